//! The remote server through the app's IPC, against a real server: Hearth's own
//! (`hearth_server`) started in this process on a free local port over the demo model. Saving
//! the server (0600, the key never sent back), testing the connection, choosing its model,
//! an answer whose receipt says where it ran, and a wrong address in plain words.

use crate::common;

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::{build_app, invoke, private_home, TestApp};
use hearth_backends::CpuBackend;
use hearth_server::{AppState, ServerOptions};
use serde_json::json;

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/demo")
}

/// Serves the demo model on 127.0.0.1 on a free port, for the rest of the process; returns its
/// address.
fn start_server() -> String {
    let backend = CpuBackend::open(&demo_model(), "demo", &Default::default(), None)
        .expect("the demo model opens");
    let state = AppState::new(Box::new(backend), ServerOptions::default());
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free local port");
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || hearth_server::serve_blocking(listener, state));
    url
}

/// An address where nothing listens: a port that was free a moment ago.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

fn app() -> TestApp {
    private_home(&[]);
    build_app(tempfile::tempdir().unwrap(), Some(demo_model()))
}

#[test]
fn a_remote_model_answers_and_its_receipt_says_where() {
    let app = app();
    let url = start_server();
    let host = url.trim_start_matches("http://").to_owned();
    assert_eq!(
        invoke(&app, "remote_server", json!({})).unwrap(),
        json!(null),
        "no server until one is saved"
    );

    let models = invoke(
        &app,
        "test_remote_server",
        json!({"url": format!("{url}/v1"), "apiKey": "sk-test-SECRET"}),
    )
    .unwrap();
    assert_eq!(
        models[0]["name"], "demo",
        "the server lists the demo model: {models}"
    );
    assert_eq!(models.as_array().unwrap().len(), 1, "{models}");
    assert_eq!(models[0]["backend"]["kind"], "remote", "{models}");
    assert_eq!(
        (
            &models[0]["server_sees"],
            &models[0]["backend"]["sees_pictures"]
        ),
        (&json!(false), &json!(false)),
        "Hearth's server says the demo model does not see: {models}"
    );

    let saved = invoke(
        &app,
        "save_remote_server",
        json!({"url": format!("{url}/v1"), "apiKey": "sk-test-SECRET", "model": null}),
    )
    .unwrap();
    assert_eq!(saved["url"], url, "the /v1 is dropped");
    assert_eq!(saved["host"], host);
    assert_eq!(saved["has_key"], true);
    let shown = invoke(&app, "remote_server", json!({})).unwrap();
    assert!(
        !shown.to_string().contains("SECRET"),
        "the key never goes to the UI: {shown}"
    );
    assert_eq!(shown["has_key"], true);

    // Saved privately, in the one format the CLI reads too.
    let file = app_config_dir(&app).join("remote.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the file holding the key is the owner's only");

    // Saving again without a key keeps it; testing without one uses the saved one.
    let kept = invoke(
        &app,
        "save_remote_server",
        json!({"url": url, "apiKey": null, "model": null}),
    )
    .unwrap();
    assert_eq!(kept["has_key"], true, "no key typed: the saved one stays");
    invoke(&app, "test_remote_server", json!({"url": url})).unwrap();

    // The "sees pictures" switch is saved with the server, and the list says so.
    let switched = invoke(
        &app,
        "save_remote_server",
        json!({"url": url, "apiKey": null, "model": null, "seesPictures": ["demo"]}),
    )
    .unwrap();
    assert_eq!(switched["sees_pictures"], json!(["demo"]));
    assert_eq!(switched["has_key"], true, "the key stays with the switch");
    let models = invoke(&app, "test_remote_server", json!({"url": url})).unwrap();
    assert_eq!(models[0]["backend"]["sees_pictures"], true, "{models}");
    assert_eq!(models[0]["server_sees"], false, "{models}");

    let status = invoke(
        &app,
        "select_model",
        json!({"name": "demo", "backend": "remote"}),
    )
    .unwrap();
    assert_eq!(status["backend_kind"], "remote");
    assert_eq!(status["family"], "remote");
    assert_eq!(status["device"], host);
    assert_eq!(status["sees_pictures"], true, "switched on in the settings");
    assert_eq!(
        invoke(&app, "remote_server", json!({})).unwrap()["model"],
        "demo",
        "the choice is remembered"
    );

    let c = invoke(&app, "create_conversation", json!({})).unwrap();
    let mut settings = c["settings"].clone();
    settings["max_tokens"] = json!(8);
    invoke(
        &app,
        "update_conversation_settings",
        json!({"id": c["id"], "settings": settings}),
    )
    .unwrap();
    invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "send", "content": "Hello"}, "onEvent": "__CHANNEL__:3"})).unwrap();
    let c = invoke(&app, "get_conversation", json!({"id": c["id"]})).unwrap();
    let answer = &c["messages"][1];
    assert_eq!(answer["state"], "complete", "{answer}");
    let receipt = &answer["receipt"];
    assert_eq!(receipt["backend_kind"], "remote", "{receipt}");
    assert_eq!(receipt["device"], host, "{receipt}");
    assert_eq!(receipt["model_name"], "demo");

    // Forgetting the server closes its model: the next answer is computed here again.
    invoke(&app, "forget_remote_server", json!({})).unwrap();
    assert!(!file.exists(), "the key is deleted with the settings");
    assert_eq!(
        invoke(&app, "remote_server", json!({})).unwrap(),
        json!(null)
    );
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(status["model"]["backend_kind"], "cpu", "{status}");
}

#[test]
fn a_wrong_address_gets_a_plain_error() {
    let app = app();
    let e = invoke(
        &app,
        "test_remote_server",
        json!({"url": closed_port_url()}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "connection", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        !message.is_empty() && !message.contains("os error"),
        "plain words: {message}"
    );
    let e = invoke(&app, "save_remote_server", json!({"url": "gopher://x"})).unwrap_err();
    assert_eq!(e["code"], "invalid_input", "{e}");
    let e = invoke(
        &app,
        "select_model",
        json!({"name": "demo", "backend": "remote"}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "not_found", "no server saved: {e}");
    assert!(e["message"].as_str().unwrap().contains("Settings"), "{e}");
}

#[test]
fn local_models_say_where_they_can_run() {
    let app = app();
    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    assert_eq!(
        models[0]["backends"][0],
        json!({"kind": "cpu", "usable": true, "reason": null, "sees_pictures": false}),
        "{models}"
    );
    let npu = &models[0]["backends"][1];
    assert_eq!(npu["kind"], "npu", "{models}");
    assert_eq!(
        npu["usable"], false,
        "the demo runs on the processor only: {models}"
    );
}

/// The config folder `build_app` gives the app.
fn app_config_dir(app: &TestApp) -> PathBuf {
    app.data_dir().join("config")
}
