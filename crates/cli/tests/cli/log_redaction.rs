//! `HEARTH_LOG=trace` must never write the Hugging Face token into the log: the HTTP and TLS
//! layers' protocol traces (which show request headers) are capped at info.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

#[test]
fn trace_logging_never_shows_the_token() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten().take(8) {
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["pull", "someone/some-model"])
        .env("HEARTH_LOG", "trace")
        .env("HF_TOKEN", "hf_NeverInTheLog42")
        .env("HF_ENDPOINT", &endpoint)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env_remove("HEARTH_OFFLINE")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the repository does not exist");
    assert!(
        !stderr.contains("NeverInTheLog42"),
        "token in the log:\n{stderr}"
    );
}
