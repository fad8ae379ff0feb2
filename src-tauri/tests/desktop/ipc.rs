//! The commands through Tauri's real IPC layer (mock runtime, the app's real capabilities):
//! argument checking, conversations, settings, a streamed answer from a tiny real model, and a
//! damaged database at start.

use crate::common;

use std::path::PathBuf;

use common::{build_app, fixture, invoke, private_home, TestApp};
use serde_json::json;

fn tiny_model() -> PathBuf {
    fixture("engine/tiny-llama")
}

fn app_with(data: tempfile::TempDir, demo: Option<PathBuf>) -> TestApp {
    private_home(&[]);
    build_app(data, demo)
}

fn app() -> TestApp {
    app_with(tempfile::tempdir().unwrap(), Some(tiny_model()))
}

#[test]
fn wrong_arguments_get_an_error_not_a_crash() {
    let app = app();
    let e = invoke(&app, "get_conversation", json!({})).unwrap_err();
    assert!(
        e.to_string().contains("id"),
        "names the missing argument: {e}"
    );
    let e = invoke(&app, "get_conversation", json!({"id": 42})).unwrap_err();
    assert!(e.to_string().contains("id"), "{e}");
    let e = invoke(
        &app,
        "rename_conversation",
        json!({"id": "x", "title": "   "}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "invalid_input");
    let e = invoke(&app, "get_conversation", json!({"id": "no-such-id"})).unwrap_err();
    assert_eq!(e["code"], "not_found");
    let c = invoke(&app, "create_conversation", json!({})).unwrap();
    let e = invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "explode"}, "onEvent": "__CHANNEL__:7"})).unwrap_err();
    assert!(e.to_string().contains("action"), "{e}");
    let e = invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "send", "content": ""}, "onEvent": "__CHANNEL__:7"})).unwrap_err();
    assert_eq!(e["code"], "invalid_input", "empty message refused: {e}");
    let huge = "x".repeat(1 << 20);
    let e = invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "send", "content": huge}, "onEvent": "__CHANNEL__:7"})).unwrap_err();
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("1048576 characters"),
        "{e}"
    );
    assert!(invoke(&app, "no_such_command", json!({})).is_err());
}

#[test]
fn conversations_are_created_renamed_searched_exported_and_deleted() {
    let app = app();
    let c = invoke(&app, "create_conversation", json!({})).unwrap();
    let id = c["id"].as_str().unwrap().to_string();
    invoke(
        &app,
        "rename_conversation",
        json!({"id": id, "title": "Garden plans"}),
    )
    .unwrap();
    let found = invoke(&app, "list_conversations", json!({"query": "garden"})).unwrap();
    assert_eq!(found.as_array().unwrap().len(), 1);
    assert!(
        invoke(&app, "list_conversations", json!({"query": "kitchen"}))
            .unwrap()
            .as_array()
            .unwrap()
            .is_empty()
    );
    let path = invoke(
        &app,
        "export_conversation",
        json!({"id": id, "format": "markdown"}),
    )
    .unwrap();
    let text = std::fs::read_to_string(path.as_str().unwrap()).unwrap();
    assert!(text.starts_with("# Garden plans"));
    // The save dialog's choice: written exactly there.
    let chosen_dir = tempfile::tempdir().unwrap();
    let chosen = chosen_dir.path().join("garden.json");
    let written = invoke(
        &app,
        "export_conversation",
        json!({"id": id, "format": "json", "path": chosen.display().to_string()}),
    )
    .unwrap();
    assert_eq!(written.as_str().unwrap(), chosen.display().to_string());
    assert!(std::fs::read_to_string(&chosen)
        .unwrap()
        .contains("\"title\": \"Garden plans\""));
    // A folder (export all): a new file beside what is there, which stays untouched.
    let into_folder = invoke(
        &app,
        "export_conversation",
        json!({"id": id, "format": "json", "path": chosen_dir.path().display().to_string()}),
    )
    .unwrap();
    assert_ne!(into_folder.as_str().unwrap(), written.as_str().unwrap());
    assert!(std::path::Path::new(into_folder.as_str().unwrap()).starts_with(chosen_dir.path()));
    invoke(&app, "delete_conversation", json!({"id": id})).unwrap();
    assert!(invoke(&app, "list_conversations", json!({}))
        .unwrap()
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn settings_round_trip_through_the_store_clamped() {
    let app = app();
    let mut s = invoke(&app, "get_settings", json!({})).unwrap();
    s["theme"] = json!("dark");
    s["font_size"] = json!(400);
    let saved = invoke(&app, "save_settings", json!({"settings": s})).unwrap();
    assert_eq!(saved["font_size"], 22, "out-of-range size is clamped");
    assert_eq!(
        invoke(&app, "get_settings", json!({})).unwrap()["theme"],
        "dark"
    );
    assert!(invoke(
        &app,
        "save_settings",
        json!({"settings": {"theme": "purple"}})
    )
    .is_err());
}

#[test]
fn an_answer_from_a_real_model_is_saved_with_its_receipt() {
    let app = app();
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(
        status["model"]["builtin"], "demo",
        "opens on the demo model: {status}"
    );
    assert!(status["notices"].to_string().contains("tiny demo model"));
    let c = invoke(&app, "create_conversation", json!({})).unwrap();
    let mut settings = c["settings"].clone();
    settings["max_tokens"] = json!(8);
    invoke(
        &app,
        "update_conversation_settings",
        json!({"id": c["id"], "settings": settings}),
    )
    .unwrap();
    invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "send", "content": "Hello"}, "onEvent": "__CHANNEL__:9"})).unwrap();
    let c = invoke(&app, "get_conversation", json!({"id": c["id"]})).unwrap();
    let messages = c["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["content"], "Hello");
    let receipt = &messages[1]["receipt"];
    assert_eq!(messages[1]["state"], "complete");
    assert!(
        receipt["generated_tokens"].as_u64().unwrap() >= 1,
        "{receipt}"
    );
    assert!(receipt["prompt_tokens"].as_u64().unwrap() > 0);
    assert_eq!(receipt["model_name"], "demo");
    // regenerate replaces the answer and keeps the first one as an earlier version
    invoke(&app, "start_answer", json!({"conversationId": c["id"], "action": {"kind": "regenerate"}, "onEvent": "__CHANNEL__:10"})).unwrap();
    let again = invoke(&app, "get_conversation", json!({"id": c["id"]})).unwrap();
    assert_eq!(again["messages"].as_array().unwrap().len(), 2);
    let versions = again["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{again}");
    assert_eq!(versions[0]["content"], messages[1]["content"]);
    assert_eq!(versions[0]["message_id"], again["messages"][1]["id"]);
    // stop with nothing running does nothing
    invoke(&app, "stop_answer", json!({})).unwrap();
}

#[test]
fn a_damaged_database_is_replaced_and_the_user_told() {
    let data = tempfile::tempdir().unwrap();
    std::fs::write(
        data.path().join("conversations.db"),
        b"this is not a database at all, just text that is long enough",
    )
    .unwrap();
    let app = app_with(data, None);
    let status = invoke(&app, "app_status", json!({})).unwrap();
    let notices = status["notices"].to_string();
    assert!(notices.contains("could not be read"), "{notices}");
    assert!(
        status["model"].is_null()
            && status["model_error"]["message"]
                .as_str()
                .unwrap()
                .contains("No model"),
        "{status}"
    );
    invoke(&app, "create_conversation", json!({})).unwrap();
}
