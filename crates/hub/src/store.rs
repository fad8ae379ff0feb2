//! The local model store in one data folder, which its caller names (the app keeps it in
//! `$XDG_DATA_HOME/hearth/`): `models/<name>/` (installed models), `downloads/<name>/`
//! (downloads in progress or paused) and `model_list.json` (the registry).
//!
//! A model becomes visible only by being registered, and it is registered only after its
//! folder is complete and valid: the folder is moved into `models/` and the registry entry is
//! written while the registry lock is held. A folder in `models/` without an entry (left by a
//! crash between the two steps, marked by `.hearth-installing`) is garbage and is replaced by the
//! next install of that name; any other folder there is the user's and is never deleted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::catalog::Backend;
use crate::download::copy_hashed;
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::hub_api::RemoteFile;
use crate::link_state::LinkStatus;
use crate::model_dir::{self, ValidatedModel, WeightFormat};
use crate::names::{check_name, derive_tag, split_tag};
use crate::registry::{
    FileRecord, FlmDetails, FlmEntry, HearthFields, Registry, RegistryFile, FILE_NAME,
};

/// What a download in progress records about itself (`downloads/<name>/download.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// What the user asked for.
    pub query: String,
    /// The Hub repository.
    pub repo: String,
    /// The branch, tag or commit asked for.
    pub requested_revision: String,
    /// The commit it pointed to when the download started.
    pub commit: String,
    /// The catalog entry, when the query named one.
    pub catalog_id: Option<String>,
    /// What the folder holds.
    pub format: WeightFormat,
    /// The files to fetch.
    pub files: Vec<RemoteFile>,
}

impl Manifest {
    const FILE: &'static str = "download.json";

    /// The manifest in `dir`, if there is a readable one.
    pub(crate) fn read(dir: &Path) -> Option<Manifest> {
        let bytes = std::fs::read(dir.join(Self::FILE)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(|e| Error::Registry {
            path: dir.join(Self::FILE),
            detail: e.to_string(),
        })?;
        fsutil::write_atomic(&dir.join(Self::FILE), &text)
    }
}

/// A model as `hearth list` and the app show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct InstalledModel {
    /// Folder name, what users type.
    pub name: String,
    /// FastFlowLM tag `family:size` (empty for the built-in model).
    pub tag: String,
    /// The model folder.
    pub folder: PathBuf,
    /// Bytes on disk.
    pub size_bytes: u64,
    /// Where it came from: `huggingface:owner/name@commit`, `import:<folder>`, `link:<file>`
    /// (a GGUF file read where it lies), `built-in`.
    pub source: String,
    /// `owner/name` on the Hub, for downloads.
    pub repo: Option<String>,
    /// Commit, for downloads.
    pub revision: Option<String>,
    /// Catalog id, when it came from the catalog.
    pub catalog_id: Option<String>,
    /// Weight format.
    pub format: WeightFormat,
    /// Where it runs.
    pub backends: Vec<Backend>,
    /// Whether it is the default model.
    pub is_default: bool,
    /// Whether it ships with Hearth (cannot be removed).
    pub builtin: bool,
    /// Size and sha256 of every file (empty for the built-in model and foreign entries).
    pub files: BTreeMap<String, FileRecord>,
    /// For a GGUF file read where it lies (linked, not copied): the file and whether it is
    /// still there and the same. None for a model whose files are in Hearth's folder.
    pub linked: Option<LinkStatus>,
    /// Whether FastFlowLM reads pictures with it on the NPU: the registry's `vlm` mark, read
    /// whether or not FastFlowLM is installed. Hearth's CPU engine reads text only.
    pub sees_pictures: bool,
}

impl InstalledModel {
    /// Whether it is an embedding model from the catalog (it reads text into vectors for
    /// searching the user's files; it does not chat).
    pub fn is_embedding(&self) -> bool {
        self.kind() == crate::catalog::ModelKind::Embedding
    }

    /// What it is for: its catalog entry's kind; chat for a model from outside the catalog.
    pub fn kind(&self) -> crate::catalog::ModelKind {
        let entry = self
            .catalog_id
            .as_deref()
            .and_then(|id| crate::catalog::find(id).ok().flatten());
        entry.map(|e| e.kind).unwrap_or_default()
    }

    /// Whether it chats (speech, reranking and embedding models do not).
    pub fn is_chat(&self) -> bool {
        self.kind() == crate::catalog::ModelKind::Chat
    }

    /// Why it cannot be opened now, in plain words: a linked GGUF file that was moved, changed
    /// or deleted since it was added. None when it can.
    pub fn unavailable(&self) -> Option<String> {
        let linked = self.linked.as_ref().filter(|l| !l.is_ready())?;
        Some(format!(
            "{} was moved or changed since you added it: find it, or remove it",
            linked.file.display()
        ))
    }
}

/// A download that was paused or interrupted and can be resumed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PartialDownload {
    /// Model name.
    pub name: String,
    /// `owner/name`.
    pub repo: String,
    /// What the user asked for (catalog id or repo), to resume with.
    pub query: String,
    /// Bytes already on disk.
    pub done_bytes: u64,
    /// Bytes of the whole model.
    pub total_bytes: u64,
}

/// What `remove` freed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Removed {
    /// Model name.
    pub name: String,
    /// Bytes freed on disk.
    pub freed_bytes: u64,
}

/// How `import` treats the source folder.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Name to register under; default: the folder's name.
    pub name: Option<String>,
    /// Move the files instead of copying them (same file system only; falls back to a copy).
    pub move_files: bool,
}

/// Facts about a model that is about to be registered.
#[derive(Debug, Clone)]
pub(crate) struct NewModel {
    pub name: String,
    pub tag: Option<String>,
    pub url: String,
    pub hearth: HearthFields,
    pub details: FlmDetails,
    pub context_length: u64,
    /// Whether FastFlowLM reads pictures with it (the catalog's `vlm`), written as its mark.
    pub vlm: bool,
}

/// A check a complete model folder must pass before it is registered, for what the hub cannot
/// judge itself: `dir` is the folder, `name` the model's name; an `Err` says in plain words why
/// the model is refused. The CLI and the app pass the engine's chat template check, so that a
/// model whose template would hang Hearth is never installed.
pub type ModelCheck = fn(dir: &Path, name: &str) -> std::result::Result<(), String>;

/// The store in one data folder.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    builtin: Option<(String, PathBuf)>,
    check: Option<ModelCheck>,
}

impl Store {
    /// The store rooted at `root`.
    pub fn at(root: PathBuf) -> Store {
        Store {
            root,
            builtin: None,
            check: None,
        }
    }

    /// Shows the model folder `dir` (shipped with Hearth) as a built-in model called `name`.
    /// It is listed, can be the default, and is never copied, registered for FastFlowLM or removed.
    pub fn with_builtin(mut self, name: &str, dir: PathBuf) -> Store {
        self.builtin = Some((name.to_string(), dir));
        self
    }

    /// Runs `check` on every model folder `pull` and `import` are about to register; a model
    /// that fails it is refused with [`Error::RefusedModel`]. By default, no check beyond the
    /// hub's own (files present, weights matching the config).
    pub fn with_model_check(mut self, check: ModelCheck) -> Store {
        self.check = Some(check);
        self
    }

    /// Runs the model check (if any) on the complete folder `dir` of the model `name`.
    pub(crate) fn check_model(&self, dir: &Path, name: &str) -> Result<()> {
        match self.check {
            Some(check) => check(dir, name).map_err(|reason| Error::RefusedModel {
                name: name.to_string(),
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The data folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where installed models live.
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }

    /// Where downloads in progress live.
    pub fn downloads_dir(&self) -> PathBuf {
        self.root.join("downloads")
    }

    /// The registry file, `model_list.json` (FastFlowLM's schema: `FLM_CONFIG_PATH` points at it).
    pub fn registry_path(&self) -> PathBuf {
        self.root.join(FILE_NAME)
    }

    /// The registry, for reading and locked updates.
    pub fn registry(&self) -> Registry {
        Registry::new(self.registry_path(), self.models_dir())
    }

    /// Every installed model, the built-in one first.
    pub fn list(&self) -> Result<Vec<InstalledModel>> {
        let file = self.registry().read()?;
        let default = file.hearth.default.clone();
        let is_default = |name: &str| {
            default
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(name))
        };
        let mut out = Vec::new();
        if let Some((name, dir)) = &self.builtin {
            if dir.is_dir() {
                out.push(InstalledModel {
                    name: name.clone(),
                    tag: String::new(),
                    folder: dir.clone(),
                    size_bytes: fsutil::dir_size(dir),
                    source: "built-in".into(),
                    repo: None,
                    revision: None,
                    catalog_id: None,
                    format: if dir.join("model.q4nx").is_file() {
                        WeightFormat::Q4nx
                    } else {
                        WeightFormat::Safetensors
                    },
                    backends: vec![Backend::Cpu],
                    is_default: is_default(name),
                    builtin: true,
                    files: BTreeMap::new(),
                    linked: None,
                    sees_pictures: false,
                });
            }
        }
        for (family, size, entry) in file.entries() {
            if check_name(&entry.name).is_err() {
                tracing::warn!(tag = %format!("{family}:{size}"), name = ?entry.name,
                    "registry entry skipped: its name cannot be a model folder");
                continue;
            }
            out.push(self.describe(family, size, entry, is_default(&entry.name)));
        }
        Ok(out)
    }

    /// The installed model called `name` (or tagged `name`).
    pub fn get(&self, name: &str) -> Result<InstalledModel> {
        self.list()?
            .into_iter()
            .find(|m| m.name.eq_ignore_ascii_case(name) || (!m.tag.is_empty() && m.tag == name))
            .ok_or_else(|| Error::NotInstalled {
                name: name.to_string(),
            })
    }

    /// The default model: the one set with [`Store::set_default`], else the first chat model
    /// listed (a model that does not chat is never the default).
    pub fn default_model(&self) -> Result<Option<InstalledModel>> {
        let list = self.list()?;
        let chat = || list.iter().find(|m| m.is_chat());
        Ok(list.iter().find(|m| m.is_default).or_else(chat).cloned())
    }

    /// Makes `name` the default model.
    pub fn set_default(&self, name: &str) -> Result<()> {
        let model = self.get(name)?;
        if !model.is_chat() {
            return Err(Error::InvalidName {
                name: model.name,
                reason: "it cannot chat: it is for searching your files, ordering passages or \
                         speech"
                    .into(),
            });
        }
        self.registry().update(|file| {
            file.hearth.default = Some(model.name.clone());
            Ok(())
        })
    }

    /// Unregisters `name` and deletes its folder (and any partial download of it); says how
    /// many bytes that freed.
    pub fn remove(&self, name: &str) -> Result<Removed> {
        if let Some((builtin, _)) = &self.builtin {
            if builtin.eq_ignore_ascii_case(name) {
                return Err(Error::InvalidName {
                    name: name.to_string(),
                    reason: "it is the model built into Hearth and cannot be removed".into(),
                });
            }
        }
        // The registry is shared with other tools: its folder names are checked before any
        // file operation, and the entry stays when the name cannot be a folder of ours.
        let removed = self.registry().update(|file| {
            if let Some((_, _, entry)) = file.find(name) {
                check_name(&entry.name).map_err(|_| foreign_folder_name(&entry.name))?;
            }
            Ok(file.remove(name))
        })?;
        let (folder_name, mut freed) = match removed {
            Some((_, _, entry)) => {
                let folder = self.model_folder(&entry.name)?;
                let bytes = fsutil::dir_size(&folder);
                // The entry is gone first: a crash now leaves an unregistered folder, never a
                // registered model without files.
                fsutil::remove_dir_all(&folder)?;
                (entry.name, bytes)
            }
            None => {
                check_name(name)?;
                if !self.downloads_dir().join(name).is_dir() {
                    return Err(Error::NotInstalled {
                        name: name.to_string(),
                    });
                }
                (name.to_string(), 0)
            }
        };
        freed += self.discard_download(&folder_name)?;
        Ok(Removed {
            name: folder_name,
            freed_bytes: freed,
        })
    }

    /// The folder `models/<name>` of a registered model, checked to be a direct child of the
    /// models folder (after resolving links), so that nothing outside it is ever deleted.
    fn model_folder(&self, name: &str) -> Result<PathBuf> {
        check_name(name).map_err(|_| foreign_folder_name(name))?;
        let models = self.models_dir();
        let folder = models.join(name);
        let (Ok(models_real), Ok(folder_real)) = (models.canonicalize(), folder.canonicalize())
        else {
            // Nothing there to delete (or no models folder at all).
            return Ok(folder);
        };
        if folder_real.parent() != Some(models_real.as_path()) {
            return Err(foreign_folder_name(name));
        }
        Ok(folder)
    }

    /// The staging folder `downloads/<name>` of a model that is registered is what a pull or
    /// import killed between writing the registry entry and clearing its staging left behind:
    /// it holds nothing the model needs, so it goes (unless a process holds its lock).
    pub(crate) fn clear_leftover_staging(&self, name: &str) {
        if let Err(e) = self.discard_download(name) {
            tracing::debug!(name, error = %e, "leftover staging folder kept");
        }
    }

    /// Downloads that were paused or interrupted (not the leftover staging of a model that is
    /// registered: see [`Store::clear_leftover_staging`]).
    pub fn partial_downloads(&self) -> Result<Vec<PartialDownload>> {
        let Ok(entries) = std::fs::read_dir(self.downloads_dir()) else {
            return Ok(Vec::new());
        };
        let registry = self.registry().read()?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if registry.find(&name).is_some() {
                continue;
            }
            let Some(manifest) = Manifest::read(&dir) else {
                continue;
            };
            out.push(PartialDownload {
                name,
                done_bytes: fsutil::dir_size(&dir.join("files")),
                total_bytes: manifest
                    .files
                    .iter()
                    .fold(0u64, |sum, f| sum.saturating_add(f.size)),
                repo: manifest.repo,
                query: manifest.query,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes the partial download of `name`, unless a process is downloading it right now.
    /// Returns the bytes freed.
    pub fn discard_download(&self, name: &str) -> Result<u64> {
        check_name(name)?;
        let dir = self.downloads_dir().join(name);
        if !dir.is_dir() {
            return Ok(0);
        }
        let _lock = FileLock::try_exclusive(&dir.join(".lock"))?.ok_or_else(|| {
            Error::AlreadyDownloading {
                name: name.to_string(),
            }
        })?;
        let bytes = fsutil::dir_size(&dir);
        fsutil::remove_dir_all(&dir)?;
        Ok(bytes)
    }

    /// Validates a local Q4NX or safetensors model folder and registers a copy of it. Only
    /// the folder's own files are taken (see [`model_dir::max_file_size`] for their sizes): a
    /// link out of the folder is refused, except a Hugging Face cache snapshot's links into
    /// its `blobs/`. With `move_files`, a folder inside the store is refused, since its files
    /// may be a registered model's.
    pub fn import(&self, dir: &Path, options: &ImportOptions) -> Result<InstalledModel> {
        let origin = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if options.move_files {
            if let Ok(root) = self.root.canonicalize() {
                if origin.starts_with(&root) {
                    return Err(Error::MoveFromStore {
                        dir: dir.to_path_buf(),
                    });
                }
            }
        }
        self.clear_abandoned_imports();
        self.import_from(dir, options, &origin)
    }

    /// [`Store::import`], recording `origin` as where the model came from.
    pub(crate) fn import_from(
        &self,
        dir: &Path,
        options: &ImportOptions,
        origin: &Path,
    ) -> Result<InstalledModel> {
        let name = match &options.name {
            Some(name) => name.clone(),
            None => dir
                .canonicalize()
                .map_err(|e| Error::io("open", dir, e))?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        check_name(&name)?;
        let validated = model_dir::validate(dir)?;
        self.check_model(dir, &name)?;
        if self.registry().read()?.find(&name).is_some() {
            self.clear_leftover_staging(&name);
            return Err(Error::NameTaken { name });
        }
        let names = model_dir::entry_names(dir)?;
        let selected = model_dir::select(&names, &dir.display().to_string())?;
        // Every file is checked to be the model's own before anything is written.
        let real_dir = dir.canonicalize().map_err(|e| Error::io("open", dir, e))?;
        let model_bytes = std::fs::metadata(real_dir.join("model.q4nx"))
            .ok()
            .map(|m| m.len());
        let mut sources = Vec::new();
        for file in &selected.files {
            sources.push((
                file.clone(),
                model_dir::source_file(&real_dir, file, model_bytes)?,
            ));
        }

        let staging_root = self.downloads_dir().join(&name);
        fsutil::create_dir_all(&staging_root)?;
        let _lock = FileLock::try_exclusive(&staging_root.join(".lock"))?
            .ok_or_else(|| Error::AlreadyDownloading { name: name.clone() })?;
        let staging = staging_root.join("files");
        fsutil::remove_dir_all(&staging)?;
        fsutil::create_dir_all(&staging)?;
        // With --move, a file is hard-linked into the staging (same file system) or copied, and
        // the source's names are removed only once the registry entry is written: until then
        // the user's folder is complete, so a failure, or a kill -9 at any moment, loses
        // nothing. (Renaming the files into the staging would leave them there, and the next
        // import of that name clears the staging.)
        let mut sources_to_remove: Vec<PathBuf> = Vec::new();
        let result = (|| {
            let mut needed: u64 = 0;
            for (_, source) in &sources {
                if !(options.move_files && same_file_system(&source.real, &staging)) {
                    needed = needed.saturating_add(source.len);
                }
            }
            let available = fsutil::free_space(&staging)?;
            if available < needed {
                return Err(Error::NotEnoughDisk {
                    path: staging.clone(),
                    needed,
                    available,
                });
            }
            let mut files = BTreeMap::new();
            for (file, source) in &mut sources {
                let (from, to) = (dir.join(&*file), staging.join(&*file));
                // The store's files are never more readable than the source (and never
                // executable or group-writable): its mode masked by 0644.
                let mode = source.mode & STORE_FILE_MODE;
                // A symbolic link (a Hugging Face snapshot's files are links to its blobs) is
                // copied through: a hard link would link the link, not the file. A file whose
                // mode is wider than the store's is copied too, so the user's file keeps its
                // mode until it is removed.
                let linked = options.move_files
                    && !source.is_link
                    && mode == source.mode
                    && std::fs::hard_link(&from, &to).is_ok();
                let record = if linked {
                    crate::download::sha256_file(&to)?
                } else {
                    let max = model_dir::max_file_size(file, model_bytes);
                    copy_hashed(&mut source.file, &source.real, &to, mode, max)?
                };
                if options.move_files {
                    sources_to_remove.push(from);
                }
                files.insert(file.clone(), record);
            }
            let new = NewModel {
                name: name.clone(),
                tag: None,
                url: String::new(),
                details: details_for(&validated, &name),
                context_length: validated.max_context.min(32768),
                vlm: false,
                hearth: HearthFields {
                    source: "import".into(),
                    repo: None,
                    revision: None,
                    imported_from: Some(origin.display().to_string()),
                    catalog_id: None,
                    format: validated.format,
                    architecture: validated.family.clone(),
                    backends: vec![Backend::Cpu],
                    files,
                    installed_at: unix_now(),
                    linked: None,
                },
            };
            self.register(&staging, new)
        })();
        if result.is_ok() {
            // Registered for good: now the source's names may go (the data stays in the model).
            for from in &sources_to_remove {
                if let Err(e) = std::fs::remove_file(from) {
                    tracing::warn!(file = %from.display(), error = %e,
                        "imported, but the source file could not be removed");
                }
            }
        }
        let _ = fsutil::remove_dir_all(&staging_root);
        result
    }

    /// Moves the complete, verified, validated folder `staged` to `models/<name>` and writes
    /// its registry entry, both under the registry lock. On failure nothing is registered.
    pub(crate) fn register(&self, staged: &Path, new: NewModel) -> Result<InstalledModel> {
        let registry = self.registry();
        let target = self.models_dir().join(&new.name);
        fsutil::create_dir_all(&self.models_dir())?;
        let result = registry.update(|file: &mut RegistryFile| {
            if file.find(&new.name).is_some() {
                return Err(Error::NameTaken {
                    name: new.name.clone(),
                });
            }
            let (family, size) = match new.tag.as_deref().and_then(split_tag) {
                Some((f, s)) => file.free_tag(f, s),
                None => {
                    let (f, s) = derive_tag(&new.name);
                    file.free_tag(&f, &s)
                }
            };
            // A folder without an entry is either what a crash between rename and write left
            // (it still carries Hearth's marker) or something the user put there: only the
            // first is replaced.
            if target.exists() || target.is_symlink() {
                if target.is_dir() && !target.is_symlink() && target.join(INSTALL_MARKER).is_file()
                {
                    fsutil::remove_dir_all(&target)?;
                } else {
                    return Err(Error::FolderExists {
                        name: new.name.clone(),
                        path: target.clone(),
                    });
                }
            }
            std::fs::write(staged.join(INSTALL_MARKER), b"")
                .map_err(|e| Error::io("write", staged.join(INSTALL_MARKER), e))?;
            std::fs::rename(staged, &target)
                .map_err(|e| Error::io(format!("move {} to", staged.display()), &target, e))?;
            fsutil::sync_dir(&self.models_dir());
            let entry = FlmEntry {
                name: new.name.clone(),
                url: new.url.clone(),
                size: new.hearth.files.values().map(|f| f.size).sum(),
                flm_min_version: None,
                files: new.hearth.files.keys().cloned().collect(),
                default_context_length: Some(new.context_length),
                vlm: new.vlm.then_some(true),
                details: new.details.clone(),
                hearth: Some(new.hearth.clone()),
                extra: Default::default(),
            };
            let out = (family.clone(), size.clone(), entry.clone());
            file.models.entry(family).or_default().insert(size, entry);
            Ok(out)
        });
        match result {
            Ok((family, size, entry)) => {
                // Registered: the folder is the model's now, no longer crash garbage.
                let _ = std::fs::remove_file(target.join(INSTALL_MARKER));
                tracing::info!(name = %new.name, tag = %format!("{family}:{size}"), "model registered");
                let default = registry.read()?.hearth.default;
                let is_default = default.is_some_and(|d| d.eq_ignore_ascii_case(&entry.name));
                Ok(self.describe(&family, &size, &entry, is_default))
            }
            Err(e) => {
                // The registry write failed after the move: put the folder back, so that no
                // unregistered model sits in models/ and the caller can clean up the staging.
                if target.is_dir() && !staged.exists() {
                    let _ = std::fs::rename(&target, staged);
                }
                let _ = std::fs::remove_file(staged.join(INSTALL_MARKER));
                Err(e)
            }
        }
    }

    fn describe(
        &self,
        family: &str,
        size: &str,
        entry: &FlmEntry,
        is_default: bool,
    ) -> InstalledModel {
        let folder = self.models_dir().join(&entry.name);
        let hearth = entry.hearth.as_ref();
        let source = match hearth {
            Some(h) if h.source == "import" || h.source == "link" => format!(
                "{}:{}",
                h.source,
                h.imported_from.clone().unwrap_or_default()
            ),
            Some(h) => format!(
                "huggingface:{}@{}",
                h.repo.clone().unwrap_or_default(),
                h.revision.clone().unwrap_or_default()
            ),
            None => "fastflowlm".to_string(),
        };
        InstalledModel {
            name: entry.name.clone(),
            tag: format!("{family}:{size}"),
            size_bytes: if entry.size > 0 {
                entry.size
            } else {
                fsutil::dir_size(&folder)
            },
            folder,
            source,
            repo: hearth.and_then(|h| h.repo.clone()),
            revision: hearth.and_then(|h| h.revision.clone()),
            catalog_id: hearth.and_then(|h| h.catalog_id.clone()),
            format: hearth.map(|h| h.format).unwrap_or(WeightFormat::Q4nx),
            backends: hearth
                .map(|h| h.backends.clone())
                .unwrap_or_else(|| vec![Backend::Npu]),
            is_default,
            builtin: false,
            files: hearth.map(|h| h.files.clone()).unwrap_or_default(),
            linked: hearth.and_then(|h| h.linked.as_ref()).map(|l| l.status()),
            sees_pictures: entry.sees_pictures(),
        }
    }
}

/// Whether `a` and `b` are on the same file system (so a rename between them needs no space).
fn same_file_system(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// The widest permission bits a file in the store gets: read and write for its owner, read for
/// others, as a download is written (a copy keeps a narrower source mode).
const STORE_FILE_MODE: u32 = 0o644;

/// The file `register` puts in a model folder while it moves it into `models/` and writes its
/// entry. A folder in `models/` without an entry is Hearth's (and may be replaced) only if it
/// carries this file.
const INSTALL_MARKER: &str = ".hearth-installing";

/// The refusal for a registry entry whose folder name is not one Hearth could have written.
fn foreign_folder_name(name: &str) -> Error {
    Error::InvalidName {
        name: name.to_string(),
        reason: "the registry (model_list.json) names this folder, which is not a plain folder \
                 inside the models folder. Nothing was deleted; remove that entry from \
                 model_list.json by hand"
            .into(),
    }
}

/// FastFlowLM details for a model outside the catalog. The family names FastFlowLM's engine:
/// `llama3` runs the Llama architecture (MiniCPM5 included); Qwen3 models keep family `qwen3`
/// only with Qwen's own vocabulary, since that engine hard-codes Qwen's token ids.
pub(crate) fn details_for(model: &ValidatedModel, name: &str) -> FlmDetails {
    let family = match model.family.as_str() {
        "qwen3" if model.vocab_size == 151_936 => "qwen3",
        "qwen3" => "qwen3-it",
        _ => "llama3",
    };
    let (_, size) = derive_tag(name);
    FlmDetails {
        family: family.to_string(),
        think: false,
        think_toggleable: false,
        parameter_size: match size.split('-').next() {
            Some("latest") | None => String::new(),
            Some(size) => size.to_ascii_uppercase(),
        },
        quantization_level: match model.format {
            WeightFormat::Q4nx => "Q4_1".into(),
            WeightFormat::Safetensors => "bf16".into(),
            WeightFormat::Gguf => "GGUF".into(),
            WeightFormat::Ct2 => "float16".into(),
        },
        extra: Default::default(),
    }
}

/// Seconds since 1970 (0 if the clock is before it): when a model was registered or a download
/// last moved.
pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
