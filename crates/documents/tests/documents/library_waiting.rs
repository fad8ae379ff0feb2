//! What waits in the library: after a Cancel (review #10, S3), each file's row says how many of
//! its passages are not indexed yet, so the library counts passages without a model's vectors
//! per document; and a writer waits for another connection's write instead of failing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hearth_documents::library::{FileState, NewPassage};
use hearth_documents::{Library, Place};

fn file(path: &str, sha: &str) -> FileState {
    FileState {
        path: PathBuf::from(path),
        size: 10,
        mtime_ns: 1,
        sha256: sha.into(),
    }
}

fn passage(text: &str) -> NewPassage {
    NewPassage {
        section: 0,
        place: Place::Page(1),
        char_start: 0,
        char_end: text.chars().count(),
        text: text.into(),
        from_scan: false,
    }
}

#[test]
fn review_10_passages_not_indexed_yet_are_counted_per_document() {
    let dir = tempfile::tempdir().unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let a = library
        .store(
            &file("/a.txt", "1"),
            "text file",
            None,
            &[passage("a1"), passage("a2"), passage("a3")],
        )
        .unwrap();
    let b = library
        .store(&file("/b.txt", "2"), "text file", None, &[passage("b1")])
        .unwrap();
    let first = library.passages(a).unwrap()[0].id;
    let only_b = library.passages(b).unwrap()[0].id;
    library
        .store_vectors("m", &[(first, vec![1.0; 4]), (only_b, vec![1.0; 4])])
        .unwrap();
    let waiting = library.count_without_vectors_by_document("m").unwrap();
    assert_eq!(
        waiting,
        BTreeMap::from([(a, 2)]),
        "b is complete, so it is left out"
    );
    assert_eq!(
        waiting.values().sum::<usize>(),
        library.count_without_vectors("m").unwrap()
    );
    assert_eq!(
        library.count_without_vectors_by_document("other").unwrap(),
        BTreeMap::from([(a, 3), (b, 1)])
    );
    let empty = Library::open(&dir.path().join("empty.db")).unwrap();
    assert!(empty
        .count_without_vectors_by_document("m")
        .unwrap()
        .is_empty());
}

/// Two writers at once (the app's indexing and its library view, or the app and `hearth`):
/// each waits for the other instead of failing with "database is locked". A write that
/// begins with a read must take the write lock first, or SQLite cannot wait for it.
#[test]
fn two_connections_writing_at_once_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("documents.db");
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let library = Library::open(&path).unwrap();
                for i in 0..100 {
                    let name = format!("/{w}/{}.txt", i % 5);
                    library
                        .store(
                            &file(&name, &i.to_string()),
                            "text file",
                            None,
                            &[passage("x")],
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(Library::open(&path).unwrap().documents().unwrap().len(), 10);
}
