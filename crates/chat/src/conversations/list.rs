//! The conversation list: start a conversation, list and search them (most recently changed
//! first, with a snippet around a match), rename, delete, and change a conversation's settings.

use rusqlite::params;
use serde::Serialize;

use super::{Conversation, ConversationStore, StoreError, UNTITLED};
use crate::clock::unix_now;
use crate::settings::ConversationSettings;

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

impl ConversationStore {
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

    /// Delete a conversation and its messages (overwritten in the file, and gone from the
    /// journal: see `hearth_sqlite::checkpoint`).
    pub fn delete(&self, id: &str) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute("DELETE FROM conversations WHERE id = ?1", params![id])
            .map_err(|e| self.err(e))?;
        self.require(id, changed)?;
        hearth_sqlite::checkpoint(&self.conn).map_err(|e| self.err(e))
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
    use crate::conversations::tests::{shown, store, turn};
    use crate::conversations::{MessageState, Role};

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
}
