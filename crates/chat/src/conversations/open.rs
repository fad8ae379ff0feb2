//! Opening the conversation database: created private (0600, WAL), migrated to this build's
//! schema, answers that were streaming when the app ended marked interrupted; a damaged file is
//! moved aside and a fresh one started (the caller is told), any other failure leaves the file
//! untouched so the caller can retry, and a newer Hearth's database is refused unchanged.

use std::path::{Path, PathBuf};

use super::{migrations, ConversationStore, StoreError};
use crate::clock::unix_now;

/// The database was damaged and replaced by a fresh one; the old file is kept here.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// Where the damaged database was moved.
    pub backup: PathBuf,
    /// What SQLite said.
    pub reason: String,
}

/// Whether `error` says the database file itself is damaged (or is not a database at all).
fn is_corruption(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

impl ConversationStore {
    /// Open (or create) the database at `path`. A damaged database (failed integrity check,
    /// SQLITE_CORRUPT or SQLITE_NOTADB) is moved aside to `<name>.damaged-<unix time>` and a
    /// fresh one started; the `Recovery` says so. Any other failure returns
    /// [`StoreError::Unavailable`] and leaves the file alone, so the caller can retry.
    pub fn open(path: &Path) -> Result<(Self, Option<Recovery>), StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Folder {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        match Self::open_checked(path) {
            Ok(store) => Ok((store, None)),
            // Only real damage sets the file aside; anything else (disk full, a lock held
            // too long, a read-only file) may pass, and the history must survive it.
            Err(StoreError::Sqlite { source, .. }) if path.exists() && !is_corruption(&source) => {
                Err(StoreError::Unavailable {
                    path: path.to_path_buf(),
                    source,
                })
            }
            Err(StoreError::Sqlite { source, .. }) if path.exists() => {
                let reason = source.to_string();
                tracing::warn!(
                    "conversations: {} is damaged ({reason}); moving it aside",
                    path.display()
                );
                let backup = Self::move_aside(path)?;
                let store = Self::open_checked(path)?;
                Ok((store, Some(Recovery { backup, reason })))
            }
            Err(other) => Err(other),
        }
    }

    fn open_checked(path: &Path) -> Result<Self, StoreError> {
        let sqlite = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        // Private (0600): the history holds everything the user typed.
        let mut conn = hearth_sqlite::open(path).map_err(sqlite)?;
        // Before anything writes: a newer Hearth's database is left exactly as it is.
        let found = migrations::version(&conn).map_err(sqlite)?;
        if found > migrations::CURRENT {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported: migrations::CURRENT,
            });
        }
        hearth_sqlite::use_wal(&conn).map_err(sqlite)?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |row| row.get(0))
            .map_err(sqlite)?;
        if check != "ok" {
            return Err(sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(format!("integrity check: {check}")),
            )));
        }
        migrations::migrate(&mut conn, migrations::STEPS).map_err(|e| match e {
            migrations::MigrationError::TooNew { found, supported } => StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported,
            },
            migrations::MigrationError::Step { to, source } => StoreError::Migration {
                path: path.to_path_buf(),
                to,
                source,
            },
            migrations::MigrationError::Sqlite(source) => sqlite(source),
        })?;
        // Answers that were streaming when the app last ended.
        conn.execute(
            "UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'",
            [],
        )
        .map_err(sqlite)?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    fn move_aside(path: &Path) -> Result<PathBuf, StoreError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "conversations.db".into());
        let backup = path.with_file_name(format!("{name}.damaged-{}", unix_now()));
        std::fs::rename(path, &backup).map_err(|source| StoreError::Backup {
            path: path.to_path_buf(),
            source,
        })?;
        for suffix in ["-wal", "-shm"] {
            let side = path.with_file_name(format!("{name}{suffix}"));
            if side.exists() {
                let _ = std::fs::rename(
                    &side,
                    backup.with_file_name(format!(
                        "{}{suffix}",
                        backup.file_name().unwrap_or_default().to_string_lossy()
                    )),
                );
            }
        }
        Ok(backup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::tests::shown;
    use crate::conversations::{MessageState, Role};
    use crate::settings::ConversationSettings;
    use rusqlite::Connection;

    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn history_files_are_private_when_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hearth/conversations.db");
        let (store, _) = ConversationStore::open(&path).unwrap();
        store.create(&ConversationSettings::default()).unwrap();
        for name in [
            "conversations.db",
            "conversations.db-wal",
            "conversations.db-shm",
        ] {
            let file = path.with_file_name(name);
            assert_eq!(mode(&file), 0o600, "{name} holds what the user typed");
        }
    }

    #[test]
    fn history_files_readable_by_others_are_narrowed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        drop(ConversationStore::open(&path).unwrap());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let wal = dir.path().join("conversations.db-wal");
        std::fs::write(&wal, b"").unwrap();
        std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).unwrap();
        let _store = ConversationStore::open(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&wal), 0o600);
    }

    #[test]
    fn partial_answer_survives_reopen_as_interrupted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let id;
        {
            let (s, _) = ConversationStore::open(&path).unwrap();
            let c = s.create(&ConversationSettings::default()).unwrap();
            id = c.id.clone();
            s.add_message(&id, Role::User, "hi", MessageState::Complete)
                .unwrap();
            let a = s
                .add_message(&id, Role::Assistant, "", MessageState::Streaming)
                .unwrap();
            s.save_partial(a.id, "Hello, I was").unwrap();
            // dropped without finishing: like a killed app
        }
        let (s, recovery) = ConversationStore::open(&path).unwrap();
        assert!(recovery.is_none());
        let c = s.get(&id).unwrap();
        assert_eq!(
            c.messages[1].content, "Hello, I was",
            "the streamed part is kept"
        );
        assert_eq!(c.messages[1].state, MessageState::Interrupted);
    }

    #[test]
    fn damaged_database_is_moved_aside_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        std::fs::write(&path, vec![0x5a; 8192]).unwrap();
        let (s, recovery) = ConversationStore::open(&path).unwrap();
        let recovery = recovery.expect("damage must be reported");
        assert!(
            recovery.backup.exists(),
            "the damaged file is kept as a backup"
        );
        assert_eq!(
            std::fs::read(&recovery.backup).unwrap(),
            vec![0x5a; 8192],
            "backup is the original bytes"
        );
        assert!(s.list("").unwrap().is_empty(), "a fresh database is usable");
        s.create(&ConversationSettings::default()).unwrap();
    }

    #[test]
    fn transient_errors_at_open_keep_the_database_and_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        {
            let (s, _) = ConversationStore::open(&path).unwrap();
            let c = s.create(&ConversationSettings::default()).unwrap();
            s.add_message(&c.id, Role::User, "keep me", MessageState::Complete)
                .unwrap();
        }
        let backups = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().contains("damaged"))
                .count()
        };

        // Another process holds the write lock longer than the busy timeout.
        let holder = rusqlite::Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let err = ConversationStore::open(&path).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        assert!(err.to_string().contains("left untouched"), "{err}");
        assert_eq!(backups(), 0, "nothing was moved aside");
        holder.execute_batch("ROLLBACK").unwrap();
        drop(holder);
        let (s, recovery) = ConversationStore::open(&path).unwrap();
        assert!(recovery.is_none());
        assert_eq!(s.list("").unwrap().len(), 1, "the history is still there");
        drop(s);

        // Something that cannot be opened at all (here a folder) is not corruption either.
        let folder = dir.path().join("folder.db");
        std::fs::create_dir(&folder).unwrap();
        let err = ConversationStore::open(&folder).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable { .. }), "{err}");
        assert!(folder.is_dir(), "left where it was");
        assert_eq!(backups(), 0);
    }

    #[test]
    fn a_database_from_before_versions_opens_and_its_conversations_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        {
            let conn = Connection::open(&path).unwrap();
            // The schema as it was: no answer_versions table.
            conn.execute_batch(
                "CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT NOT NULL,
                   created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, settings TEXT NOT NULL);
                 CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                   conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                   role TEXT NOT NULL, content TEXT NOT NULL, state TEXT NOT NULL, receipt TEXT,
                   created_at INTEGER NOT NULL);
                 INSERT INTO conversations VALUES ('old', 'Old chat', 1, 2, '{}');
                 INSERT INTO messages (conversation_id, role, content, state, created_at)
                   VALUES ('old', 'user', 'hi', 'complete', 1), ('old', 'assistant', 'hello', 'complete', 2);",
            )
            .unwrap();
        }
        let (s, recovery) = ConversationStore::open(&path).unwrap();
        assert!(recovery.is_none(), "an older database is not damaged");
        let c = s.get("old").unwrap();
        assert_eq!(c.messages.len(), 2);
        assert!(c.versions.is_empty());
        assert_eq!(s.take_trailing_answers("old").unwrap().len(), 1);
    }

    /// The schema every Hearth before numbered versions wrote (`user_version` 0), with a
    /// conversation in it: what every existing user has on disk.
    const UNNUMBERED_V1: &str = "
        CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT NOT NULL,
            created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, settings TEXT NOT NULL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL, content TEXT NOT NULL, state TEXT NOT NULL, receipt TEXT,
            created_at INTEGER NOT NULL);
        CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
        CREATE TABLE answer_versions (id INTEGER PRIMARY KEY AUTOINCREMENT,
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            content TEXT NOT NULL, state TEXT NOT NULL, receipt TEXT, created_at INTEGER NOT NULL);
        CREATE INDEX answer_versions_by_message ON answer_versions(message_id, id);
        INSERT INTO conversations VALUES ('c1', 'Tides', 10, 20, '{\"system_prompt\":\"Be brief.\"}');
        INSERT INTO messages (id, conversation_id, role, content, state, receipt, created_at) VALUES
            (1, 'c1', 'user', 'How do tides work?', 'complete', NULL, 10),
            (2, 'c1', 'assistant', 'The moon pulls.', 'complete', NULL, 11),
            (3, 'c1', 'user', 'And the sun?', 'complete', NULL, 12),
            (4, 'c1', 'assistant', 'It pulls too.', 'stopped', NULL, 13);
        INSERT INTO answer_versions (message_id, content, state, receipt, created_at)
            VALUES (4, 'Less so.', 'complete', NULL, 12);
    ";

    #[test]
    fn an_unnumbered_database_is_version_1_and_migrates_with_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch(UNNUMBERED_V1)
            .unwrap();
        let (s, recovery) = ConversationStore::open(&path).unwrap();
        assert!(recovery.is_none());
        assert_eq!(migrations::version(&s.conn).unwrap(), migrations::CURRENT);
        let c = s.get("c1").unwrap();
        assert_eq!(
            (c.title.as_str(), c.created_at, c.updated_at),
            ("Tides", 10, 20)
        );
        assert_eq!(c.settings.system_prompt, "Be brief.");
        let texts: Vec<_> = c.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(
            texts,
            [
                "How do tides work?",
                "The moon pulls.",
                "And the sun?",
                "It pulls too."
            ]
        );
        assert_eq!(c.messages[3].state, MessageState::Stopped);
        assert_eq!(c.versions.len(), 1);
        assert_eq!(
            (c.versions[0].message_id, c.versions[0].content.as_str()),
            (4, "Less so.")
        );
        // The line it was is the tree's one branch: an edit keeps it whole.
        let edit = s.edit_message("c1", 3, "And the stars?").unwrap();
        assert_eq!(
            shown(&s, "c1"),
            ["How do tides work?", "The moon pulls.", "And the stars?"]
        );
        s.show_branch("c1", 3).unwrap();
        assert_eq!(s.get("c1").unwrap().messages, {
            let mut old = c.messages.clone();
            old[2].branches = vec![3, edit.id];
            old
        });
        assert_eq!(s.get("c1").unwrap().versions, c.versions);
    }

    #[test]
    fn a_database_from_a_newer_hearth_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversations.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(UNNUMBERED_V1).unwrap();
            conn.execute_batch(
                "UPDATE messages SET state = 'streaming' WHERE id = 4; PRAGMA user_version = 999",
            )
            .unwrap();
        }
        let before = std::fs::read(&path).unwrap();
        let err = ConversationStore::open(&path).map(|_| ()).unwrap_err();
        assert!(
            matches!(err, StoreError::TooNew { found: 999, .. }),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("newer Hearth") && text.contains("999") && text.contains("update Hearth"),
            "{text}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "not a byte changed");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["conversations.db"], "nothing moved aside or added");
    }
}
