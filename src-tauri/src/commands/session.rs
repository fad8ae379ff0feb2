//! The app's status and the loaded model.

use hearth_chat::BackendKind;
use serde::Serialize;
use tauri::{AppHandle, Emitter, Runtime, State};

use super::blocking;
use crate::answer::{self, MAX_MESSAGE_CHARS};
use crate::error::CommandResult;
use crate::npu_model::{self, ModelLoading};
use crate::paths::{self, LocalModel};
use crate::session::ModelStatus;
use crate::state::{lock, AppState, Notice};

/// What the UI needs at start.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
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

/// Load the model named `name`: a local one on the processor, with `backend: "npu"` on the NPU
/// through FastFlowLM (loading is reported as `model-loading` events), or with
/// `backend: "remote"` the model of that id on the saved remote server (answers then leave this
/// computer). `npu_anyway: true` ("Try on the NPU anyway") loads it on the NPU even when
/// FastFlowLM is known to fail with it, for testers.
#[tauri::command]
pub async fn select_model<R: Runtime>(
    app: AppHandle<R>,
    state: State<'_, AppState>,
    name: String,
    backend: Option<BackendKind>,
    npu_anyway: Option<bool>,
) -> CommandResult<ModelStatus> {
    let state = state.inner().clone();
    let anyway = npu_anyway.unwrap_or(false);
    blocking(move || match backend {
        Some(BackendKind::Remote) => answer::load_remote_model(&state, &name),
        Some(BackendKind::Npu) => npu_model::load(&state, &name, loading_events(app), anyway),
        None if anyway => npu_model::load(&state, &name, loading_events(app), true),
        Some(BackendKind::Cpu) | None => {
            let entry = answer::local_model(&state, &name)?;
            answer::load_model(&state, &entry)
        }
    })
    .await
}

/// Sends loading progress to the UI as `model-loading` events.
pub(crate) fn loading_events<R: Runtime>(app: AppHandle<R>) -> npu_model::Progress {
    std::sync::Arc::new(move |loading: ModelLoading| {
        if let Err(error) = app.emit(npu_model::LOADING_EVENT, &loading) {
            tracing::warn!("could not send the loading state to the window: {error}");
        }
    })
}
