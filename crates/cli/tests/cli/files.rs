//! `hearth run --file` and `hearth chat --file`: the files are indexed into Hearth's library
//! and given to the model as the app gives a conversation's, the numbered sources are printed
//! after the answer, and a file that cannot be read stops the command with its name. On a copy
//! of the tiny Qwen3 fixture that allows 1024 positions (the instruction to cite and a passage
//! are longer than its 128), with every Hearth folder in a temporary directory.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

/// The tiny Qwen3 fixture copied into `dir` with room for 1024 positions.
fn model(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let to = dir.join("tiny-qwen3-1024");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    let config = to.join("config.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["max_position_embeddings"] = 1024.into();
    std::fs::write(&config, json.to_string()).unwrap();
    to
}

/// A short note the model is asked about.
fn note(dir: &Path) -> PathBuf {
    let path = dir.join("boathouse.md");
    std::fs::write(
        &path,
        "# Keys\n\nThe boathouse key hangs on the blue hook.\n",
    )
    .unwrap();
    path
}

/// Runs `hearth` with `args` in the temporary home `dir`, typing `stdin`.
fn hearth(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut command = common::hearth(dir);
    command
        .args(args)
        // Keyword search only: the test does not depend on the bundled embedding model.
        .env("HEARTH_EMBEDDING_MODEL", dir.join("no-embedding-model"));
    common::run_typing(&mut command, stdin)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_with_a_file_prints_its_numbered_source_after_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let note = note(dir.path());
    let out = hearth(
        dir.path(),
        &[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--context",
            "1024",
            "--max-tokens",
            "4",
            "--file",
            note.to_str().unwrap(),
            "Where is the key?",
        ],
        "",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "hearth run failed: {stderr}");
    assert!(
        stdout.ends_with("\nSources:\n[1] boathouse.md, section “Keys” (probably used)\n")
            || stdout.ends_with("\nAlso read:\n[1] boathouse.md, read whole\n"),
        "the sources come after the answer, by number, file and section, as the answer used \
         them (the test model's few words may or may not be the file's): {stdout:?}"
    );
    assert!(stderr.contains("boathouse.md read (1 passage)"), "{stderr}");
    assert!(
        dir.path().join("data/hearth/documents.db").is_file(),
        "the file is indexed in Hearth's data folder"
    );

    let json = hearth(
        dir.path(),
        &[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--context",
            "1024",
            "--max-tokens",
            "2",
            "--json",
            "--file",
            note.to_str().unwrap(),
            "Where is the key?",
        ],
        "",
    );
    assert!(json.status.success(), "{}", text(&json.stderr));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let source = &report["sources"][0];
    assert_eq!(source["name"], "boathouse.md");
    assert!(
        source["text"]
            .as_str()
            .unwrap()
            .ends_with("The boathouse key hangs on the blue hook."),
        "{source}"
    );
}

#[test]
fn an_unreadable_file_is_named_and_nothing_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let missing = dir.path().join("lost-notes.pdf");
    let out = hearth(
        dir.path(),
        &[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--file",
            missing.to_str().unwrap(),
            "What do my notes say?",
        ],
        "",
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("lost-notes.pdf"),
        "the file is named: {stderr}"
    );
    assert!(out.stdout.is_empty(), "no answer without the file");
}

#[test]
fn chat_with_a_file_saves_the_sources_with_each_answer() {
    let dir = tempfile::tempdir().unwrap();
    let model = model(dir.path());
    let note = note(dir.path());
    let out = hearth(
        dir.path(),
        &[
            "chat",
            "--model",
            model.to_str().unwrap(),
            "--context",
            "1024",
            "--max-tokens",
            "4",
            "--file",
            note.to_str().unwrap(),
        ],
        "Where is the key?\n/exit\n",
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Four tokens of the demo model support nothing in the note, so the short file read whole
    // is listed under "Also read", not as a source the answer used.
    assert!(
        stdout.contains("\nAlso read:\n[1] boathouse.md, read whole\n")
            || stdout.contains("\nSources:\n[1] boathouse.md"),
        "{stdout:?}"
    );
    let app = hearth_app::App::open(hearth_app::Home {
        data_dir: dir.path().join("data/hearth"),
        config_dir: dir.path().join("config/hearth"),
        state_dir: dir.path().join("state/hearth"),
        builtin: None,
        system_root: dir.path().join("no-npu"),
    })
    .unwrap();
    let listed = app.list_conversations("").unwrap();
    assert_eq!(listed.len(), 1);
    let attached = app.documents().attached(&listed[0].id).unwrap();
    assert_eq!(attached[0].name, "boathouse.md", "the file stays attached");
    let saved = app.message_sources(&listed[0].id).unwrap();
    assert_eq!(saved.len(), 1, "the answer keeps its sources");
    assert_eq!(saved[0].sources[0].name, "boathouse.md");
}
