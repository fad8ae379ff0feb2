//! Answers: start one (streamed over a Channel) and stop it.

use tauri::ipc::Channel;
use tauri::State;

use super::blocking;
use crate::answer::{self, ChatAction, ChatEvent};
use crate::error::CommandResult;
use crate::state::AppState;

/// Answer in a conversation: send a message, regenerate, or edit and resend. Events stream on
/// `on_event`; the call returns when the answer is finished (or failed to start).
#[tauri::command]
pub async fn start_answer(
    state: State<'_, AppState>,
    conversation_id: String,
    action: ChatAction,
    on_event: Channel<ChatEvent>,
) -> CommandResult<()> {
    let state = state.inner().clone();
    let busy = answer::begin(&state)?;
    blocking(move || {
        answer::run(&state, busy, &conversation_id, action, &|event| {
            if let Err(error) = on_event.send(event) {
                tracing::warn!("the window stopped listening to the answer: {error}");
            }
        })
    })
    .await
}

/// Stop the answer being written (it is kept, marked as stopped).
#[tauri::command]
pub fn stop_answer(state: State<'_, AppState>) {
    state.request_stop();
}
