//! Hearth's desktop shell: thin Tauri commands over `hearth_app`, the product core the CLI
//! and the server share.
//!
//! Layout: `commands/` holds the `#[tauri::command]` adapters, one module per area; each
//! parses its arguments, calls one function of `hearth_app::App`, and returns its error as
//! it is ([`error`]). The settings are kept with tauri-plugin-store (`commands::settings`).

pub mod commands;
pub mod error;

use hearth_app::{App, Home};
use tauri::{Builder, Manager, Runtime};

/// Add Hearth's plugins, state and commands to a Tauri builder. `home` overrides where data
/// lives (tests); None uses the user's XDG folders and finds the bundled built-in model.
pub fn configure<R: Runtime>(builder: Builder<R>, home: Option<Home>) -> Builder<R> {
    // With a given home (tests) the app is opened now: the setup hook only runs with an event
    // loop, which the mock runtime does not start.
    let (builder, open_in_setup) = match home {
        Some(given) => match App::open(given) {
            Ok(app) => (builder.manage(app), false),
            Err(error) => panic!("hearth-desktop: cannot open the app state: {error}"),
        },
        None => (builder, true),
    };
    builder
        // "Let other apps on this computer use Hearth": off until the user turns it on, then on
        // at every start (restored below, or by the tests through `commands::share::restore`).
        .manage(hearth_server::Sharing::default())
        // Read aloud: the reader is made at its first use (commands::read_aloud).
        .manage(commands::read_aloud::Reader::default())
        // Piper voice downloads, made at their first use (commands::read_aloud).
        .manage(commands::read_aloud::Voices::default())
        // The microphone's one recording (commands::voice).
        .manage(hearth_app::voice::Voice::default())
        .plugin(tauri_plugin_store::Builder::new().build())
        // Import's folder picker and export's save dialog.
        .plugin(tauri_plugin_dialog::init())
        .setup(move |window| {
            if !open_in_setup {
                return Ok(()); // already managed above
            }
            let resources = window.path().resource_dir().ok();
            let home = Home::for_user(hearth_app::home::find_builtin_model(resources.as_deref()))?;
            tracing::info!("data folder: {}", home.data_dir.display());
            let app = App::open(home)?;
            // An embedding model chosen in Settings and removed since leaves the bundled one.
            if let Err(error) = app.apply_settings(&commands::settings::load(window.handle())) {
                tracing::warn!("{}", error.message);
            }
            // The bundled embedding model, for searching the user's files by meaning.
            app.documents().set_resource_dir(resources);
            // Other apps can use Hearth again when the user left the switch on.
            let sharing = window.state::<hearth_server::Sharing>();
            commands::share::restore(window.handle(), &app, &sharing);
            window.manage(app);
            Ok(())
        })
        // Files dropped on the window: their paths come from the window system, classified and
        // kept here under a token the UI acts by (commands::documents).
        .on_window_event(|window, event| {
            if let tauri::WindowEvent::DragDrop(tauri::DragDropEvent::Drop { paths, .. }) = event {
                let handle = window.app_handle();
                if let Some(app) = handle.try_state::<App>() {
                    commands::documents::dropped(handle, &app, paths);
                }
            }
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
            commands::conversations::show_branch,
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
            commands::models::import_dropped,
            commands::models::found_models,
            commands::models::import_found,
            commands::models::set_default_model,
            commands::models::relink_model,
            commands::remote::remote_server,
            commands::remote::save_remote_server,
            commands::remote::test_remote_server,
            commands::remote::forget_remote_server,
            commands::share::share_status,
            commands::share::start_sharing,
            commands::share::stop_sharing,
            commands::documents::pick_documents,
            commands::documents::attach_dropped,
            commands::documents::attach_document,
            commands::documents::detach_document,
            commands::documents::conversation_documents,
            commands::documents::accept_remote_documents,
            commands::documents::library,
            commands::documents::remove_document,
            commands::documents::message_sources,
            commands::files::open_document,
            commands::documents::cancel_indexing,
            commands::documents::continue_indexing,
            commands::documents::pick_document_folder,
            commands::documents::keep_failed,
            commands::documents::test_drop,
            commands::read_aloud::read_aloud_speak,
            commands::read_aloud::read_aloud_stop,
            commands::read_aloud::piper_voices,
            commands::read_aloud::download_piper_voice,
            commands::read_aloud::cancel_piper_voice,
            commands::voice::start_listening,
            commands::voice::stop_listening,
            commands::voice::cancel_listening,
            commands::voice::voice_status,
            commands::voice::spoken_language,
            commands::pictures::check_picture,
            commands::pictures::pick_pictures,
            commands::pictures::take_dropped_pictures,
            commands::pictures::message_picture,
            commands::pictures::pictures_as_documents,
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
