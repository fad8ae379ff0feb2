//! The Models area: the catalog, installed models, downloads (progress over a Channel, pause,
//! resume, cancel), delete, import (a path typed or picked in the import form, or a model
//! dropped on the window, by its token), default; each over one `hearth_app::App` function.

use std::path::Path;

use hearth_app::model_store::{
    FoundModel, InstalledModel, ModelsOverview, Progress, PullResult, Removed,
};
use hearth_app::App;

use tauri::ipc::Channel;
use tauri::State;

use super::{blocking, send};
use crate::error::CommandResult;

/// The catalog, installed models, partial and running downloads, and this machine's resources.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn models_overview(app: State<'_, App>) -> CommandResult<ModelsOverview> {
    let app = app.inner().clone();
    blocking(move || app.models_overview()).await
}

/// Download (or resume) `query`: a catalog id or a Hugging Face `owner/name`. Progress streams
/// on `on_progress`; the call returns when the model is installed, paused or cancelled.
#[tauri::command]
#[tracing::instrument(skip(app, on_progress))]
pub async fn pull_model(
    app: State<'_, App>,
    query: String,
    on_progress: Channel<Progress>,
) -> CommandResult<PullResult> {
    let app = app.inner().clone();
    blocking(move || app.pull_model(query, &mut |p| send(&on_progress, p.clone()))).await
}

/// Pause the running download of `name` (its bytes are kept; `pull_model` resumes it).
#[tauri::command]
pub fn pause_download(app: State<'_, App>, name: String) -> CommandResult<()> {
    app.pause_download(&name)
}

/// Cancel the download of `name`, running or paused, and delete its partial files.
#[tauri::command]
pub async fn cancel_download(app: State<'_, App>, name: String) -> CommandResult<u64> {
    let app = app.inner().clone();
    blocking(move || app.cancel_download(&name)).await
}

/// Delete an installed model; returns the bytes freed (a linked GGUF file is never deleted,
/// only Hearth's small folder for it).
#[tauri::command]
pub async fn remove_model(app: State<'_, App>, name: String) -> CommandResult<Removed> {
    let app = app.inner().clone();
    blocking(move || app.remove_model(&name)).await
}

/// Add a model from this computer: a GGUF file (linked where it lies, or copied with the
/// "copy models" setting; the file is only read), a model folder (validated and copied), or a
/// folder holding one GGUF file, as `hearth import` does. Progress streams on `on_progress`.
#[tauri::command]
#[tracing::instrument(skip(app, on_progress))]
pub async fn import_model(
    app: State<'_, App>,
    path: String,
    name: Option<String>,
    on_progress: Channel<Progress>,
) -> CommandResult<InstalledModel> {
    let app = app.inner().clone();
    blocking(move || app.import_model(Path::new(path.trim()), name, &mut |p| send(&on_progress, p)))
        .await
}

/// Import the model of the drop `token` (once; the drop's path stayed in Rust), as
/// `import_model` imports a path. Progress streams on `on_progress`.
#[tauri::command]
#[tracing::instrument(skip(app, on_progress))]
pub async fn import_dropped(
    app: State<'_, App>,
    token: String,
    on_progress: Channel<Progress>,
) -> CommandResult<InstalledModel> {
    let app = app.inner().clone();
    blocking(move || app.import_dropped(&token, &mut |p| send(&on_progress, p))).await
}

/// The models other programs keep on this computer (Ollama, LM Studio, Jan, the Hugging Face
/// cache), each with whether Hearth can import it. Their folders are only read.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn found_models(app: State<'_, App>) -> CommandResult<Vec<FoundModel>> {
    let app = app.inner().clone();
    blocking(move || Ok(app.found_models())).await
}

/// Add the found model at `path` (a GGUF file is linked where it lies, or copied with the "copy
/// models" setting; a folder is copied; the original is only read) under `name`. Progress
/// streams on `on_progress`.
#[tauri::command]
#[tracing::instrument(skip(app, on_progress))]
pub async fn import_found(
    app: State<'_, App>,
    path: String,
    name: Option<String>,
    on_progress: Channel<Progress>,
) -> CommandResult<InstalledModel> {
    let app = app.inner().clone();
    blocking(move || app.import_found(Path::new(&path), name, &mut |p| send(&on_progress, p))).await
}

/// "Find it": link the linked model `name`, whose GGUF file was moved or changed, to the file
/// picked again at `path` (the same model keeps its name; another file is refused).
#[tauri::command]
#[tracing::instrument(skip(app))]
pub async fn relink_model(
    app: State<'_, App>,
    name: String,
    path: String,
) -> CommandResult<InstalledModel> {
    let app = app.inner().clone();
    blocking(move || app.relink_model(&name, Path::new(path.trim()))).await
}

/// Make `name` the model Hearth opens at start (recorded in the registry, its one home).
#[tauri::command]
pub async fn set_default_model(app: State<'_, App>, name: String) -> CommandResult<()> {
    let app = app.inner().clone();
    blocking(move || app.set_default_model(&name)).await
}
