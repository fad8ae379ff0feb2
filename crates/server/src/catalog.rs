//! The models a server can answer with: either one backend opened before the server started (the
//! NPU, a remote server, or the model named with `hearth serve --model`), or the installed model
//! folders, loaded on Hearth's engine when a request names one ([`LocalModels`]).
//!
//! What a listing says of a model (family, trained context, size) is read from its folder's
//! `config.json` and files, without loading it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hearth_backends::CpuBackend;
use hearth_chat::{Backend, BackendInfo, BackendKind};
use hearth_engine::LoadOptions;

use crate::error::AppError;

/// An installed model folder the server may load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModel {
    /// The name requests use (the registry's name, or the folder's).
    pub name: String,
    /// The model folder (config.json, weights, tokenizer.json, chat template).
    pub dir: PathBuf,
    /// sha256 of the weights, when the registry has it (shown as the model's digest).
    pub sha256: Option<String>,
}

/// Installed model folders, each loaded on Hearth's CPU engine when a request names it.
#[derive(Debug, Clone)]
pub struct LocalModels {
    models: Vec<LocalModel>,
    load: LoadOptions,
}

impl LocalModels {
    /// Serves `models`, loading each with `load` (its `context_length` is the context a model
    /// gets unless a request asks for more with `num_ctx`).
    pub fn new(models: Vec<LocalModel>, load: LoadOptions) -> Self {
        LocalModels { models, load }
    }

    /// The models, in the order given.
    pub fn models(&self) -> &[LocalModel] {
        &self.models
    }

    /// The model a request names: its exact name (any case), or the name with Ollama's default
    /// tag `:latest`.
    pub(crate) fn find(&self, requested: &str) -> Option<&LocalModel> {
        let wanted = requested.strip_suffix(":latest").unwrap_or(requested);
        self.models
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(wanted))
    }

    /// Loads `model` with room for `context` positions (None: the server's default).
    pub(crate) fn open(
        &self,
        model: &LocalModel,
        context: Option<usize>,
    ) -> Result<Box<dyn Backend>, AppError> {
        let options = LoadOptions {
            context_length: context.or(self.load.context_length),
            ..self.load.clone()
        };
        let failed = |message: String| AppError::LoadFailed {
            model: model.name.clone(),
            message,
        };
        let backend = CpuBackend::open(&model.dir, &model.name, &options, model.sha256.clone())
            .map_err(|e| failed(e.to_string()))?;
        backend.require_chat().map_err(|e| failed(e.to_string()))?;
        Ok(Box::new(backend))
    }
}

/// What a listing says of one model, loaded or not.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelEntry {
    /// The name requests use.
    pub name: String,
    /// Architecture (`config.json`'s `model_type`, e.g. `qwen3`), when known.
    pub family: Option<String>,
    /// `q4nx`, `safetensors`, or the backend's kind for models Hearth does not hold.
    pub format: String,
    /// Positions the model was trained for (`max_position_embeddings`), when known.
    pub trained_context: Option<usize>,
    /// Bytes of its folder's files (0 when not local).
    pub size_bytes: u64,
    /// sha256 of the weights, when known.
    pub digest: Option<String>,
    /// When its weights were last written, when known.
    pub modified: Option<SystemTime>,
    /// Where it runs.
    pub kind: BackendKind,
    /// The chat template's source, when the folder has one.
    pub template: Option<String>,
}

impl ModelEntry {
    /// A local model's entry, read from its folder.
    pub fn of_folder(model: &LocalModel) -> Self {
        let config = read_json(&model.dir.join("config.json"));
        let family = config
            .as_ref()
            .and_then(|c| c.get("model_type"))
            .and_then(|t| t.as_str())
            .map(str::to_owned);
        let trained_context = config
            .as_ref()
            .and_then(|c| c.get("max_position_embeddings"))
            .and_then(|n| n.as_u64())
            .and_then(|n| usize::try_from(n).ok());
        let weights = ["model.q4nx", "model.safetensors"]
            .iter()
            .map(|f| model.dir.join(f))
            .find(|p| p.is_file());
        let format = weights
            .as_ref()
            .and_then(|p| p.extension())
            .map_or_else(String::new, |e| e.to_string_lossy().into_owned());
        let modified = weights
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok());
        ModelEntry {
            name: model.name.clone(),
            family,
            format,
            trained_context,
            size_bytes: folder_size(&model.dir),
            digest: model.sha256.clone(),
            modified,
            kind: BackendKind::Cpu,
            template: template_source(&model.dir),
        }
    }

    /// The entry of a backend opened before the server started (nothing read from disk).
    pub fn of_backend(info: &BackendInfo) -> Self {
        ModelEntry {
            name: info.model.clone(),
            family: None,
            format: info.kind.as_str().to_owned(),
            trained_context: info.context_length,
            size_bytes: 0,
            digest: info.model_sha256.clone(),
            modified: None,
            kind: info.kind,
            template: None,
        }
    }

    /// The `details` object Ollama gives each model.
    pub fn ollama_details(&self) -> serde_json::Value {
        let family = self.family.clone().unwrap_or_default();
        let families: Vec<&str> = self.family.iter().map(String::as_str).collect();
        serde_json::json!({
            "parent_model": "",
            "format": self.format,
            "family": family,
            "families": families,
            "parameter_size": "",
            "quantization_level": quantization(&self.format),
        })
    }
}

/// How the weights are stored, in Ollama's words for `quantization_level`.
fn quantization(format: &str) -> &'static str {
    match format {
        "q4nx" => "Q4_1",
        "safetensors" => "F32",
        _ => "",
    }
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The chat template as the engine reads it: `chat_template.jinja`, else `tokenizer_config.json`'s
/// `chat_template` (a string, or the `default` entry of a list).
fn template_source(dir: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(dir.join("chat_template.jinja")) {
        return Some(text);
    }
    match read_json(&dir.join("tokenizer_config.json"))?.get("chat_template")? {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Array(list) => list
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template"))
            .and_then(|t| t.as_str())
            .map(str::to_owned),
        _ => None,
    }
}

/// Bytes of the files directly in `dir` (model folders are flat).
fn folder_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// `time` as RFC 3339 in UTC with microseconds (`2024-06-04T14:38:31.837530Z`), as Ollama's
/// `created_at`, `modified_at` and `expires_at` are written.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        of_day / 3600,
        (of_day / 60) % 60,
        of_day % 60,
        since.subsec_micros()
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_writes_utc_with_microseconds() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let t = UNIX_EPOCH + Duration::from_micros(1_717_511_911_837_530);
        assert_eq!(rfc3339(t), "2024-06-04T14:38:31.837530Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000000Z");
    }

    #[test]
    fn names_match_with_or_without_the_latest_tag() {
        let models = LocalModels::new(
            vec![LocalModel {
                name: "SmolLM2".into(),
                dir: PathBuf::from("x"),
                sha256: None,
            }],
            LoadOptions::default(),
        );
        assert!(models.find("smollm2").is_some());
        assert!(models.find("smollm2:latest").is_some());
        assert!(models.find("smollm2:7b").is_none());
        assert!(models.find("other").is_none());
    }
}
