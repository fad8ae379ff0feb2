//! Indexing and retrieval on real files in a temporary library: progress, cancel and resume,
//! changed and touched files, removal, and the three rankings. Vectors come from a small
//! stand-in model (letter counts) so these tests need no model files; the engine's encoder is
//! checked against its reference in crates/engine.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use hearth_documents::{
    index, search, EmbeddingModel, IndexSettings, Library, Outcome, Progress, Ranking, Stage,
};

/// Letter counts, normalized: texts with the same letters point the same way.
struct Letters;

impl EmbeddingModel for Letters {
    fn model_id(&self) -> &str {
        "letters"
    }
    fn pieces(&self, word: &str) -> usize {
        hearth_documents::passages::estimate_pieces(word)
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|text| {
                let mut v = [0f32; 26];
                for c in text.to_lowercase().chars().filter(char::is_ascii_lowercase) {
                    v[(c as u8 - b'a') as usize] += 1.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(library: &Library, files: &[PathBuf], model: Option<&dyn EmbeddingModel>) -> Vec<Outcome> {
    index(
        library,
        files,
        &IndexSettings::default(),
        model,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap()
    .files
    .into_iter()
    .map(|f| f.outcome)
    .collect()
}

#[test]
fn progress_counts_files_then_passages() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let files = vec![
        write(dir.path(), "a.txt", "alpha beta"),
        write(dir.path(), "b.txt", "gamma delta"),
    ];
    let mut seen = Vec::new();
    index(
        &library,
        &files,
        &IndexSettings::default(),
        Some(&Letters),
        &mut |p: Progress| seen.push((p.stage, p.done, p.total)),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(
        seen,
        [
            (Stage::Reading, 0, 2),
            (Stage::Reading, 1, 2),
            (Stage::Reading, 2, 2),
            (Stage::Embedding, 0, 2),
            (Stage::Embedding, 1, 2),
            (Stage::Embedding, 2, 2)
        ]
    );
}

#[test]
fn a_cancelled_run_keeps_what_it_committed_and_the_next_one_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let files: Vec<_> = (0..5)
        .map(|i| write(dir.path(), &format!("{i}.txt"), &format!("file number {i}")))
        .collect();
    let cancel = AtomicBool::new(false);
    let report = index(
        &library,
        &files,
        &IndexSettings::default(),
        Some(&Letters),
        &mut |p: Progress| {
            if p.stage == Stage::Reading && p.done == 3 {
                cancel.store(true, Ordering::Relaxed);
            }
        },
        &cancel,
    )
    .unwrap();
    assert!(report.cancelled);
    assert_eq!(
        library.documents().unwrap().len(),
        4,
        "the file in hand is finished"
    );
    let outcomes = run(&library, &files, Some(&Letters));
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == Outcome::Unchanged)
            .count(),
        4
    );
    for document in library.documents().unwrap() {
        assert!(library
            .passages_without_vectors(document.id, "letters")
            .unwrap()
            .is_empty());
    }
}

#[test]
fn a_changed_file_is_read_again_and_a_touched_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let file = write(
        dir.path(),
        "notes.txt",
        "the first version mentions walruses",
    );
    assert_eq!(
        run(&library, std::slice::from_ref(&file), None),
        [Outcome::Indexed { passages: 1 }]
    );
    assert_eq!(
        run(&library, std::slice::from_ref(&file), None),
        [Outcome::Unchanged]
    );

    // Same bytes, new modification time: hashed, found the same, not read again.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(
        run(&library, std::slice::from_ref(&file), None),
        [Outcome::Unchanged]
    );
    let doc = library
        .document(&file.canonicalize().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(
        doc.mtime_ns as u128,
        later
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );

    std::fs::write(&file, "the second version is about narwhals instead").unwrap();
    assert_eq!(
        run(&library, std::slice::from_ref(&file), None),
        [Outcome::Indexed { passages: 1 }]
    );
    let found = |q: &str| {
        search(&library, q, &[doc.id], Ranking::Keyword, None, 5)
            .unwrap()
            .len()
    };
    assert_eq!(found("walruses"), 0, "the old text is gone");
    assert_eq!(found("narwhals"), 1);
}

#[test]
fn an_unreadable_file_is_reported_by_name_and_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let good = write(dir.path(), "good.txt", "fine text");
    let missing = dir.path().join("missing.txt");
    let outcomes = run(&library, &[missing, dir.path().to_path_buf(), good], None);
    match (&outcomes[0], &outcomes[1]) {
        (Outcome::Failed(a), Outcome::Failed(b)) => {
            assert!(a.contains("missing.txt"), "{a}");
            assert!(b.contains("folder"), "{b}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(outcomes[2], Outcome::Indexed { passages: 1 });
}

#[test]
fn a_removed_document_is_gone_from_every_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let file = write(dir.path(), "a.txt", "quokkas live on Rottnest island");
    run(&library, std::slice::from_ref(&file), Some(&Letters));
    let id = library.documents().unwrap()[0].id;
    for ranking in [Ranking::Keyword, Ranking::Semantic, Ranking::Combined] {
        assert_eq!(
            search(&library, "quokkas", &[id], ranking, Some(&Letters), 5)
                .unwrap()
                .len(),
            1
        );
    }
    assert!(library.remove(&file.canonicalize().unwrap()).unwrap());
    for ranking in [Ranking::Keyword, Ranking::Semantic, Ranking::Combined] {
        assert!(
            search(&library, "quokkas", &[id], ranking, Some(&Letters), 5)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn rankings_find_by_words_by_meaning_and_by_both() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let files = vec![
        write(dir.path(), "a.txt", "zzz zzz zzz buzzing sleep"),
        write(dir.path(), "b.txt", "apt installs packages"),
        write(dir.path(), "c.md", "# Setup\n\nrun the installer"),
    ];
    run(&library, &files, Some(&Letters));
    let ids: Vec<_> = library.documents().unwrap().iter().map(|d| d.id).collect();
    let top = |q: &str, ranking| {
        let hits = search(&library, q, &ids, ranking, Some(&Letters), 3).unwrap();
        hits[0]
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(top("packages", Ranking::Keyword), "b.txt");
    // No shared word, the same letters.
    assert_eq!(top("zz zz", Ranking::Semantic), "a.txt");
    let hits = search(
        &library,
        "installer",
        &ids,
        Ranking::Combined,
        Some(&Letters),
        3,
    )
    .unwrap();
    assert!(
        hits[0].keyword_rank.is_some() && hits[0].semantic_rank.is_some(),
        "{hits:?}"
    );
    assert_eq!(
        hits[0].place,
        hearth_documents::Place::Heading("Setup".into())
    );
    // The search covers only the documents asked for.
    let only_a = search(&library, "packages", &ids[..1], Ranking::Keyword, None, 3).unwrap();
    assert!(only_a.is_empty());
}

#[test]
fn short_chinese_words_are_found_without_the_trigram_index() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let files = vec![
        write(dir.path(), "zh.txt", "安装软件包需要管理员权限。"),
        write(dir.path(), "other.txt", "没有相关内容。"),
    ];
    run(&library, &files, None);
    let ids: Vec<_> = library.documents().unwrap().iter().map(|d| d.id).collect();
    for question in ["安装", "软件包", "如何安装软件包"] {
        let hits = search(&library, question, &ids, Ranking::Keyword, None, 5).unwrap();
        assert_eq!(hits.len(), 1, "{question}");
        assert!(hits[0].path.ends_with("zh.txt"), "{question}");
    }
}

#[test]
fn a_short_chinese_word_beside_a_longer_word_still_counts() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let files = vec![
        write(dir.path(), "scripts.txt", "Shell scripts run commands."),
        write(dir.path(), "ssh.txt", "安全 Shell 提供加密通讯。"),
    ];
    run(&library, &files, None);
    let ids: Vec<_> = library.documents().unwrap().iter().map(|d| d.id).collect();
    let hits = search(&library, "安全 Shell", &ids, Ranking::Keyword, None, 5).unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0].path.ends_with("ssh.txt"), "{hits:?}");
}

#[test]
fn disk_use_counts_the_database_files() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let before = library.disk_use();
    run(
        &library,
        &[write(dir.path(), "a.txt", &"lots of words ".repeat(5000))],
        None,
    );
    assert!(library.disk_use() > before);
}
