//! "Let other apps on this computer use Hearth": Hearth's local API (OpenAI's and Ollama's
//! routes) served on 127.0.0.1 from inside the app, over the model the app has open
//! (`hearth_server::Sharing`). Off until the user turns it on; the choice and its port are kept
//! in the settings store (`hearth_app::share::ShareChoice`), and [`restore`] turns it on again at
//! every start.

use hearth_app::share::{ShareChoice, ShareStatus};
use hearth_app::{App, ErrorCode};
use hearth_server::Sharing;
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_store::StoreExt;

use super::blocking;
use super::settings::STORE_FILE;
use crate::error::{CommandError, CommandResult};

/// The choice's key in the settings store (beside the settings, which the UI saves whole).
const KEY: &str = "share";

/// The remembered choice (off when absent or unreadable).
pub fn load<R: Runtime>(window: &AppHandle<R>) -> ShareChoice {
    match window.store(STORE_FILE) {
        Ok(store) => ShareChoice::from_stored(store.get(KEY)),
        Err(error) => {
            tracing::warn!("sharing: cannot open the settings store ({error}); it is off");
            ShareChoice::default()
        }
    }
}

fn remember<R: Runtime>(window: &AppHandle<R>, choice: ShareChoice) -> CommandResult<()> {
    let storage = |e: &dyn std::fmt::Display| {
        CommandError::new(
            ErrorCode::Storage,
            format!(
                "Hearth could not remember this choice for the next start ({e}). Check that \
                 your data folder is writable."
            ),
        )
    };
    let store = window.store(STORE_FILE).map_err(|e| storage(&e))?;
    store.set(KEY, serde_json::to_value(choice).map_err(|e| storage(&e))?);
    store.save().map_err(|e| storage(&e))
}

/// At a start: sharing as the user left it (on again at its port, or off with the port kept).
pub fn restore<R: Runtime>(window: &AppHandle<R>, app: &App, sharing: &Sharing) -> ShareStatus {
    sharing.restore(app, load(window))
}

/// Whether other apps can use Hearth now, at which address, with which model; when it was left
/// on and could not start again, why.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub fn share_status(sharing: State<'_, Sharing>) -> ShareStatus {
    sharing.status()
}

/// Turns sharing on at `port` (Ollama's 11434, or another; a taken port falls back to a free
/// one and the status says so), and remembers it for the next start.
#[tauri::command]
#[tracing::instrument(skip(window, app, sharing))]
pub async fn start_sharing<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    sharing: State<'_, Sharing>,
    port: u16,
) -> CommandResult<ShareStatus> {
    let (app, sharing) = (app.inner().clone(), sharing.inner().clone());
    let status = blocking(move || sharing.start(&app, port)).await?;
    remember(&window, ShareChoice { on: true, port })?;
    Ok(status)
}

/// Turns sharing off (waits until a request being answered has let go of the model), and
/// remembers it off, with its port, for the next start.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn stop_sharing<R: Runtime>(
    window: AppHandle<R>,
    sharing: State<'_, Sharing>,
) -> CommandResult<ShareStatus> {
    let sharing = sharing.inner().clone();
    let status = blocking(move || Ok(sharing.stop())).await?;
    remember(
        &window,
        ShareChoice {
            on: false,
            port: status.wanted_port,
        },
    )?;
    Ok(status)
}
