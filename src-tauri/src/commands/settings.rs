//! App settings through tauri-plugin-store (used from Rust only).

use tauri::{AppHandle, Runtime, State};
use tauri_plugin_store::StoreExt;

use crate::error::{CommandError, CommandResult};
use crate::settings::Settings;
use crate::state::{lock, AppState};

/// The store file (in the app's data folder).
pub const STORE_FILE: &str = "settings.json";
const KEY: &str = "settings";

/// Read the settings (defaults when absent or unreadable).
pub fn load<R: Runtime>(app: &AppHandle<R>) -> Settings {
    match app.store(STORE_FILE) {
        Ok(store) => Settings::from_stored(store.get(KEY)),
        Err(error) => {
            tracing::warn!("settings: cannot open the store ({error}); using defaults");
            Settings::default()
        }
    }
}

/// The current settings.
#[tauri::command]
pub fn get_settings<R: Runtime>(app: AppHandle<R>) -> Settings {
    load(&app)
}

/// Save settings (values are clamped into range) and return what was stored.
#[tauri::command]
pub fn save_settings<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    settings: Settings,
) -> CommandResult<Settings> {
    let settings = settings.clamped();
    let store = app
        .store(STORE_FILE)
        .map_err(|e| CommandError::new("storage", format!("Settings could not be saved: {e}")))?;
    let value = serde_json::to_value(&settings).map_err(|e| {
        CommandError::new("internal", format!("Settings could not be encoded: {e}"))
    })?;
    store.set(KEY, value);
    store
        .save()
        .map_err(|e| CommandError::new("storage", format!("Settings could not be written to disk: {e}. Check that your data folder is writable.")))?;
    *lock(&state.cpu_threads) = settings.threads;
    Ok(settings)
}
