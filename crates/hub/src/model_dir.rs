//! What a model folder must hold, which of a repository's files to keep, and the final check
//! (by `q4nx`) that the weights match the config.

use std::path::Path;

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
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightFormat::Q4nx => "q4nx",
            WeightFormat::Safetensors => "safetensors",
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
    let family = match config.family {
        q4nx::Family::Llama => "llama",
        q4nx::Family::Qwen3 => "qwen3",
    };
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
    fn unsafe_names_are_refused() {
        for bad in ["", ".hidden", "../x", "a/b", "a\\b"] {
            assert!(!is_safe_file_name(bad), "{bad:?}");
        }
        assert!(is_safe_file_name("model.q4nx"));
    }
}
