//! Pictures for the next message (`hearth_app::pictures`): checked from the bytes the web view
//! holds (a paste, a drop on the composer), from files chosen in the system's dialog (opened
//! here, so no path crosses from the web view), or from a drop on the window by its token; a
//! saved message's picture read back to show; and, for a model that does not see, the pictures
//! handed to the documents' path (a drop token the UI attaches, their text read by OCR).

use std::path::PathBuf;

use hearth_app::pictures::{DraftPicture, PictureUpload};
use hearth_app::App;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_dialog::DialogExt;

use crate::error::CommandResult;

/// Checks a pasted or dropped picture (`data`: its bytes, base64) named `name`.
#[tauri::command(async)]
pub fn check_picture(
    app: State<'_, App>,
    name: String,
    data: String,
) -> CommandResult<DraftPicture> {
    app.check_picture(&name, &data)
}

/// Opens the system's file dialog (its `title`, and `filter` naming the pictures, in the app's
/// language) and checks the pictures chosen; none when it was cancelled.
#[tauri::command(async)]
pub fn pick_pictures<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    title: String,
    filter: String,
) -> CommandResult<Vec<DraftPicture>> {
    let chosen = window
        .dialog()
        .file()
        .set_title(title)
        .add_filter(filter, &["png", "jpg", "jpeg", "webp"])
        .blocking_pick_files()
        .unwrap_or_default();
    let paths: Vec<PathBuf> = chosen
        .into_iter()
        .filter_map(|f| f.into_path().ok())
        .collect();
    app.check_picture_files(&paths)
}

/// Checks the pictures of the drop `token` (once).
#[tauri::command(async)]
pub fn take_dropped_pictures(
    app: State<'_, App>,
    token: String,
) -> CommandResult<Vec<DraftPicture>> {
    app.take_dropped_pictures(&token)
}

/// Picture `index` of the saved message `message_id`, as a `data:` URL.
#[tauri::command(async)]
pub fn message_picture(app: State<'_, App>, message_id: i64, index: u32) -> CommandResult<String> {
    app.message_picture(message_id, index)
}

/// Writes `pictures` out as documents to read by OCR; returns the drop token to attach them by.
#[tauri::command(async)]
pub fn pictures_as_documents(
    app: State<'_, App>,
    pictures: Vec<PictureUpload>,
) -> CommandResult<String> {
    app.pictures_as_documents(&pictures)
}
