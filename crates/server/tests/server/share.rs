//! The desktop app's "Let other apps on this computer use Hearth" switch over a real
//! `hearth_app::App` (its folders in a temporary directory) whose open model is the tiny Qwen3
//! fixture: on, other apps get that model at the address the status shows; while the app
//! answers (it holds its model's lock) they get the busy answer; when the app opens another
//! model they get that one; off, the port is free.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_app::models::LocalModel;
use hearth_app::session::OpenOptions;
use hearth_app::{App, Home, Session};
use hearth_chat::BackendKind;
use hearth_server::Sharing;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

fn app_in(dir: &Path) -> App {
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: dir.join("no-npu"),
    };
    App::open(home).expect("the app opens in a temporary folder")
}

fn open(app: &App, name: &str) {
    let model = LocalModel {
        name: name.to_owned(),
        path: fixture(name),
        builtin: None,
        is_default: true,
        sha256: None,
        backends: Vec::new(),
        selftest: None,
    };
    let session = Session::open(app.home(), &model, BackendKind::Cpu, OpenOptions::default())
        .expect("the fixture opens on the processor");
    *app.model_slot().lock().unwrap() = Some(session);
}

fn address(url: &str) -> SocketAddr {
    url.strip_prefix("http://").unwrap().parse().unwrap()
}

/// Sends one request; the status code and the body.
fn exchange(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status, body.unwrap_or_default())
}

fn ollama_chat(model: &str) -> String {
    let body = format!(
        r#"{{"model":"{model}","messages":[{{"role":"user","content":"Hello"}}],"stream":false,"options":{{"temperature":0,"num_predict":4}}}}"#
    );
    format!(
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn other_apps_get_the_model_the_app_has_open_while_the_switch_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    open(&app, "tiny-qwen3");
    let sharing = Sharing::default();
    assert!(!sharing.status().on, "off by default");
    assert_eq!(
        sharing.status().wanted_port,
        11434,
        "Ollama's port is offered"
    );

    let status = sharing.start(&app, 0).unwrap();
    assert!(status.on);
    assert_eq!(status.model.as_deref(), Some("tiny-qwen3"));
    let url = status.url.clone().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let addr = address(&url);

    let (code, body) = exchange(addr, &ollama_chat("tiny-qwen3"));
    assert_eq!(code, 200, "{body}");
    {
        let slot = app.model_slot();
        let _answering = slot.lock().unwrap();
        let (code, body) = exchange(addr, &ollama_chat("tiny-qwen3"));
        assert_eq!(code, 503, "the app is answering: {body}");
        assert_eq!(
            sharing.status().model.as_deref(),
            Some("tiny-qwen3"),
            "what is shared is known while the app answers"
        );
    }

    // The app opens another model: other apps get that one.
    open(&app, "tiny-llama");
    let (code, body) = exchange(addr, &ollama_chat("tiny-llama"));
    assert_eq!(code, 200, "{body}");
    let (code, _) = exchange(addr, &ollama_chat("tiny-qwen3"));
    assert_eq!(code, 404, "the model the app closed is not served");
    assert_eq!(sharing.status().model.as_deref(), Some("tiny-llama"));

    let off = sharing.stop();
    assert!(!off.on && off.url.is_none());
    assert!(TcpListener::bind(addr).is_ok(), "the port is free once off");
    assert!(app.claim_model().is_ok(), "the app has its model back");
}

#[test]
fn a_taken_port_is_reported_and_another_port_moves_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    open(&app, "tiny-qwen3");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let sharing = Sharing::default();
    let status = sharing.start(&app, port).unwrap();
    assert!(status.port_taken, "another program listens at {port}");
    assert_eq!(status.wanted_port, port);
    assert_ne!(address(status.url.as_deref().unwrap()).port(), port);

    drop(taken);
    let moved = sharing.start(&app, port).unwrap();
    assert_eq!(moved, status, "the same port asked again: nothing changes");
    let moved = sharing.start(&app, 0).unwrap();
    assert!(moved.on && !moved.port_taken);
    let old = address(status.url.as_deref().unwrap());
    assert!(
        TcpStream::connect(old).is_err(),
        "the old address is closed"
    );
    sharing.stop();
}

#[test]
fn review_5_sharing_left_on_starts_again_at_its_port_and_a_taken_port_is_said() {
    use hearth_app::share::ShareChoice;
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    open(&app, "tiny-qwen3");
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);

    // Off until switched on: the port is kept for the switch.
    let sharing = Sharing::default();
    let off = sharing.restore(&app, ShareChoice { on: false, port });
    assert!(!off.on && off.problem.is_none(), "{off:?}");
    assert_eq!(off.wanted_port, port, "the remembered port is offered");

    // Left on: on again at the same address, as a plug-in set up yesterday expects.
    let on = sharing.restore(&app, ShareChoice { on: true, port });
    assert!(on.on && !on.port_taken, "{on:?}");
    assert_eq!(address(on.url.as_deref().unwrap()).port(), port);
    let off = sharing.stop();
    assert_eq!(off.wanted_port, port, "switched off, the port is kept");

    // Another program took the port meanwhile: on at a free one, and the status says so.
    let taken = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let again = Sharing::default().restore(&app, ShareChoice { on: true, port });
    assert!(again.on && again.port_taken, "{again:?}");
    assert_ne!(address(again.url.as_deref().unwrap()).port(), port);
    drop(taken);
}
