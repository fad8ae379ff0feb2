//! App settings, kept with tauri-plugin-store (used from Rust only); what they hold and their
//! ranges are `hearth_app::settings`.

use hearth_app::settings::Settings;
use hearth_app::{App, ErrorCode};
use tauri::{AppHandle, Runtime, State};
use tauri_plugin_store::StoreExt;

use crate::error::{CommandError, CommandResult};

/// The store file (in the app's data folder).
pub const STORE_FILE: &str = "settings.json";
const KEY: &str = "settings";

/// Read the settings (defaults when absent or unreadable).
pub fn load<R: Runtime>(window: &AppHandle<R>) -> Settings {
    match window.store(STORE_FILE) {
        Ok(store) => Settings::from_stored(store.get(KEY)),
        Err(error) => {
            tracing::warn!("settings: cannot open the store ({error}); using defaults");
            Settings::default()
        }
    }
}

/// The current settings ("copy models" read from the model registry, its one home).
#[tauri::command]
pub fn get_settings<R: Runtime>(window: AppHandle<R>, app: State<'_, App>) -> Settings {
    Settings {
        copy_models: app.copy_models(),
        ..load(&window)
    }
}

/// Save settings (a choice that cannot work refused by `Settings::checked`, values clamped into
/// range), apply them (`App::apply_settings`) and return what was stored. Another embedding
/// model starts embedding the library with it in the background.
#[tauri::command]
pub fn save_settings<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    settings: Settings,
) -> CommandResult<Settings> {
    let settings = settings.checked()?.clamped();
    let new_embedding_model = app.apply_settings(&settings)?;
    app.set_copy_models(settings.copy_models)?;
    let storage = |e: &dyn std::fmt::Display| {
        CommandError::new(
            ErrorCode::Storage,
            format!("Settings could not be written to disk: {e}. Check that your data folder is writable."),
        )
    };
    let store = window.store(STORE_FILE).map_err(|e| storage(&e))?;
    store.set(
        KEY,
        serde_json::to_value(&settings).map_err(|e| storage(&e))?,
    );
    store.save().map_err(|e| storage(&e))?;
    if new_embedding_model {
        app.documents()
            .continue_indexing(super::documents::window_events(window))?;
    }
    Ok(settings)
}
