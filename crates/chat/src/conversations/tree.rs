//! A conversation as it is stored: a tree of messages (an edit starts a branch beside the message
//! it edits; a regenerated answer keeps its earlier versions), and reading it back: the path of
//! shown messages, which is what the conversation shows and what a model is given.

use rusqlite::{params, OptionalExtension};
use serde::{Deserialize, Serialize};

use super::{ConversationStore, StoreError};
use crate::answer::Receipt;
use crate::settings::ConversationSettings;

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
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }

    pub(super) fn parse(s: &str) -> Result<Self, StoreError> {
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
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Streaming => "streaming",
            Self::Stopped => "stopped",
            Self::Interrupted => "interrupted",
            Self::Error => "error",
        }
    }

    pub(super) fn parse(s: &str) -> Self {
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
    /// The pictures given with it (user messages), in order; their bytes are read with
    /// [`ConversationStore::picture`]. Empty for most messages.
    #[serde(default)]
    pub pictures: Vec<super::PictureInfo>,
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

/// The conversation shown, as the table `shown_path(id)` for conversation `?1`: its shown
/// first message, then each message's shown follower. Ids increase along it.
const SHOWN_PATH: &str = "WITH RECURSIVE shown_path(id) AS (
    SELECT id FROM messages WHERE conversation_id = ?1 AND parent_id IS NULL AND shown = 1
    UNION ALL
    SELECT m.id FROM messages m JOIN shown_path p ON m.parent_id = p.id WHERE m.shown = 1)";

impl ConversationStore {
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
        let mut pictures = self.picture_infos(id)?;
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
                pictures: pictures.remove(&mid).unwrap_or_default(),
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
    pub(super) fn shown_path(&self, conversation_id: &str) -> Result<Vec<(i64, Role)>, StoreError> {
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
    pub(super) fn versions_where(
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

    /// One message, with its branches.
    pub(super) fn message(&self, message_id: i64) -> Result<Message, StoreError> {
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
            pictures: self
                .picture_infos(&conversation_id)?
                .remove(&message_id)
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::tests::store;

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
}
