//! `model_list.json`: the registry of installed models, in FastFlowLM's schema so that
//! `FLM_CONFIG_PATH=<it> flm serve <tag>` finds the same models. Hearth's own facts about each
//! model (source, revision, sha256 per file, backends) sit beside FastFlowLM's fields under the
//! key `hearth`, which FastFlowLM ignores. Unknown fields are kept as they are.
//!
//! Every change is a read-modify-write under an exclusive `flock` on `model_list.json.lock`,
//! and the new file replaces the old by rename, so readers never see half a file and two
//! writers never lose each other's entries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::Backend;
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::model_dir::WeightFormat;
use crate::names::split_tag;

/// File name of the registry inside Hearth's data folder.
pub const FILE_NAME: &str = "model_list.json";

/// The whole registry file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistryFile {
    /// Folder holding one sub-folder per model (absolute, so FastFlowLM needs no other setting).
    pub model_path: String,
    /// `family -> size -> entry`, the two halves of a FastFlowLM tag `family:size`.
    #[serde(default)]
    pub models: BTreeMap<String, BTreeMap<String, FlmEntry>>,
    /// Hearth's settings that concern all models.
    #[serde(default, skip_serializing_if = "HearthSettings::is_empty")]
    pub hearth: HearthSettings,
    /// Anything else found in the file, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Registry-wide settings of Hearth.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HearthSettings {
    /// Name of the model the app and CLI use when none is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Whether a GGUF file added to Hearth is copied into its folder (converted) instead of
    /// linked where it lies: for files on removable disks. Off by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub copy_models: bool,
}

impl HearthSettings {
    fn is_empty(&self) -> bool {
        self.default.is_none() && !self.copy_models
    }
}

/// One model as FastFlowLM describes it, plus Hearth's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlmEntry {
    /// Folder name under `model_path` (FastFlowLM also looks for `xclbins/<name>/`).
    pub name: String,
    /// Where the files came from (`<endpoint>/<repo>/resolve/<commit>`), empty for imports.
    #[serde(default)]
    pub url: String,
    /// Total size of the files in bytes.
    #[serde(default)]
    pub size: u64,
    /// Oldest FastFlowLM that can run it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flm_min_version: Option<String>,
    /// The files of the model folder.
    #[serde(default)]
    pub files: Vec<String>,
    /// Context length FastFlowLM uses by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_context_length: Option<u64>,
    /// FastFlowLM's vision mark: `true` for a model it reads pictures with (`image_url` parts).
    /// Kept as found (absent, `true` or `false`), so a file FastFlowLM wrote round-trips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlm: Option<bool>,
    /// FastFlowLM's model details (its `family` picks the engine).
    pub details: FlmDetails,
    /// Hearth's facts about the model; absent on entries written by others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hearth: Option<HearthFields>,
    /// Other fields (`label`, `footprint`, `modified_at`, ...), kept unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// FastFlowLM's `details` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlmDetails {
    /// Engine family: `qwen3`, `qwen3-it`, `llama`, ...
    pub family: String,
    /// Whether the model reasons in `<think>` blocks.
    #[serde(default)]
    pub think: bool,
    /// Whether reasoning can be switched off.
    #[serde(default)]
    pub think_toggleable: bool,
    /// "1.7B".
    #[serde(default)]
    pub parameter_size: String,
    /// "Q4_1".
    #[serde(default)]
    pub quantization_level: String,
    /// Other fields, kept unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Hearth's own facts about an installed model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HearthFields {
    /// "huggingface", "import" or "link" (a GGUF file read where it lies).
    pub source: String,
    /// `owner/name` on the Hub, for downloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The commit the files came from, for downloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The folder the files were imported from, for imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
    /// The catalog id, when it came from the catalog.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_id: Option<String>,
    /// Weight format.
    pub format: WeightFormat,
    /// Architecture family from config.json ("llama", "qwen3").
    pub architecture: String,
    /// Where it can run.
    pub backends: Vec<Backend>,
    /// Size and sha256 of every file, as verified when installed.
    pub files: BTreeMap<String, FileRecord>,
    /// Seconds since the Unix epoch when it was registered.
    pub installed_at: u64,
    /// For a GGUF file read where it lies (not copied): the file, as it was when added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked: Option<LinkedFile>,
}

/// The GGUF file a linked model reads, as it was when it was added (the same facts its folder's
/// `gguf-link.json` holds for the engine): a file whose size or modification time differs is
/// "moved or changed" and is not opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedFile {
    /// The file's absolute path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Its modification time, nanoseconds since the Unix epoch (negative before 1970).
    pub modified_ns: i64,
    /// Lowercase hex SHA-256 of its header (everything before the tensor data): the same model
    /// found elsewhere has the same one.
    pub header_sha256: String,
}

/// Size and checksum of one installed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FileRecord {
    /// Bytes.
    pub size: u64,
    /// Lowercase hex sha256 of the content.
    pub sha256: String,
}

impl FlmEntry {
    /// Whether FastFlowLM reads pictures with this model (its `vlm` mark is `true`).
    pub fn sees_pictures(&self) -> bool {
        self.vlm == Some(true)
    }
}

impl RegistryFile {
    /// Every entry with its tag halves.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &FlmEntry)> {
        self.models.iter().flat_map(|(family, sizes)| {
            sizes
                .iter()
                .map(move |(size, entry)| (family.as_str(), size.as_str(), entry))
        })
    }

    /// The entry whose folder name or tag is `query` (names compare ignoring case).
    pub fn find(&self, query: &str) -> Option<(&str, &str, &FlmEntry)> {
        let tag = split_tag(query);
        self.entries().find(|(family, size, entry)| {
            entry.name.eq_ignore_ascii_case(query) || tag == Some((family, size))
        })
    }

    /// Removes the entry called `name` (or tagged so); returns it with its tag halves.
    pub fn remove(&mut self, query: &str) -> Option<(String, String, FlmEntry)> {
        let (family, size) = {
            let (f, s, _) = self.find(query)?;
            (f.to_string(), s.to_string())
        };
        let sizes = self.models.get_mut(&family)?;
        let entry = sizes.remove(&size)?;
        if sizes.is_empty() {
            self.models.remove(&family);
        }
        if self
            .hearth
            .default
            .as_deref()
            .is_some_and(|d| d.eq_ignore_ascii_case(&entry.name))
        {
            self.hearth.default = None;
        }
        Some((family, size, entry))
    }

    /// A free `family:size` pair for a new model: `wanted` if unused, else `size-2`, `size-3`...
    pub fn free_tag(&self, family: &str, size: &str) -> (String, String) {
        let taken = |s: &str| self.models.get(family).is_some_and(|m| m.contains_key(s));
        if !taken(size) {
            return (family.to_string(), size.to_string());
        }
        (2..)
            .map(|n| format!("{size}-{n}"))
            .find(|s| !taken(s))
            .map(|s| (family.to_string(), s))
            .expect("an unused suffix exists")
    }
}

/// Largest registry read: FastFlowLM's own list of 37 models is about 20 KB, and the file is
/// shared with other tools, so it is read with a bound.
const MAX_REGISTRY_BYTES: u64 = 16 << 20;

/// The bytes of `path`, or None if it holds more than `max`.
fn read_capped(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// The registry file of one data folder.
#[derive(Debug, Clone)]
pub struct Registry {
    path: PathBuf,
    models_dir: PathBuf,
}

impl Registry {
    /// The registry at `path`, describing models kept in `models_dir`.
    pub fn new(path: PathBuf, models_dir: PathBuf) -> Registry {
        Registry { path, models_dir }
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the registry (an empty one if the file does not exist yet). No lock is needed:
    /// writers replace the file by rename.
    pub fn read(&self) -> Result<RegistryFile> {
        match read_capped(&self.path, MAX_REGISTRY_BYTES) {
            Ok(Some(bytes)) => serde_json::from_slice(&bytes).map_err(|e| Error::Registry {
                path: self.path.clone(),
                detail: e.to_string(),
            }),
            Ok(None) => Err(Error::Registry {
                path: self.path.clone(),
                detail: format!(
                    "it is larger than {} MiB, which a list of models never is",
                    MAX_REGISTRY_BYTES >> 20
                ),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RegistryFile {
                model_path: self.models_dir.display().to_string(),
                ..RegistryFile::default()
            }),
            Err(e) => Err(Error::io("read", &self.path, e)),
        }
    }

    /// Runs `change` on the current registry under the lock and writes the result if `change`
    /// succeeds. Holding the lock across read and write is what keeps concurrent writers from
    /// losing entries.
    pub fn update<T>(&self, change: impl FnOnce(&mut RegistryFile) -> Result<T>) -> Result<T> {
        if let Some(dir) = self.path.parent() {
            fsutil::create_dir_all(dir)?;
        }
        let _lock = FileLock::exclusive(&self.lock_path())?;
        let mut file = self.read()?;
        let out = change(&mut file)?;
        file.model_path = self.models_dir.display().to_string();
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| Error::Registry {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        text.push('\n');
        fsutil::write_atomic(&self.path, text.as_bytes())?;
        Ok(out)
    }

    /// Holds the registry lock while `work` runs, without reading or writing the file: used to
    /// move a model folder into place and register it as one step.
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLM_SAMPLE: &str = r#"{ "model_path": "models",
      "models": {
        "qwen3": {
          "1.7b": {
            "name": "Qwen3-1.7B-NPU2",
            "url": "https://example.invalid/FastFlowLM/Qwen3-1.7B-NPU2/resolve/abc",
            "size": 1700000000,
            "flm_min_version": "0.9.22",
            "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
            "default_context_length": 32768,
            "details": { "family": "qwen3", "think": true, "think_toggleable": true,
                         "parameter_size": "1.7B", "quantization_level": "Q4_1" },
            "label": ["reasoning"],
            "footprint": 1.6 } } } }"#;

    #[test]
    fn fastflowlm_file_round_trips_without_losing_fields() {
        let parsed: RegistryFile = serde_json::from_str(FLM_SAMPLE).unwrap();
        let (family, size, entry) = parsed.find("qwen3:1.7b").unwrap();
        assert_eq!((family, size), ("qwen3", "1.7b"));
        assert_eq!(entry.details.family, "qwen3");
        assert_eq!(entry.extra["footprint"], serde_json::json!(1.6));
        let written = serde_json::to_value(&parsed).unwrap();
        let original: Value = serde_json::from_str(FLM_SAMPLE).unwrap();
        assert_eq!(written, original, "no field added, dropped or changed");
    }

    #[test]
    fn the_vlm_mark_is_read_and_written_back_as_found() {
        let mut file: Value = serde_json::from_str(FLM_SAMPLE).unwrap();
        let parse = |file: &Value| serde_json::from_value::<RegistryFile>(file.clone());
        let sees = |parsed: &RegistryFile| parsed.find("qwen3:1.7b").unwrap().2.sees_pictures();
        assert!(!sees(&parse(&file).unwrap()), "absent: text only");
        for (mark, seeing) in [(true, true), (false, false)] {
            file["models"]["qwen3"]["1.7b"]["vlm"] = Value::Bool(mark);
            let parsed = parse(&file).unwrap();
            assert_eq!(sees(&parsed), seeing);
            assert_eq!(
                serde_json::to_value(&parsed).unwrap(),
                file,
                "kept as found"
            );
        }
        file["models"]["qwen3"]["1.7b"]["vlm"] = Value::String("yes".into());
        let err = parse(&file).unwrap_err().to_string();
        assert!(err.contains("expected a boolean"), "{err}");
    }

    #[test]
    fn find_by_name_ignores_case_and_remove_clears_default() {
        let mut parsed: RegistryFile = serde_json::from_str(FLM_SAMPLE).unwrap();
        parsed.hearth.default = Some("Qwen3-1.7B-NPU2".into());
        assert!(parsed.find("qwen3-1.7b-npu2").is_some());
        let (_, _, removed) = parsed.remove("QWEN3-1.7B-NPU2").unwrap();
        assert_eq!(removed.name, "Qwen3-1.7B-NPU2");
        assert!(parsed.models.is_empty(), "empty family is dropped");
        assert_eq!(parsed.hearth.default, None);
    }

    #[test]
    fn free_tag_adds_a_suffix_when_taken() {
        let parsed: RegistryFile = serde_json::from_str(FLM_SAMPLE).unwrap();
        assert_eq!(
            parsed.free_tag("qwen3", "4b"),
            ("qwen3".into(), "4b".into())
        );
        assert_eq!(
            parsed.free_tag("qwen3", "1.7b"),
            ("qwen3".into(), "1.7b-2".into())
        );
    }

    #[test]
    fn unreadable_registry_says_which_file() {
        let dir = std::env::temp_dir().join(format!("hearth-hub-reg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, "{ not json").unwrap();
        let err = Registry::new(path.clone(), dir.join("models"))
            .read()
            .unwrap_err();
        assert!(err.to_string().contains(FILE_NAME), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
