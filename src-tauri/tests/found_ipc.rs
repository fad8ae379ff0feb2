//! The "Found on this computer" commands through Tauri's real IPC layer: a Hugging Face cache
//! snapshot in the private home (files linked to blobs, as the cache keeps them) is listed as
//! runnable, and `import_found` copies it into the store with progress, leaving it as it was.
//!
//! Its private home has `HEARTH_OFFLINE`, and it sets `OLLAMA_MODELS` and `XDG_CACHE_HOME` and
//! removes the Hugging Face cache's variables for the whole process, so it is a test binary of its
//! own, not a module of `tests/desktop/`.

mod common;

use std::path::Path;

use common::{build_app, fixture, invoke, private_home};
use serde_json::json;

/// A snapshot of `org/tiny` in the cache under `hub`, its files links to blobs.
fn hf_snapshot(hub: &Path) -> std::path::PathBuf {
    let repo = hub.join("models--org--tiny");
    let snapshot = repo.join("snapshots/0123abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    for entry in std::fs::read_dir(fixture("hub/tiny-safetensors"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        std::fs::copy(entry.path(), repo.join("blobs").join(&name)).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{name}"), snapshot.join(&name)).unwrap();
    }
    snapshot
}

#[test]
fn a_found_model_is_listed_and_imported_as_a_copy() {
    let home = private_home(&[("HEARTH_OFFLINE", "1".into())]);
    // Every place the scan reads is inside the private home.
    std::env::set_var("OLLAMA_MODELS", home.join("ollama"));
    std::env::set_var("XDG_CACHE_HOME", home.join("cache"));
    std::env::remove_var("HF_HUB_CACHE");
    std::env::remove_var("HF_HOME");
    let app = build_app(tempfile::tempdir().unwrap(), None);
    let none = invoke(&app, "found_models", json!({})).expect("found_models");
    assert_eq!(none, json!([]), "an empty home has nothing to find");

    let snapshot = hf_snapshot(&home.join("cache/huggingface/hub"));
    let found = invoke(&app, "found_models", json!({})).expect("found_models");
    let model = &found[0];
    assert_eq!(model["name"], "org/tiny", "{found}");
    assert_eq!(model["source"], "huggingface");
    assert_eq!(model["format"], "safetensors");
    assert_eq!(model["runnable"], true, "{found}");
    assert_eq!(model["import_name"], "org-tiny");

    let before = std::fs::read(snapshot.join("config.json")).unwrap();
    let installed = invoke(
        &app,
        "import_found",
        json!({"path": model["path"], "name": model["import_name"], "onProgress": "__CHANNEL__:3"}),
    )
    .expect("import_found");
    assert_eq!(installed["name"], "org-tiny");
    assert_eq!(installed["format"], "safetensors");
    assert_eq!(std::fs::read(snapshot.join("config.json")).unwrap(), before);
    assert!(
        std::fs::symlink_metadata(snapshot.join("config.json"))
            .unwrap()
            .is_symlink(),
        "copied, never moved"
    );

    let e = invoke(
        &app,
        "import_found",
        json!({"path": "/no/such/model", "name": null, "onProgress": "__CHANNEL__:4"}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "storage", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("list the models again"),
        "{e}"
    );
}
