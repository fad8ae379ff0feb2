//! `hearth list --found` over a private home holding an Ollama store (a manifest over a GGUF
//! blob) and an LM Studio folder, and importing one of the found models: it is registered and
//! the original file stays byte for byte what it was.

use std::path::Path;
use std::process::{Command, Output};

use q4nx::gguf::write::tiny_model;

/// `hearth` in a private home: every folder it may read or write is under `home`.
fn hearth(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(args)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("OLLAMA_MODELS", home.join("ollama"))
        .env("HF_HOME", home.join("hf"))
        .env_remove("HF_HUB_CACHE")
        .env("HEARTH_OFFLINE", "1")
        .env_remove("HEARTH_DEMO_MODEL")
        .env_remove("HEARTH_LOG")
        .output()
        .expect("hearth runs")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn found_models_are_listed_and_one_imports_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let tiny = tiny_model("llama").finish();
    let digest = "ab".repeat(32);
    let blob = home.join(format!("ollama/blobs/sha256-{digest}"));
    write(&blob, &tiny);
    let manifest = serde_json::json!({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.model",
         "digest": format!("sha256:{digest}"), "size": tiny.len()}]});
    write(
        &home.join("ollama/manifests/registry.local/library/tiny/1b"),
        manifest.to_string().as_bytes(),
    );
    write(
        &home.join(".lmstudio/models/pub/Other-GGUF/Other.gguf"),
        &tiny_model("phimoe").finish(),
    );

    let json: serde_json::Value =
        serde_json::from_str(&ok(hearth(home, &["list", "--found", "--json"]))).unwrap();
    let list = json.as_array().expect("an array");
    assert_eq!(list.len(), 2, "{json:#}");
    let tiny_entry = &list[0];
    assert_eq!(tiny_entry["name"], "tiny:1b");
    assert_eq!(tiny_entry["source"], "ollama");
    assert_eq!(tiny_entry["format"], "gguf");
    assert_eq!(tiny_entry["architecture"], "llama");
    assert_eq!(tiny_entry["size_bytes"], tiny.len());
    assert_eq!(tiny_entry["runnable"], true);
    assert_eq!(tiny_entry["path"], blob.to_str().unwrap());
    let other = &list[1];
    assert_eq!(other["source"], "lmstudio");
    assert_eq!(other["runnable"], false);
    assert!(
        other["reason"]
            .as_str()
            .unwrap()
            .contains("Phi-3.5-MoE models are not supported yet"),
        "{other:#}"
    );

    let table = ok(hearth(home, &["list", "--found"]));
    assert!(
        table.contains("tiny:1b") && table.contains("yes"),
        "{table}"
    );
    assert!(table.contains("no: Phi-3.5-MoE"), "{table}");
    assert!(
        table.contains("hearth import"),
        "says how to import: {table}"
    );

    let out = ok(hearth(
        home,
        &["import", blob.to_str().unwrap(), "--name", "tiny-1b"],
    ));
    assert!(out.contains("tiny-1b"), "{out}");
    let listed: serde_json::Value =
        serde_json::from_str(&ok(hearth(home, &["list", "--json"]))).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "tiny-1b"),
        "{listed:#}"
    );
    assert_eq!(std::fs::read(&blob).unwrap(), tiny, "the blob is only read");
}
