//! Ollama's model routes: `GET /api/tags` (installed), `GET /api/ps` (loaded), `POST /api/show`
//! (one model's details and template) and `GET /api/version`. (`POST /api/embed` is in
//! `crate::embeddings`.)

use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use hearth_chat::SamplingParams;
use hearth_wire::ollama::{ListedModel, ModelList, RunningModel, ShowReply, ShowRequest, Version};
use serde_json::json;

use super::required_model;
use crate::catalog::{rfc3339, ModelEntry};
use crate::error::OllamaError;
use crate::state::AppState;
use crate::worker;

/// `GET /api/tags`: every model the server can answer with.
pub async fn tags(State(state): State<AppState>) -> Json<ModelList<ListedModel>> {
    let models = state
        .catalog()
        .iter()
        .map(|entry| ListedModel {
            name: entry.name.clone(),
            model: entry.name.clone(),
            modified_at: rfc3339(entry.modified.unwrap_or(SystemTime::UNIX_EPOCH)),
            size: entry.size_bytes,
            digest: entry.digest.clone().unwrap_or_default(),
            details: entry.ollama_details(None),
        })
        .collect();
    Json(ModelList { models })
}

/// `GET /api/ps`: the model in memory, where it runs and when it will be unloaded.
pub async fn ps(State(state): State<AppState>) -> Json<ModelList<RunningModel>> {
    let models = state
        .running()
        .into_iter()
        .map(|running| {
            // Answering, or kept until replaced: Ollama writes a date centuries away then.
            let expires = running.expires.map_or_else(
                || SystemTime::now() + Duration::from_secs(FOREVER_SECS),
                AppState::wall_clock,
            );
            let context = running.info.context_length;
            RunningModel {
                name: running.entry.name.clone(),
                model: running.entry.name.clone(),
                size: running.entry.size_bytes,
                digest: running.entry.digest.clone().unwrap_or_default(),
                details: running.entry.ollama_details(context),
                expires_at: rfc3339(expires),
                size_vram: 0,
                context_length: context,
                backend: running.info.kind.as_str().to_owned(),
                device: running.info.device,
            }
        })
        .collect();
    Json(ModelList { models })
}

/// About 292 years, the longest keep-alive Ollama writes (`math.MaxInt64` nanoseconds).
const FOREVER_SECS: u64 = i64::MAX as u64 / 1_000_000_000;

/// `POST /api/show`: a model's family, context, parameters and chat template.
pub async fn show(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ShowReply>, OllamaError> {
    let request: ShowRequest = worker::parse_body(body, &state, "a show request", "'model'")?;
    let name = required_model(request.model.as_deref().or(request.name.as_deref()))?;
    let entry = state.entry(name)?;
    let running = state.running().filter(|r| r.entry.name == entry.name);
    let context = running
        .as_ref()
        .and_then(|r| r.info.context_length)
        .or(entry.trained_context);
    Ok(Json(show_body(&entry, context)))
}

fn show_body(entry: &ModelEntry, context: Option<usize>) -> ShowReply {
    let defaults = SamplingParams::default();
    let mut parameters = String::new();
    if let Some(context) = context {
        parameters.push_str(&format!("num_ctx {context}\n"));
    }
    parameters.push_str(&format!(
        "temperature {}\ntop_k {}\ntop_p {}\nmin_p {}\nrepeat_penalty {}",
        defaults.temperature,
        defaults.top_k,
        defaults.top_p,
        defaults.min_p,
        defaults.repetition_penalty
    ));
    let family = entry.family.clone().unwrap_or_default();
    let mut model_info = serde_json::Map::new();
    model_info.insert("general.architecture".into(), json!(family));
    if let Some(trained) = entry.trained_context {
        model_info.insert(format!("{family}.context_length"), json!(trained));
    }
    ShowReply {
        modelfile: format!("# Hearth model {}\nFROM {}\n", entry.name, entry.name),
        parameters,
        template: entry.template.clone().unwrap_or_default(),
        details: entry.ollama_details(context),
        model_info,
        capabilities: vec!["completion".to_owned()],
        modified_at: rfc3339(entry.modified.unwrap_or(SystemTime::UNIX_EPOCH)),
        backend: entry.kind.as_str().to_owned(),
    }
}

/// `GET /api/version`: Hearth's version.
pub async fn version() -> Json<Version> {
    Json(Version {
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}
