//! The library: Hearth's own SQLite database of the user's documents (`documents.db` in the data
//! folder), apart from the conversation store so that indexing a large file never holds a lock
//! chatting waits on.
//!
//! It holds each document (path, size, modification time, sha256, format, status), its passages
//! with their places and character ranges, an FTS5 index of the passages with the `trigram`
//! tokenizer (any script, Chinese and Japanese included, matches by substring), one vector per
//! passage per embedding model, and which conversations a document is attached to.
//!
//! Privacy: the file and its `-wal`/`-shm` are created 0600; `secure_delete` is on for the
//! database and for the FTS5 index, so a removed document's text, index entries and vectors are
//! overwritten, not merely unlinked.
//!
//! Concurrency: one `Library` is one connection. Indexing runs on its own thread with its own
//! `Library`; another `Library` opened on the same file searches meanwhile (WAL lets readers
//! run beside the one writer; a write waits up to 5 s for another).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::extract::Place;

/// The schema this Hearth writes, kept in `PRAGMA user_version`. A database with a newer one
/// was written by a newer Hearth and is not opened (its tables may mean something else).
pub const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    format TEXT NOT NULL,
    title TEXT,
    status TEXT NOT NULL CHECK (status IN ('ready', 'failed')),
    error TEXT,
    indexed_at INTEGER NOT NULL,
    error_code TEXT,
    error_params TEXT,
    error_detail TEXT
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    section INTEGER NOT NULL,
    place_kind TEXT NOT NULL CHECK (place_kind IN ('page', 'heading', 'whole')),
    place TEXT NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    text TEXT NOT NULL,
    from_scan INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS passages_by_document ON passages(document_id, id);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    text, content='passages', content_rowid='id', tokenize='trigram remove_diacritics 1'
);
CREATE TRIGGER IF NOT EXISTS passages_fts_insert AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS passages_fts_delete AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE IF NOT EXISTS vectors (
    passage_id INTEGER NOT NULL REFERENCES passages(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (passage_id, model)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS attachments (
    conversation_id TEXT NOT NULL,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    attached_at INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, document_id)
);
";

/// What version 1 lacked, added to a library it wrote: the error's code, parameters and
/// detail, and whether a passage was read from a scan.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE documents ADD COLUMN error_code TEXT;
ALTER TABLE documents ADD COLUMN error_params TEXT;
ALTER TABLE documents ADD COLUMN error_detail TEXT;
ALTER TABLE passages ADD COLUMN from_scan INTEGER NOT NULL DEFAULT 0;
";

/// Why the library could not do what was asked. Each message names the database or the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LibraryError {
    #[error("documents: cannot create the library's folder {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("documents: the library {} failed: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "documents: {} was written by a newer Hearth (schema {found}, this one knows up to \
         {SCHEMA_VERSION}): update Hearth, or move the file aside to start a new library",
        path.display()
    )]
    Newer { path: PathBuf, found: i64 },
    #[error("documents: the embedding model failed on {}: {message}", path.display())]
    Embedding { path: PathBuf, message: String },
}

/// A document's id in the library.
pub type DocumentId = i64;

/// A document as the library knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    pub id: DocumentId,
    /// Its absolute path, as it was when indexed.
    pub path: PathBuf,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Hex sha256 of its bytes when indexed.
    pub sha256: String,
    /// What kind of file it is (`Format::name`).
    pub format: String,
    pub title: Option<String>,
    /// Why it could not be read, when it could not (then it has no passages): the English
    /// sentence.
    pub error: Option<String>,
    /// The same as a code and parameters for a front end to translate, and the technical
    /// detail (`ExtractError::code`, `params`, `detail`). `None` for a failure recorded before
    /// codes existed (schema 1) or without one.
    pub failure: Option<Failure>,
    /// Its passages.
    pub passages: usize,
}

/// Why a file could not be read, as stored: `ExtractError::code`, `params` and `detail`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Failure {
    pub code: String,
    pub params: BTreeMap<String, String>,
    pub detail: String,
}

impl Failure {
    pub fn of(error: &crate::extract::ExtractError) -> Failure {
        Failure {
            code: error.code().to_owned(),
            params: error
                .params()
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
            detail: error.detail(),
        }
    }
}

/// One passage as stored: where it is and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPassage {
    pub id: i64,
    pub document: DocumentId,
    /// Index of its section in the extracted document.
    pub section: usize,
    pub place: Place,
    /// Characters `char_start..char_end` of its section's text.
    pub char_start: usize,
    pub char_end: usize,
    pub text: String,
    /// Read by OCR from a picture of the page: its citation says "read from a scan".
    pub from_scan: bool,
}

/// A passage to store: its section and range, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPassage {
    pub section: usize,
    pub place: Place,
    pub char_start: usize,
    pub char_end: usize,
    pub text: String,
    /// Read by OCR from a picture of the page.
    pub from_scan: bool,
}

/// What a file was on disk when it was read: what tells a changed file from the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub path: PathBuf,
    pub size: u64,
    pub mtime_ns: i64,
    pub sha256: String,
}

/// The library's database, one connection.
pub struct Library {
    pub(crate) conn: Connection,
    path: PathBuf,
}

impl Library {
    /// Opens (or creates) the library at `path`, normally `<data folder>/documents.db`.
    pub fn open(path: &Path) -> Result<Self, LibraryError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LibraryError::Folder {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let sqlite = |source| LibraryError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        // Private (0600): it holds the text of the user's documents.
        let conn = hearth_sqlite::open(path).map_err(sqlite)?;
        hearth_sqlite::use_wal(&conn).map_err(sqlite)?;
        // Read under the write lock, so that two first opens at once migrate it once.
        let tx = hearth_sqlite::write(&conn).map_err(sqlite)?;
        let found: i64 = tx
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(sqlite)?;
        if found > SCHEMA_VERSION {
            return Err(LibraryError::Newer {
                path: path.to_path_buf(),
                found,
            });
        }
        if found < SCHEMA_VERSION {
            // A new library gets the whole schema; one written by schema 1 keeps its tables
            // (which `IF NOT EXISTS` leaves alone) and gets the columns it lacks.
            tx.execute_batch(SCHEMA).map_err(sqlite)?;
            if found == 1 {
                tx.execute_batch(MIGRATE_1_TO_2).map_err(sqlite)?;
            }
            // FTS5 keeps deleted rows' tokens in its segments until they merge, unless told
            // to overwrite them at once (a setting stored in the index itself).
            tx.execute(
                "INSERT INTO passages_fts(passages_fts, rank) VALUES ('secure-delete', 1)",
                [],
            )
            .map_err(sqlite)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION)
                .map_err(sqlite)?;
        }
        tx.commit().map_err(sqlite)?;
        // The journal files the writes above created, private too.
        hearth_sqlite::make_private(path);
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn err(&self, source: rusqlite::Error) -> LibraryError {
        LibraryError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The document indexed from `path` (absolute, as the indexer stores it), if any.
    pub fn document(&self, path: &Path) -> Result<Option<Document>, LibraryError> {
        self.conn
            .query_row(
                &format!("{DOCUMENT_COLUMNS} WHERE d.path = ?1"),
                [path_text(path)],
                document_row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every document in the library, by path.
    pub fn documents(&self) -> Result<Vec<Document>, LibraryError> {
        let mut statement = self
            .conn
            .prepare(&format!("{DOCUMENT_COLUMNS} ORDER BY d.path"))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([], document_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Records that `file`, seen again unchanged (same sha256), now has this size and time.
    pub(crate) fn touch(&self, id: DocumentId, file: &FileState) -> Result<(), LibraryError> {
        self.conn
            .execute(
                "UPDATE documents SET size = ?2, mtime_ns = ?3 WHERE id = ?1",
                params![id, file.size as i64, file.mtime_ns],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Replaces whatever the library held for `file` with these passages, in one transaction:
    /// a kill in the middle leaves the previous state (and the old size/time, so the next run
    /// reads the file again).
    pub fn store(
        &self,
        file: &FileState,
        format: &str,
        title: Option<&str>,
        passages: &[NewPassage],
    ) -> Result<DocumentId, LibraryError> {
        self.replace(file, format, title, Ok(passages))
    }

    /// Records that `file` could not be read, and why (its old passages, if any, are removed).
    pub fn store_failure(
        &self,
        file: &FileState,
        format: &str,
        error: &str,
    ) -> Result<DocumentId, LibraryError> {
        self.replace(file, format, None, Err((error, None)))
    }

    /// `store_failure`, with the error's code, parameters and detail (`Document::failure`).
    pub fn store_coded_failure(
        &self,
        file: &FileState,
        format: &str,
        error: &str,
        failure: &Failure,
    ) -> Result<DocumentId, LibraryError> {
        self.replace(file, format, None, Err((error, Some(failure))))
    }

    fn replace(
        &self,
        file: &FileState,
        format: &str,
        title: Option<&str>,
        passages: Result<&[NewPassage], (&str, Option<&Failure>)>,
    ) -> Result<DocumentId, LibraryError> {
        let err = |e| self.err(e);
        let tx = hearth_sqlite::write(&self.conn).map_err(err)?;
        let path = path_text(&file.path);
        let old: Option<DocumentId> = tx
            .query_row("SELECT id FROM documents WHERE path = ?1", [&path], |row| {
                row.get(0)
            })
            .optional()
            .map_err(err)?;
        if let Some(id) = old {
            delete_passages(&tx, id).map_err(err)?;
        }
        let (status, error, failure) = match passages {
            Ok(_) => ("ready", None, None),
            Err((message, failure)) => ("failed", Some(message), failure),
        };
        let (code, params_text, detail) = match failure {
            Some(failure) => (
                Some(failure.code.as_str()),
                Some(params_text(&failure.params)),
                Some(failure.detail.as_str()),
            ),
            None => (None, None, None),
        };
        tx.execute(
            "INSERT INTO documents (path, size, mtime_ns, sha256, format, title, status, error,
                                    indexed_at, error_code, error_params, error_detail)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, unixepoch(), ?9, ?10, ?11)
             ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,
                 sha256 = excluded.sha256, format = excluded.format, title = excluded.title,
                 status = excluded.status, error = excluded.error,
                 indexed_at = excluded.indexed_at, error_code = excluded.error_code,
                 error_params = excluded.error_params, error_detail = excluded.error_detail",
            params![
                path,
                file.size as i64,
                file.mtime_ns,
                file.sha256,
                format,
                title,
                status,
                error,
                code,
                params_text,
                detail
            ],
        )
        .map_err(err)?;
        let id: DocumentId = tx
            .query_row("SELECT id FROM documents WHERE path = ?1", [&path], |row| {
                row.get(0)
            })
            .map_err(err)?;
        if let Ok(passages) = passages {
            let mut insert = tx
                .prepare(
                    "INSERT INTO passages (document_id, section, place_kind, place, char_start,
                                           char_end, text, from_scan)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(err)?;
            for passage in passages {
                let (kind, place) = place_columns(&passage.place);
                insert
                    .execute(params![
                        id,
                        passage.section as i64,
                        kind,
                        place,
                        passage.char_start as i64,
                        passage.char_end as i64,
                        passage.text,
                        passage.from_scan
                    ])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        Ok(id)
    }

    /// Removes the document indexed from `path`: its passages, their index entries and
    /// vectors, and its attachments, overwritten on disk (`secure_delete`). Whether it was there.
    pub fn remove(&self, path: &Path) -> Result<bool, LibraryError> {
        let err = |e| self.err(e);
        let tx = hearth_sqlite::write(&self.conn).map_err(err)?;
        let id: Option<DocumentId> = tx
            .query_row(
                "SELECT id FROM documents WHERE path = ?1",
                [path_text(path)],
                |row| row.get(0),
            )
            .optional()
            .map_err(err)?;
        if let Some(id) = id {
            delete_passages(&tx, id).map_err(err)?;
            tx.execute("DELETE FROM attachments WHERE document_id = ?1", [id])
                .map_err(err)?;
            tx.execute("DELETE FROM documents WHERE id = ?1", [id])
                .map_err(err)?;
        }
        tx.commit().map_err(err)?;
        // Copy the WAL's pages (which may hold the deleted text) into the database and empty it.
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(err)?;
        Ok(id.is_some())
    }

    /// The passages of document `id`, in order.
    pub fn passages(&self, id: DocumentId) -> Result<Vec<StoredPassage>, LibraryError> {
        let mut statement = self
            .conn
            .prepare(&format!(
                "{PASSAGE_COLUMNS} WHERE p.document_id = ?1 ORDER BY p.id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([id], passage_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Passages of document `id` that have no vector from `model` yet, in order.
    pub fn passages_without_vectors(
        &self,
        id: DocumentId,
        model: &str,
    ) -> Result<Vec<StoredPassage>, LibraryError> {
        let mut statement = self
            .conn
            .prepare(&format!(
                "{PASSAGE_COLUMNS} WHERE p.document_id = ?1 AND NOT EXISTS
                     (SELECT 1 FROM vectors v WHERE v.passage_id = p.id AND v.model = ?2)
                 ORDER BY p.id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params![id, model], passage_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Passages of the whole library that have no vector from `model` yet: found by keyword
    /// only until they are embedded.
    pub fn count_without_vectors(&self, model: &str) -> Result<usize, LibraryError> {
        self.conn
            .query_row(
                "SELECT count(*) FROM passages p WHERE NOT EXISTS
                     (SELECT 1 FROM vectors v WHERE v.passage_id = p.id AND v.model = ?1)",
                [model],
                |row| row.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(|e| self.err(e))
    }

    /// Passages without a vector from `model` yet, by document (documents that have none
    /// waiting are left out): what each file's row says is "not indexed yet".
    pub fn count_without_vectors_by_document(
        &self,
        model: &str,
    ) -> Result<BTreeMap<DocumentId, usize>, LibraryError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT p.document_id, count(*) FROM passages p WHERE NOT EXISTS
                     (SELECT 1 FROM vectors v WHERE v.passage_id = p.id AND v.model = ?1)
                 GROUP BY p.document_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([model], |row| {
                Ok((row.get::<_, DocumentId>(0)?, row.get::<_, i64>(1)? as usize))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Stores the vectors `model` gave these passages, in one transaction.
    pub fn store_vectors(
        &self,
        model: &str,
        vectors: &[(i64, Vec<f32>)],
    ) -> Result<(), LibraryError> {
        let err = |e| self.err(e);
        let tx = hearth_sqlite::write(&self.conn).map_err(err)?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR REPLACE INTO vectors (passage_id, model, vector) VALUES (?1, ?2, ?3)",
                )
                .map_err(err)?;
            for (passage, vector) in vectors {
                insert
                    .execute(params![passage, model, vector_bytes(vector)])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Attaches document `id` to the conversation `conversation` (the conversation store's
    /// id). Attaching twice is one attachment.
    pub fn attach(&self, conversation: &str, id: DocumentId) -> Result<(), LibraryError> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO attachments (conversation_id, document_id, attached_at)
                 VALUES (?1, ?2, unixepoch())",
                params![conversation, id],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Detaches document `id` from `conversation` (the document stays in the library).
    pub fn detach(&self, conversation: &str, id: DocumentId) -> Result<(), LibraryError> {
        self.conn
            .execute(
                "DELETE FROM attachments WHERE conversation_id = ?1 AND document_id = ?2",
                params![conversation, id],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Forgets `conversation` (deleted from the conversation store): its attachments are
    /// deleted, the documents stay in the library. The conversation's id no longer appears in
    /// the database, nor, `secure_delete` being on, in its free pages.
    pub fn forget_conversation(&self, conversation: &str) -> Result<(), LibraryError> {
        self.conn
            .execute(
                "DELETE FROM attachments WHERE conversation_id = ?1",
                [conversation],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// The documents attached to `conversation`, in the order they were attached.
    pub fn attached(&self, conversation: &str) -> Result<Vec<Document>, LibraryError> {
        let mut statement = self
            .conn
            .prepare(&format!(
                "{DOCUMENT_COLUMNS} JOIN attachments a ON a.document_id = d.id
                 WHERE a.conversation_id = ?1 ORDER BY a.attached_at, a.rowid"
            ))
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map([conversation], document_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Bytes the library takes on disk: the database with its `-wal` and `-shm` files.
    pub fn disk_use(&self) -> u64 {
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        [
            self.path.clone(),
            self.path.with_file_name(format!("{name}-wal")),
            self.path.with_file_name(format!("{name}-shm")),
        ]
        .iter()
        .filter_map(|file| std::fs::metadata(file).ok())
        .map(|meta| meta.len())
        .sum()
    }
}

/// Deletes a document's vectors and passages (the trigger deletes their FTS5 entries).
fn delete_passages(conn: &Connection, id: DocumentId) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM vectors WHERE passage_id IN (SELECT id FROM passages WHERE document_id = ?1)",
        [id],
    )?;
    conn.execute("DELETE FROM passages WHERE document_id = ?1", [id])?;
    Ok(())
}

const DOCUMENT_COLUMNS: &str = "SELECT d.id, d.path, d.size, d.mtime_ns, d.sha256, d.format,
    d.title, d.error, (SELECT count(*) FROM passages p WHERE p.document_id = d.id),
    d.error_code, d.error_params, d.error_detail
    FROM documents d";

fn document_row(row: &rusqlite::Row) -> rusqlite::Result<Document> {
    Ok(Document {
        id: row.get(0)?,
        path: PathBuf::from(row.get::<_, String>(1)?),
        size: row.get::<_, i64>(2)? as u64,
        mtime_ns: row.get(3)?,
        sha256: row.get(4)?,
        format: row.get(5)?,
        title: row.get(6)?,
        error: row.get(7)?,
        passages: row.get::<_, i64>(8)? as usize,
        failure: match row.get::<_, Option<String>>(9)? {
            Some(code) => Some(Failure {
                code,
                params: params_from_text(&row.get::<_, Option<String>>(10)?.unwrap_or_default()),
                detail: row.get::<_, Option<String>>(11)?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

/// Parameters as stored: `key=value` lines, a backslash and a line break in a value escaped
/// (`\\\\`, `\\n`).
fn params_text(params: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (key, value) in params {
        out.push_str(key);
        out.push('=');
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('\n');
    }
    out
}

/// The parameters `params_text` stored (a line without `=` is skipped).
fn params_from_text(text: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let mut out = String::new();
        let mut chars = value.chars();
        while let Some(c) = chars.next() {
            match (c, c == '\\') {
                (_, true) => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some(other) => out.push(other),
                    None => {}
                },
                (c, false) => out.push(c),
            }
        }
        params.insert(key.to_owned(), out);
    }
    params
}

pub(crate) const PASSAGE_COLUMNS: &str = "SELECT p.id, p.document_id, p.section, p.place_kind,
    p.place, p.char_start, p.char_end, p.text, p.from_scan FROM passages p";

pub(crate) fn passage_row(row: &rusqlite::Row) -> rusqlite::Result<StoredPassage> {
    let kind: String = row.get(3)?;
    let place: String = row.get(4)?;
    Ok(StoredPassage {
        id: row.get(0)?,
        document: row.get(1)?,
        section: row.get::<_, i64>(2)? as usize,
        place: match kind.as_str() {
            "page" => Place::Page(place.parse().unwrap_or(0)),
            "heading" => Place::Heading(place),
            _ => Place::Whole,
        },
        char_start: row.get::<_, i64>(5)? as usize,
        char_end: row.get::<_, i64>(6)? as usize,
        text: row.get(7)?,
        from_scan: row.get(8)?,
    })
}

fn place_columns(place: &Place) -> (&'static str, String) {
    match place {
        Place::Page(page) => ("page", page.to_string()),
        Place::Heading(heading) => ("heading", heading.clone()),
        Place::Whole => ("whole", String::new()),
    }
}

/// A path as the library stores it. Paths that are not UTF-8 are stored lossily (and so are
/// not found again by their exact bytes; the indexer reports them by the path it was given).
pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// A vector as stored: its f32s, little-endian.
fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector's f32s.
pub(crate) fn vector_from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
            place: Place::Page(3),
            char_start: 0,
            char_end: text.chars().count(),
            text: text.into(),
            from_scan: false,
        }
    }

    fn fts_count(library: &Library, term: &str) -> i64 {
        library
            .conn
            .query_row(
                "SELECT count(*) FROM passages_fts WHERE passages_fts MATCH ?1",
                [format!("\"{term}\"")],
                |row| row.get(0),
            )
            .unwrap()
    }

    #[test]
    fn the_bundled_sqlite_has_fts5_with_the_trigram_tokenizer() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(&dir.path().join("documents.db")).unwrap();
        library
            .store(
                &file("/a.txt", "1"),
                "text file",
                None,
                &[passage("软件包管理系统"), passage("Paquets Debian")],
            )
            .unwrap();
        assert_eq!(
            fts_count(&library, "管理系"),
            1,
            "Chinese matches by substring"
        );
        assert_eq!(fts_count(&library, "paquet"), 1, "case folds");
    }

    #[test]
    fn the_database_is_private_versioned_and_deletes_securely() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hearth/documents.db");
        let library = Library::open(&path).unwrap();
        for name in ["documents.db", "documents.db-wal", "documents.db-shm"] {
            let mode = std::fs::metadata(dir.path().join("hearth").join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{name} holds the user's text");
        }
        let pragma = |name: &str| -> i64 {
            library
                .conn
                .query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(pragma("user_version"), SCHEMA_VERSION);
        assert_eq!(pragma("secure_delete"), 1);
        let journal: String = library
            .conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
        drop(library);
        // A second open finds the schema in place.
        Library::open(&path).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("documents.db");
        drop(Library::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let error = Library::open(&path).err().unwrap().to_string();
        assert!(error.contains("newer Hearth"), "{error}");
        assert!(error.contains("update Hearth"), "{error}");
    }

    #[test]
    fn a_removed_document_leaves_no_text_in_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("documents.db");
        let library = Library::open(&path).unwrap();
        let secret = "zebracornflakes-private-contract-clause";
        let id = library
            .store(
                &file("/secret.txt", "1"),
                "text file",
                None,
                &[passage(secret)],
            )
            .unwrap();
        library
            .store_vectors("m", &[(library.passages(id).unwrap()[0].id, vec![1.0; 4])])
            .unwrap();
        library.attach("conversation-1", id).unwrap();
        assert!(library.remove(Path::new("/secret.txt")).unwrap());
        assert!(!library.remove(Path::new("/secret.txt")).unwrap());
        assert_eq!(fts_count(&library, "zebracorn"), 0);
        assert!(library.attached("conversation-1").unwrap().is_empty());
        let vectors: i64 = library
            .conn
            .query_row("SELECT count(*) FROM vectors", [], |row| row.get(0))
            .unwrap();
        assert_eq!(vectors, 0);
        for name in ["documents.db", "documents.db-wal"] {
            let bytes = std::fs::read(dir.path().join(name)).unwrap_or_default();
            let found = bytes.windows(12).any(|w| w == &secret.as_bytes()[..12]);
            assert!(!found, "{name} still holds the removed text");
        }
        assert!(library.disk_use() > 0);
    }

    #[test]
    fn p11_a_forgotten_conversation_leaves_no_attachment_behind() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(&dir.path().join("documents.db")).unwrap();
        let id = library
            .store(&file("/a.txt", "1"), "text file", None, &[passage("words")])
            .unwrap();
        library.attach("conversation-gone", id).unwrap();
        library.attach("conversation-kept", id).unwrap();
        library.forget_conversation("conversation-gone").unwrap();
        assert!(library.attached("conversation-gone").unwrap().is_empty());
        assert_eq!(library.attached("conversation-kept").unwrap().len(), 1);
        assert_eq!(library.documents().unwrap().len(), 1, "the document stays");
    }

    #[test]
    fn storing_again_replaces_the_passages_and_keeps_attachments() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(&dir.path().join("documents.db")).unwrap();
        let id = library
            .store(
                &file("/a.txt", "1"),
                "text file",
                None,
                &[passage("old words")],
            )
            .unwrap();
        library.attach("c", id).unwrap();
        library.attach("c", id).unwrap();
        let again = library
            .store(
                &file("/a.txt", "2"),
                "text file",
                Some("A"),
                &[passage("new words"), passage("more")],
            )
            .unwrap();
        assert_eq!(again, id, "the same document");
        let texts: Vec<_> = library
            .passages(id)
            .unwrap()
            .into_iter()
            .map(|p| p.text)
            .collect();
        assert_eq!(texts, ["new words", "more"]);
        assert_eq!(fts_count(&library, "old"), 0);
        let attached = library.attached("c").unwrap();
        assert_eq!(attached.len(), 1);
        assert_eq!(attached[0].title.as_deref(), Some("A"));
        assert_eq!(attached[0].passages, 2);
        library.detach("c", id).unwrap();
        assert!(library.attached("c").unwrap().is_empty());
    }

    #[test]
    fn places_and_vectors_come_back_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let library = Library::open(&dir.path().join("documents.db")).unwrap();
        let mut heading = passage("under a heading");
        heading.place = Place::Heading("Über uns".into());
        let mut whole = passage("whole");
        whole.place = Place::Whole;
        let id = library
            .store(
                &file("/a.md", "1"),
                "Markdown file",
                None,
                &[passage("p3"), heading, whole],
            )
            .unwrap();
        let stored = library.passages(id).unwrap();
        let places: Vec<_> = stored.iter().map(|p| p.place.clone()).collect();
        assert_eq!(
            places,
            [
                Place::Page(3),
                Place::Heading("Über uns".into()),
                Place::Whole
            ]
        );
        library
            .store_vectors("m", &[(stored[1].id, vec![0.5, -2.0])])
            .unwrap();
        let missing = library.passages_without_vectors(id, "m").unwrap();
        assert_eq!(missing.len(), 2);
        assert_eq!(
            library.passages_without_vectors(id, "other").unwrap().len(),
            3
        );
        let bytes: Vec<u8> = library
            .conn
            .query_row("SELECT vector FROM vectors", [], |row| row.get(0))
            .unwrap();
        assert_eq!(vector_from_bytes(&bytes), [0.5, -2.0]);
    }
}
