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
pub(crate) fn work_paths(downloads: &Path, name: &str) -> (PathBuf, PathBuf) {
    (
        downloads.join(format!("{CONVERSION_PREFIX}{name}")),
        downloads.join(format!("{CONVERSION_PREFIX}{name}.lock")),
    )
}

/// What the hidden work folders of GGUF imports start with.
const CONVERSION_PREFIX: &str = ".gguf-";

/// The families people know by name behind GGUF architectures Hearth does not run (llama.cpp's
/// `general.architecture` names), so a refusal says "Phi-3.5-MoE models", not "phimoe". Whether a file
/// runs is decided by `q4nx::gguf::check_header` alone; this only names what it refused (a test
/// checks that every architecture here is still refused).
const UNSUPPORTED_FAMILIES: [(&str, &str); 20] = [
    ("phi2", "Phi-2"),
    ("phimoe", "Phi-3.5-MoE"),
    ("gemma", "Gemma (the first)"),
    ("gemma2", "Gemma 2"),
    ("gemma3n", "Gemma 3n"),
    ("gpt-oss", "gpt-oss"),
    ("deepseek2", "DeepSeek-V2, V3 and R1 (the full model)"),
    ("qwen2moe", "Qwen1.5-MoE and Qwen2-MoE"),
    ("qwen3moe", "Qwen3 mixture-of-experts (30B-A3B, 235B-A22B)"),
    ("qwen2vl", "Qwen2-VL"),
    ("granite", "Granite"),
    ("olmo2", "OLMo 2"),
    ("command-r", "Command R"),
    ("cohere2", "Command R7B and Command A"),
    ("starcoder2", "StarCoder2"),
    ("falcon", "Falcon"),
    ("mamba", "Mamba"),
    ("glm4", "GLM-4"),
    ("smollm3", "SmolLM3"),
    ("bert", "BERT embedding"),
];

/// `reason`, why `q4nx` refused a GGUF file of `architecture`, led by the family's plain name
/// when the architecture is one of [`UNSUPPORTED_FAMILIES`].
pub(crate) fn plain_refusal(architecture: Option<&str>, reason: String) -> String {
    let family = UNSUPPORTED_FAMILIES
        .iter()
        .find(|(arch, _)| Some(*arch) == architecture);
    match family {
        Some((_, family)) => format!("{family} models are not supported yet ({reason})"),
        None => reason,
    }
}

/// The `general.architecture` of GGUF `file`, if its header says one.
pub(crate) fn architecture_of(file: &Path) -> Option<String> {
    let gguf = q4nx::gguf::GgufFile::open(file).ok()?;
    let arch = gguf.header().get("general.architecture")?.as_str()?;
    Some(arch.to_string())
}

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
                    reason: plain_refusal(
                        architecture_of(file).as_deref(),
                        match e {
                            q4nx::Error::Gguf { detail, .. } => detail,
                            other => other.to_string(),
                        },
                    ),
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

    #[test]
    fn every_family_named_unsupported_is_refused_by_the_importer() {
        for (arch, family) in UNSUPPORTED_FAMILIES {
            let bytes = q4nx::gguf::write::tiny_model(arch).finish();
            let header = q4nx::gguf::parse(&bytes, Path::new("t.gguf")).unwrap();
            assert!(
                q4nx::gguf::check_header(&header, Path::new("t.gguf")).is_err(),
                "{arch} imports now: take {family} out of UNSUPPORTED_FAMILIES"
            );
        }
    }

    #[test]
    fn a_refused_family_is_named_in_plain_words() {
        let said = plain_refusal(Some("phimoe"), "architecture \"phimoe\" is not one".into());
        assert!(
            said.starts_with("Phi-3.5-MoE models are not supported yet ("),
            "{said}"
        );
        assert_eq!(
            plain_refusal(Some("llama"), "cut short".into()),
            "cut short"
        );
        assert_eq!(plain_refusal(None, "not GGUF".into()), "not GGUF");
    }

    #[test]
    fn importing_a_refused_family_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("phi.gguf");
        std::fs::write(&file, q4nx::gguf::write::tiny_model("phimoe").finish()).unwrap();
        let store = Store::at(dir.path().join("store"));
        let err = store
            .import_gguf(&file, &GgufImportOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Phi-3.5-MoE models are not supported yet"),
            "{err}"
        );
    }
}
