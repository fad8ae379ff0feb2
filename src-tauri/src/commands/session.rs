//! The app's status and the model in use.

use hearth_app::models::LocalModel;
use hearth_app::npu::{ModelLoading, Progress, LOADING_EVENT};
use hearth_app::selection::AppStatus;
use hearth_app::session::BackendKind;
use hearth_app::{App, ModelStatus};
use tauri::{AppHandle, Emitter, Runtime, State};

use super::blocking;
use crate::error::CommandResult;

/// Open the start model if needed (on the best backend here), then report the app's status.
/// Notices are handed over once.
#[tauri::command]
pub async fn app_status<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
) -> CommandResult<AppStatus> {
    let app = app.inner().clone();
    let progress = loading_events(window);
    blocking(move || Ok(app.status(&progress))).await
}

/// Models Hearth can open (the registry's, the default first, then the built-in one).
#[tauri::command(async)]
pub fn list_local_models(app: State<'_, App>) -> Vec<LocalModel> {
    app.local_models()
}

/// Put the model `name` in use: a local one on `backend`, or with `backend` null on the best
/// one here (the NPU when FastFlowLM can run it, else the processor); with `backend:
/// "remote"` the model of that id on the saved remote server (answers then leave this
/// computer). Loading onto the NPU is reported as `model-loading` events. `npu_anyway: true`
/// ("Try on the NPU anyway") loads it on the NPU even when FastFlowLM is known to fail with it.
#[tauri::command]
pub async fn select_model<R: Runtime>(
    window: AppHandle<R>,
    app: State<'_, App>,
    name: String,
    backend: Option<BackendKind>,
    npu_anyway: Option<bool>,
) -> CommandResult<ModelStatus> {
    let app = app.inner().clone();
    let progress = loading_events(window);
    blocking(move || app.select_model(&name, backend, npu_anyway.unwrap_or(false), &progress)).await
}

/// Sends loading progress to the UI as `model-loading` events.
pub(crate) fn loading_events<R: Runtime>(window: AppHandle<R>) -> Progress {
    std::sync::Arc::new(move |loading: ModelLoading| {
        if let Err(error) = window.emit(LOADING_EVENT, &loading) {
            tracing::warn!("could not send the loading state to the window: {error}");
        }
    })
}
