//! Read aloud: speak an answer, stop speaking; what happens arrives as `read-aloud` events
//! (`hearth_app::read_aloud::ReadAloudEvent`). With "always read answers" on, `start_answer`
//! has the reader follow the answer it streams ([`reader`]).

use std::sync::{Arc, OnceLock};

use hearth_app::read_aloud::{app_language, ReadAloud, ReadAloudConfig, READ_ALOUD_EVENT};
use hearth_app::settings::Language;
use hearth_app::App;
use tauri::{AppHandle, Emitter, Manager, Runtime};

use super::blocking;
use crate::error::CommandResult;

/// The app's one reader, made at its first use (it needs the window to tell).
#[derive(Default)]
pub struct Reader(OnceLock<Arc<ReadAloud>>);

/// The app's reader, its events emitted to the window.
pub fn reader<R: Runtime>(window: &AppHandle<R>) -> Arc<ReadAloud> {
    let state = window.state::<Reader>();
    state
        .0
        .get_or_init(|| {
            let voices = window
                .try_state::<App>()
                .map(|app| app.home().data_dir.join("voices"));
            let handle = window.clone();
            Arc::new(ReadAloud::new(
                ReadAloudConfig::from_env(voices),
                move |event| {
                    if let Err(error) = handle.emit(READ_ALOUD_EVENT, event) {
                        tracing::warn!("read aloud: the window stopped listening: {error}");
                    }
                },
            ))
        })
        .clone()
}

/// The language readings fall back to when an answer's own is not clear: the app's.
pub fn fallback<R: Runtime>(window: &AppHandle<R>) -> Language {
    app_language(super::settings::load(window).language)
}

/// Read `text` aloud (the answer `messageId`, when it is one), in `language` or else the
/// answer's own; stops what was being read.
#[tauri::command]
pub async fn read_aloud_speak<R: Runtime>(
    window: AppHandle<R>,
    message_id: Option<i64>,
    text: String,
    language: Option<Language>,
) -> CommandResult<()> {
    let fallback = fallback(&window);
    let reader = reader(&window);
    blocking(move || reader.speak(message_id, &text, language, fallback)).await
}

/// Stop reading aloud (nothing happens when nothing is being read).
#[tauri::command]
pub async fn read_aloud_stop<R: Runtime>(window: AppHandle<R>) -> CommandResult<()> {
    let reader = reader(&window);
    blocking(move || {
        reader.stop();
        Ok(())
    })
    .await
}
