//! Speaking to the app: start listening (the level and time stream on a Channel), stop and
//! write down the words, cancel; whether anything can hear here (with the speech model to
//! download when nothing can: the front end pulls it with `pull_model` like any model); and
//! the language to hear in. Thin over
//! `hearth_app::voice::Voice`, which the desktop keeps as state.

use hearth_app::voice::{Listening, Voice, VoiceHeard, VoiceLevel, VoiceStatus};
use hearth_app::App;
use tauri::ipc::Channel;
use tauri::State;

use super::{blocking, send};
use crate::error::CommandResult;

/// Starts listening to the microphone; its level and elapsed time come on `on_level`.
#[tauri::command(async)]
pub fn start_listening(
    voice: State<'_, Voice>,
    on_level: Channel<VoiceLevel>,
) -> CommandResult<Listening> {
    voice.start(move |level| send(&on_level, level))
}

/// Stops listening and returns the words, heard in `language` (a code; None: detected).
#[tauri::command]
pub async fn stop_listening(
    app: State<'_, App>,
    voice: State<'_, Voice>,
    language: Option<String>,
) -> CommandResult<VoiceHeard> {
    let app = app.inner().clone();
    let voice = voice.inner().clone();
    blocking(move || voice.stop(&app, language.as_deref())).await
}

/// Stops listening and drops the sound.
#[tauri::command]
pub fn cancel_listening(voice: State<'_, Voice>) {
    voice.cancel();
}

/// The language to hear in (a code): the conversation's, told from its latest messages, else
/// `fallback`, the app's.
#[tauri::command(async)]
pub fn spoken_language(
    app: State<'_, App>,
    conversation_id: Option<String>,
    fallback: String,
) -> String {
    hearth_app::voice::spoken_language(&app, conversation_id.as_deref(), &fallback)
}

/// Whether a speech model is installed (or the NPU hears), and whether it is listening.
#[tauri::command(async)]
pub fn voice_status(app: State<'_, App>, voice: State<'_, Voice>) -> VoiceStatus {
    voice.status(&app)
}
