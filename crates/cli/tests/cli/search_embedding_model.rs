//! `hearth search --embedding-model NAME`: an installed Qwen3 embedding model, chosen by its name
//! in the store, ranks passages semantically (the engine's tiny random Qwen3-Embedding-shaped
//! fixture stands in for Qwen3-Embedding-0.6B, which is not downloaded in tests).

use crate::common;

use std::path::Path;
use std::process::Command;

/// `hearth` in the private home, with no embedding model named by the environment.
fn hearth(home: &Path) -> Command {
    let mut command = common::hearth(home);
    command.env_remove("HEARTH_EMBEDDING_MODEL");
    command
}

#[test]
fn an_installed_qwen3_embedding_model_is_chosen_by_name() {
    let home = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    common::import_tiny_qwen3_embedding(home.path(), "tiny-embedding");
    let file = docs.path().join("notes.md");
    std::fs::write(
        &file,
        "# Travel\n\nThe train to Lyon leaves at nine.\n\n# Kitchen\n\nBake the bread for forty minutes.\n",
    )
    .unwrap();
    let search = hearth(home.path())
        .args(["search", "--ranking", "semantic", "--json"])
        .args(["--embedding-model", "tiny-embedding", "--file"])
        .arg(&file)
        .arg("When does the train leave?")
        .output()
        .unwrap();
    assert!(
        search.status.success(),
        "{}",
        String::from_utf8_lossy(&search.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(json["embedding_model"], "tiny-embedding-64d", "{json}");
    let hits = json["passages"].as_array().expect("passages");
    assert!(!hits.is_empty(), "{json}");

    let unknown = hearth(home.path())
        .args([
            "search",
            "--ranking",
            "semantic",
            "--embedding-model",
            "nonesuch",
            "--file",
        ])
        .arg(&file)
        .arg("train")
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("nor an installed model"), "{stderr}");
}
