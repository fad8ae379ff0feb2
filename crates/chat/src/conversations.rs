//! Saved conversations: SQLite (WAL) in the data directory. Answers are written while they stream,
//! so killing the app mid-answer loses at most the last fraction of a second; a database that
//! cannot be read is moved aside (backed up) and a fresh one started, and the caller is told.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::answer::Receipt;
use crate::clock::unix_now;
use crate::settings::ConversationSettings;

mod migrations;
mod sources;

pub use sources::{MessageSources, Source};

/// Title of a conversation before its first message names it.
pub const UNTITLED: &str = "New conversation";

/// What went wrong with the conversation database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite failed on the database file.
    #[error("conversations: the database {path} failed: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The database could not be moved aside after it was found damaged.
    #[error("conversations: the database {path} is damaged and could not be moved aside ({source}); move or delete it, then start Hearth again")]
    Backup {
        /// The damaged file.
        path: PathBuf,
        /// Why renaming failed.
        source: std::io::Error,
    },
    /// The database could not be opened for a reason other than damage (disk full, locked
    /// by another process, read-only, permissions). The file was left exactly as it was.
    #[error("conversations: the database {path} could not be opened ({source}). It was left untouched and your history is still in it: free some disk space, close other Hearth windows, or check that the file and its folder are writable, then start Hearth again")]
    Unavailable {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The database was written by a newer Hearth, with a schema this one does not know. The
    /// file was left untouched.
    #[error("conversations: the database {path} was made by a newer Hearth (schema version {found}; this Hearth reads up to version {supported}). It was left untouched: update Hearth to open it")]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// Bringing the database's schema up to date failed; the change was rolled back.
    #[error("conversations: the database {path} could not be upgraded to schema version {to} ({source}). Nothing was changed and your history is still in it: free some disk space or check that the file is writable, then start Hearth again")]
    Migration {
        /// The database file.
        path: PathBuf,
        /// The version the failed step makes.
        to: u32,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The data directory could not be created.
    #[error(
        "conversations: cannot create the folder {path} ({source}); check that it is writable"
    )]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No conversation or message with that id.
    #[error("conversations: there is no {what} with id {id} (it may have been deleted)")]
    NotFound {
        /// "conversation" or "message".
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A stored value could not be read back.
    #[error("conversations: stored {what} is unreadable: {detail}")]
    Corrupt {
        /// Which value.
        what: &'static str,
        /// Parser message.
        detail: String,
    },
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            other => Err(StoreError::Corrupt {
                what: "message role",
                detail: format!("unknown role {other:?}"),
            }),
        }
    }
}

/// Where a message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum MessageState {
    /// Finished normally.
    Complete,
    /// Being written right now.
    Streaming,
    /// The user stopped it.
    Stopped,
    /// The app ended while it was being written (found so at the next start).
    Interrupted,
    /// Generation failed.
    Error,
}

impl MessageState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Streaming => "streaming",
            Self::Stopped => "stopped",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "complete" => Self::Complete,
            "streaming" => Self::Streaming,
            "stopped" => Self::Stopped,
            "error" => Self::Error,
            _ => Self::Interrupted,
        }
    }
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Message {
    /// Database id (increasing in conversation order).
    pub id: i64,
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// Its state.
    pub state: MessageState,
    /// How it was made (answers only).
    pub receipt: Option<Receipt>,
    /// Unix seconds.
    pub created_at: i64,
    /// The versions of this message that edits made, oldest first, this one among them: each
    /// keeps the conversation that followed it (see [`ConversationStore::show_branch`]). Empty
    /// for a message never edited.
    #[serde(default)]
    pub branches: Vec<i64>,
}

/// An earlier answer, kept when the answer was written again (Regenerate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AnswerVersion {
    /// The answer now shown in its place.
    pub message_id: i64,
    /// Its text.
    pub content: String,
    /// Its state.
    pub state: MessageState,
    /// How it was made.
    pub receipt: Option<Receipt>,
    /// Unix seconds.
    pub created_at: i64,
}

/// A conversation with its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Conversation {
    /// Id (hex).
    pub id: String,
    /// Title shown in the list.
    pub title: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds of the last change.
    pub updated_at: i64,
    /// System prompt and sampling.
    pub settings: ConversationSettings,
    /// Messages, oldest first.
    pub messages: Vec<Message>,
    /// Earlier versions of its answers, oldest first (none in conversations saved before
    /// versions were kept).
    #[serde(default)]
    pub versions: Vec<AnswerVersion>,
}

/// A line of the conversation list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConversationSummary {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub updated_at: i64,
    /// Number of messages.
    pub message_count: usize,
    /// Text around the search match (when searching).
    pub snippet: Option<String>,
}

/// The database was damaged and replaced by a fresh one; the old file is kept here.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// Where the damaged database was moved.
    pub backup: PathBuf,
    /// What SQLite said.
    pub reason: String,
}

/// The conversation shown, as the table `shown_path(id)` for conversation `?1`: its shown
/// first message, then each message's shown follower. Ids increase along it.
const SHOWN_PATH: &str = "WITH RECURSIVE shown_path(id) AS (
    SELECT id FROM messages WHERE conversation_id = ?1 AND parent_id IS NULL AND shown = 1
    UNION ALL
    SELECT m.id FROM messages m JOIN shown_path p ON m.parent_id = p.id WHERE m.shown = 1)";

/// The conversation database. A conversation is a tree of messages (an edit starts a
/// branch beside the message it edits, see [`edit_message`](Self::edit_message)); what it
/// shows, and what a model is given, is the path of shown messages.
pub struct ConversationStore {
    conn: Connection,
    path: PathBuf,
}

/// Makes the database and its `-wal`/`-shm` files readable by this user only (0600): the
/// history holds everything the user typed. A missing database is created 0600 first, and
/// SQLite gives the files it adds the database's own mode. Best effort: a file that cannot
/// be changed (another owner) is left as it is, with a warning, and SQLite still opens it.
fn make_private(path: &Path) {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if !path.exists() {
        // An empty file is a new database to SQLite.
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            tracing::debug!("conversations: could not create {}: {e}", path.display());
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
                "conversations: {} was readable by others; now by you only (0600)",
                file.display()
            ),
            Err(e) => tracing::warn!(
                "conversations: {} is readable by others and could not be narrowed to 0600 ({e}); \
                 run `chmod 600` on it",
                file.display()
            ),
        }
    }
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
        make_private(path);
        let mut conn = Connection::open(path).map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sqlite)?;
        // Before anything writes: a newer Hearth's database is left exactly as it is.
        let found = migrations::version(&conn).map_err(sqlite)?;
        if found > migrations::CURRENT {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported: migrations::CURRENT,
            });
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlite)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(sqlite)?;
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

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start a new, empty conversation.
    pub fn create(&self, settings: &ConversationSettings) -> Result<Conversation, StoreError> {
        let settings_json = serde_json::to_string(settings).unwrap_or_else(|_| "{}".into());
        let t = unix_now() as i64;
        let id: String = self
            .conn
            .query_row("SELECT lower(hex(randomblob(8)))", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        self.conn
            .execute(
                "INSERT INTO conversations (id, title, created_at, updated_at, settings) VALUES (?1, ?2, ?3, ?3, ?4)",
                params![id, UNTITLED, t, settings_json],
            )
            .map_err(|e| self.err(e))?;
        self.get(&id)
    }

    /// Conversations, most recently changed first, each with the number of messages it shows.
    /// A non-empty `query` keeps those whose title or messages (those of every branch) contain
    /// it (case-insensitive) and returns a snippet around the match.
    pub fn list(&self, query: &str) -> Result<Vec<ConversationSummary>, StoreError> {
        let query = query.trim();
        let pattern = format!(
            "%{}%",
            query
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let mut stmt = self
            .conn
            .prepare(
                "WITH RECURSIVE shown(id, conversation_id) AS (
                    SELECT id, conversation_id FROM messages WHERE parent_id IS NULL AND shown = 1
                    UNION ALL
                    SELECT m.id, m.conversation_id FROM messages m JOIN shown p ON m.parent_id = p.id
                    WHERE m.shown = 1),
                 counts(conversation_id, n) AS (
                    SELECT conversation_id, count(*) FROM shown GROUP BY conversation_id)
                 SELECT c.id, c.title, c.created_at, c.updated_at, COALESCE(counts.n, 0),
                        (SELECT m.content FROM messages m WHERE m.conversation_id = c.id
                           AND m.content LIKE ?1 ESCAPE '\\' ORDER BY m.id LIMIT 1)
                 FROM conversations c LEFT JOIN counts ON counts.conversation_id = c.id
                 WHERE ?2 = '' OR c.title LIKE ?1 ESCAPE '\\' OR EXISTS (
                    SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\\')
                 ORDER BY c.updated_at DESC, c.rowid DESC",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![pattern, query], |row| {
                let matched: Option<String> = row.get(5)?;
                Ok(ConversationSummary {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    created_at: row.get(2)?,
                    updated_at: row.get(3)?,
                    message_count: row.get::<_, i64>(4)? as usize,
                    snippet: if query.is_empty() {
                        None
                    } else {
                        matched.map(|text| snippet(&text, query))
                    },
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }

    /// One conversation with the messages it shows (the shown path of its tree).
    pub fn get(&self, id: &str) -> Result<Conversation, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT id, title, created_at, updated_at, settings FROM conversations WHERE id = ?1",
                params![id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound {
                what: "conversation",
                id: id.to_string(),
            })?;
        let settings = serde_json::from_str::<ConversationSettings>(&row.4)
            .map(ConversationSettings::clamped)
            .unwrap_or_else(|error| {
                tracing::warn!(
                    "conversations: settings of {id} unreadable ({error}); using defaults"
                );
                ConversationSettings::default()
            });
        let mut stmt = self
            .conn
            .prepare(&format!(
                "{SHOWN_PATH} SELECT m.id, m.role, m.content, m.state, m.receipt, m.created_at
                 FROM messages m JOIN shown_path USING (id) ORDER BY m.id"
            ))
            .map_err(|e| self.err(e))?;
        let raw = stmt
            .query_map(params![id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let branches = self.branches(id)?;
        let mut messages = Vec::with_capacity(raw.len());
        for (mid, role, content, state, receipt, created_at) in raw {
            messages.push(Message {
                id: mid,
                role: Role::parse(&role)?,
                content,
                state: MessageState::parse(&state),
                receipt: receipt.and_then(|r| serde_json::from_str(&r).ok()),
                created_at,
                branches: branches.get(&mid).cloned().unwrap_or_default(),
            });
        }
        let mut versions = self.versions_where("m.conversation_id = ?1", params![id])?;
        versions.retain(|v| messages.iter().any(|m| m.id == v.message_id));
        Ok(Conversation {
            id: row.0,
            title: row.1,
            created_at: row.2,
            updated_at: row.3,
            settings,
            messages,
            versions,
        })
    }

    /// For each message of conversation `conversation_id` that has siblings (versions made
    /// by edits), its siblings' ids, oldest first, itself among them.
    fn branches(
        &self,
        conversation_id: &str,
    ) -> Result<std::collections::HashMap<i64, Vec<i64>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, parent_id FROM messages WHERE conversation_id = ?1 ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![conversation_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Option<i64>>(1)?))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let mut by_parent: std::collections::HashMap<Option<i64>, Vec<i64>> =
            std::collections::HashMap::new();
        for (id, parent) in rows {
            by_parent.entry(parent).or_default().push(id);
        }
        Ok(by_parent
            .into_values()
            .filter(|siblings| siblings.len() > 1)
            .flat_map(|siblings| {
                siblings
                    .clone()
                    .into_iter()
                    .map(move |id| (id, siblings.clone()))
            })
            .collect())
    }

    /// The shown messages of conversation `conversation_id`, in order, with their roles.
    fn shown_path(&self, conversation_id: &str) -> Result<Vec<(i64, Role)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "{SHOWN_PATH} SELECT m.id, m.role FROM messages m JOIN shown_path USING (id)
                 ORDER BY m.id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![conversation_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        rows.into_iter()
            .map(|(id, role)| Ok((id, Role::parse(&role)?)))
            .collect()
    }

    /// The versions of answers matching `filter` (over `answer_versions v JOIN messages m`).
    fn versions_where(
        &self,
        filter: &str,
        args: impl rusqlite::Params,
    ) -> Result<Vec<AnswerVersion>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT v.message_id, v.content, v.state, v.receipt, v.created_at
                 FROM answer_versions v JOIN messages m ON m.id = v.message_id
                 WHERE {filter} ORDER BY v.message_id, v.id"
            ))
            .map_err(|e| self.err(e))?;
        // Bound first: the rows borrow `stmt`, which must outlive them.
        let versions = stmt
            .query_map(args, |r| {
                Ok(AnswerVersion {
                    message_id: r.get(0)?,
                    content: r.get(1)?,
                    state: MessageState::parse(&r.get::<_, String>(2)?),
                    receipt: r
                        .get::<_, Option<String>>(3)?
                        .and_then(|j| serde_json::from_str(&j).ok()),
                    created_at: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e));
        versions
    }

    fn touch(&self, id: &str) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
                params![id, unix_now() as i64],
            )
            .map_err(|e| self.err(e))
    }

    fn require(&self, id: &str, changed: usize) -> Result<(), StoreError> {
        if changed == 0 {
            Err(StoreError::NotFound {
                what: "conversation",
                id: id.to_string(),
            })
        } else {
            Ok(())
        }
    }

    /// Rename a conversation. Its last-change time stays: the list is ordered by what was said,
    /// so a rename does not move it.
    pub fn rename(&self, id: &str, title: &str) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE conversations SET title = ?2 WHERE id = ?1",
                params![id, title],
            )
            .map_err(|e| self.err(e))?;
        self.require(id, changed)
    }

    /// Delete a conversation and its messages.
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute("DELETE FROM conversations WHERE id = ?1", params![id])
            .map_err(|e| self.err(e))?;
        self.require(id, changed)
    }

    /// Replace a conversation's settings.
    pub fn update_settings(
        &self,
        id: &str,
        settings: &ConversationSettings,
    ) -> Result<(), StoreError> {
        let json = serde_json::to_string(settings).unwrap_or_else(|_| "{}".into());
        let changed = self
            .conn
            .execute(
                "UPDATE conversations SET settings = ?2 WHERE id = ?1",
                params![id, json],
            )
            .map_err(|e| self.err(e))?;
        self.require(id, changed)
    }

    /// Append a message after the last one shown. The first user message also names an
    /// untitled conversation.
    pub fn add_message(
        &self,
        conversation_id: &str,
        role: Role,
        content: &str,
        state: MessageState,
    ) -> Result<Message, StoreError> {
        let changed = self.touch(conversation_id)?;
        self.require(conversation_id, changed)?;
        let parent = self.shown_path(conversation_id)?.last().map(|&(id, _)| id);
        let id = self.insert_message(conversation_id, parent, role, content, state)?;
        if role == Role::User {
            self.conn
                .execute(
                    "UPDATE conversations SET title = ?2 WHERE id = ?1 AND title = ?3",
                    params![conversation_id, title_from(content), UNTITLED],
                )
                .map_err(|e| self.err(e))?;
        }
        self.message(id)
    }

    /// Insert a message after `parent` (None: a first message), shown in place of its
    /// siblings. Returns its id.
    fn insert_message(
        &self,
        conversation_id: &str,
        parent: Option<i64>,
        role: Role,
        content: &str,
        state: MessageState,
    ) -> Result<i64, StoreError> {
        self.conn
            .execute(
                "UPDATE messages SET shown = 0 WHERE conversation_id = ?1 AND parent_id IS ?2",
                params![conversation_id, parent],
            )
            .map_err(|e| self.err(e))?;
        self.conn
            .execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    conversation_id,
                    parent,
                    role.as_str(),
                    content,
                    state.as_str(),
                    unix_now() as i64
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.conn.last_insert_rowid())
    }

    /// One message, with its branches.
    fn message(&self, message_id: i64) -> Result<Message, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT conversation_id, role, content, state, receipt, created_at FROM messages
                 WHERE id = ?1",
                params![message_id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::NotFound {
                what: "message",
                id: message_id.to_string(),
            })?;
        let (conversation_id, role, content, state, receipt, created_at) = row;
        Ok(Message {
            id: message_id,
            role: Role::parse(&role)?,
            content,
            state: MessageState::parse(&state),
            receipt: receipt.and_then(|r| serde_json::from_str(&r).ok()),
            created_at,
            branches: self
                .branches(&conversation_id)?
                .remove(&message_id)
                .unwrap_or_default(),
        })
    }

    /// Edit the user message `message_id`: the new text becomes a new version of it, shown in
    /// its place with nothing after it yet, and the old version keeps the conversation that
    /// followed it (its answers, their versions, later turns), shown again by
    /// [`show_branch`](Self::show_branch). Nothing is deleted. Editing the first message
    /// also retitles the conversation, unless the user renamed it.
    pub fn edit_message(
        &self,
        conversation_id: &str,
        message_id: i64,
        content: &str,
    ) -> Result<Message, StoreError> {
        let found: Option<(Option<i64>, String)> = self
            .conn
            .query_row(
                "SELECT parent_id, content FROM messages
                 WHERE id = ?1 AND conversation_id = ?2 AND role = 'user'",
                params![message_id, conversation_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some((parent, old)) = found else {
            return Err(StoreError::NotFound {
                what: "message",
                id: message_id.to_string(),
            });
        };
        self.touch(conversation_id)?;
        if parent.is_none() {
            self.conn
                .execute(
                    "UPDATE conversations SET title = ?2 WHERE id = ?1 AND title = ?3",
                    params![conversation_id, title_from(content), title_from(&old)],
                )
                .map_err(|e| self.err(e))?;
        }
        let id = self.insert_message(
            conversation_id,
            parent,
            Role::User,
            content,
            MessageState::Complete,
        )?;
        self.message(id)
    }

    /// Show the branch that starts at `message_id` (one version of an edited message) in place
    /// of its siblings; what follows it is shown as it was last left.
    pub fn show_branch(&self, conversation_id: &str, message_id: i64) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE messages SET shown = (id = ?2)
                 WHERE conversation_id = ?1 AND parent_id IS (
                    SELECT parent_id FROM messages WHERE id = ?2 AND conversation_id = ?1)
                 AND EXISTS (SELECT 1 FROM messages WHERE id = ?2 AND conversation_id = ?1)",
                params![conversation_id, message_id],
            )
            .map_err(|e| self.err(e))?;
        if changed == 0 {
            return Err(StoreError::NotFound {
                what: "message",
                id: message_id.to_string(),
            });
        }
        Ok(())
    }

    /// Save the text of an answer so far (called while it streams).
    pub fn save_partial(&self, message_id: i64, content: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE messages SET content = ?2 WHERE id = ?1",
                params![message_id, content],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Finish an answer: final text, state and receipt.
    pub fn finish_message(
        &self,
        message_id: i64,
        content: &str,
        state: MessageState,
        receipt: Option<&Receipt>,
    ) -> Result<Message, StoreError> {
        let receipt_json = receipt.and_then(|r| serde_json::to_string(r).ok());
        let changed = self
            .conn
            .execute(
                "UPDATE messages SET content = ?2, state = ?3, receipt = ?4 WHERE id = ?1",
                params![message_id, content, state.as_str(), receipt_json],
            )
            .map_err(|e| self.err(e))?;
        if changed == 0 {
            return Err(StoreError::NotFound {
                what: "message",
                id: message_id.to_string(),
            });
        }
        let conversation_id: String = self
            .conn
            .query_row(
                "SELECT conversation_id FROM messages WHERE id = ?1",
                params![message_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        self.touch(&conversation_id)?;
        self.message(message_id)
    }

    /// Delete the answers shown after the last user message shown (regenerate) and return
    /// them, each after its own earlier versions, so [`keep_versions`](Self::keep_versions)
    /// can attach them to the answer written in their place. Empty answers are not kept.
    pub fn take_trailing_answers(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<AnswerVersion>, StoreError> {
        let path = self.shown_path(conversation_id)?;
        let after_user = path
            .iter()
            .rposition(|&(_, role)| role == Role::User)
            .map_or(0, |at| at + 1);
        let mut taken = Vec::new();
        for &(id, _) in &path[after_user..] {
            taken.extend(self.versions_where("m.id = ?1", params![id])?);
            let answer = self
                .conn
                .query_row(
                    "SELECT id, content, state, receipt, created_at FROM messages WHERE id = ?1",
                    params![id],
                    |r| {
                        Ok(AnswerVersion {
                            message_id: r.get(0)?,
                            content: r.get(1)?,
                            state: MessageState::parse(&r.get::<_, String>(2)?),
                            receipt: r
                                .get::<_, Option<String>>(3)?
                                .and_then(|j| serde_json::from_str(&j).ok()),
                            created_at: r.get(4)?,
                        })
                    },
                )
                .map_err(|e| self.err(e))?;
            taken.push(answer);
        }
        taken.retain(|v| !v.content.trim().is_empty());
        for &(id, _) in &path[after_user..] {
            self.conn
                .execute("DELETE FROM messages WHERE id = ?1", params![id])
                .map_err(|e| self.err(e))?;
        }
        Ok(taken)
    }

    /// Attach earlier versions (from [`take_trailing_answers`](Self::take_trailing_answers))
    /// to the answer `message_id`.
    pub fn keep_versions(
        &self,
        message_id: i64,
        versions: &[AnswerVersion],
    ) -> Result<(), StoreError> {
        for v in versions {
            let receipt = v
                .receipt
                .as_ref()
                .and_then(|r| serde_json::to_string(r).ok());
            self.conn
                .execute(
                    "INSERT INTO answer_versions (message_id, content, state, receipt, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        message_id,
                        v.content,
                        v.state.as_str(),
                        receipt,
                        v.created_at
                    ],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

/// A title from the first line of a message (at most 60 characters).
pub fn title_from(content: &str) -> String {
    let line = content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    if title.is_empty() {
        UNTITLED.to_string()
    } else {
        title
    }
}

/// About 80 characters of `text` around the first case-insensitive match of `query`.
fn snippet(text: &str, query: &str) -> String {
    let lower = text.to_lowercase();
    let at = lower.find(&query.to_lowercase()).unwrap_or(0);
    // `at` indexes the lowercased text; map back by characters to stay on boundaries.
    let at_chars = lower[..at].chars().count();
    let start = at_chars.saturating_sub(30);
    let piece: String = text.chars().skip(start).take(80).collect();
    let piece = piece.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        format!("…{piece}")
    } else {
        piece
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn store() -> (tempfile::TempDir, ConversationStore) {
        let dir = tempfile::tempdir().unwrap();
        let (store, recovery) =
            ConversationStore::open(&dir.path().join("conversations.db")).unwrap();
        assert!(recovery.is_none());
        (dir, store)
    }

    #[test]
    fn first_user_message_names_the_conversation() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        assert_eq!(c.title, UNTITLED);
        s.add_message(
            &c.id,
            Role::User,
            "  \nHow do tides work?\nmore",
            MessageState::Complete,
        )
        .unwrap();
        assert_eq!(s.get(&c.id).unwrap().title, "How do tides work?");
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
    fn search_matches_titles_and_messages_case_insensitively() {
        let (_d, s) = store();
        let a = s.create(&ConversationSettings::default()).unwrap();
        s.add_message(
            &a.id,
            Role::User,
            "Tell me about Rust lifetimes",
            MessageState::Complete,
        )
        .unwrap();
        let b = s.create(&ConversationSettings::default()).unwrap();
        s.add_message(&b.id, Role::User, "Soup recipes", MessageState::Complete)
            .unwrap();
        s.add_message(
            &b.id,
            Role::Assistant,
            "Try a LENTIL soup with 100% cumin",
            MessageState::Complete,
        )
        .unwrap();
        let hits = s.list("lentil").unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].id, b.id);
        assert!(hits[0].snippet.as_deref().unwrap().contains("LENTIL"));
        assert_eq!(s.list("100%").unwrap().len(), 1, "% is matched literally");
        assert_eq!(s.list("").unwrap().len(), 2);
        assert!(s.list("nothing like this").unwrap().is_empty());
    }

    #[test]
    fn rename_delete_and_missing_ids() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        s.rename(&c.id, "Trip").unwrap();
        assert_eq!(s.get(&c.id).unwrap().title, "Trip");
        s.delete(&c.id).unwrap();
        assert!(matches!(s.get(&c.id), Err(StoreError::NotFound { .. })));
        assert!(matches!(
            s.rename("nope", "x"),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            s.add_message("nope", Role::User, "x", MessageState::Complete),
            Err(StoreError::NotFound { .. })
        ));
    }

    #[test]
    fn renaming_keeps_the_place_in_the_list() {
        let (_d, s) = store();
        let older = s.create(&ConversationSettings::default()).unwrap();
        let newer = s.create(&ConversationSettings::default()).unwrap();
        for (id, at) in [(&older.id, 100), (&newer.id, 200)] {
            s.conn
                .execute(
                    "UPDATE conversations SET updated_at = ?2 WHERE id = ?1",
                    params![id, at],
                )
                .unwrap();
        }
        s.rename(&older.id, "Renamed").unwrap();
        let order: Vec<_> = s.list("").unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(
            order,
            [newer.id, older.id.clone()],
            "a rename does not move it up"
        );
        assert_eq!(s.get(&older.id).unwrap().updated_at, 100);
    }

    #[test]
    fn regenerate_takes_only_the_answers_after_the_last_question() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        s.add_message(&c.id, Role::User, "one", MessageState::Complete)
            .unwrap();
        s.add_message(&c.id, Role::Assistant, "a1", MessageState::Complete)
            .unwrap();
        let u2 = s
            .add_message(&c.id, Role::User, "two", MessageState::Complete)
            .unwrap();
        s.add_message(&c.id, Role::Assistant, "a2", MessageState::Complete)
            .unwrap();
        let taken = s.take_trailing_answers(&c.id).unwrap();
        assert_eq!(
            taken.iter().map(|v| v.content.as_str()).collect::<Vec<_>>(),
            ["a2"]
        );
        let m = s.get(&c.id).unwrap().messages;
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].id, u2.id);
    }

    #[test]
    fn regenerated_answers_are_kept_as_versions_in_order() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        s.add_message(&c.id, Role::User, "q", MessageState::Complete)
            .unwrap();
        s.add_message(&c.id, Role::Assistant, "first", MessageState::Complete)
            .unwrap();
        // Regenerate twice: each new answer carries every earlier one.
        let mut last = 0;
        for text in ["second", "third"] {
            let earlier = s.take_trailing_answers(&c.id).unwrap();
            let a = s
                .add_message(&c.id, Role::Assistant, text, MessageState::Complete)
                .unwrap();
            s.keep_versions(a.id, &earlier).unwrap();
            last = a.id;
        }
        let got = s.get(&c.id).unwrap();
        assert_eq!(got.messages.len(), 2);
        assert_eq!(got.messages[1].content, "third");
        assert!(got.versions.iter().all(|v| v.message_id == last));
        let texts: Vec<_> = got.versions.iter().map(|v| v.content.as_str()).collect();
        assert_eq!(texts, ["first", "second"], "oldest first");
        // Editing the question keeps the answer and its versions in the old branch.
        let edited = s.edit_message(&c.id, got.messages[0].id, "q2").unwrap();
        assert!(s.get(&c.id).unwrap().versions.is_empty());
        s.show_branch(&c.id, got.messages[0].id).unwrap();
        let back = s.get(&c.id).unwrap();
        assert_eq!(back.versions, got.versions);
        assert_eq!(back.messages[1], got.messages[1]);
        assert_eq!(back.messages[0].branches, [got.messages[0].id, edited.id]);
    }

    /// Adds a question and its answer; returns their ids.
    fn turn(s: &ConversationStore, id: &str, question: &str, answer: &str) -> (i64, i64) {
        let q = s
            .add_message(id, Role::User, question, MessageState::Complete)
            .unwrap();
        let a = s
            .add_message(id, Role::Assistant, answer, MessageState::Complete)
            .unwrap();
        (q.id, a.id)
    }

    fn shown(s: &ConversationStore, id: &str) -> Vec<String> {
        s.get(id)
            .unwrap()
            .messages
            .into_iter()
            .map(|m| m.content)
            .collect()
    }

    #[test]
    fn an_edit_keeps_the_old_branch_and_each_version_shows_its_own() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        turn(&s, &c.id, "one", "a1");
        let (q2, _) = turn(&s, &c.id, "two", "a2");
        turn(&s, &c.id, "three", "a3");

        // Edit twice: each edit starts a new branch after "a1".
        let e1 = s.edit_message(&c.id, q2, "two, edited").unwrap();
        assert_eq!(e1.branches, [q2, e1.id]);
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two, edited"]);
        s.add_message(&c.id, Role::Assistant, "b2", MessageState::Complete)
            .unwrap();
        let e2 = s.edit_message(&c.id, e1.id, "two, again").unwrap();
        s.add_message(&c.id, Role::Assistant, "c2", MessageState::Complete)
            .unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two, again", "c2"]);
        let got = s.get(&c.id).unwrap();
        assert_eq!(got.messages[2].branches, [q2, e1.id, e2.id], "oldest first");
        assert!(got.messages[0].branches.is_empty(), "never edited");
        assert_eq!(s.list("").unwrap()[0].message_count, 4, "shown messages");

        // Switch back and forth: each version shows the conversation that followed it.
        s.show_branch(&c.id, q2).unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two", "a2", "three", "a3"]);
        assert_eq!(s.list("").unwrap()[0].message_count, 6);
        s.show_branch(&c.id, e1.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two, edited", "b2"]);
        s.show_branch(&c.id, e2.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two, again", "c2"]);
        s.show_branch(&c.id, q2).unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two", "a2", "three", "a3"]);

        // Talking on in an old branch stays in it.
        turn(&s, &c.id, "four", "a4");
        assert_eq!(shown(&s, &c.id)[6..], ["four", "a4"]);
        s.show_branch(&c.id, e1.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["one", "a1", "two, edited", "b2"]);

        // Every branch's text is still found by search.
        assert_eq!(s.list("a3").unwrap().len(), 1);
    }

    #[test]
    fn editing_the_first_message_keeps_the_whole_conversation() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let (q1, _) = turn(&s, &c.id, "Tides?", "The moon.");
        turn(&s, &c.id, "Sun?", "Also.");
        let e = s.edit_message(&c.id, q1, "Waves?").unwrap();
        assert_eq!(shown(&s, &c.id), ["Waves?"]);
        assert_eq!(
            s.get(&c.id).unwrap().title,
            "Waves?",
            "the automatic title follows the edited first message (review finding 18)"
        );
        s.show_branch(&c.id, q1).unwrap();
        assert_eq!(shown(&s, &c.id), ["Tides?", "The moon.", "Sun?", "Also."]);
        s.show_branch(&c.id, e.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["Waves?"]);
    }

    #[test]
    fn a_title_the_user_chose_stays_when_the_first_message_is_edited() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let (q1, _) = turn(&s, &c.id, "Tides?", "The moon.");
        let (q2, _) = turn(&s, &c.id, "Sun?", "Also.");
        s.edit_message(&c.id, q2, "Stars?").unwrap();
        assert_eq!(
            s.get(&c.id).unwrap().title,
            "Tides?",
            "a later message is not the title"
        );
        s.rename(&c.id, "Moon notes").unwrap();
        s.edit_message(&c.id, q1, "Waves?").unwrap();
        assert_eq!(s.get(&c.id).unwrap().title, "Moon notes");
    }

    #[test]
    fn regenerating_inside_an_old_branch_keeps_versions_there() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let (q, _) = turn(&s, &c.id, "q", "first");
        let e = s.edit_message(&c.id, q, "q edited").unwrap();
        s.add_message(
            &c.id,
            Role::Assistant,
            "edited answer",
            MessageState::Complete,
        )
        .unwrap();
        s.show_branch(&c.id, q).unwrap();
        let earlier = s.take_trailing_answers(&c.id).unwrap();
        assert_eq!(earlier.len(), 1, "only the shown branch's answer");
        assert_eq!(earlier[0].content, "first");
        let a = s
            .add_message(&c.id, Role::Assistant, "second", MessageState::Complete)
            .unwrap();
        s.keep_versions(a.id, &earlier).unwrap();
        let got = s.get(&c.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["q", "second"]);
        assert_eq!(got.versions.len(), 1);
        assert_eq!(
            (got.versions[0].message_id, got.versions[0].content.as_str()),
            (a.id, "first")
        );
        s.show_branch(&c.id, e.id).unwrap();
        let other = s.get(&c.id).unwrap();
        assert_eq!(shown(&s, &c.id), ["q edited", "edited answer"]);
        assert!(
            other.versions.is_empty(),
            "the other branch's answer has no versions"
        );
    }

    #[test]
    fn deleting_a_conversation_removes_every_branch() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let (q, _) = turn(&s, &c.id, "q", "a");
        let earlier = s.take_trailing_answers(&c.id).unwrap();
        let a = s
            .add_message(&c.id, Role::Assistant, "a again", MessageState::Complete)
            .unwrap();
        s.keep_versions(a.id, &earlier).unwrap();
        s.edit_message(&c.id, q, "q2").unwrap();
        let keep = s.create(&ConversationSettings::default()).unwrap();
        turn(&s, &keep.id, "other", "kept");
        s.delete(&c.id).unwrap();
        let count = |table: &str| -> i64 {
            s.conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(count("messages"), 2, "only the other conversation's");
        assert_eq!(count("answer_versions"), 0);
        assert_eq!(shown(&s, &keep.id), ["other", "kept"]);
    }

    #[test]
    fn editing_or_showing_what_is_not_there_changes_nothing() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let (q, a) = turn(&s, &c.id, "q", "a");
        let other = s.create(&ConversationSettings::default()).unwrap();
        for (conversation, id) in [(&c.id, a), (&c.id, 999), (&other.id, q)] {
            assert!(
                matches!(
                    s.edit_message(conversation, id, "x"),
                    Err(StoreError::NotFound {
                        what: "message",
                        ..
                    })
                ),
                "only a user message of that conversation is edited"
            );
        }
        s.show_branch(&c.id, a).unwrap(); // a message never edited is its only version
        for (conversation, id) in [(&c.id, 999), (&other.id, q)] {
            assert!(matches!(
                s.show_branch(conversation, id),
                Err(StoreError::NotFound {
                    what: "message",
                    ..
                })
            ));
        }
        assert_eq!(shown(&s, &c.id), ["q", "a"]);
        assert!(shown(&s, &other.id).is_empty());
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

    #[test]
    fn receipt_round_trips() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let a = s
            .add_message(&c.id, Role::Assistant, "", MessageState::Streaming)
            .unwrap();
        let receipt = Receipt {
            model_name: "demo".into(),
            model_sha256: Some("ab".into()),
            backend_kind: crate::BackendKind::Remote,
            backend: "remote (http://127.0.0.1:8080)".into(),
            device: "127.0.0.1:8080".into(),
            runtime_version: None,
            prompt_tokens: 12,
            generated_tokens: 5,
            counts_exact: false,
            ttft_secs: 0.1,
            decode_secs: 0.5,
            tokens_per_second: 10.0,
            backend_timings: None,
            stop_reason: "end of turn".into(),
            trimmed_messages: 0,
            finished_at: 1,
            energy: None,
        };
        s.finish_message(a.id, "done", MessageState::Complete, Some(&receipt))
            .unwrap();
        assert_eq!(
            s.get(&c.id).unwrap().messages[0].receipt.as_ref(),
            Some(&receipt)
        );
    }

    #[test]
    fn receipts_saved_before_backends_read_as_cpu() {
        let old = serde_json::json!({
            "model_name": "demo", "model_sha256": null, "backend": "cpu (avx2)",
            "device": "cpu", "prompt_tokens": 3, "generated_tokens": 4, "ttft_secs": 0.1,
            "decode_secs": 0.2, "tokens_per_second": 15.0, "stop_reason": "end of turn",
            "trimmed_messages": 0, "finished_at": 1
        });
        let receipt: Receipt = serde_json::from_value(old).unwrap();
        assert_eq!(receipt.backend_kind, crate::BackendKind::Cpu);
        assert!(receipt.counts_exact);
        assert_eq!(receipt.energy, None);
    }

    #[test]
    fn title_is_cut_on_character_boundaries() {
        let long = "é".repeat(100);
        let t = title_from(&long);
        assert_eq!(t.chars().count(), 61);
        assert_eq!(title_from("   "), UNTITLED);
    }
}
