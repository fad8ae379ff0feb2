//! The saved conversations as front ends use them: list and search, create with the default
//! settings, open, rename, delete, change settings, export.

use std::path::PathBuf;

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::export::{self, ExportFormat};
use crate::lock::lock;

// The records front ends receive and send, from the chat crate that stores them.
pub use hearth_chat::conversations::{Conversation, ConversationSummary, Message};
pub use hearth_chat::ConversationSettings;

/// The longest conversation title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// The longest search query, in characters (longer ones are cut).
pub const MAX_QUERY_CHARS: usize = 500;

impl App {
    /// Conversations, newest first; `query` filters by title and message text.
    pub fn list_conversations(&self, query: &str) -> Result<Vec<ConversationSummary>> {
        let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
        Ok(lock(&self.store).list(&query)?)
    }

    /// Starts a new conversation with `settings` (the app's defaults for new ones).
    pub fn create_conversation(&self, settings: &ConversationSettings) -> Result<Conversation> {
        Ok(lock(&self.store).create(settings)?)
    }

    /// One conversation with its messages.
    pub fn conversation(&self, id: &str) -> Result<Conversation> {
        Ok(lock(&self.store).get(id)?)
    }

    /// Shows the branch that starts at `message_id` (one version of an edited message) in
    /// place of its siblings, and returns the conversation as it now reads.
    pub fn show_branch(&self, conversation_id: &str, message_id: i64) -> Result<Conversation> {
        let store = lock(&self.store);
        store.show_branch(conversation_id, message_id)?;
        Ok(store.get(conversation_id)?)
    }

    /// Renames a conversation (the title is trimmed and cut to [`MAX_TITLE_CHARS`]).
    pub fn rename_conversation(&self, id: &str, title: &str) -> Result<()> {
        let title = title.trim();
        if title.is_empty() {
            return Err(Error::invalid(
                "A conversation needs a name. Type one, or press Escape to keep the old one.",
            ));
        }
        let title: String = title.chars().take(MAX_TITLE_CHARS).collect();
        Ok(lock(&self.store).rename(id, &title)?)
    }

    /// Deletes a conversation and its attachments (the attached documents stay in the
    /// library); refused while an answer is being written.
    pub fn delete_conversation(&self, id: &str) -> Result<()> {
        if self.is_busy() {
            return Err(Error::new(
                ErrorCode::Busy,
                "An answer is being written. Stop it first, then delete the conversation.",
            ));
        }
        lock(&self.store).delete(id)?;
        self.documents.with_library(|library| {
            library
                .forget_conversation(id)
                .map_err(crate::documents::library_error)
        })
    }

    /// Replaces a conversation's system prompt and sampling settings (clamped into range).
    pub fn update_conversation_settings(
        &self,
        id: &str,
        settings: ConversationSettings,
    ) -> Result<()> {
        Ok(lock(&self.store).update_settings(id, &settings.clamped())?)
    }

    /// Writes the conversation to a Markdown or JSON file (with its pictures: [`export`]): to `path` when it is a file the
    /// user chose (in a save dialog that asked before replacing); under a new name (never
    /// replacing a file) in `path` when it is a folder, or else in the exports folder. Returns
    /// the path written.
    pub fn export_conversation(
        &self,
        id: &str,
        format: ExportFormat,
        path: Option<PathBuf>,
    ) -> Result<PathBuf> {
        let conversation = self.conversation(id)?;
        let pictures = self.pictures_of(&conversation)?;
        let (written, target) = match path {
            Some(path) if !path.is_dir() => (
                export::write_to(&path, &conversation, format, &pictures),
                path,
            ),
            Some(dir) => (export::write(&dir, &conversation, format, &pictures), dir),
            None => {
                let dir = self.home.exports_dir();
                (export::write(&dir, &conversation, format, &pictures), dir)
            }
        };
        written.map_err(|e| {
            Error::new(
                ErrorCode::Storage,
                format!(
                    "The export could not be written to {}: {e}. Choose another place.",
                    target.display()
                ),
            )
        })
    }
}
