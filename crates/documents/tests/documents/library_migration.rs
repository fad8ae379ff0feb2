//! A library written by schema 1 (before OCR) opens in schema 2: its passages are kept (not
//! read from a scan), its failures keep their sentence (no code), and new passages and
//! failures store the scan mark and the error's code, parameters and detail.

use hearth_documents::library::{Failure, FileState, NewPassage};
use hearth_documents::{Library, Place};

/// Schema 1's tables as that Hearth wrote them (the columns only; indexes and triggers alike).
const SCHEMA_1: &str = "
CREATE TABLE documents (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, format TEXT NOT NULL, title TEXT,
    status TEXT NOT NULL CHECK (status IN ('ready', 'failed')), error TEXT,
    indexed_at INTEGER NOT NULL);
CREATE TABLE passages (id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    section INTEGER NOT NULL,
    place_kind TEXT NOT NULL CHECK (place_kind IN ('page', 'heading', 'whole')),
    place TEXT NOT NULL, char_start INTEGER NOT NULL, char_end INTEGER NOT NULL, text TEXT NOT NULL);
CREATE VIRTUAL TABLE passages_fts USING fts5(
    text, content='passages', content_rowid='id', tokenize='trigram remove_diacritics 1');
CREATE TRIGGER passages_fts_insert AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text);
END;
INSERT INTO documents VALUES (1, '/docs/old.md', 10, 0, 'aa', 'Markdown file', NULL, 'ready',
    NULL, 0);
INSERT INTO documents VALUES (2, '/docs/scan.pdf', 10, 0, 'bb', 'PDF', NULL, 'failed',
    '/docs/scan.pdf: this PDF has no text layer', 0);
INSERT INTO passages VALUES (1, 1, 0, 'page', '2', 0, 5, 'hello');
PRAGMA user_version = 1;
";

#[test]
fn a_schema_1_library_is_migrated_and_keeps_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("documents.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(SCHEMA_1)
        .unwrap();

    let library = Library::open(&path).unwrap();
    let documents = library.documents().unwrap();
    assert_eq!(documents.len(), 2);
    assert_eq!(documents[0].passages, 1);
    let old = library.passages(1).unwrap();
    assert_eq!(old[0].place, Place::Page(2));
    assert!(!old[0].from_scan);
    assert!(documents[1]
        .error
        .as_deref()
        .unwrap()
        .contains("no text layer"));
    assert_eq!(documents[1].failure, None);

    let file = FileState {
        path: "/docs/new-scan.pdf".into(),
        size: 1,
        mtime_ns: 1,
        sha256: "cc".into(),
    };
    let scanned = NewPassage {
        section: 0,
        place: Place::Page(1),
        char_start: 0,
        char_end: 4,
        text: "rent".into(),
        from_scan: true,
    };
    let id = library.store(&file, "PDF", None, &[scanned]).unwrap();
    assert!(library.passages(id).unwrap()[0].from_scan);
    let failure = Failure {
        code: "scanned-no-ocr-language".into(),
        params: [("file".to_owned(), "a\nb=c\\d.pdf".to_owned())].into(),
        detail: "/docs/a.pdf: asked kor".into(),
    };
    let failed = FileState {
        path: "/docs/a.pdf".into(),
        ..file
    };
    library
        .store_coded_failure(&failed, "PDF", "sentence", &failure)
        .unwrap();
    let stored = library.document(&failed.path).unwrap().unwrap();
    assert_eq!(stored.failure, Some(failure));
    drop(library);
    // Opened again: already schema 2, nothing migrated twice.
    let library = Library::open(&path).unwrap();
    assert_eq!(library.documents().unwrap().len(), 4);
}
