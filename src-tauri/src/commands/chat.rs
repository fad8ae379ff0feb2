//! Answers: start one (streamed over a Channel) and stop it.

use hearth_app::turn::{ChatAction, ChatEvent};
use hearth_app::App;
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime, State};

use super::{blocking, send};
use crate::error::CommandResult;

/// Answer in a conversation: send a message, regenerate, or edit and resend. Events stream on
/// `on_event`; the call returns when the answer is finished (or failed to start).
#[tauri::command]
pub async fn start_answer<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    conversation_id: String,
    action: ChatAction,
    on_event: Channel<ChatEvent>,
) -> CommandResult<()> {
    let app = app.inner().clone();
    let busy = app.begin_answer()?;
    // "Always read answers": the reader follows the answer as it streams.
    let read_aloud = super::settings::load(&window).read_answers.then(|| {
        let fallback = super::read_aloud::fallback(&window);
        (super::read_aloud::reader(&window), fallback)
    });
    let progress = super::session::loading_events(window);
    blocking(move || {
        app.answer(busy, &conversation_id, action, &progress, &|event| {
            if let Some((reader, fallback)) = &read_aloud {
                reader.follow(&event, *fallback);
            }
            send(&on_event, event)
        })
    })
    .await
}

/// Stop the answer being written (it is kept, marked as stopped).
#[tauri::command]
pub fn stop_answer(app: State<'_, App>) {
    app.request_stop();
}
