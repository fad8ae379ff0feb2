//! Ollama's model routes: `GET /api/tags` (installed), `GET /api/ps` (loaded), `POST /api/show`
//! (one model's details and template) and `GET /api/version`. (`POST /api/embed` is in
//! `crate::embeddings`.)

use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use hearth_engine::SamplingParams;
use serde::Deserialize;
use serde_json::{json, Value};

use super::required_model;
use crate::catalog::{rfc3339, ModelEntry};
use crate::error::OllamaError;
use crate::state::AppState;
use crate::worker;

/// `GET /api/tags`: every model the server can answer with.
pub async fn tags(State(state): State<AppState>) -> Json<Value> {
    let models: Vec<Value> = state
        .catalog()
        .iter()
        .map(|entry| {
            json!({
                "name": entry.name,
                "model": entry.name,
                "modified_at": rfc3339(entry.modified.unwrap_or(SystemTime::UNIX_EPOCH)),
                "size": entry.size_bytes,
                "digest": entry.digest.clone().unwrap_or_default(),
                "details": entry.ollama_details(),
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

/// `GET /api/ps`: the model in memory, where it runs and when it will be unloaded.
pub async fn ps(State(state): State<AppState>) -> Json<Value> {
    let models: Vec<Value> = state
        .running()
        .into_iter()
        .map(|running| {
            // Answering, or kept until replaced: Ollama writes a date centuries away then.
            let expires = running.expires.map_or_else(
                || SystemTime::now() + Duration::from_secs(FOREVER_SECS),
                AppState::wall_clock,
            );
            let mut details = running.entry.ollama_details();
            details["context_length"] = json!(running.info.context_length);
            json!({
                "name": running.entry.name,
                "model": running.entry.name,
                "size": running.entry.size_bytes,
                "digest": running.entry.digest.clone().unwrap_or_default(),
                "details": details,
                "expires_at": rfc3339(expires),
                "size_vram": 0,
                "context_length": running.info.context_length,
                "backend": running.info.kind,
                "device": running.info.device,
            })
        })
        .collect();
    Json(json!({ "models": models }))
}

/// About 292 years, the longest keep-alive Ollama writes (`math.MaxInt64` nanoseconds).
const FOREVER_SECS: u64 = i64::MAX as u64 / 1_000_000_000;

/// `POST /api/show` body.
#[derive(Debug, Deserialize)]
pub struct ShowRequest {
    /// The model's name.
    #[serde(default)]
    pub model: Option<String>,
    /// Its older name for the same field.
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /api/show`: a model's family, context, parameters and chat template.
pub async fn show(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, OllamaError> {
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

fn show_body(entry: &ModelEntry, context: Option<usize>) -> Value {
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
    let mut details = entry.ollama_details();
    details["context_length"] = json!(context);
    json!({
        "modelfile": format!("# Hearth model {}\nFROM {}\n", entry.name, entry.name),
        "parameters": parameters,
        "template": entry.template.clone().unwrap_or_default(),
        "details": details,
        "model_info": model_info,
        "capabilities": ["completion"],
        "modified_at": rfc3339(entry.modified.unwrap_or(SystemTime::UNIX_EPOCH)),
        "backend": entry.kind,
    })
}

/// `GET /api/version`: Hearth's version.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION") }))
}
