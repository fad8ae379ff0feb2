//! The catalog's multilingual embedding model, Qwen3-Embedding-0.6B, downloaded by its catalog
//! id from a local imitation of the Hub. The real weights (1.2 GB) are not fetched in tests: the
//! imitation's repository holds the engine's tiny fixture saved as that checkpoint is (tensors
//! without the `model.` prefix, no `lm_head`, bf16), beside the sentence-transformers files the
//! real repository has, so the download, the file selection and q4nx's validation of a
//! prefix-less checkpoint run as they would on it.

use std::path::Path;
use std::time::Duration;

use crate::common::{MockFile, MockHub, TempDir};
use hearth_hub::{
    pull, DownloadControl, DownloadOptions, HubClient, ModelKind, PullOutcome, PullRequest, Store,
};

const REPO: &str = "Qwen/Qwen3-Embedding-0.6B";
const COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

fn repository() -> Vec<MockFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine/tiny-qwen3-embedding");
    let mut files: Vec<MockFile> = [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    .into_iter()
    .map(|name| MockFile {
        name: name.into(),
        bytes: std::fs::read(dir.join(name)).unwrap(),
        lfs: name.starts_with("model."),
    })
    .collect();
    for (name, text) in [
        ("README.md", "# Qwen3-Embedding-0.6B\n"),
        ("modules.json", "[]\n"),
        ("config_sentence_transformers.json", "{}\n"),
    ] {
        files.push(MockFile {
            name: name.into(),
            bytes: text.as_bytes().to_vec(),
            lfs: false,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

#[test]
fn the_catalog_embedding_model_downloads_validates_and_registers() {
    let entry = hearth_hub::catalog::find("qwen3-embedding-0.6b")
        .unwrap()
        .unwrap();
    assert_eq!(entry.kind, ModelKind::Embedding);
    assert_eq!(entry.repo, REPO);
    let tmp = TempDir::new("embedding");
    let store = Store::at(tmp.0.clone());
    let hub = MockHub::start();
    hub.add_repo(REPO, COMMIT, repository());
    let client = HubClient::new(&hub.endpoint, None, false);
    let request = PullRequest {
        query: "qwen3-embedding-0.6b".into(),
        ..Default::default()
    };
    let options = DownloadOptions {
        attempt_window: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(20),
        max_attempts: 4,
        retry_delay: Duration::from_millis(10),
        disk_reserve: 0,
    };
    let outcome = pull(
        &store,
        &client,
        &request,
        &options,
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap();
    let PullOutcome::Installed(model) = outcome else {
        panic!("expected Installed, got {outcome:?}")
    };
    assert_eq!(model.name, "Qwen3-Embedding-0.6B");
    assert_eq!(model.catalog_id.as_deref(), Some("qwen3-embedding-0.6b"));
    let mut kept: Vec<String> = std::fs::read_dir(&model.folder)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ],
        "the model's files, not sentence-transformers' or the docs"
    );
    assert_eq!(
        store.get("Qwen3-Embedding-0.6B").unwrap().folder,
        model.folder
    );
    // It searches files; it is never the model Hearth chats with.
    assert!(model.is_embedding());
    assert!(
        store.default_model().unwrap().is_none(),
        "the only model installed is not a default to chat with"
    );
    let refused = store.set_default("Qwen3-Embedding-0.6B").unwrap_err();
    assert!(refused.to_string().contains("cannot chat"), "{refused}");
}
