//! Saved conversations: list, search, open, rename, delete, settings, export.

use tauri::{AppHandle, Runtime, State};

use crate::error::{CommandError, CommandResult};
use crate::export::{self, ExportFormat};
use crate::state::{lock, AppState};
use hearth_chat::conversations::{Conversation, ConversationSummary};
use hearth_chat::ConversationSettings;

/// The longest conversation title, in characters.
const MAX_TITLE_CHARS: usize = 200;

/// Conversations, newest first; `query` filters by title and message text.
#[tauri::command(async)]
pub fn list_conversations(
    state: State<'_, AppState>,
    query: Option<String>,
) -> CommandResult<Vec<ConversationSummary>> {
    let query = query.unwrap_or_default();
    let query: String = query.chars().take(500).collect();
    Ok(lock(&state.store).list(&query)?)
}

/// Start a new conversation with the default settings.
#[tauri::command(async)]
pub fn create_conversation<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
) -> CommandResult<Conversation> {
    let defaults = super::settings::load(&app).conversation_defaults();
    Ok(lock(&state.store).create(&defaults)?)
}

/// One conversation with its messages.
#[tauri::command(async)]
pub fn get_conversation(state: State<'_, AppState>, id: String) -> CommandResult<Conversation> {
    Ok(lock(&state.store).get(&id)?)
}

/// Rename a conversation.
#[tauri::command(async)]
pub fn rename_conversation(
    state: State<'_, AppState>,
    id: String,
    title: String,
) -> CommandResult<()> {
    let title = title.trim();
    if title.is_empty() {
        return Err(CommandError::invalid(
            "A conversation needs a name. Type one, or press Escape to keep the old one.",
        ));
    }
    let title: String = title.chars().take(MAX_TITLE_CHARS).collect();
    Ok(lock(&state.store).rename(&id, &title)?)
}

/// Delete a conversation.
#[tauri::command(async)]
pub fn delete_conversation(state: State<'_, AppState>, id: String) -> CommandResult<()> {
    if state.busy.load(std::sync::atomic::Ordering::Acquire) {
        return Err(CommandError::new(
            "busy",
            "An answer is being written. Stop it first, then delete the conversation.",
        ));
    }
    Ok(lock(&state.store).delete(&id)?)
}

/// Replace a conversation's system prompt and sampling settings.
#[tauri::command(async)]
pub fn update_conversation_settings(
    state: State<'_, AppState>,
    id: String,
    settings: ConversationSettings,
) -> CommandResult<()> {
    Ok(lock(&state.store).update_settings(&id, &settings.clamped())?)
}

/// Write the conversation to a Markdown or JSON file: to `path` when the user chose a file in
/// the save dialog; under a new name (never replacing a file) in `path` when it is a folder
/// (export all) or else in the exports folder. Returns the path written.
#[tauri::command(async)]
pub fn export_conversation(
    state: State<'_, AppState>,
    id: String,
    format: ExportFormat,
    path: Option<String>,
) -> CommandResult<String> {
    let conversation = lock(&state.store).get(&id)?;
    if let Some(path) = path {
        let path = std::path::PathBuf::from(path);
        let written = if path.is_dir() {
            export::write(&path, &conversation, format)
        } else {
            export::write_to(&path, &conversation, format)
        };
        return written.map(|p| p.display().to_string()).map_err(|e| {
            CommandError::new(
                "storage",
                format!(
                    "The export could not be written to {}: {e}. Choose another place.",
                    path.display()
                ),
            )
        });
    }
    let dir = state.paths.exports_dir();
    export::write(&dir, &conversation, format)
        .map(|p| p.display().to_string())
        .map_err(|e| {
            CommandError::new(
                "storage",
                format!("The export could not be written to {}: {e}", dir.display()),
            )
        })
}
