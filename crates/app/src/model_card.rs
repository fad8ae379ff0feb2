//! What a listing says of a local model without loading it: its family, weights format,
//! trained context, size, when its weights were written, its chat template's source. Read from
//! the model folder's `config.json` and files; anything unreadable is left out, never an error,
//! since a listing must not fail on one odd folder (opening the model says what is wrong).

use std::path::Path;
use std::time::SystemTime;

use crate::models::{LocalModel, WEIGHTS_FILES};

/// A local model as a listing describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCard {
    /// The name requests and the model list use.
    pub name: String,
    /// Architecture (`config.json`'s `model_type`, e.g. `qwen3`), when known.
    pub family: Option<String>,
    /// `q4nx` or `safetensors` (empty when the folder has neither).
    pub format: String,
    /// Positions the model was trained for (`max_position_embeddings`), when known.
    pub trained_context: Option<usize>,
    /// Bytes of its folder's files.
    pub size_bytes: u64,
    /// sha256 of the weights, when the registry recorded it.
    pub sha256: Option<String>,
    /// When its weights were last written, when known.
    pub modified: Option<SystemTime>,
    /// The chat template's source, when the folder has one.
    pub template: Option<String>,
}

impl ModelCard {
    /// Reads `model`'s folder.
    pub fn read(model: &LocalModel) -> Self {
        let dir = &model.path;
        let config = read_json(&dir.join("config.json"));
        let family = config
            .as_ref()
            .and_then(|c| c.get("model_type")?.as_str())
            .map(str::to_owned);
        let trained_context = config
            .as_ref()
            .and_then(|c| c.get("max_position_embeddings")?.as_u64())
            .and_then(|n| usize::try_from(n).ok());
        let weights = WEIGHTS_FILES
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file());
        let format = weights
            .as_ref()
            .and_then(|p| p.extension())
            .map_or_else(String::new, |e| e.to_string_lossy().into_owned());
        let modified = weights
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok()?.modified().ok());
        ModelCard {
            name: model.name.clone(),
            family,
            format,
            trained_context,
            size_bytes: hearth_hub::dir_size(dir),
            sha256: model.sha256.clone(),
            modified,
            template: template_source(dir),
        }
    }
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The chat template's source where the engine reads it (`hearth_backends::template_source`).
fn template_source(dir: &Path) -> Option<String> {
    let tokenizer_config = read_json(&dir.join("tokenizer_config.json"));
    let found = hearth_backends::template_source(dir, tokenizer_config.as_ref()).ok()?;
    found.map(|(text, _)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(dir: &Path) -> LocalModel {
        LocalModel {
            name: "m".into(),
            path: dir.to_path_buf(),
            builtin: None,
            is_default: false,
            sha256: Some("abc".into()),
            backends: Vec::new(),
            selftest: None,
        }
    }

    #[test]
    fn a_card_reads_the_config_the_weights_and_the_template() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.json"),
            r#"{"model_type": "qwen3", "max_position_embeddings": 40960}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("model.q4nx"), [0u8; 10]).unwrap();
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"chat_template": [{"name": "tool_use", "template": "t"},
                                  {"name": "default", "template": "d"}]}"#,
        )
        .unwrap();
        let card = ModelCard::read(&model(dir.path()));
        assert_eq!(card.family.as_deref(), Some("qwen3"));
        assert_eq!(card.trained_context, Some(40960));
        assert_eq!(card.format, "q4nx");
        assert_eq!(card.template.as_deref(), Some("d"));
        assert_eq!(card.sha256.as_deref(), Some("abc"));
        assert!(card.size_bytes >= 10 && card.modified.is_some());
    }

    #[test]
    fn an_odd_folder_gives_a_card_with_nothing_known() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{not json").unwrap();
        std::fs::write(dir.path().join("chat_template.jinja"), "j").unwrap();
        let card = ModelCard::read(&model(dir.path()));
        assert_eq!((card.family, card.trained_context), (None, None));
        assert_eq!(card.format, "");
        assert_eq!(card.template.as_deref(), Some("j"));
    }
}
