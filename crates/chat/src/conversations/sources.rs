//! What an answer that cites the user's files keeps with it: its numbered sources (file, place,
//! character range, the passage), and the user's consent, per conversation, to send passages
//! of its files to a remote server. When a file leaves the library its passages leave every
//! answer ([`ConversationStore::forget_document`]): the number, name and place stay, the text
//! goes.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{ConversationStore, StoreError};

/// One passage an answer was given to read, by the number the model cites it with (`[1]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Source {
    /// The `[n]` in the answer, from 1.
    pub number: usize,
    /// The document's id in the library.
    pub document_id: i64,
    /// The file's name (no folder).
    pub name: String,
    /// Where in the file, in words: "page 3", "section “Terms”", or "" for the whole file.
    pub place: String,
    /// The page, for a PDF.
    pub page: Option<u32>,
    /// The section's index in the extracted document.
    pub section: usize,
    /// Characters (Unicode scalar values) `char_start..char_end` of the section's text.
    pub char_start: usize,
    /// End of the range (exclusive).
    pub char_end: usize,
    /// The passage.
    pub text: String,
}

/// The sources of one saved answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MessageSources {
    /// The answer.
    pub message_id: i64,
    /// Its sources, by number.
    pub sources: Vec<Source>,
}

impl ConversationStore {
    /// Keeps `sources` with the answer `message_id` (replacing what it had).
    pub fn save_sources(&self, message_id: i64, sources: &[Source]) -> Result<(), StoreError> {
        let json = serde_json::to_string(sources).expect("sources serialize");
        self.conn
            .execute(
                "INSERT INTO message_sources (message_id, sources) VALUES (?1, ?2)
                 ON CONFLICT(message_id) DO UPDATE SET sources = excluded.sources",
                params![message_id, json],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Drops the text of every saved source from the library's document `document_id` (the
    /// file was removed), keeping its number, name and place, and empties the journal of the
    /// old text; the number of answers changed.
    pub fn forget_document(&self, document_id: i64) -> Result<usize, StoreError> {
        let rows: Vec<(i64, String)> = {
            let mut statement = self
                .conn
                .prepare(
                    "SELECT message_id, sources FROM message_sources WHERE EXISTS (
                       SELECT 1 FROM json_each(sources)
                       WHERE json_extract(value, '$.document_id') = ?1)",
                )
                .map_err(|e| self.err(e))?;
            let rows = statement
                .query_map(params![document_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| self.err(e))?;
            rows.collect::<Result<_, _>>().map_err(|e| self.err(e))?
        };
        for (message_id, json) in &rows {
            let mut sources: Vec<Source> =
                serde_json::from_str(json).map_err(|e| StoreError::Corrupt {
                    what: "sources",
                    detail: e.to_string(),
                })?;
            for s in sources.iter_mut().filter(|s| s.document_id == document_id) {
                s.text.clear();
            }
            self.save_sources(*message_id, &sources)?;
        }
        hearth_sqlite::checkpoint(&self.conn).map_err(|e| self.err(e))?;
        Ok(rows.len())
    }

    /// The sources of the answers of `conversation_id` that have any, oldest first.
    pub fn sources(&self, conversation_id: &str) -> Result<Vec<MessageSources>, StoreError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT s.message_id, s.sources FROM message_sources s
                 JOIN messages m ON m.id = s.message_id
                 WHERE m.conversation_id = ?1 ORDER BY s.message_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params![conversation_id], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let mut all = Vec::new();
        for row in rows {
            let (message_id, json) = row.map_err(|e| self.err(e))?;
            // A row this Hearth cannot read (written by another version) is left out, not fatal.
            if let Ok(sources) = serde_json::from_str(&json) {
                all.push(MessageSources {
                    message_id,
                    sources,
                });
            }
        }
        Ok(all)
    }

    /// The remote server the user agreed to send passages of this conversation's files to.
    pub fn remote_documents_ok(&self, conversation_id: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT remote_documents_ok FROM conversations WHERE id = ?1",
                params![conversation_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .map_err(|e| self.err(e))
            .map(Option::flatten)
    }

    /// Records that the user agreed to send passages of this conversation's files to `server`.
    pub fn accept_remote_documents(
        &self,
        conversation_id: &str,
        server: &str,
    ) -> Result<(), StoreError> {
        let changed = self
            .conn
            .execute(
                "UPDATE conversations SET remote_documents_ok = ?2 WHERE id = ?1",
                params![conversation_id, server],
            )
            .map_err(|e| self.err(e))?;
        if changed == 0 {
            return Err(StoreError::NotFound {
                what: "conversation",
                id: conversation_id.to_owned(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::{MessageState, Role};

    #[test]
    fn p11_a_removed_files_passages_leave_every_answer_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let (store, _) = ConversationStore::open(&path).unwrap();
        let c = store.create(&Default::default()).unwrap();
        let m = store
            .add_message(
                &c.id,
                Role::Assistant,
                "See [1], [2].",
                MessageState::Complete,
            )
            .unwrap();
        let source = |number, document_id, text: &str| Source {
            number,
            document_id,
            name: format!("file{document_id}.md"),
            place: "page 2".into(),
            page: Some(2),
            section: 0,
            char_start: 0,
            char_end: text.chars().count(),
            text: text.into(),
        };
        let secret = "The acquisition target is ZEBRACORN-PRIVATE Ltd at 41 million.";
        let kept = source(2, 8, "Another file's passage.");
        store
            .save_sources(m.id, &[source(1, 7, secret), kept.clone()])
            .unwrap();
        assert_eq!(store.forget_document(7).unwrap(), 1);
        assert_eq!(store.forget_document(9).unwrap(), 0, "no answer cites it");
        let saved = &store.sources(&c.id).unwrap()[0].sources;
        let forgotten = Source {
            text: String::new(),
            ..source(1, 7, secret)
        };
        assert_eq!(saved[0], forgotten, "number, name and place stay");
        assert_eq!(saved[1], kept, "other files' passages stay");
        for file in [path.clone(), dir.path().join("c.db-wal")] {
            let bytes = std::fs::read(&file).unwrap_or_default();
            let found = bytes.windows(9).any(|w| w == b"ZEBRACORN");
            assert!(!found, "{} no longer holds the passage", file.display());
        }
    }

    #[test]
    fn sources_and_consent_are_kept_with_the_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = ConversationStore::open(&dir.path().join("c.db")).unwrap();
        let c = store.create(&Default::default()).unwrap();
        let m = store
            .add_message(&c.id, Role::Assistant, "See [1].", MessageState::Complete)
            .unwrap();
        let source = Source {
            number: 1,
            document_id: 7,
            name: "notes.txt".into(),
            place: String::new(),
            page: None,
            section: 0,
            char_start: 3,
            char_end: 9,
            text: "passage".into(),
        };
        store
            .save_sources(m.id, std::slice::from_ref(&source))
            .unwrap();
        assert_eq!(
            store.sources(&c.id).unwrap(),
            [MessageSources {
                message_id: m.id,
                sources: vec![source]
            }]
        );
        assert_eq!(store.remote_documents_ok(&c.id).unwrap(), None);
        store.accept_remote_documents(&c.id, "http://h:1").unwrap();
        assert_eq!(
            store.remote_documents_ok(&c.id).unwrap().as_deref(),
            Some("http://h:1")
        );
        assert!(store.accept_remote_documents("nope", "x").is_err());
    }
}
