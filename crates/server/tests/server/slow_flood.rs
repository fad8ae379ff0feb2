//! Connection slots are fair to a real client under a flood of silent sockets (the security
//! review's N13: 300 silent sockets delayed a request 9.5 s, a reconnecting flood 20 s). The
//! real accept loop on a loopback socket; the header timeout is far longer than the client's
//! patience, so only a slot given up to the real client lets it through.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use hearth_backends::CpuBackend;
use hearth_server::{AppState, ServerOptions};

fn start(options: ServerOptions) -> SocketAddr {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, "tiny-qwen3", &Default::default(), None).unwrap();
    let state = AppState::new(Box::new(backend), options);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || hearth_server::serve_blocking(listener, state));
    addr
}

/// A request on a new connection, waiting at most `patience` for each read.
fn ask(addr: SocketAddr, patience: Duration) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(patience)).unwrap();
    stream
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn silent_sockets_give_way_to_a_client_that_speaks() {
    let addr = start(ServerOptions {
        max_connections: 8,
        header_timeout: Duration::from_secs(60),
        ..ServerOptions::default()
    });
    // More silent sockets than slots: every slot is taken, more wait in the backlog.
    let silent: Vec<TcpStream> = (0..24).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let answer = ask(addr, Duration::from_secs(15));
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the request waited behind silent sockets: {answer:?}"
    );
    // And again, with the flood still there.
    let answer = ask(addr, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    drop(silent);
}

#[test]
fn a_reconnecting_flood_does_not_starve_a_client() {
    let addr = start(ServerOptions {
        max_connections: 8,
        header_timeout: Duration::from_secs(60),
        ..ServerOptions::default()
    });
    // Sockets that connect, stay silent, and come back as soon as they are closed.
    let flood = std::thread::spawn(move || {
        let mut open: Vec<TcpStream> = Vec::new();
        for _ in 0..400 {
            if let Ok(s) = TcpStream::connect(addr) {
                open.push(s);
            }
            if open.len() > 40 {
                open.remove(0);
            }
        }
        open
    });
    let answer = ask(addr, Duration::from_secs(15));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    drop(flood.join().unwrap());
}
