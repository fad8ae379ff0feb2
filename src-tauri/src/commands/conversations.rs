//! Saved conversations: list, search, open, rename, delete, settings, export.

use hearth_app::conversations::{Conversation, ConversationSettings, ConversationSummary};
use hearth_app::export::ExportFormat;
use hearth_app::App;
use tauri::{AppHandle, Runtime, State};

use crate::error::CommandResult;

/// Conversations, newest first; `query` filters by title and message text.
#[tauri::command(async)]
pub fn list_conversations(
    app: State<'_, App>,
    query: Option<String>,
) -> CommandResult<Vec<ConversationSummary>> {
    app.list_conversations(query.as_deref().unwrap_or_default())
}

/// Start a new conversation with the default settings.
#[tauri::command(async)]
pub fn create_conversation<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
) -> CommandResult<Conversation> {
    app.create_conversation(&super::settings::load(&window).conversation_defaults())
}

/// One conversation with its messages.
#[tauri::command(async)]
pub fn get_conversation(app: State<'_, App>, id: String) -> CommandResult<Conversation> {
    app.conversation(&id)
}

/// Show the branch that starts at `message_id` (one version of an edited message) in place of
/// its siblings; returns the conversation as it now reads.
#[tauri::command(async)]
pub fn show_branch(
    app: State<'_, App>,
    conversation_id: String,
    message_id: i64,
) -> CommandResult<Conversation> {
    app.show_branch(&conversation_id, message_id)
}

/// Rename a conversation.
#[tauri::command(async)]
pub fn rename_conversation(app: State<'_, App>, id: String, title: String) -> CommandResult<()> {
    app.rename_conversation(&id, &title)
}

/// Delete a conversation.
#[tauri::command(async)]
pub fn delete_conversation(app: State<'_, App>, id: String) -> CommandResult<()> {
    app.delete_conversation(&id)
}

/// Replace a conversation's system prompt and sampling settings.
#[tauri::command(async)]
pub fn update_conversation_settings(
    app: State<'_, App>,
    id: String,
    settings: ConversationSettings,
) -> CommandResult<()> {
    app.update_conversation_settings(&id, settings)
}

/// Write the conversation to a Markdown or JSON file: to `path` when the user chose a file in
/// the save dialog; under a new name in `path` when it is a folder (export all) or else in the
/// exports folder. Returns the path written.
#[tauri::command(async)]
pub fn export_conversation(
    app: State<'_, App>,
    id: String,
    format: ExportFormat,
    path: Option<String>,
) -> CommandResult<String> {
    let written = app.export_conversation(&id, format, path.map(Into::into))?;
    Ok(written.display().to_string())
}
