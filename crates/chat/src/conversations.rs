//! Saved conversations: SQLite (WAL) in the data directory. Answers are written while they stream,
//! so killing the app mid-answer loses at most the last fraction of a second; a database that
//! cannot be read is moved aside (backed up) and a fresh one started, and the caller is told.
//!
//! [`ConversationStore`] is one connection; its methods live beside what they do: `open`
//! (opening, privacy, recovery), `list` (the conversation list and search), `tree` (the
//! conversation as a tree of messages, read back as the path it shows), `messages` (writing
//! messages, edits and versions), `sources` (the passages an answer cited), `pictures` (the
//! pictures given with a question), `migrations`.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use crate::clock::unix_now;

mod list;
mod messages;
mod migrations;
mod open;
mod pictures;
mod sources;
mod tree;

pub use list::ConversationSummary;
pub use open::Recovery;
pub use pictures::PictureInfo;
pub use sources::{MessageSources, Source, SourceUse};
pub use tree::{AnswerVersion, Conversation, Message, MessageState, Role};

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

/// The conversation database. A conversation is a tree of messages (an edit starts a
/// branch beside the message it edits, see [`edit_message`](Self::edit_message)); what it
/// shows, and what a model is given, is the path of shown messages.
pub struct ConversationStore {
    conn: Connection,
    path: PathBuf,
}

impl ConversationStore {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(super) fn store() -> (tempfile::TempDir, ConversationStore) {
        let dir = tempfile::tempdir().unwrap();
        let (store, recovery) =
            ConversationStore::open(&dir.path().join("conversations.db")).unwrap();
        assert!(recovery.is_none());
        (dir, store)
    }

    /// Adds a question and its answer; returns their ids.
    pub(super) fn turn(
        s: &ConversationStore,
        id: &str,
        question: &str,
        answer: &str,
    ) -> (i64, i64) {
        let q = s
            .add_message(id, Role::User, question, MessageState::Complete)
            .unwrap();
        let a = s
            .add_message(id, Role::Assistant, answer, MessageState::Complete)
            .unwrap();
        (q.id, a.id)
    }

    pub(super) fn shown(s: &ConversationStore, id: &str) -> Vec<String> {
        s.get(id)
            .unwrap()
            .messages
            .into_iter()
            .map(|m| m.content)
            .collect()
    }

    #[test]
    fn title_is_cut_on_character_boundaries() {
        let long = "é".repeat(100);
        let t = title_from(&long);
        assert_eq!(t.chars().count(), 61);
        assert_eq!(title_from("   "), UNTITLED);
    }
}
