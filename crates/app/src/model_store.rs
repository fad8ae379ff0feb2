//! The Models area over `hearth-hub`: the catalog with "fits on this machine" hints, installed
//! models, downloads (pause, resume, cancel), delete, import (a GGUF file linked where it lies
//! unless the "copy models" setting is on), finding a linked file again, the default model.
//!
//! A download runs in the call that started it; pausing or cancelling flips its
//! `DownloadControl`, found by model name in [`App::downloads`]. Resuming is a new
//! [`App::pull_model`] call: the hub continues from the bytes on disk.

use std::path::{Path, PathBuf};

use hearth_hub::{
    CatalogItem, DownloadControl, DownloadOptions, FoundRoots, HubClient, Machine, PartialDownload,
    PullOutcome, PullRequest,
};
use serde::Serialize;

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::lock::lock;

// The hub's records front ends receive.
pub use hearth_hub::{FoundModel, InstalledModel, Progress, Removed};

/// Everything the Models view shows.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    /// Whether a GGUF file added now is copied into Hearth's folder instead of linked where it
    /// lies ([`App::copy_models`]), so the Models view says which it does.
    pub copy_models: bool,
}

/// How a download ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum PullEnd {
    /// Downloaded, checked and registered.
    Installed,
    /// It was installed already.
    AlreadyInstalled,
    /// Paused; its bytes are kept and a new pull resumes it.
    Paused,
    /// Cancelled; its partial files are deleted.
    Cancelled,
}

/// How a [`App::pull_model`] call ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PullResult {
    /// How it ended.
    pub outcome: PullEnd,
    /// The model, when installed.
    pub model: Option<InstalledModel>,
}

impl From<PullOutcome> for PullResult {
    fn from(outcome: PullOutcome) -> Self {
        let (outcome, model) = match outcome {
            PullOutcome::Installed(model) => (PullEnd::Installed, Some(model)),
            PullOutcome::AlreadyInstalled(model) => (PullEnd::AlreadyInstalled, Some(model)),
            PullOutcome::Paused { .. } => (PullEnd::Paused, None),
            PullOutcome::Cancelled => (PullEnd::Cancelled, None),
        };
        Self { outcome, model }
    }
}

impl App {
    /// The catalog, installed models, partial and running downloads, and this machine's
    /// resources.
    pub fn models_overview(&self) -> Result<ModelsOverview> {
        let store = self.home.store();
        let downloading: Vec<String> = lock(&self.downloads).keys().cloned().collect();
        let machine = Machine::measure(&store)?;
        Ok(ModelsOverview {
            catalog: hearth_hub::catalog_view(&store, &machine)?,
            installed: store.list()?,
            partial: store.partial_downloads()?,
            machine,
            downloading,
            copy_models: store.copy_models(),
        })
    }

    /// Downloads (or resumes) `query`: a catalog id or a Hugging Face `owner/name`, reporting
    /// to `progress`; returns when the model is installed, paused or cancelled.
    pub fn pull_model(
        &self,
        query: String,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<PullResult> {
        let store = self.home.store();
        let request = PullRequest {
            query,
            ..Default::default()
        };
        let name = hearth_hub::target_name(&request)?;
        let control = DownloadControl::new();
        {
            let mut running = lock(&self.downloads);
            if running.contains_key(&name) {
                return Err(hearth_hub::Error::AlreadyDownloading { name }.into());
            }
            running.insert(name.clone(), control.clone());
        }
        let client = HubClient::from_env(false);
        let result = hearth_hub::pull(
            &store,
            &client,
            &request,
            &DownloadOptions::default(),
            &control,
            progress,
        );
        lock(&self.downloads).remove(&name);
        Ok(result?.into())
    }

    /// Pauses the running download of `name` (its bytes are kept; a new pull resumes it).
    pub fn pause_download(&self, name: &str) -> Result<()> {
        match lock(&self.downloads).get(name) {
            Some(control) => {
                control.pause();
                Ok(())
            }
            None => Err(Error::new(
                ErrorCode::NotFound,
                format!("\"{name}\" is not downloading now."),
            )),
        }
    }

    /// Cancels the download of `name`, running or paused, and deletes its partial files;
    /// returns the bytes freed (0 for a running one: its own call frees them).
    pub fn cancel_download(&self, name: &str) -> Result<u64> {
        if let Some(control) = lock(&self.downloads).get(name) {
            control.cancel();
            return Ok(0);
        }
        Ok(self.home.store().discard_download(name)?)
    }

    /// Deletes an installed model; returns the bytes freed. A linked GGUF file is never
    /// deleted: only Hearth's small folder for it is. A speech model (`whisper-base`) is the
    /// folder Hearth downloaded into `models/speech/`, as `hearth rm` removes it; one Hearth
    /// did not download is refused in words.
    pub fn remove_model(&self, name: &str) -> Result<Removed> {
        let store = self.home.store();
        Ok(match hearth_hub::speech::folder_name(&store, name)? {
            Some(folder) => hearth_hub::speech::remove(&store, &folder)?,
            None => store.remove(name)?,
        })
    }

    /// Adds a model from this computer, as `hearth import` does: a GGUF file (linked where it
    /// lies, or with the setting [`App::copy_models`] converted into Hearth's own copy; the file
    /// is only read), a model folder (validated and copied), or a folder holding exactly one
    /// GGUF file and no config.json. Reports to `progress`.
    pub fn import_model(
        &self,
        path: &Path,
        name: Option<String>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<InstalledModel> {
        let target = import_target(path)?;
        let store = self.home.store();
        let copy = store.copy_models();
        Ok(hearth_hub::import_found(
            &store, &target, name, copy, progress,
        )?)
    }

    /// The models other programs keep on this computer (Ollama, LM Studio, Jan, the Hugging
    /// Face cache), each with whether Hearth can import it. Their folders are only read.
    pub fn found_models(&self) -> Vec<FoundModel> {
        hearth_hub::scan_found(&FoundRoots::from_env())
    }

    /// Adds the found model at `path` under `name` (a GGUF file is linked where it lies, or
    /// copied with the setting [`App::copy_models`]; a folder is copied; the original is only
    /// read), reporting to `progress`.
    pub fn import_found(
        &self,
        path: &Path,
        name: Option<String>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<InstalledModel> {
        let store = self.home.store();
        let copy = store.copy_models();
        Ok(hearth_hub::import_found(
            &store, path, name, copy, progress,
        )?)
    }

    /// "Find it": links the linked model `name`, whose GGUF file was moved or changed, to the
    /// file picked again at `path`. The same model (the same header) keeps its name and
    /// conversations; another file is refused in plain words and nothing changes.
    pub fn relink_model(&self, name: &str, path: &Path) -> Result<InstalledModel> {
        Ok(self.home.store().relink(name, path)?)
    }

    /// Whether a GGUF file added from now on is copied into Hearth's folder instead of linked
    /// where it lies (Settings › Models, "Copy models into Hearth's folder"; off by default).
    /// Kept in the model registry, so `hearth import` follows it too.
    pub fn copy_models(&self) -> bool {
        self.home.store().copy_models()
    }

    /// Sets [`App::copy_models`]; the models already added stay as they are.
    pub fn set_copy_models(&self, copy: bool) -> Result<()> {
        Ok(self.home.store().set_copy_models(copy)?)
    }

    /// Makes `name` the model Hearth opens at start (recorded in the registry, its one home).
    pub fn set_default_model(&self, name: &str) -> Result<()> {
        Ok(self.home.store().set_default(name)?)
    }
}

/// What the user chose to import: a GGUF file as it is, a model folder, or a folder holding
/// exactly one GGUF file (and no config.json), which stands for that file. A file that is not
/// GGUF is refused with what to choose instead.
fn import_target(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        return Err(Error::new(
            ErrorCode::NotFound,
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
        return Err(Error::new(
            ErrorCode::InvalidModel,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_missing_path_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let error = import_target(&dir.path().join("gone.gguf")).unwrap_err();
        assert_eq!(error.code, ErrorCode::NotFound);
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
        assert_eq!(error.code, ErrorCode::InvalidModel);
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
