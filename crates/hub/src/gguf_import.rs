//! Importing a GGUF file: `q4nx` converts it into a Q4NX folder in Hearth's downloads area, and
//! the ordinary folder import moves that folder into the store and registers it. The GGUF file
//! itself is only read.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::store::{ImportOptions, InstalledModel, Store};
use crate::{fsutil, names};

/// Options of [`Store::import_gguf`].
#[derive(Debug, Clone, Default)]
pub struct GgufImportOptions {
    /// Name to register under. By default, the file's name without `.gguf`.
    pub name: Option<String>,
    /// Threads for the conversion. By default, every core.
    pub threads: Option<usize>,
}

/// The default model name of a GGUF file: its stem, with characters a name cannot hold
/// replaced by `-`.
pub fn name_from_file(file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    clean_name(&stem)
}

/// `text` with every character a model name cannot hold replaced by `-`, and without leading
/// dots and dashes.
pub(crate) fn clean_name(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.trim_start_matches(['.', '-']).to_string()
}

/// Whether `path` is a file that starts with GGUF's magic (false when it cannot be read; see
/// [`gguf_magic`] to tell the two apart).
pub fn is_gguf_file(path: &Path) -> bool {
    gguf_magic(path).unwrap_or(false)
}

/// Whether `path` is a regular file that starts with GGUF's magic, or why it cannot be read
/// (so that an unreadable GGUF file is reported as unreadable, not as "not a GGUF file").
pub fn gguf_magic(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    if !std::fs::metadata(path)?.is_file() {
        return Ok(false);
    }
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path)?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == q4nx::gguf::MAGIC),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// The hidden work folder of the GGUF import of `name`, and its lock file, in `downloads`.
fn work_paths(downloads: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        downloads.join(format!("{CONVERSION_PREFIX}{name}")),
        downloads.join(format!("{CONVERSION_PREFIX}{name}.lock")),
    )
}

/// What the hidden work folders of GGUF imports start with.
const CONVERSION_PREFIX: &str = ".gguf-";

impl Store {
    /// Deletes what killed GGUF imports left in the downloads folder (their hidden work
    /// folders, up to a whole converted model, and lock files), except the work of an import
    /// that is running now (its lock is held). Returns the bytes freed. Runs at the start of
    /// every import; the app may call it at start-up.
    pub fn clear_abandoned_imports(&self) -> u64 {
        let downloads = self.downloads_dir();
        let Ok(entries) = std::fs::read_dir(&downloads) else {
            return 0;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let file = e.file_name().to_string_lossy().into_owned();
                let rest = file.strip_prefix(CONVERSION_PREFIX)?;
                Some(rest.strip_suffix(".lock").unwrap_or(rest).to_string())
            })
            .filter(|name| names::check_name(name).is_ok())
            .collect();
        names.sort();
        names.dedup();
        let mut freed = 0;
        for name in names {
            let (work, lock_path) = work_paths(&downloads, &name);
            match fsutil::FileLock::try_exclusive(&lock_path) {
                Ok(Some(lock)) => {
                    let bytes = fsutil::dir_size(&work);
                    match fsutil::remove_dir_all(&work) {
                        Ok(()) => freed += bytes,
                        Err(e) => tracing::warn!(error = %e, "abandoned GGUF import kept"),
                    }
                    lock.remove();
                }
                Ok(None) => {} // running now
                Err(e) => tracing::debug!(error = %e, "abandoned GGUF import not checked"),
            }
        }
        if freed > 0 {
            tracing::info!(freed, "removed what killed GGUF imports left behind");
        }
        freed
    }

    /// Converts the GGUF `file` to Q4NX and registers it. `progress` sees the conversion;
    /// returns the installed model and what the conversion did.
    pub fn import_gguf(
        &self,
        file: &Path,
        options: &GgufImportOptions,
        progress: &mut dyn FnMut(q4nx::ConvertProgress),
    ) -> Result<(InstalledModel, q4nx::gguf::GgufImportReport)> {
        let name = options.name.clone().unwrap_or_else(|| name_from_file(file));
        names::check_name(&name)?;
        if self.registry().read()?.find(&name).is_some() {
            return Err(Error::NameTaken { name });
        }
        let origin = file
            .canonicalize()
            .map_err(|e| Error::io("open", file, e))?;
        self.clear_abandoned_imports();
        // Hidden, Hearth's own, and beside the staging folder of the folder import.
        let (work, lock_path) = work_paths(&self.downloads_dir(), &name);
        fsutil::create_dir_all(&self.downloads_dir())?;
        // Held until the end: a second import under the same name waits its turn elsewhere.
        let lock = fsutil::FileLock::try_exclusive(&lock_path)?
            .ok_or_else(|| Error::AlreadyDownloading { name: name.clone() })?;
        fsutil::remove_dir_all(&work)?;
        fsutil::create_dir_all(&work)?;
        let converted: PathBuf = work.join("model");
        let result = (|| {
            let report = q4nx::gguf::import_gguf(file, &converted, options.threads, progress)
                .map_err(|e| Error::Gguf {
                    file: origin.clone(),
                    reason: match e {
                        q4nx::Error::Gguf { detail, .. } => detail,
                        other => other.to_string(),
                    },
                })?;
            let import = ImportOptions {
                name: Some(name.clone()),
                move_files: true,
            };
            let model = self.import_from(&converted, &import, &origin)?;
            Ok((model, report))
        })();
        if let Err(e) = fsutil::remove_dir_all(&work) {
            tracing::warn!(dir = %work.display(), error = %e, "could not remove the conversion folder");
        }
        lock.remove();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_file_stem() {
        assert_eq!(
            name_from_file(Path::new("/x/SmolLM2-135M-Instruct.Q4_1.gguf")),
            "SmolLM2-135M-Instruct.Q4_1"
        );
        assert_eq!(
            name_from_file(Path::new("my model (1).gguf")),
            "my-model--1-"
        );
        assert_eq!(name_from_file(Path::new(".hidden.gguf")), "hidden");
    }
}
