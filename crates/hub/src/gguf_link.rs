//! Adding a GGUF file by linking it (issue 49): the file stays where it is, and Hearth's store
//! gets a small folder (`config.json`, `tokenizer.json`, the chat template and `gguf-link.json`,
//! written by [`q4nx::gguf::link_gguf`]) whose registry entry records the file's path,
//! size, modification time and header hash ([`LinkedFile`]). The engine reads the weights from
//! the file itself.
//!
//! The contract:
//! - the GGUF file is only read: linking, finding it again and removing the model never write,
//!   move or delete it (Hearth did not create it; removing a linked model removes only its
//!   small folder in `models/`);
//! - a linked model whose file is no longer there, or whose size or modification time changed,
//!   is listed with [`crate::LinkState::Missing`] or [`crate::LinkState::Changed`] (a stat, no read), and the
//!   engine refuses to open it with the same plain words;
//! - [`Store::relink`] ("Find it") takes a file picked again: the same model (the same header
//!   hash) is linked in place under the same name, any other file is refused with
//!   [`Error::DifferentFile`] and the model is left as it was.
//!
//! Copying (`hearth import --copy`, the app's "Copy models into Hearth's folder") is
//! [`Store::import_gguf`], unchanged.

use std::path::Path;

use crate::catalog::Backend;
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::gguf_import::{plain_refusal, work_paths, GgufImportOptions};
use crate::model_dir::{self, WeightFormat};
use crate::names;
use crate::registry::{FileRecord, FlmDetails, HearthFields, LinkedFile};
use crate::store::{unix_now, InstalledModel, NewModel, Store};

/// The file in a linked model's folder that names its GGUF file (written by `q4nx`).
pub use q4nx::gguf::LINK_FILE;

impl Store {
    /// Whether a GGUF file added to Hearth is copied into its folder instead of linked (the
    /// setting "Copy models into Hearth's folder", kept in the registry; off when unreadable).
    pub fn copy_models(&self) -> bool {
        self.registry()
            .read()
            .map(|file| file.hearth.copy_models)
            .unwrap_or(false)
    }

    /// Sets whether GGUF files added from now on are copied instead of linked. Models already
    /// added stay as they are.
    pub fn set_copy_models(&self, copy: bool) -> Result<()> {
        self.registry().update(|file| {
            file.hearth.copy_models = copy;
            Ok(())
        })
    }

    /// Adds the GGUF `file` by linking it: a small model folder is written and registered, the
    /// file stays where it is and is never written. `progress` sees the link being written.
    /// Returns the installed model and what `q4nx` found in the file.
    pub fn link_gguf(
        &self,
        file: &Path,
        options: &GgufImportOptions,
        progress: &mut dyn FnMut(q4nx::ConvertProgress),
    ) -> Result<(InstalledModel, q4nx::gguf::GgufLinkReport)> {
        let name = options
            .name
            .clone()
            .unwrap_or_else(|| crate::gguf_import::name_from_file(file));
        names::check_name(&name)?;
        if self.registry().read()?.find(&name).is_some() {
            return Err(Error::NameTaken { name });
        }
        let origin = file
            .canonicalize()
            .map_err(|e| Error::io("open", file, e))?;
        self.with_link_folder(&name, &origin, progress, |folder, report, linked| {
            self.check_model(folder, &name)?;
            let new = NewModel {
                name: name.clone(),
                tag: None,
                url: String::new(),
                details: link_details(report),
                context_length: (report.config.max_position_embeddings as u64).clamp(1, 32768),
                vlm: false,
                hearth: HearthFields {
                    source: "link".into(),
                    repo: None,
                    revision: None,
                    imported_from: Some(origin.display().to_string()),
                    catalog_id: None,
                    format: WeightFormat::Gguf,
                    architecture: report.architecture.clone(),
                    backends: vec![Backend::Cpu],
                    files: folder_records(folder)?,
                    installed_at: unix_now(),
                    linked: Some(linked),
                },
            };
            let model = self.register(folder, new)?;
            Ok((model, report.clone()))
        })
    }

    /// "Find it": links the registered linked model `name` to the file picked again, `file`.
    /// The same model (the same header hash) is linked in place, keeping its name, default and
    /// conversations; another file is refused with [`Error::DifferentFile`] and nothing changes.
    pub fn relink(&self, name: &str, file: &Path) -> Result<InstalledModel> {
        let registry = self.registry();
        let current = registry.read()?;
        let (_, _, entry) = current.find(name).ok_or_else(|| Error::NotInstalled {
            name: name.to_string(),
        })?;
        let name = entry.name.clone();
        let recorded = entry
            .hearth
            .as_ref()
            .and_then(|h| h.linked.clone())
            .ok_or_else(|| Error::NotLinked { name: name.clone() })?;
        let origin = file
            .canonicalize()
            .map_err(|e| Error::io("open", file, e))?;
        // The header alone says whether it is the same model, before anything is written.
        let different = || Error::DifferentFile {
            name: name.clone(),
            file: origin.clone(),
        };
        let measured = q4nx::gguf::GgufLink::measure(&origin).map_err(|_| different())?;
        if measured.header_sha256 != recorded.header_sha256 {
            return Err(different());
        }
        let target = self.models_dir().join(&name);
        self.with_link_folder(&name, &origin, &mut |_| {}, |folder, _, linked| {
            if linked.header_sha256 != recorded.header_sha256 {
                return Err(different());
            }
            let files = folder_records(folder)?;
            let old = folder.with_file_name("old");
            registry.update(|reg| {
                let hearth = reg
                    .models
                    .values_mut()
                    .flat_map(|sizes| sizes.values_mut())
                    .find(|e| e.name == name)
                    .and_then(|e| e.hearth.as_mut().map(|h| (h, &mut e.files, &mut e.size)))
                    .ok_or_else(|| Error::NotInstalled { name: name.clone() })?;
                // The old folder goes aside first and comes back if the new one cannot take
                // its place: the model always has a folder.
                if target.exists() {
                    std::fs::rename(&target, &old)
                        .map_err(|e| Error::io(format!("move {} to", target.display()), &old, e))?;
                }
                if let Err(e) = std::fs::rename(folder, &target) {
                    let _ = std::fs::rename(&old, &target);
                    return Err(Error::io(
                        format!("move {} to", folder.display()),
                        &target,
                        e,
                    ));
                }
                fsutil::sync_dir(&self.models_dir());
                let (fields, names, size) = hearth;
                fields.imported_from = Some(origin.display().to_string());
                fields.linked = Some(linked.clone());
                *names = files.keys().cloned().collect();
                *size = files.values().map(|f| f.size).sum();
                fields.files = files.clone();
                Ok(())
            })?;
            tracing::info!(name = %name, file = %origin.display(), "linked model found again");
            self.get(&name)
        })
    }

    /// Runs `link_gguf` of `file` (canonical) into a hidden work folder of the downloads
    /// folder (held under the name's lock, cleared afterwards whatever happens), and hands
    /// `then` the finished folder, what `q4nx` reported and the facts to record.
    fn with_link_folder<T>(
        &self,
        name: &str,
        file: &Path,
        progress: &mut dyn FnMut(q4nx::ConvertProgress),
        then: impl FnOnce(&Path, &q4nx::gguf::GgufLinkReport, LinkedFile) -> Result<T>,
    ) -> Result<T> {
        self.clear_abandoned_imports();
        let (work, lock_path) = work_paths(&self.downloads_dir(), name);
        fsutil::create_dir_all(&self.downloads_dir())?;
        let lock =
            FileLock::try_exclusive(&lock_path)?.ok_or_else(|| Error::AlreadyDownloading {
                name: name.to_string(),
            })?;
        fsutil::remove_dir_all(&work)?;
        fsutil::create_dir_all(&work)?;
        let folder = work.join("model");
        let result = (|| {
            let report =
                q4nx::gguf::link_gguf(file, &folder, progress).map_err(|e| Error::Gguf {
                    file: file.to_path_buf(),
                    reason: plain_refusal(
                        crate::gguf_import::architecture_of(file).as_deref(),
                        match e {
                            q4nx::Error::Gguf { detail, .. } => detail,
                            other => other.to_string(),
                        },
                    ),
                })?;
            let linked = linked_file(&report);
            then(&folder, &report, linked)
        })();
        if let Err(e) = fsutil::remove_dir_all(&work) {
            tracing::warn!(dir = %work.display(), error = %e, "could not remove the link's work folder");
        }
        lock.remove();
        result
    }
}

/// What the registry records of the linked file: the facts `q4nx` wrote in the link.
fn linked_file(report: &q4nx::gguf::GgufLinkReport) -> LinkedFile {
    LinkedFile {
        path: report.link.path.clone(),
        size: report.link.bytes,
        modified_ns: report.link.modified_ns,
        header_sha256: report.link.header_sha256.clone(),
    }
}

/// Size and sha256 of every file of the small folder `dir` (the files a linked model's folder
/// holds: config, tokenizer, template, link file).
fn folder_records(dir: &Path) -> Result<std::collections::BTreeMap<String, FileRecord>> {
    let mut files = std::collections::BTreeMap::new();
    let mut names = model_dir::file_names(dir)?;
    names.sort();
    for name in names {
        if !model_dir::is_safe_file_name(&name) {
            continue;
        }
        files.insert(
            name.clone(),
            crate::download::sha256_file(&dir.join(&name))?,
        );
    }
    if !files.contains_key(LINK_FILE) {
        return Err(Error::InvalidModel {
            dir: dir.to_path_buf(),
            reason: format!("the link folder has no {LINK_FILE}"),
        });
    }
    Ok(files)
}

/// FastFlowLM's details for a linked GGUF. FastFlowLM does not run it (it has no Q4NX file);
/// the family only fills the schema, and the quantization level says what the file holds.
fn link_details(report: &q4nx::gguf::GgufLinkReport) -> FlmDetails {
    FlmDetails {
        family: report.architecture.clone(),
        think: false,
        think_toggleable: false,
        parameter_size: String::new(),
        quantization_level: "GGUF".into(),
        extra: Default::default(),
    }
}
