//! The pictures given with a question: kept in the conversation database, in the table
//! `message_pictures` (message, position, media type, size, the encoded bytes), and read back
//! whole (to give them to a model again, or to export them) or as a short description
//! ([`PictureInfo`], what a conversation's messages carry to the UI).
//!
//! Why in the database and not as files beside it: a picture is written in the same
//! transaction-safe file as its message, so there is never a picture without its message or a
//! message whose picture is missing; deleting a conversation deletes its pictures by the
//! foreign key's cascade (and `hearth_sqlite::checkpoint` clears them from the journal), with
//! no folder to sweep; and the file stays private like the rest of the history. Pictures reach
//! the store already checked and downscaled by [`crate::picture`] (at most a few hundred
//! kilobytes each), so the database does not grow by the originals' size.
//!
//! Contract: pictures belong to user messages only; their order is the order they were given;
//! an edited question keeps its pictures (the edit copies them to the new version).

use std::sync::Arc;

use hearth_engine::{Picture, PictureFormat};
use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::{ConversationStore, StoreError};

/// What a saved message says of one of its pictures (the bytes are read with
/// [`ConversationStore::picture`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PictureInfo {
    /// Its place among the message's pictures, from 0.
    pub index: u32,
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Size of the encoded picture in bytes.
    pub size: u32,
}

fn format_of(media_type: &str) -> Result<PictureFormat, StoreError> {
    match media_type {
        "image/png" => Ok(PictureFormat::Png),
        "image/jpeg" => Ok(PictureFormat::Jpeg),
        other => Err(StoreError::Corrupt {
            what: "picture",
            detail: format!("unknown media type {other:?}"),
        }),
    }
}

impl ConversationStore {
    /// Keeps `pictures` with the message `message_id`, after the ones it has.
    pub fn add_pictures(&self, message_id: i64, pictures: &[Picture]) -> Result<(), StoreError> {
        let next: i64 = self
            .conn
            .query_row(
                "SELECT coalesce(max(position) + 1, 0) FROM message_pictures WHERE message_id = ?1",
                params![message_id],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        for (position, picture) in (next..).zip(pictures) {
            self.conn
                .execute(
                    "INSERT INTO message_pictures
                     (message_id, position, media_type, width, height, bytes)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![
                        message_id,
                        position,
                        picture.format.media_type(),
                        picture.width,
                        picture.height,
                        &picture.bytes[..]
                    ],
                )
                .map_err(|e| match e {
                    rusqlite::Error::SqliteFailure(f, _)
                        if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        StoreError::NotFound {
                            what: "message",
                            id: message_id.to_string(),
                        }
                    }
                    e => self.err(e),
                })?;
        }
        Ok(())
    }

    /// The pictures of message `message_id`, in the order they were given (none for most).
    pub fn pictures(&self, message_id: i64) -> Result<Vec<Picture>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT media_type, width, height, bytes FROM message_pictures
                 WHERE message_id = ?1 ORDER BY position",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![message_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, u32>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, Vec<u8>>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        rows.into_iter()
            .map(|(media_type, width, height, bytes)| {
                Ok(Picture {
                    format: format_of(&media_type)?,
                    width,
                    height,
                    bytes: Arc::from(bytes),
                })
            })
            .collect()
    }

    /// Picture `index` (from 0) of message `message_id`.
    pub fn picture(&self, message_id: i64, index: u32) -> Result<Picture, StoreError> {
        self.pictures(message_id)?
            .into_iter()
            .nth(index as usize)
            .ok_or_else(|| StoreError::NotFound {
                what: "picture",
                id: format!("{index} of message {message_id}"),
            })
    }

    /// What the messages of conversation `conversation_id` say of their pictures, by message.
    pub(super) fn picture_infos(
        &self,
        conversation_id: &str,
    ) -> Result<std::collections::HashMap<i64, Vec<PictureInfo>>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT p.message_id, p.media_type, p.width, p.height, length(p.bytes)
                 FROM message_pictures p JOIN messages m ON m.id = p.message_id
                 WHERE m.conversation_id = ?1 ORDER BY p.message_id, p.position",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![conversation_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, u32>(2)?,
                    r.get::<_, u32>(3)?,
                    r.get::<_, u32>(4)?,
                ))
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let mut by_message: std::collections::HashMap<i64, Vec<PictureInfo>> =
            std::collections::HashMap::new();
        for (message_id, media_type, width, height, size) in rows {
            let list = by_message.entry(message_id).or_default();
            list.push(PictureInfo {
                index: list.len() as u32,
                media_type,
                width,
                height,
                size,
            });
        }
        Ok(by_message)
    }

    /// Gives the message `to` copies of the pictures of message `from` (an edited question
    /// keeps its pictures).
    pub(super) fn copy_pictures(&self, from: i64, to: i64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO message_pictures (message_id, position, media_type, width, height, bytes)
                 SELECT ?2, position, media_type, width, height, bytes FROM message_pictures
                 WHERE message_id = ?1",
                params![from, to],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::tests::store;
    use crate::conversations::{MessageState, Role};
    use crate::settings::ConversationSettings;

    fn picture(format: PictureFormat, fill: u8) -> Picture {
        Picture {
            format,
            width: 3,
            height: 2,
            bytes: Arc::from(vec![fill; 10]),
        }
    }

    #[test]
    fn pictures_are_kept_in_order_and_described_on_their_message() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let q = s
            .add_message(&c.id, Role::User, "what is this?", MessageState::Complete)
            .unwrap();
        let a = picture(PictureFormat::Png, 1);
        let b = picture(PictureFormat::Jpeg, 2);
        s.add_pictures(q.id, std::slice::from_ref(&a)).unwrap();
        s.add_pictures(q.id, std::slice::from_ref(&b)).unwrap();
        assert_eq!(s.pictures(q.id).unwrap(), vec![a.clone(), b.clone()]);
        assert_eq!(s.picture(q.id, 1).unwrap(), b);
        assert!(matches!(
            s.picture(q.id, 2),
            Err(StoreError::NotFound {
                what: "picture",
                ..
            })
        ));
        let shown = s.get(&c.id).unwrap();
        let infos = &shown.messages[0].pictures;
        assert_eq!(infos.len(), 2);
        assert_eq!(infos[1].media_type, "image/jpeg");
        assert_eq!((infos[1].index, infos[1].size), (1, 10));
        assert!(s.add_pictures(9999, &[a]).is_err(), "no such message");
    }

    #[test]
    fn an_edit_keeps_the_pictures_and_deleting_the_conversation_deletes_them() {
        let (_d, s) = store();
        let c = s.create(&ConversationSettings::default()).unwrap();
        let q = s
            .add_message(&c.id, Role::User, "what is this?", MessageState::Complete)
            .unwrap();
        s.add_pictures(q.id, &[picture(PictureFormat::Png, 7)])
            .unwrap();
        let edited = s.edit_message(&c.id, q.id, "and this?").unwrap();
        assert_eq!(edited.pictures.len(), 1);
        assert_eq!(s.pictures(edited.id).unwrap().len(), 1);
        s.delete(&c.id).unwrap();
        let left: i64 = s
            .conn
            .query_row("SELECT count(*) FROM message_pictures", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, 0, "pictures go with their conversation");
    }
}
