//! Writing messages: add one after the last shown (the first question names the conversation),
//! edit a question into a new branch, show another branch, save an answer while it streams and
//! finish it, and take the answers after the last question to keep them as versions of the one
//! written in their place (Regenerate).

use rusqlite::{params, OptionalExtension};

use super::{
    title_from, AnswerVersion, ConversationStore, Message, MessageState, Role, StoreError, UNTITLED,
};
use crate::answer::Receipt;
use crate::clock::unix_now;

impl ConversationStore {
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
        self.copy_pictures(message_id, id)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversations::tests::{shown, store, turn};
    use crate::settings::ConversationSettings;

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
}
