//! What a model folder must hold, which of a repository's files to keep, and the final check
//! (by `q4nx`) that the weights match the config.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How the weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum WeightFormat {
    /// `model.q4nx`: FastFlowLM's tiles, runs on the NPU and on Hearth's CPU engine.
    Q4nx,
    /// Plain safetensors (one file or shards with an index), as models are released.
    Safetensors,
    /// A GGUF file read where it lies: the folder holds `gguf-link.json`, not the weights.
    Gguf,
    /// CTranslate2's `model.bin`: faster-whisper's Whisper conversions (speech models).
    Ct2,
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightFormat::Q4nx => "q4nx",
            WeightFormat::Safetensors => "safetensors",
            WeightFormat::Gguf => "gguf",
            WeightFormat::Ct2 => "ct2",
        })
    }
}

/// Files every model folder needs besides its weights.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "tokenizer_config.json"];

/// Small files kept when present (tokenizer variants, templates, generation defaults).
const OPTIONAL_FILES: [&str; 8] = [
    "generation_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
];

/// The files of a model, chosen from what a repository or folder holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// The weight format found.
    pub format: WeightFormat,
    /// The file names to keep, sorted.
    pub files: Vec<String>,
}

/// Whether `name` is a plain file name Hearth will write (no folders, no hidden files).
pub fn is_safe_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= 200
}

/// Picks the files of a model from the top-level file names of a repository or folder:
/// the required files, `model.q4nx` (preferred) or the safetensors weights, the optional small
/// files, and FastFlowLM's `*.q4nx` / `*.xclbin` companions. `origin` names the repository or
/// folder in the error when something needed is missing.
pub fn select(names: &[String], origin: &str) -> Result<ModelFiles> {
    let has = |wanted: &str| names.iter().any(|n| n == wanted);
    let format = if has("model.q4nx") {
        Some(WeightFormat::Q4nx)
    } else if has("model.safetensors") || has("model.safetensors.index.json") {
        Some(WeightFormat::Safetensors)
    } else {
        None
    };
    let mut missing: Vec<String> = REQUIRED_FILES
        .iter()
        .filter(|f| !has(f))
        .map(|f| f.to_string())
        .collect();
    if format.is_none() {
        missing.push("model.q4nx or model.safetensors".to_string());
    }
    if !missing.is_empty() {
        let mut found = names.to_vec();
        found.sort();
        return Err(Error::MissingFiles {
            repo: origin.to_string(),
            missing,
            found,
        });
    }
    let format = format.expect("checked above");
    let mut files: Vec<String> = names
        .iter()
        .filter(|name| is_safe_file_name(name))
        .filter(|name| {
            let name = name.as_str();
            REQUIRED_FILES.contains(&name)
                || OPTIONAL_FILES.contains(&name)
                || name.ends_with(".xclbin")
                || match format {
                    WeightFormat::Q4nx => name.ends_with(".q4nx"),
                    WeightFormat::Safetensors => {
                        name.ends_with(".safetensors") || name == "model.safetensors.index.json"
                    }
                    WeightFormat::Gguf | WeightFormat::Ct2 => false,
                }
        })
        .cloned()
        .collect();
    files.sort();
    files.dedup();
    Ok(ModelFiles { format, files })
}

/// The names of the files in `dir`, counting a symbolic link to a file as the file (a Hugging
/// Face cache snapshot links each file to its blob).
pub(crate) fn file_names(dir: &Path) -> Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| Error::io("read folder", dir, e))?
        .flatten()
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

/// Most bytes a file of the model may have, by what it is for: the weights are bounded only by
/// the disk (checked before copying), a companion `*.q4nx` by the main weights' size, an NPU
/// kernel by what a kernel binary ever is, and the small JSON and text files by what they hold.
/// `model_bytes` is the size of `model.q4nx`, when the folder has one.
pub fn max_file_size(name: &str, model_bytes: Option<u64>) -> u64 {
    const MIB: u64 = 1 << 20;
    match name {
        "model.q4nx" => u64::MAX,
        n if n.ends_with(".safetensors") => u64::MAX,
        n if n.ends_with(".q4nx") => model_bytes.unwrap_or(u64::MAX),
        // FastFlowLM's kernels (attn, dequant, layer, mm, lm_head) are a few MB each.
        n if n.ends_with(".xclbin") => 64 * MIB,
        // The largest vocabularies (262k tokens) take about 35 MB of tokenizer.json.
        "tokenizer.json" | "tokenizer.model" | "vocab.json" | "merges.txt" => 128 * MIB,
        "model.safetensors.index.json" => 64 * MIB,
        // config.json, tokenizer_config.json, chat templates, generation defaults.
        _ => 16 * MIB,
    }
}

/// A file of a model folder, checked to be the model's own (see [`source_file`]).
#[derive(Debug)]
pub(crate) struct SourceFile {
    /// The file, open for reading.
    pub file: std::fs::File,
    /// Where it really is (links resolved).
    pub real: PathBuf,
    /// Its size in bytes.
    pub len: u64,
    /// Its permission bits.
    pub mode: u32,
    /// Whether `name` in the folder is a symbolic link.
    pub is_link: bool,
}

/// The Hugging Face cache's `blobs/` folder for `dir`, when `dir` (canonical) is a snapshot
/// of a cache repository (`models--<org>--<name>/snapshots/<revision>`), whose files are links
/// into it.
fn snapshot_blobs(dir: &Path) -> Option<PathBuf> {
    let snapshots = dir.parent()?;
    let repo = snapshots.parent()?;
    let is_repo = repo
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("models--"));
    if snapshots.file_name()? != "snapshots" || !is_repo {
        return None;
    }
    repo.join("blobs").canonicalize().ok()
}

/// Opens `name` in the model folder `dir` (canonical) if it is the model's own: a regular file
/// in the folder, or a link whose target (all links resolved) is a regular file inside the
/// folder or, for a Hugging Face cache snapshot, inside that repository's `blobs/`. Links out
/// of the folder (to another file of the user's, `/proc`, a device) and files larger than
/// their use allows ([`max_file_size`]) are refused, naming the file.
pub(crate) fn source_file(dir: &Path, name: &str, model_bytes: Option<u64>) -> Result<SourceFile> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let path = dir.join(name);
    let refuse = |reason: String| Error::InvalidModel {
        dir: dir.to_path_buf(),
        reason,
    };
    let is_link = std::fs::symlink_metadata(&path)
        .map_err(|e| Error::io("read", &path, e))?
        .is_symlink();
    let real = path
        .canonicalize()
        .map_err(|e| Error::io("resolve", &path, e))?;
    if is_link {
        let inside = |root: &Path| real.starts_with(root) && real != root;
        if !(inside(dir) || snapshot_blobs(dir).is_some_and(|blobs| inside(&blobs))) {
            return Err(refuse(format!(
                "{name} is a link to {}, outside the folder; Hearth copies only the folder's \
                 own files. If that file belongs to the model, copy it into the folder",
                real.display()
            )));
        }
    }
    // Opened without following a link: the checked path must still be a plain file.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|e| Error::io("open", &real, e))?;
    let meta = file.metadata().map_err(|e| Error::io("read", &real, e))?;
    if !meta.is_file() {
        return Err(refuse(format!(
            "{name} is not a regular file (a device, pipe or socket); a model's files are \
             plain files"
        )));
    }
    let max = max_file_size(name, model_bytes);
    if meta.len() > max {
        return Err(refuse(format!(
            "{name} is {} bytes, more than the {max} a file of its kind may be",
            meta.len()
        )));
    }
    Ok(SourceFile {
        file,
        real,
        len: meta.len(),
        mode: meta.mode() & 0o7777,
        is_link,
    })
}

/// The names of every entry of `dir` that is not a folder: files, links (also broken ones),
/// pipes and devices. An import picks the model's files from these, so that one that is not a
/// plain file is refused by name rather than left out unnoticed.
pub(crate) fn entry_names(dir: &Path) -> Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)
        .map_err(|e| Error::io("read folder", dir, e))?
        .flatten()
        .filter(|e| !std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

/// What the final check learned about a model folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedModel {
    /// The weight format.
    pub format: WeightFormat,
    /// Architecture family from config.json: "llama" or "qwen3".
    pub family: String,
    /// `max_position_embeddings` from config.json.
    pub max_context: u64,
    /// `vocab_size` from config.json.
    pub vocab_size: u64,
}

/// Checks a complete model folder: the needed files are there and `q4nx` finds every tensor
/// the config implies with the right dtype, shape and tile count.
pub fn validate(dir: &Path) -> Result<ValidatedModel> {
    let names = file_names(dir)?;
    let selected = select(&names, &dir.display().to_string())?;
    let config = q4nx::validate_dir(dir).map_err(|e| Error::InvalidModel {
        dir: dir.to_path_buf(),
        reason: e.to_string(),
    })?;
    let family = config.family.name();
    Ok(ValidatedModel {
        format: selected.format,
        family: family.to_string(),
        max_context: config.max_position_embeddings as u64,
        vocab_size: config.vocab_size as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn q4nx_repo_keeps_model_files_and_drops_docs_and_other_formats() {
        let picked = select(
            &names(&[
                "README.md",
                ".gitattributes",
                "config.json",
                "model.q4nx",
                "model.safetensors",
                "tokenizer.json",
                "tokenizer_config.json",
                "attn.xclbin",
                "model.gguf",
            ]),
            "a/b",
        )
        .unwrap();
        assert_eq!(picked.format, WeightFormat::Q4nx);
        assert_eq!(
            picked.files,
            names(&[
                "attn.xclbin",
                "config.json",
                "model.q4nx",
                "tokenizer.json",
                "tokenizer_config.json"
            ])
        );
    }

    #[test]
    fn sharded_safetensors_repo_keeps_index_and_shards() {
        let picked = select(
            &names(&[
                "config.json",
                "tokenizer.json",
                "tokenizer_config.json",
                "generation_config.json",
                "model.safetensors.index.json",
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors",
                "pytorch_model.bin",
            ]),
            "a/b",
        )
        .unwrap();
        assert_eq!(picked.format, WeightFormat::Safetensors);
        assert_eq!(picked.files.len(), 7);
        assert!(!picked.files.contains(&"pytorch_model.bin".to_string()));
    }

    #[test]
    fn repo_without_weights_or_tokenizer_names_what_is_missing() {
        let err = select(&names(&["README.md", "config.json"]), "someone/gguf-only").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("someone/gguf-only"), "{text}");
        assert!(text.contains("tokenizer.json"), "{text}");
        assert!(text.contains("model.q4nx or model.safetensors"), "{text}");
        assert!(text.contains("README.md"), "lists what is there: {text}");
    }

    #[test]
    fn each_kind_of_file_has_a_size_bound_by_its_use() {
        assert_eq!(
            max_file_size("model.q4nx", Some(10)),
            u64::MAX,
            "weights: the disk"
        );
        assert_eq!(
            max_file_size("model-00001-of-00002.safetensors", None),
            u64::MAX
        );
        assert_eq!(
            max_file_size("vision.q4nx", Some(10)),
            10,
            "a companion: the model's"
        );
        assert_eq!(max_file_size("attn.xclbin", None), 64 << 20);
        assert_eq!(max_file_size("tokenizer.json", None), 128 << 20);
        assert_eq!(max_file_size("config.json", None), 16 << 20);
    }

    #[test]
    fn unsafe_names_are_refused() {
        for bad in ["", ".hidden", "../x", "a/b", "a\\b"] {
            assert!(!is_safe_file_name(bad), "{bad:?}");
        }
        assert!(is_safe_file_name("model.q4nx"));
    }
}
