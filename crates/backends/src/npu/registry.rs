//! What FastFlowLM reads of Hearth's model registry (`model_list.json`, which Hearth writes in
//! FastFlowLM's own schema and hands it through `FLM_CONFIG_PATH`): the models folder and, per
//! model, its folder name, its `family:size` tag and its engine family; and, of Hearth's own
//! fields, the sha256 of the weights for the receipt. The NPU backend reads the registry through
//! these fields only; `hearth_hub::registry` writes it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// The registry, as FastFlowLM reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct FlmRegistry {
    /// Folder holding one sub-folder per model (absolute when Hearth writes it; a relative one
    /// is taken from the registry's folder).
    pub model_path: String,
    /// `family -> size -> model`, the two halves of a tag `family:size`.
    #[serde(default)]
    pub models: BTreeMap<String, BTreeMap<String, FlmModel>>,
}

/// One model of the registry, as FastFlowLM reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FlmModel {
    /// Folder name under `model_path`; FastFlowLM's kernels for it are in `xclbins/<name>/`.
    pub name: String,
    /// Context length FastFlowLM uses by default.
    #[serde(default)]
    pub default_context_length: Option<u64>,
    /// FastFlowLM's model details.
    pub details: FlmModelDetails,
    /// Whether it is a vision model (FastFlowLM's catalog `vlm`): it reads pictures given as
    /// `image_url` parts. Absent: no.
    #[serde(default)]
    pub vlm: bool,
    /// Hearth's facts about the model; absent on entries written by others.
    #[serde(default)]
    pub hearth: Option<HearthFacts>,
}

/// Of Hearth's facts about a model, the files it verified when installing it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HearthFacts {
    /// The model folder's files by name.
    #[serde(default)]
    pub files: BTreeMap<String, FileFacts>,
}

/// A file Hearth verified.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FileFacts {
    /// Its sha256, hex.
    pub sha256: String,
}

/// The details FastFlowLM picks its engine by.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FlmModelDetails {
    /// Engine family: `qwen3`, `qwen3-it`, `llama`, ...
    pub family: String,
}

impl FlmRegistry {
    /// Reads the registry at `path`; the error says what failed.
    pub fn read(path: &Path) -> Result<FlmRegistry, String> {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    }

    /// The model whose folder name (ignoring case) or `family:size` tag is `query`, with its
    /// tag.
    pub fn find(&self, query: &str) -> Option<(String, &FlmModel)> {
        let tag = query.split_once(':');
        self.models.iter().find_map(|(family, sizes)| {
            sizes.iter().find_map(|(size, model)| {
                let tagged = tag == Some((family.as_str(), size.as_str()));
                (tagged || model.name.eq_ignore_ascii_case(query))
                    .then(|| (format!("{family}:{size}"), model))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registry as Hearth writes it, with fields FastFlowLM reads and fields it does not.
    const REGISTRY: &str = r#"{
        "model_path": "/models",
        "models": {
            "qwen3": {
                "1.7b": {
                    "name": "Qwen3-1.7B-NPU2", "url": "", "size": 1, "files": [],
                    "details": {"family": "qwen3", "think": true},
                    "hearth": {"source": "import", "files": {"model.q4nx": {"size": 1, "sha256": "ab"}}},
                    "label": "x"
                }
            }
        },
        "hearth": {"default": "Qwen3-1.7B-NPU2"}
    }"#;

    #[test]
    fn a_model_is_found_by_folder_name_or_tag() {
        let registry: FlmRegistry = serde_json::from_str(REGISTRY).unwrap();
        assert_eq!(registry.model_path, "/models");
        let (tag, by_name) = registry.find("qwen3-1.7b-npu2").expect("names ignore case");
        assert_eq!(tag, "qwen3:1.7b");
        assert_eq!(by_name.details.family, "qwen3");
        assert_eq!(
            by_name.hearth.as_ref().unwrap().files["model.q4nx"].sha256,
            "ab"
        );
        assert_eq!(registry.find("qwen3:1.7b"), Some((tag, by_name)));
        assert_eq!(registry.find("qwen3:4b"), None);
        assert_eq!(registry.find("Qwen3"), None);
    }
}
