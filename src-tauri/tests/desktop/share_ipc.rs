//! "Let other apps on this computer use Hearth" through the app's IPC: off by default; on, the
//! model open in the app (the demo) answers another program at the address the status shows,
//! through Ollama's route; off again, nothing listens there.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use common::{build_app, invoke, private_home};
use serde_json::{json, Value};

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/demo")
}

/// Another program's request: Ollama's chat, not streamed; the status code and the body.
fn ollama_chat(addr: SocketAddr, model: &str) -> (u16, Value) {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": false,
        "options": {"temperature": 0, "num_predict": 4},
    })
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).unwrap().parse().unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap())
}

#[test]
fn the_switch_serves_the_open_model_to_other_apps_until_turned_off() {
    private_home(&[]);
    let app = build_app(tempfile::tempdir().unwrap(), Some(demo_model()));
    let off = invoke(&app, "share_status", json!({})).unwrap();
    assert_eq!(off["on"], false, "off by default: {off}");
    assert_eq!(off["wanted_port"], 11434, "Ollama's port is offered: {off}");

    // The app opens its start model (the demo) as it does when the window shows.
    invoke(&app, "app_status", json!({})).unwrap();
    let on = invoke(&app, "start_sharing", json!({"port": 0})).unwrap();
    assert_eq!(on["on"], true, "{on}");
    assert_eq!(on["model"], "demo", "{on}");
    let url = on["url"].as_str().unwrap();
    let addr: SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    assert!(addr.ip().is_loopback(), "{url}");

    let (status, reply) = ollama_chat(addr, "demo");
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["done"], true, "{reply}");

    let off = invoke(&app, "stop_sharing", json!({})).unwrap();
    assert_eq!(off["on"], false);
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens once off"
    );
}

#[test]
fn review_5_the_switch_is_remembered_across_starts_with_its_port() {
    use hearth_server::Sharing;
    use tauri::Manager;
    private_home(&[]);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = build_app(tempfile::tempdir().unwrap(), Some(demo_model()));
    invoke(&app, "app_status", json!({})).unwrap();
    let on = invoke(&app, "start_sharing", json!({"port": port})).unwrap();
    assert_eq!(on["on"], true, "{on}");
    let handle = app.webview.app_handle();
    let core = handle.state::<hearth_app::App>();
    // The next start: a new switch restored from what the store remembers.
    invoke(&app, "stop_sharing", json!({})).unwrap();
    invoke(&app, "start_sharing", json!({"port": port})).unwrap();
    handle.state::<Sharing>().stop(); // the app closed (the choice stays on)
    let next = Sharing::default();
    let again = hearth_desktop::commands::share::restore(handle, &core, &next);
    assert!(again.on, "left on, it is on again after a start: {again:?}");
    assert_eq!(again.wanted_port, port);
    assert!(
        again.url.as_deref().unwrap().ends_with(&format!(":{port}")),
        "{again:?}"
    );
    next.stop();

    // Switched off: off at the next start, the port kept for the switch.
    invoke(&app, "start_sharing", json!({"port": port})).unwrap();
    let off = invoke(&app, "stop_sharing", json!({})).unwrap();
    assert_eq!(off["wanted_port"], port, "{off}");
    let next = Sharing::default();
    let restored = hearth_desktop::commands::share::restore(handle, &core, &next);
    assert!(!restored.on && restored.problem.is_none(), "{restored:?}");
    assert_eq!(restored.wanted_port, port);
}
