//! What an answer that cites the user's files keeps with it: its numbered sources (file, place,
//! character range, the passage), and the user's consent, per conversation, to send passages
//! of its files to a remote server. When a file leaves the library its passages leave every
//! answer ([`ConversationStore::forget_document`]): the number, name and place stay, the text
//! goes.
//!
//! Each saved source says how the answer used it ([`SourceUse`]: cited with [n], probably
//! used, or only read). Sources saved before Hearth told these apart load as
//! [`SourceUse::Given`], with no merged numbers and not read whole.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{ConversationStore, StoreError};

/// How an answer used a source: the order Hearth lists them in (cited first, "Also read" last).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum SourceUse {
    /// The answer cites it with one of its [n] markers.
    Cited,
    /// The answer has no markers, and much of its wording is in this passage.
    ProbablyUsed,
    /// Given to the model; the answer shows no sign of using it ("Also read").
    AlsoRead,
    /// Given to the model, how the answer used it not (yet) known: while it is being written,
    /// and in sources saved before Hearth told the uses apart.
    #[default]
    Given,
}

/// One passage an answer was given to read (or one page or section of them), by the number
/// the model cites it with (`[1]`).
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
    /// Whether the passage was read from a scan or a photo (OCR), which its citation says.
    /// Absent in sources saved before OCR: false.
    #[serde(default)]
    pub from_scan: bool,
    /// How the answer used it. Absent in sources saved before: given.
    #[serde(default)]
    pub used: SourceUse,
    /// Every [n] this entry stands for, lowest first, when passages of one page or section
    /// are listed as one entry (`number` is the first); empty for a single passage.
    #[serde(default)]
    pub numbers: Vec<usize>,
    /// The passage's file was given to the model whole (it was short enough); an "Also read"
    /// entry of such a file stands for all of it that was not cited.
    #[serde(default)]
    pub read_whole: bool,
}

impl Source {
    /// Every [n] this entry stands for: `numbers`, or `number` alone.
    pub fn all_numbers(&self) -> Vec<usize> {
        if self.numbers.is_empty() {
            vec![self.number]
        } else {
            self.numbers.clone()
        }
    }
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
        Ok(self
            .sources_with_answers(conversation_id)?
            .into_iter()
            .map(|(sources, _)| sources)
            .collect())
    }

    /// [`Self::sources`], each with its answer's text (to tell how the answer used sources
    /// saved before Hearth told that apart).
    pub fn sources_with_answers(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<(MessageSources, String)>, StoreError> {
        let mut statement = self
            .conn
            .prepare(
                "SELECT s.message_id, s.sources, m.content FROM message_sources s
                 JOIN messages m ON m.id = s.message_id
                 WHERE m.conversation_id = ?1 ORDER BY s.message_id",
            )
            .map_err(|e| self.err(e))?;
        let rows = statement
            .query_map(params![conversation_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let mut all = Vec::new();
        for row in rows {
            let (message_id, json, content) = row.map_err(|e| self.err(e))?;
            // A row this Hearth cannot read (written by another version) is left out, not fatal.
            if let Ok(sources) = serde_json::from_str(&json) {
                let sources = MessageSources {
                    message_id,
                    sources,
                };
                all.push((sources, content));
            }
        }
        Ok(all)
    }

    /// The sources saved with the answer `message_id` (empty when none, or unreadable).
    pub fn message_sources(&self, message_id: i64) -> Result<Vec<Source>, StoreError> {
        let json: Option<String> = self
            .conn
            .query_row(
                "SELECT sources FROM message_sources WHERE message_id = ?1",
                params![message_id],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(json
            .and_then(|j| serde_json::from_str(&j).ok())
            .unwrap_or_default())
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
            from_scan: false,
            used: SourceUse::Cited,
            numbers: Vec::new(),
            read_whole: false,
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
            from_scan: true,
            used: SourceUse::ProbablyUsed,
            numbers: vec![1, 3],
            read_whole: true,
        };
        store
            .save_sources(m.id, std::slice::from_ref(&source))
            .unwrap();
        assert_eq!(
            store.sources(&c.id).unwrap(),
            [MessageSources {
                message_id: m.id,
                sources: vec![source.clone()]
            }]
        );
        assert_eq!(
            store.message_sources(m.id).unwrap(),
            std::slice::from_ref(&source)
        );
        assert!(store.message_sources(m.id + 1).unwrap().is_empty());
        let with = store.sources_with_answers(&c.id).unwrap();
        assert_eq!(with[0].1, "See [1].");
        assert_eq!(store.remote_documents_ok(&c.id).unwrap(), None);
        store.accept_remote_documents(&c.id, "http://h:1").unwrap();
        assert_eq!(
            store.remote_documents_ok(&c.id).unwrap().as_deref(),
            Some("http://h:1")
        );
        assert!(store.accept_remote_documents("nope", "x").is_err());
    }

    #[test]
    fn sources_saved_before_uses_were_told_apart_load_as_given() {
        let old = r#"[{"number":2,"document_id":7,"name":"a.pdf","place":"page 3","page":3,
            "section":2,"char_start":0,"char_end":4,"text":"rent"}]"#;
        let sources: Vec<Source> = serde_json::from_str(old).unwrap();
        assert_eq!(sources[0].used, SourceUse::Given);
        assert_eq!(sources[0].all_numbers(), [2]);
        assert!(!sources[0].read_whole && !sources[0].from_scan);
        let json = serde_json::to_string(&SourceUse::ProbablyUsed).unwrap();
        assert_eq!(json, "\"probably_used\"");
    }
}
