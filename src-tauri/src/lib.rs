//! Hearth's desktop shell: Tauri commands over the engine, saved conversations, settings.
//!
//! Layout: `commands/` holds the thin `#[tauri::command]` adapters, one module per area;
//! [`answer`] saves an answer as the shared loop (`hearth_chat::answer`) writes it;
//! [`session`] is the loaded model; [`settings`], [`paths`], [`export`], [`state`] and [`error`]
//! hold the rest. The conversation store, context fitting and the backends live in
//! `hearth_chat`.

pub mod answer;
pub mod commands;
pub mod error;
pub mod export;
pub mod fidelity;
pub mod npu_model;
pub mod paths;
pub mod session;
pub mod settings;
pub mod state;

use tauri::{Builder, Manager, Runtime};

use crate::paths::Paths;
use crate::state::AppState;

/// Add Hearth's plugins, state and commands to a Tauri builder. `paths` overrides where data
/// lives (tests); None uses the user's XDG folders and finds the bundled demo model.
pub fn configure<R: Runtime>(builder: Builder<R>, paths: Option<Paths>) -> Builder<R> {
    // With given paths (tests) the state is opened now: the setup hook only runs with an event
    // loop, which the mock runtime does not start.
    let (builder, open_in_setup) = match paths {
        Some(given) => match AppState::open(given) {
            Ok(state) => (builder.manage(state), false),
            Err(error) => panic!("hearth-desktop: cannot open the app state: {error}"),
        },
        None => (builder, true),
    };
    builder
        .plugin(tauri_plugin_store::Builder::new().build())
        // Import's folder picker and export's save dialog.
        .plugin(tauri_plugin_dialog::init())
        .manage(std::sync::Arc::new(commands::npu::PowerState::default()))
        .manage(std::sync::Arc::new(commands::models::ModelsState::default()))
        .setup(move |app| {
            if !open_in_setup {
                return Ok(()); // already managed above
            }
            let resources = app.path().resource_dir().ok();
            let paths = Paths::for_user(paths::find_builtin_model(resources.as_deref()))?;
            tracing::info!("data folder: {}", paths.data_dir.display());
            let state = AppState::open(paths)?;
            *state::lock(&state.cpu_threads) = commands::settings::load(app.handle()).threads;
            app.manage(state);
            Ok(())
        })
        .invoke_handler(tauri::generate_handler![
            commands::session::app_status,
            commands::session::list_local_models,
            commands::session::select_model,
            commands::settings::get_settings,
            commands::settings::save_settings,
            commands::conversations::list_conversations,
            commands::conversations::create_conversation,
            commands::conversations::get_conversation,
            commands::conversations::rename_conversation,
            commands::conversations::delete_conversation,
            commands::conversations::update_conversation_settings,
            commands::conversations::export_conversation,
            commands::chat::start_answer,
            commands::chat::stop_answer,
            commands::npu::npu_status,
            commands::npu::power_sample,
            commands::npu::compare_backends,
            commands::models::models_overview,
            commands::models::pull_model,
            commands::models::pause_download,
            commands::models::cancel_download,
            commands::models::remove_model,
            commands::models::import_model,
            commands::models::found_models,
            commands::models::import_found,
            commands::models::set_default_model,
            commands::remote::remote_server,
            commands::remote::save_remote_server,
            commands::remote::test_remote_server,
            commands::remote::forget_remote_server,
        ])
}

/// Start the desktop app. A second launch does not open a second copy (and a second model in
/// memory): it brings the running window to the front.
pub fn run() -> anyhow::Result<()> {
    let builder =
        tauri::Builder::default().plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| {
            if let Some(window) = app.get_webview_window("main") {
                let _ = window.unminimize();
                let _ = window.show();
                let _ = window.set_focus();
            }
        }));
    configure(builder, None)
        .run(tauri::generate_context!())
        .map_err(|e| anyhow::anyhow!("the Hearth window could not start: {e}"))
}
