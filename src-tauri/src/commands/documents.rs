//! The user's files: attach them to a conversation (picked in the system's dialog, which this
//! side opens, or dropped on the window), the document library, and the remote notice.
//!
//! No path crosses from the web view: the dialog's choice and a drop's paths reach Rust from
//! the window system, and the UI names files only by a drop's single-use token or a library id.
//! A drop is classified in the app (`hearth_app::drop`) and announced on the `dropped` window
//! event. Indexing runs on a thread of its own and reports on the `documents` window event.
//! Each attach and detach returns the conversation's files and the remote notice.

use std::path::PathBuf;
use std::sync::Arc;

use hearth_app::documents::{
    accepted_extensions, ConversationDocuments, DocumentEvent, DocumentSink, LibraryView,
    MessageSources, DOCUMENTS_EVENT,
};
use hearth_app::drop::DROP_EVENT;
use hearth_app::App;
use tauri::{AppHandle, Emitter, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::{CommandError, CommandResult, ErrorCode};

/// Sends indexing events to the window as `documents` events.
pub fn window_events<R: Runtime>(window: AppHandle<R>) -> DocumentSink {
    Arc::new(move |event: DocumentEvent| {
        if let Err(error) = window.emit(DOCUMENTS_EVENT, &event) {
            tracing::warn!("the window stopped listening: {error}");
        }
    })
}

/// Files dropped on the window (the window system's drag-drop event, or `test_drop`):
/// classified and kept under a token; the UI receives the drop in a `dropped` event and acts
/// by the token (`attach_dropped`, `import_dropped`).
pub fn dropped<R: Runtime>(window: &AppHandle<R>, app: &App, paths: &[PathBuf]) {
    let drop = app.register_drop(paths);
    tracing::info!("drop: {}", drop.reason);
    if let Err(error) = window.emit(DROP_EVENT, &drop) {
        tracing::warn!("the window stopped listening: {error}");
    }
}

/// Opens the system's file dialog (its `title` and the name of its `filter` in the app's
/// language) and attaches the files chosen to `conversation_id`; indexing goes on in the
/// background. Returns the conversation's files (unchanged when the
/// dialog was cancelled).
#[tauri::command(async)]
pub fn pick_documents<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    conversation_id: String,
    title: String,
    filter: String,
) -> CommandResult<ConversationDocuments> {
    let chosen = window
        .dialog()
        .file()
        .set_title(title)
        .add_filter(filter, &accepted_extensions())
        .blocking_pick_files()
        .unwrap_or_default();
    let paths: Vec<PathBuf> = chosen
        .into_iter()
        .filter_map(|f| f.into_path().ok())
        .collect();
    if paths.is_empty() {
        return app.conversation_documents(&conversation_id);
    }
    app.attach_files(&conversation_id, paths, window_events(window))
}

/// Opens the system's folder dialog (its `title` in the app's language); the folder chosen is
/// classified as a drop of it would be (`hearth_app::drop`: the documents inside it, bounded)
/// and announced on the `dropped` event, so the UI attaches it by the drop's token. Returns
/// whether a folder was chosen.
#[tauri::command(async)]
pub fn pick_document_folder<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    title: String,
) -> CommandResult<bool> {
    let Some(path) = window
        .dialog()
        .file()
        .set_title(title)
        .blocking_pick_folder()
        .and_then(|f| f.into_path().ok())
    else {
        return Ok(false);
    };
    dropped(&window, &app, &[path]);
    Ok(true)
}

/// Keeps the file of a `failed` event (by its `failure` number) in the library with why it
/// could not be read; its `indexed` event follows.
#[tauri::command(async)]
pub fn keep_failed<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    failure: u64,
) -> CommandResult<()> {
    app.documents().keep_failed(failure, window_events(window))
}

/// Attaches the documents of the drop `token` (once) to `conversation_id`.
#[tauri::command(async)]
pub fn attach_dropped<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    conversation_id: String,
    token: String,
) -> CommandResult<ConversationDocuments> {
    app.attach_dropped(&conversation_id, &token, window_events(window))
}

/// Attaches a file of the library to `conversation_id`.
#[tauri::command(async)]
pub fn attach_document(
    app: State<'_, App>,
    conversation_id: String,
    document_id: i64,
) -> CommandResult<ConversationDocuments> {
    app.attach_document(&conversation_id, document_id)
}

/// Takes a file off `conversation_id` (it stays in the library).
#[tauri::command(async)]
pub fn detach_document(
    app: State<'_, App>,
    conversation_id: String,
    document_id: i64,
) -> CommandResult<ConversationDocuments> {
    app.detach_document(&conversation_id, document_id)
}

/// The files of `conversation_id`, and the notice to show before passages go to a remote
/// server.
#[tauri::command(async)]
pub fn conversation_documents(
    app: State<'_, App>,
    conversation_id: String,
) -> CommandResult<ConversationDocuments> {
    app.conversation_documents(&conversation_id)
}

/// The user accepts that passages of this conversation's files go to the remote server in use.
#[tauri::command(async)]
pub fn accept_remote_documents(app: State<'_, App>, conversation_id: String) -> CommandResult<()> {
    app.accept_remote_documents(&conversation_id)
}

/// Every file in the library, and the disk it takes.
#[tauri::command(async)]
pub fn library(app: State<'_, App>) -> CommandResult<LibraryView> {
    app.documents().library()
}

/// Deletes a file's text, passages and vectors from the library and the passages saved with
/// answers (the original file stays).
#[tauri::command(async)]
pub fn remove_document(app: State<'_, App>, document_id: i64) -> CommandResult<LibraryView> {
    app.remove_document(document_id)
}

/// Stops the indexing going now; what was read and embedded is kept. Whether any was running.
#[tauri::command(async)]
pub fn cancel_indexing(app: State<'_, App>) -> bool {
    app.documents().cancel_indexing()
}

/// Embeds, in the background, the passages of the library that have no vector from the
/// embedding model yet (after a cancel, or for a model chosen anew).
#[tauri::command(async)]
pub fn continue_indexing<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
) -> CommandResult<()> {
    app.documents().continue_indexing(window_events(window))
}

/// The sources saved with the answers of `conversation_id`.
#[tauri::command(async)]
pub fn message_sources(
    app: State<'_, App>,
    conversation_id: String,
) -> CommandResult<Vec<MessageSources>> {
    app.message_sources(&conversation_id)
}

/// The end-to-end test's stand-in for an OS drop, which WebDriver cannot make: fires the same
/// drop of `paths` as the window system's event. Refused unless the app was started with
/// `HEARTH_TEST_DROP=1`, since it takes paths from the web view.
#[tauri::command(async)]
pub fn test_drop<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    paths: Vec<String>,
) -> CommandResult<()> {
    if std::env::var_os("HEARTH_TEST_DROP").is_none_or(|v| v != "1") {
        return Err(CommandError::new(
            ErrorCode::InvalidInput,
            "test_drop works only in the end-to-end test (HEARTH_TEST_DROP=1).",
        ));
    }
    let paths: Vec<PathBuf> = paths.into_iter().map(PathBuf::from).collect();
    dropped(&window, &app, &paths);
    Ok(())
}
