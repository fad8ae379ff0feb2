//! `hearth search` end to end: a kill -9 in the middle of indexing loses nothing (the next run
//! reads the files that were not committed and the library ends as a fresh one would), and
//! --json gives places and character ranges that slice the passage out of the file's text.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;

use hearth_documents::{index, IndexSettings, Library};

/// Enough files that the run is still indexing when the kill lands: it is killed on reading the
/// 30th, and the 120 after it take seconds to index (each file's text takes about 30 ms).
const FILES: usize = 150;

/// `hearth` in the private home, with no embedding model named by the environment.
fn hearth(home: &Path) -> Command {
    let mut command = common::hearth(home);
    command.env_remove("HEARTH_EMBEDDING_MODEL");
    command
}

/// `FILES` text files, each with a word of its own among enough text to take a while.
fn corpus(dir: &Path) -> Vec<PathBuf> {
    let filler =
        "The package manager keeps a list of installed software and their files. ".repeat(400);
    (0..FILES)
        .map(|i| {
            let path = dir.join(format!("note{i:03}.txt"));
            std::fs::write(
                &path,
                format!("{filler}\nmarker{i:03}xyz is here.\n{filler}"),
            )
            .unwrap();
            path
        })
        .collect()
}

#[test]
fn a_kill_during_indexing_loses_nothing() {
    let home = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    let files = corpus(docs.path());

    let mut child = hearth(home.path())
        .args(["search", "--ranking", "keyword", "--json"])
        .args(
            files
                .iter()
                .flat_map(|f| ["--file".as_ref(), f.as_os_str()]),
        )
        .arg("marker100xyz")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Progress comes as whole lines when stderr is not a terminal: wait for the 30th file.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        if line.unwrap().starts_with("reading 30/") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let library_path = home.path().join("data/hearth/documents.db");
    let indexed = Library::open(&library_path)
        .unwrap()
        .documents()
        .unwrap()
        .len();
    assert!(
        (29..FILES).contains(&indexed),
        "killed in the middle: {indexed} of {FILES} files were committed"
    );

    let run = hearth(home.path())
        .args(["search", "--ranking", "keyword", "--json"])
        .args(
            files
                .iter()
                .flat_map(|f| ["--file".as_ref(), f.as_os_str()]),
        )
        .arg("marker100xyz")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let first = &json["passages"][0];
    assert!(
        first["file"].as_str().unwrap().ends_with("note100.txt"),
        "{first}"
    );
    assert!(first["text"].as_str().unwrap().contains("marker100xyz"));

    // The library is what indexing the same files afresh makes.
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh = Library::open(&fresh_dir.path().join("documents.db")).unwrap();
    index(
        &fresh,
        &files,
        &IndexSettings::default(),
        None,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let resumed = Library::open(&library_path).unwrap();
    let summary = |library: &Library| -> Vec<(PathBuf, usize, String)> {
        library
            .documents()
            .unwrap()
            .into_iter()
            .map(|d| (d.path, d.passages, d.sha256))
            .collect()
    };
    assert_eq!(
        summary(&resumed),
        summary(&fresh),
        "nothing lost or doubled"
    );
    for document in resumed.documents().unwrap() {
        let ours: Vec<_> = resumed
            .passages(document.id)
            .unwrap()
            .into_iter()
            .map(|p| p.text)
            .collect();
        let theirs = fresh.document(&document.path).unwrap().unwrap();
        let theirs: Vec<_> = fresh
            .passages(theirs.id)
            .unwrap()
            .into_iter()
            .map(|p| p.text)
            .collect();
        assert_eq!(ours, theirs, "{}", document.path.display());
    }
}

#[test]
fn json_ranges_slice_the_passage_out_of_the_file() {
    let home = tempfile::tempdir().unwrap();
    let docs = tempfile::tempdir().unwrap();
    let path = docs.path().join("notes.md");
    let text = "# Intro\n\nNothing here.\n\n# Ünïcode section\n\nThe café sells crème brûlée.\n\
                The secret word is zanzibar.\n";
    std::fs::write(&path, text).unwrap();
    let run = hearth(home.path())
        .args(["search", "--ranking", "keyword", "--json", "--file"])
        .arg(&path)
        .arg("zanzibar")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let hit = &json["passages"][0];
    assert_eq!(hit["place"]["heading"], "Ünïcode section");
    let section: String = hearth_documents::extract(&path, &Default::default())
        .unwrap()
        .sections[hit["section"].as_u64().unwrap() as usize]
        .text
        .clone();
    let (start, end) = (
        hit["chars"][0].as_u64().unwrap() as usize,
        hit["chars"][1].as_u64().unwrap() as usize,
    );
    let slice: String = section.chars().skip(start).take(end - start).collect();
    assert_eq!(
        slice,
        hit["text"].as_str().unwrap(),
        "the range is the passage's text"
    );
    assert!(slice.contains("zanzibar"));

    // A question the file does not answer finds nothing and says so by its exit code.
    let none = hearth(home.path())
        .args(["search", "--ranking", "keyword", "--file"])
        .arg(&path)
        .arg("helicopter")
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1));
}
