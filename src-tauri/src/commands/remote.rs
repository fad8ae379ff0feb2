//! The remote server area: where it is, its key (never sent to the UI), testing the
//! connection, and forgetting it. Choosing one of its models goes through `select_model` with
//! `backend: "remote"`.

use hearth_app::remote::{RemoteModel, RemoteServer};
use hearth_app::App;
use tauri::State;

use super::blocking;
use crate::error::CommandResult;

/// The saved remote server, or None when none is set.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn remote_server(app: State<'_, App>) -> CommandResult<Option<RemoteServer>> {
    let app = app.inner().clone();
    blocking(move || app.remote_server()).await
}

/// Save the server at `url` in one write. `api_key`: None keeps the saved key (for the same
/// server), `""` removes it. `model`: None keeps the saved choice. `sees_pictures`: the models
/// switched to "sees pictures" (None keeps the saved ones).
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn save_remote_server(
    app: State<'_, App>,
    url: String,
    api_key: Option<String>,
    model: Option<String>,
    sees_pictures: Option<Vec<String>>,
) -> CommandResult<RemoteServer> {
    let app = app.inner().clone();
    blocking(move || app.save_remote_server(&url, api_key.as_deref(), model, sees_pictures)).await
}

/// Ask the server at `url` for its models (with `api_key`, or the saved key for the same
/// server when None), with which see pictures, or what went wrong in plain words.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn test_remote_server(
    app: State<'_, App>,
    url: String,
    api_key: Option<String>,
) -> CommandResult<Vec<RemoteModel>> {
    let app = app.inner().clone();
    blocking(move || app.test_remote_server(&url, api_key.as_deref())).await
}

/// Delete the saved server and its key. A remote model in use is closed, so the next answer
/// comes from this computer again.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn forget_remote_server(app: State<'_, App>) -> CommandResult<()> {
    let app = app.inner().clone();
    blocking(move || app.forget_remote_server()).await
}
