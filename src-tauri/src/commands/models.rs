//! The Models area over `hearth-hub`: the catalog with "fits on this machine" hints, installed
//! models, downloads (progress over a Channel, pause, resume, cancel), delete, import, default.
//!
//! A download runs in the command call that started it; pausing or cancelling flips its
//! `DownloadControl`, found by model name in [`ModelsState`]. Resuming is a new `pull_model`
//! call: the hub continues from the bytes on disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hearth_hub::{
    CatalogItem, DownloadControl, DownloadOptions, FoundModel, FoundRoots, HubClient,
    InstalledModel, Machine, PartialDownload, Progress, PullOutcome, PullRequest, Removed, Store,
};
use serde::Serialize;
use tauri::ipc::Channel;
use tauri::State;

use super::blocking;
use crate::error::{CommandError, CommandResult};
use crate::state::{lock, AppState};

/// Downloads running in this app, by model name.
#[derive(Default)]
pub struct ModelsState {
    running: Mutex<HashMap<String, DownloadControl>>,
}

/// Everything the Models view shows.
#[derive(Debug, Clone, Serialize)]
#[derive(ts_rs::TS)]
pub struct ModelsOverview {
    /// Memory and free disk of this machine.
    pub machine: Machine,
    /// The catalog with install state and fit hints.
    pub catalog: Vec<CatalogItem>,
    /// Installed models (the bundled demo first).
    pub installed: Vec<InstalledModel>,
    /// Paused or interrupted downloads.
    pub partial: Vec<PartialDownload>,
    /// Names of the downloads running now.
    pub downloading: Vec<String>,
}

/// How a `pull_model` call ended.
#[derive(Debug, Clone, Serialize)]
#[derive(ts_rs::TS)]
pub struct PullResult {
    /// "installed", "already_installed", "paused" or "cancelled".
    pub outcome: &'static str,
    /// The model, when installed.
    pub model: Option<InstalledModel>,
}

/// The hub's store in the app's data folder, showing the bundled demo model as built in.
fn store(state: &AppState) -> Store {
    state.paths.store()
}

/// The hub's error as the UI receives it.
fn hub_error(error: hearth_hub::Error) -> CommandError {
    use hearth_hub::Error as E;
    let code = match &error {
        E::NotInstalled { .. } | E::RepoNotFound { .. } => "not_found",
        E::Offline { .. } => "offline",
        E::Network { .. } | E::Stalled { .. } | E::HttpStatus { .. } | E::BadResponse { .. } => {
            "network"
        }
        E::AccessDenied { .. } => "access_denied",
        E::NotEnoughDisk { .. } | E::DiskFull { .. } => "disk_full",
        E::ChecksumMismatch { .. } | E::MetadataMismatch { .. } => "corrupt",
        E::AlreadyDownloading { .. } => "busy",
        E::UnknownModel { .. } | E::InvalidName { .. } | E::NameTaken { .. } => "invalid_input",
        E::MissingFiles { .. } | E::InvalidModel { .. } | E::Gguf { .. } => "invalid_model",
        _ => "storage",
    };
    CommandError::new(code, error.to_string())
}

/// The catalog, installed models, partial and running downloads, and this machine's resources.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn models_overview(
    state: State<'_, AppState>,
    models: State<'_, Arc<ModelsState>>,
) -> CommandResult<ModelsOverview> {
    let store = store(state.inner());
    let downloading: Vec<String> = lock(&models.running).keys().cloned().collect();
    blocking(move || {
        let machine = Machine::measure(&store).map_err(hub_error)?;
        Ok(ModelsOverview {
            catalog: hearth_hub::catalog_view(&store, &machine).map_err(hub_error)?,
            installed: store.list().map_err(hub_error)?,
            partial: store.partial_downloads().map_err(hub_error)?,
            machine,
            downloading,
        })
    })
    .await
}

/// Download (or resume) `query`: a catalog id or a Hugging Face `owner/name`. Progress streams
/// on `on_progress`; the call returns when the model is installed, paused or cancelled.
#[tauri::command]
#[tracing::instrument(skip(state, models, on_progress))]
pub async fn pull_model(
    state: State<'_, AppState>,
    models: State<'_, Arc<ModelsState>>,
    query: String,
    on_progress: Channel<Progress>,
) -> CommandResult<PullResult> {
    let store = store(state.inner());
    let request = PullRequest {
        query,
        ..Default::default()
    };
    let name = hearth_hub::target_name(&request).map_err(hub_error)?;
    let control = DownloadControl::new();
    {
        let mut running = lock(&models.running);
        if running.contains_key(&name) {
            return Err(hub_error(hearth_hub::Error::AlreadyDownloading { name }));
        }
        running.insert(name.clone(), control.clone());
    }
    let registry = Arc::clone(models.inner());
    let result = blocking(move || {
        let client = HubClient::from_env(false);
        hearth_hub::pull(
            &store,
            &client,
            &request,
            &DownloadOptions::default(),
            &control,
            &mut |p| {
                if let Err(error) = on_progress.send(p.clone()) {
                    tracing::warn!("the window stopped listening to the download: {error}");
                }
            },
        )
        .map_err(hub_error)
    })
    .await;
    lock(&registry.running).remove(&name);
    Ok(match result? {
        PullOutcome::Installed(model) => PullResult {
            outcome: "installed",
            model: Some(model),
        },
        PullOutcome::AlreadyInstalled(model) => PullResult {
            outcome: "already_installed",
            model: Some(model),
        },
        PullOutcome::Paused { .. } => PullResult {
            outcome: "paused",
            model: None,
        },
        PullOutcome::Cancelled => PullResult {
            outcome: "cancelled",
            model: None,
        },
    })
}

/// Pause the running download of `name` (its bytes are kept; `pull_model` resumes it).
#[tauri::command]
pub fn pause_download(models: State<'_, Arc<ModelsState>>, name: String) -> CommandResult<()> {
    match lock(&models.running).get(&name) {
        Some(control) => {
            control.pause();
            Ok(())
        }
        None => Err(CommandError::new(
            "not_found",
            format!("\"{name}\" is not downloading now."),
        )),
    }
}

/// Cancel the download of `name`, running or paused, and delete its partial files.
#[tauri::command]
pub async fn cancel_download(
    state: State<'_, AppState>,
    models: State<'_, Arc<ModelsState>>,
    name: String,
) -> CommandResult<u64> {
    if let Some(control) = lock(&models.running).get(&name) {
        control.cancel();
        return Ok(0);
    }
    let store = store(state.inner());
    blocking(move || store.discard_download(&name).map_err(hub_error)).await
}

/// Delete an installed model; returns the bytes freed.
#[tauri::command]
pub async fn remove_model(state: State<'_, AppState>, name: String) -> CommandResult<Removed> {
    let store = store(state.inner());
    blocking(move || store.remove(&name).map_err(hub_error)).await
}

/// What the user chose to import: a GGUF file as it is, a model folder, or a folder holding
/// exactly one GGUF file (and no config.json), which stands for that file. A file that is not
/// GGUF is refused with what to choose instead.
fn import_target(path: &Path) -> CommandResult<PathBuf> {
    if !path.exists() {
        return Err(CommandError::new(
            "not_found",
            format!(
                "There is nothing at {}. Check the path, or choose the file with Browse.",
                path.display()
            ),
        ));
    }
    if path.is_file() {
        if hearth_hub::is_gguf_file(path) {
            return Ok(path.to_path_buf());
        }
        return Err(CommandError::new(
            "invalid_model",
            format!(
                "{} is not a GGUF file (it does not start with \"GGUF\"). Choose a .gguf file, or \
                 the folder that holds a model's config.json.",
                path.display()
            ),
        ));
    }
    if path.is_dir() && !path.join("config.json").exists() {
        let ggufs: Vec<PathBuf> = std::fs::read_dir(path)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| hearth_hub::is_gguf_file(p))
                    .collect()
            })
            .unwrap_or_default();
        if let [only] = ggufs.as_slice() {
            return Ok(only.clone());
        }
    }
    Ok(path.to_path_buf())
}

/// Import a model from this computer: a GGUF file (converted to Q4NX; the file is only read) or
/// a model folder (validated and copied), as `hearth import` does. Progress streams on
/// `on_progress`.
#[tauri::command]
#[tracing::instrument(skip(state, on_progress))]
pub async fn import_model(
    state: State<'_, AppState>,
    path: String,
    name: Option<String>,
    on_progress: Channel<Progress>,
) -> CommandResult<InstalledModel> {
    let store = store(state.inner());
    blocking(move || {
        let target = import_target(Path::new(path.trim()))?;
        hearth_hub::import_found(&store, &target, name, &mut |p| {
            if let Err(error) = on_progress.send(p) {
                tracing::warn!("the window stopped listening to the import: {error}");
            }
        })
        .map_err(hub_error)
    })
    .await
}

/// The models other programs keep on this computer (Ollama, LM Studio, Jan, the Hugging Face
/// cache), each with whether Hearth can import it. Their folders are only read.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn found_models() -> CommandResult<Vec<FoundModel>> {
    blocking(|| Ok(hearth_hub::scan_found(&FoundRoots::from_env()))).await
}

/// Import the found model at `path` (a GGUF file is converted, a folder copied; the original
/// is only read) under `name`. Progress streams on `on_progress`.
#[tauri::command]
#[tracing::instrument(skip(state, on_progress))]
pub async fn import_found(
    state: State<'_, AppState>,
    path: String,
    name: Option<String>,
    on_progress: Channel<Progress>,
) -> CommandResult<InstalledModel> {
    let store = store(state.inner());
    blocking(move || {
        hearth_hub::import_found(&store, &PathBuf::from(path), name, &mut |p| {
            if let Err(error) = on_progress.send(p) {
                tracing::warn!("the window stopped listening to the import: {error}");
            }
        })
        .map_err(hub_error)
    })
    .await
}

/// Make `name` the model Hearth opens at start (recorded in the registry, its one home).
#[tauri::command]
pub async fn set_default_model(state: State<'_, AppState>, name: String) -> CommandResult<()> {
    let store = store(state.inner());
    blocking(move || store.set_default(&name).map_err(hub_error)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_errors_keep_their_message_and_get_a_stable_code() {
        let error = hub_error(hearth_hub::Error::NotEnoughDisk {
            path: PathBuf::from("/data"),
            needed: 2_000_000_000,
            available: 1_000,
        });
        assert_eq!(error.code, "disk_full");
        assert!(
            error.message.contains("not enough free disk space"),
            "{}",
            error.message
        );
        let error = hub_error(hearth_hub::Error::ChecksumMismatch {
            file: "model.q4nx".into(),
            algorithm: "sha256",
            expected: "a".into(),
            actual: "b".into(),
        });
        assert_eq!(
            error.code, "corrupt",
            "the UI shows corrupted downloads apart"
        );
    }

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_missing_path_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let error = import_target(&dir.path().join("gone.gguf")).unwrap_err();
        assert_eq!(error.code, "not_found");
        assert!(error.message.contains("gone.gguf"), "{}", error.message);
    }

    #[test]
    fn a_gguf_file_is_imported_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tiny.gguf");
        write(&file, b"GGUF\x03\0\0\0");
        assert_eq!(import_target(&file).unwrap(), file);
    }

    #[test]
    fn a_file_that_is_not_gguf_is_refused_with_what_to_choose() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        write(&file, b"hello");
        let error = import_target(&file).unwrap_err();
        assert_eq!(error.code, "invalid_model");
        assert!(
            error.message.contains("Choose a .gguf file"),
            "says what to pick: {}",
            error.message
        );
    }

    #[test]
    fn a_folder_with_one_gguf_and_no_config_stands_for_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.Q4_1.gguf");
        write(&file, b"GGUF\x03\0\0\0");
        write(&dir.path().join("README.md"), b"# model");
        assert_eq!(import_target(dir.path()).unwrap(), file);
    }

    #[test]
    fn a_model_folder_or_one_with_several_ggufs_stays_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("a.gguf"), b"GGUF\x03\0\0\0");
        write(&dir.path().join("b.gguf"), b"GGUF\x03\0\0\0");
        assert_eq!(import_target(dir.path()).unwrap(), dir.path());
        write(&dir.path().join("config.json"), b"{}");
        std::fs::remove_file(dir.path().join("b.gguf")).unwrap();
        assert_eq!(
            import_target(dir.path()).unwrap(),
            dir.path(),
            "a folder with config.json is a model folder even beside a GGUF file"
        );
    }
}
