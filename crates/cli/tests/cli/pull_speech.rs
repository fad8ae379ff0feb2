//! `hearth pull whisper-base` and `hearth rm whisper-base` against the hub's imitation of
//! Hugging Face: the speech model lands in models/speech/, is not a chat model, and only what
//! Hearth downloaded is removed.

use std::path::Path;

use crate::common::hearth;
use crate::mockhub::{MockFile, MockHub};

fn whisper_files() -> Vec<MockFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper/tiny-ct2");
    ["config.json", "model.bin", "vocabulary.json"]
        .iter()
        .map(|name| MockFile {
            name: name.to_string(),
            bytes: std::fs::read(dir.join(name)).unwrap(),
            lfs: *name == "model.bin",
        })
        .collect()
}

fn run(home: &Path, hub: &MockHub, args: &[&str]) -> (bool, String) {
    let out = hearth(home)
        .args(args)
        .env("HF_ENDPOINT", &hub.endpoint)
        .env_remove("HEARTH_OFFLINE")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn pull_installs_whisper_base_for_the_microphone_and_rm_deletes_only_what_hearth_downloaded() {
    let home = tempfile::tempdir().unwrap();
    let hub = MockHub::start();
    let entry = hearth_hub::catalog::find("whisper-base").unwrap().unwrap();
    hub.add_repo(&entry.repo, &entry.revision, whisper_files());

    let (ok, text) = run(home.path(), &hub, &["pull", "whisper-base"]);
    assert!(ok, "{text}");
    assert!(text.contains("installed whisper-base (ct2"), "{text}");
    let folder = home.path().join("data/hearth/models/speech/whisper-base");
    assert!(folder.join("model.bin").is_file(), "{text}");

    // It is no chat model: not listed among them, and a second pull fetches nothing.
    let (ok, list) = run(home.path(), &hub, &["list"]);
    assert!(ok, "{list}");
    assert!(!list.contains("whisper-base"), "{list}");
    let (ok, text) = run(home.path(), &hub, &["pull", "whisper-base"]);
    assert!(ok && text.contains("already installed"), "{text}");

    let (ok, text) = run(home.path(), &hub, &["rm", "whisper-base"]);
    assert!(ok, "{text}");
    assert!(text.contains("removed whisper-base"), "{text}");
    assert!(!folder.exists());

    // A Whisper folder put there by hand is refused in words and kept.
    let mine = home.path().join("data/hearth/models/speech/my-whisper");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("config.json"), "{}").unwrap();
    std::fs::write(mine.join("model.bin"), "x").unwrap();
    let (ok, text) = run(home.path(), &hub, &["rm", "my-whisper"]);
    assert!(!ok, "{text}");
    assert!(text.contains("not downloaded by Hearth"), "{text}");
    assert!(mine.join("model.bin").is_file());
}

#[test]
fn pull_offline_says_so_in_words() {
    let home = tempfile::tempdir().unwrap();
    let hub = MockHub::start();
    let (ok, text) = run(home.path(), &hub, &["pull", "--offline", "whisper-base"]);
    assert!(!ok, "{text}");
    assert!(text.contains("offline"), "{text}");
    assert!(hub.log().is_empty());
}
