//! The app's status and the loaded model.

use hearth_chat::BackendKind;
use serde::Serialize;
use tauri::State;

use super::blocking;
use crate::answer::{self, MAX_MESSAGE_CHARS};
use crate::error::{CommandError, CommandResult};
use crate::paths::{self, LocalModel};
use crate::session::ModelStatus;
use crate::state::{lock, AppState, Notice};

/// What the UI needs at start.
#[derive(Debug, Clone, Serialize)]
pub struct AppStatus {
    /// The loaded model, if any.
    pub model: Option<ModelStatus>,
    /// Why no model is loaded.
    pub model_error: Option<String>,
    /// Notices not yet shown.
    pub notices: Vec<Notice>,
    /// Where Hearth keeps its data.
    pub data_dir: String,
    /// The longest message, in characters.
    pub max_message_chars: usize,
}

/// Load the start model if needed, then report the app's status. Notices are handed over once.
#[tauri::command]
pub async fn app_status(state: State<'_, AppState>) -> CommandResult<AppStatus> {
    let state = state.inner().clone();
    blocking(move || {
        if let Err(error) = answer::ensure_model(&state) {
            tracing::warn!("no model at start: {}", error.message);
        }
        let model = state
            .model
            .try_lock()
            .ok()
            .and_then(|m| m.as_ref().map(|l| l.status()));
        Ok(AppStatus {
            model,
            model_error: lock(&state.model_error).clone(),
            notices: std::mem::take(&mut *lock(&state.notices)),
            data_dir: state.paths.data_dir.display().to_string(),
            max_message_chars: MAX_MESSAGE_CHARS,
        })
    })
    .await
}

/// Models Hearth can open (the registry's, the default first, then the demo).
#[tauri::command(async)]
pub fn list_local_models(state: State<'_, AppState>) -> Vec<LocalModel> {
    paths::local_models(&state.paths)
}

/// Load the model named `name`: a local one, or with `backend: "remote"` the model of that id
/// on the saved remote server (answers then leave this computer).
#[tauri::command]
pub async fn select_model(
    state: State<'_, AppState>,
    name: String,
    backend: Option<BackendKind>,
) -> CommandResult<ModelStatus> {
    let state = state.inner().clone();
    blocking(move || match backend {
        Some(BackendKind::Remote) => answer::load_remote_model(&state, &name),
        Some(BackendKind::Npu) => Err(CommandError::new(
            "unsupported",
            "The app cannot run models on the NPU yet. Choose \"On this computer\" instead.",
        )),
        Some(BackendKind::Cpu) | None => {
            let entry = paths::local_models(&state.paths)
                .into_iter()
                .find(|m| m.name == name)
                .ok_or_else(|| CommandError::new("not_found", format!("There is no model called \"{name}\" on this computer. Open Models to see which ones are.")))?;
            answer::load_model(&state, &entry)
        }
    })
    .await
}
