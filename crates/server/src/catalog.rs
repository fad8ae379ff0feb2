//! The models a server can answer with: either one backend opened before the server started (the
//! NPU, a remote server, or the model named with `hearth serve --model`), or the app's local
//! models, opened through the app on the processor when a request names one ([`LocalModels`]).
//!
//! What a listing says of a model (family, trained context, size) is the app's
//! [`ModelCard`], read from its folder without loading it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hearth_app::model_card::ModelCard;
use hearth_app::session::{KernelLevel, OpenOptions};
use hearth_app::{Home, LocalModel, Session};
use hearth_chat::{Backend, BackendInfo, BackendKind};
use hearth_wire::ollama::Details;

use crate::error::AppError;

/// How the server opens a local model on the processor (`hearth serve --threads --context
/// --kernel`); None leaves each to the engine's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadSettings {
    /// Processor threads (None: one per physical core).
    pub threads: Option<usize>,
    /// Context length in tokens, unless a request asks for more with `num_ctx` (None:
    /// min(4096, the model's maximum)).
    pub context_length: Option<usize>,
    /// SIMD level (None: the best this processor has).
    pub kernel: Option<KernelLevel>,
}

/// The app's local models, each opened on Hearth's engine when a request names it.
#[derive(Debug, Clone)]
pub struct LocalModels {
    home: Home,
    models: Vec<LocalModel>,
    load: LoadSettings,
}

impl LocalModels {
    /// Serves `models` (the app's list, `hearth_app::models::local_models`, or one folder),
    /// opening each in `home` with `load`.
    pub fn new(home: Home, models: Vec<LocalModel>, load: LoadSettings) -> Self {
        LocalModels { home, models, load }
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

    /// Opens `model` with room for `context` positions (None: the server's default), through
    /// the app (`Session::open` on the processor), refusing a model that cannot chat.
    pub(crate) fn open(
        &self,
        model: &LocalModel,
        context: Option<usize>,
    ) -> Result<Box<dyn Backend>, AppError> {
        let options = OpenOptions {
            threads: self.load.threads,
            context_length: context.or(self.load.context_length),
            kernel: self.load.kernel,
            require_chat: true,
            ..OpenOptions::default()
        };
        let session = Session::open(&self.home, model, BackendKind::Cpu, options).map_err(|e| {
            AppError::LoadFailed {
                model: model.name.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(session.backend)
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
    /// A local model's entry, from its card.
    pub fn of_card(card: ModelCard) -> Self {
        ModelEntry {
            name: card.name,
            family: card.family,
            format: card.format,
            trained_context: card.trained_context,
            size_bytes: card.size_bytes,
            digest: card.sha256,
            modified: card.modified,
            kind: BackendKind::Cpu,
            template: card.template,
        }
    }

    /// A local model's entry, read from its folder.
    pub fn of_model(model: &LocalModel) -> Self {
        Self::of_card(ModelCard::read(model))
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
    pub fn ollama_details(&self, context_length: Option<usize>) -> Details {
        Details {
            parent_model: String::new(),
            format: self.format.clone(),
            family: self.family.clone().unwrap_or_default(),
            families: self.family.iter().cloned().collect(),
            parameter_size: String::new(),
            quantization_level: quantization(&self.format).to_owned(),
            context_length,
        }
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
        let home = Home {
            data_dir: "/nonexistent/data".into(),
            config_dir: "/nonexistent/config".into(),
            state_dir: "/nonexistent/state".into(),
            builtin: None,
            system_root: "/".into(),
        };
        let models = LocalModels::new(
            home,
            vec![LocalModel {
                name: "SmolLM2".into(),
                ..LocalModel::folder("x".into())
            }],
            LoadSettings::default(),
        );
        assert!(models.find("smollm2").is_some());
        assert!(models.find("smollm2:latest").is_some());
        assert!(models.find("smollm2:7b").is_none());
        assert!(models.find("other").is_none());
    }
}
