//! The conversation database's schema, as numbered migration steps.
//!
//! The database's `PRAGMA user_version` is the number of steps applied. At open, the steps
//! after it run in order inside one transaction, and the new version is written last, in the
//! same transaction: a step that fails rolls everything back and the file is as it was.
//!
//! To change the schema, append a step to [`STEPS`] (never edit or reorder an existing one:
//! users' databases have already run it) and add a test that opens a database of the previous
//! version, with content, and finds it intact. Foreign keys are on while steps run, so prefer
//! `ALTER TABLE … ADD COLUMN` and new tables to rebuilding a table (dropping one would cascade
//! into the tables that refer to it).

use rusqlite::{Connection, TransactionBehavior};

/// Version 1: the schema every Hearth wrote before versions were numbered (with
/// `user_version` 0). `IF NOT EXISTS` throughout, so an unnumbered database with these
/// tables, or an older one without `answer_versions`, becomes version 1 as it is.
const V1: &str = "
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    settings TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    receipt TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE IF NOT EXISTS answer_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    content TEXT NOT NULL,
    state TEXT NOT NULL,
    receipt TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS answer_versions_by_message ON answer_versions(message_id, id);
";

/// Version 2: a conversation is a tree, so that an edit keeps what it replaces. A message's
/// `parent_id` is the message it follows (NULL for a first message); an edited user message
/// gets a sibling (same parent), and each sibling keeps the messages that followed it. Among
/// siblings exactly one is `shown`; the conversation shown is the path of shown messages.
/// A version-1 conversation is a line: each message follows the one before it.
const V2: &str = "
ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE;
ALTER TABLE messages ADD COLUMN shown INTEGER NOT NULL DEFAULT 1;
UPDATE messages SET parent_id = (
    SELECT max(p.id) FROM messages p
    WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id);
CREATE INDEX messages_by_parent ON messages(parent_id, id);
";

/// Version 3: answers that cite the user's files keep their sources (`sources`, a JSON list
/// of [`super::Source`]), and a conversation remembers that the user accepted sending passages
/// of its files to a remote server (`remote_documents_ok`, the server's address).
const V3: &str = "
CREATE TABLE message_sources (
    message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    sources TEXT NOT NULL
);
ALTER TABLE conversations ADD COLUMN remote_documents_ok TEXT;
";

/// Version 4: pictures given with a user message, in the database beside their message (see
/// [`super::pictures`] for why they are not files), in the order they were given; deleted with
/// their message, so with their conversation.
const V4: &str = "
CREATE TABLE message_pictures (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    width INTEGER NOT NULL,
    height INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (message_id, position)
);
";

/// The steps, in order: `STEPS[n]` takes a database from version `n` to `n + 1`.
pub(super) const STEPS: &[&str] = &[V1, V2, V3, V4];

/// The version this Hearth writes and reads.
pub(super) const CURRENT: u32 = STEPS.len() as u32;

/// What stopped a database from being brought to the current version.
#[derive(Debug)]
pub(super) enum MigrationError {
    /// The database is of a later version than `supported`.
    TooNew { found: u32, supported: u32 },
    /// Step `to` (the version it makes) failed; nothing was changed.
    Step { to: u32, source: rusqlite::Error },
    /// Reading the version or running the transaction failed.
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for MigrationError {
    fn from(source: rusqlite::Error) -> Self {
        Self::Sqlite(source)
    }
}

/// The database's schema version (`PRAGMA user_version`).
pub(super) fn version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings the database to version `steps.len()` by running the steps after its version in
/// one transaction that writes the new version last. Returns the version it found. A database
/// newer than `steps` is refused without a change.
pub(super) fn migrate(conn: &mut Connection, steps: &[&str]) -> Result<u32, MigrationError> {
    let supported = steps.len() as u32;
    // IMMEDIATE: a second Hearth opening the same file waits here instead of migrating twice.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = version(&tx)?;
    if found > supported {
        return Err(MigrationError::TooNew { found, supported });
    }
    for (to, sql) in (found + 1..).zip(&steps[found as usize..]) {
        tx.execute_batch(sql)
            .map_err(|source| MigrationError::Step { to, source })?;
    }
    if found < supported {
        tx.pragma_update(None, "user_version", supported)?;
    }
    tx.commit()?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_exists(conn: &Connection, name: &str) -> bool {
        conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            == 1
    }

    #[test]
    fn a_new_database_gets_every_step_and_the_current_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn, STEPS).unwrap(), 0, "found empty");
        assert_eq!(version(&conn).unwrap(), CURRENT);
        assert!(table_exists(&conn, "answer_versions"));
        assert_eq!(
            migrate(&mut conn, STEPS).unwrap(),
            CURRENT,
            "a second open runs nothing"
        );
    }

    #[test]
    fn a_failed_step_rolls_back_every_step_and_the_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE kept (x TEXT); INSERT INTO kept VALUES ('mine');
             PRAGMA user_version = 1;",
        )
        .unwrap();
        let steps = [
            "CREATE TABLE never (x TEXT)",
            "CREATE TABLE added (x TEXT); INSERT INTO added VALUES ('a')",
            "DELETE FROM kept; INSERT INTO no_such_table VALUES (1)",
        ];
        let err = migrate(&mut conn, &steps).unwrap_err();
        assert!(
            matches!(err, MigrationError::Step { to: 3, .. }),
            "{err:?}: the failing step is named by the version it makes"
        );
        assert_eq!(version(&conn).unwrap(), 1, "the version is unchanged");
        assert!(!table_exists(&conn, "added"), "step 2 was rolled back");
        assert!(!table_exists(&conn, "never"), "step 1 was already applied");
        let kept: String = conn
            .query_row("SELECT x FROM kept", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, "mine", "the failed step's delete was rolled back");
    }

    #[test]
    fn a_newer_database_is_refused_unchanged() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
        let err = migrate(&mut conn, STEPS).unwrap_err();
        assert!(
            matches!(err, MigrationError::TooNew { found: 99, supported } if supported == CURRENT),
            "{err:?}"
        );
        assert!(!table_exists(&conn, "conversations"), "nothing was run");
        assert_eq!(version(&conn).unwrap(), 99);
    }
}
