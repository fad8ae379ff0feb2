//! Read aloud: speak an answer, stop speaking; what happens arrives as `read-aloud` events
//! (`hearth_app::read_aloud::ReadAloudEvent`). With "always read answers" on, `start_answer`
//! has the reader follow the answer it streams ([`reader`]). Settings › Read aloud lists and
//! downloads Piper voices (`hearth_app::read_aloud::voices`) into the folder the reader uses.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use hearth_app::read_aloud::voices::{PiperStatus, Progress, VoiceDownloaded, VoiceDownloads};
use hearth_app::read_aloud::{app_language, ReadAloud, ReadAloudConfig, READ_ALOUD_EVENT};
use hearth_app::settings::Language;
use hearth_app::App;
use tauri::ipc::Channel;
use tauri::{AppHandle, Emitter, Manager, Runtime};

use super::{blocking, send};
use crate::error::CommandResult;

/// Where Piper voices are kept: `<data>/voices` (none without the app's home).
fn voices_folder<R: Runtime>(window: &AppHandle<R>) -> Option<PathBuf> {
    window
        .try_state::<App>()
        .map(|app| app.home().data_dir.join("voices"))
}

/// The app's one reader, made at its first use (it needs the window to tell).
#[derive(Default)]
pub struct Reader(OnceLock<Arc<ReadAloud>>);

/// The app's reader, its events emitted to the window.
pub fn reader<R: Runtime>(window: &AppHandle<R>) -> Arc<ReadAloud> {
    let state = window.state::<Reader>();
    state
        .0
        .get_or_init(|| {
            let voices = voices_folder(window);
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

/// The app's Piper voice downloads, made at their first use.
#[derive(Default)]
pub struct Voices(OnceLock<Arc<VoiceDownloads>>);

fn voices<R: Runtime>(window: &AppHandle<R>) -> CommandResult<Arc<VoiceDownloads>> {
    let folder = voices_folder(window).ok_or_else(|| {
        hearth_app::Error::new(
            hearth_app::ErrorCode::Internal,
            "Hearth's data folder is not ready, so voices cannot be listed yet.",
        )
    })?;
    Ok(window
        .state::<Voices>()
        .0
        .get_or_init(|| Arc::new(VoiceDownloads::new(folder)))
        .clone())
}

/// Whether `piper` is installed here, and the voice offered for each language.
#[tauri::command]
pub async fn piper_voices<R: Runtime>(window: AppHandle<R>) -> CommandResult<PiperStatus> {
    let voices = voices(&window)?;
    blocking(move || Ok(voices.status())).await
}

/// Download the Piper voice of `language`; progress streams on `on_progress`.
#[tauri::command]
pub async fn download_piper_voice<R: Runtime>(
    window: AppHandle<R>,
    language: Language,
    on_progress: Channel<Progress>,
) -> CommandResult<VoiceDownloaded> {
    let voices = voices(&window)?;
    blocking(move || voices.download(language, &mut |p| send(&on_progress, p.clone()))).await
}

/// Cancel the download of the Piper voice of `language` (its partial files are deleted).
#[tauri::command]
pub async fn cancel_piper_voice<R: Runtime>(
    window: AppHandle<R>,
    language: Language,
) -> CommandResult<()> {
    let voices = voices(&window)?;
    blocking(move || voices.cancel(language)).await
}
