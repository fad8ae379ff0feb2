//! The Models commands through Tauri's real IPC layer (mock runtime, the app's real
//! capabilities): overview with the catalog and the demo model, import, set as default, delete,
//! and the errors of pause/cancel/pull when there is nothing to act on. Downloads themselves
//! are tested in crates/hub against a local imitation of the Hub.
//!
//! Its private home has `HEARTH_OFFLINE` for the whole process, so it is a test binary of its own,
//! not a module of `tests/desktop/`.

mod common;

use std::path::PathBuf;

use common::{build_app, fixture, invoke, private_home, TestApp};
use serde_json::json;

fn hub_fixture(name: &str) -> PathBuf {
    fixture(&format!("hub/{name}"))
}

/// The app offline (no catalog fetch), with a tiny Q4NX model as its demo.
fn app() -> TestApp {
    private_home(&[("HEARTH_OFFLINE", "1".into())]);
    build_app(tempfile::tempdir().unwrap(), Some(hub_fixture("tiny-q4nx")))
}

#[test]
fn overview_lists_the_catalog_with_fit_hints_and_the_built_in_demo() {
    let app = app();
    let overview = invoke(&app, "models_overview", json!({})).expect("overview");
    // Every catalog entry, the multilingual embedding model (kind "embedding") among them.
    let catalog = overview["catalog"].as_array().unwrap();
    assert_eq!(catalog.len(), hearth_hub::catalog::entries().unwrap().len());
    let embedding = catalog
        .iter()
        .filter(|c| c["entry"]["kind"] == "embedding")
        .count();
    assert_eq!(embedding, 1);
    assert!(
        overview["catalog"][0]["fit"]["hint"]
            .as_str()
            .unwrap()
            .len()
            > 10
    );
    assert!(overview["machine"]["total_memory"].as_u64().unwrap() > 0);
    let installed = overview["installed"].as_array().unwrap();
    assert_eq!(installed.len(), 1);
    assert_eq!(installed[0]["name"], "demo");
    assert_eq!(installed[0]["builtin"], true);
}

#[test]
fn import_then_default_then_delete() {
    let app = app();
    let model = invoke(
        &app,
        "import_model",
        json!({"path": hub_fixture("tiny-safetensors"), "name": "Tiny", "onProgress": "__CHANNEL__:5"}),
    )
    .expect("import");
    assert_eq!(model["name"], "Tiny");
    assert_eq!(model["format"], "safetensors");
    invoke(&app, "set_default_model", json!({"name": "Tiny"})).expect("set default");
    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    assert_eq!(
        models[0]["name"], "Tiny",
        "the registry's default is the first model and the one the app opens at start"
    );
    assert_eq!(models[0]["is_default"], true);
    let settings = invoke(&app, "get_settings", json!({})).unwrap();
    assert!(
        settings.get("default_model").is_none(),
        "the default model has one home, the registry: {settings}"
    );
    let overview = invoke(&app, "models_overview", json!({})).unwrap();
    let tiny = overview["installed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "Tiny")
        .unwrap()
        .clone();
    assert_eq!(tiny["is_default"], true);
    let removed = invoke(&app, "remove_model", json!({"name": "Tiny"})).expect("remove");
    assert_eq!(removed["freed_bytes"], tiny["size_bytes"]);
    let e = invoke(&app, "remove_model", json!({"name": "Tiny"})).unwrap_err();
    assert_eq!(e["code"], "not_found");
}

#[test]
fn a_gguf_file_is_imported_from_its_path_or_its_folder() {
    let app = app();
    let downloads = tempfile::tempdir().unwrap();
    let file = downloads.path().join("Tiny-Chat.Q4_1.gguf");
    let bytes = q4nx::gguf::write::tiny_model("llama").finish();
    std::fs::write(&file, &bytes).unwrap();
    let model = invoke(
        &app,
        "import_model",
        json!({"path": file, "name": null, "onProgress": "__CHANNEL__:11"}),
    )
    .expect("import the GGUF file");
    assert_eq!(model["name"], "Tiny-Chat.Q4_1", "named after the file");
    assert_eq!(model["format"], "gguf", "linked, not converted: {model}");
    assert_eq!(model["linked"]["state"], "ready", "{model}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the GGUF file is only read"
    );
    let again = invoke(
        &app,
        "import_model",
        json!({"path": downloads.path(), "name": "From-folder", "onProgress": "__CHANNEL__:12"}),
    )
    .expect("a folder holding one GGUF file imports that file");
    assert_eq!(again["name"], "From-folder");
    let e = invoke(
        &app,
        "import_model",
        json!({"path": file, "name": null, "onProgress": "__CHANNEL__:13"}),
    )
    .unwrap_err();
    assert_eq!(
        e["code"], "invalid_input",
        "a second import under the same name: {e}"
    );
}

#[test]
fn errors_say_what_is_wrong() {
    let app = app();
    let e = invoke(
        &app,
        "import_model",
        json!({"path": "/no/such/folder", "name": null, "onProgress": "__CHANNEL__:6"}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "not_found", "{e}");
    let e = invoke(&app, "pause_download", json!({"name": "Nothing"})).unwrap_err();
    assert_eq!(e["code"], "not_found");
    assert_eq!(
        invoke(&app, "cancel_download", json!({"name": "Nothing"})).unwrap(),
        0
    );
    let e = invoke(
        &app,
        "pull_model",
        json!({"query": "gpt-9", "onProgress": "__CHANNEL__:7"}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "invalid_input");
    assert!(
        e["message"].as_str().unwrap().contains("minicpm5-2b"),
        "{e}"
    );
    let e = invoke(
        &app,
        "pull_model",
        json!({"query": "qwen3:1.7b", "onProgress": "__CHANNEL__:8"}),
    )
    .unwrap_err();
    assert_eq!(
        e["code"], "offline",
        "HEARTH_OFFLINE keeps tests off the network: {e}"
    );
}
