//! "Let other apps on this computer use Hearth": Hearth's local API (OpenAI's and Ollama's
//! routes) served on 127.0.0.1 from inside the app, over the model the app has open
//! (`hearth_server::Sharing`). Off by default.

use hearth_app::share::ShareStatus;
use hearth_app::App;
use hearth_server::Sharing;
use tauri::State;

use super::blocking;
use crate::error::CommandResult;

/// Whether other apps can use Hearth now, at which address, with which model.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub fn share_status(sharing: State<'_, Sharing>) -> ShareStatus {
    sharing.status()
}

/// Turns sharing on at `port` (Ollama's 11434, or another; a taken port falls back to a free
/// one and the status says so).
#[tauri::command]
#[tracing::instrument(skip(app, sharing))]
pub async fn start_sharing(
    app: State<'_, App>,
    sharing: State<'_, Sharing>,
    port: u16,
) -> CommandResult<ShareStatus> {
    let (app, sharing) = (app.inner().clone(), sharing.inner().clone());
    blocking(move || sharing.start(&app, port)).await
}

/// Turns sharing off (waits until a request being answered has let go of the model).
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn stop_sharing(sharing: State<'_, Sharing>) -> CommandResult<ShareStatus> {
    let sharing = sharing.inner().clone();
    blocking(move || Ok(sharing.stop())).await
}
