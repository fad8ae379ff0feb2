//! How Hearth opens its SQLite databases. Both hold what the user wrote or read: the
//! conversations (`hearth-chat`) and the document library (`hearth-documents`). Both are opened
//! the same way, so that fact lives here once:
//!
//! - the database and its `-wal`/`-shm` files are readable by this user alone (0600), also
//!   when they were created by an older Hearth or another tool ([`make_private`]);
//! - a writer waits up to [`BUSY_TIMEOUT`] for another (the app and `hearth` at once);
//! - deleted content is overwritten with zeros (`secure_delete`; bundled SQLite has it off), so
//!   a removed file's passages or a deleted conversation do not stay in free pages, and a
//!   caller that deletes on the user's word then truncates the journal ([`checkpoint`]);
//! - the journal is written ahead (WAL), synced at commits (`synchronous=NORMAL`), with foreign
//!   keys enforced ([`use_wal`]);
//! - a transaction that writes takes the write lock when it begins ([`write`]). One that began
//!   by reading could not wait for another writer: SQLite answers "database is locked" at once
//!   rather than let its snapshot go stale.
//!
//! Neither store may use the other's crate, and this is all they share, so it is a leaf crate
//! of its own rather than a module of either.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

/// How long a write waits for another connection's write before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the database at `path` (creating it 0600 when missing), made private first, with the
/// busy timeout set and deleted content overwritten. The journal is left alone, so a caller can
/// check the database's version before anything writes; [`use_wal`] then sets it.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    make_private(path);
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(conn)
}

/// Copies the write-ahead journal into the database and empties it, so that what was just
/// deleted (overwritten in the database by `secure_delete`) is not kept in the journal's old
/// pages either. Best effort: a reader holding the journal leaves it for the next checkpoint.
pub fn checkpoint(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
}

/// Begins a transaction that will write, holding the write lock from its start (`BEGIN
/// IMMEDIATE`), so it waits up to [`BUSY_TIMEOUT`] for another connection's write.
pub fn write(conn: &Connection) -> rusqlite::Result<Transaction<'_>> {
    Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
}

/// Write-ahead journal, synced at commits, foreign keys enforced.
///
/// Switching a new database to WAL needs it alone, and SQLite answers "database is locked" at
/// once rather than call the busy handler while another connection opens it too (the app's
/// first indexing beside its library view). So the switch is tried again for up to
/// [`BUSY_TIMEOUT`], as any other write waits.
pub fn use_wal(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            break;
        }
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => break result?,
        }
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")
}

/// Makes the database at `path` and its `-wal`/`-shm` files readable by this user only (0600).
/// A missing database is created 0600 first (an empty file is a new database to SQLite), and
/// SQLite gives the files it adds the database's own mode. Best effort: a file that cannot be
/// changed (another owner) is left as it is, with a warning that says what to run, and SQLite
/// still opens it.
pub fn make_private(path: &Path) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if !path.exists() {
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            tracing::debug!("could not create {}: {e}", path.display());
        }
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    for file in [
        path.to_path_buf(),
        path.with_file_name(format!("{name}-wal")),
        path.with_file_name(format!("{name}-shm")),
    ] {
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if meta.permissions().mode() & 0o077 == 0 {
            continue;
        }
        match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => tracing::info!(
                "{} was readable by others; now by you only (0600)",
                file.display()
            ),
            Err(e) => tracing::warn!(
                "{} is readable by others and could not be narrowed to 0600 ({e}); run \
                 `chmod 600` on it",
                file.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_database_and_its_journal_are_the_users_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.db");
        let conn = open(&path).unwrap();
        use_wal(&conn).unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("new.db-wal")), 0o600);
        let journal: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
    }

    #[test]
    fn deleted_content_is_overwritten_and_leaves_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.db");
        let conn = open(&path).unwrap();
        use_wal(&conn).unwrap();
        let on: i64 = conn
            .query_row("PRAGMA secure_delete", [], |row| row.get(0))
            .unwrap();
        assert_eq!(on, 1);
        conn.execute_batch(
            "CREATE TABLE t (x); INSERT INTO t VALUES ('ZEBRACORN-PRIVATE' || hex(randomblob(2000)));",
        )
        .unwrap();
        checkpoint(&conn).unwrap();
        conn.execute_batch("DELETE FROM t;").unwrap();
        checkpoint(&conn).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes.windows(9).any(|w| w == b"ZEBRACORN");
        assert!(!found, "the deleted row is not in the file");
        let journal = std::fs::metadata(dir.path().join("secret.db-wal")).unwrap();
        assert_eq!(journal.len(), 0, "the journal is emptied");
    }

    #[test]
    fn an_old_database_readable_by_others_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        open(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
    }
}
