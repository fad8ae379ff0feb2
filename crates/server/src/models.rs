//! OpenAI's read-only routes: `GET /v1/models` and `GET /v1/models/{id}`, every model this
//! server can answer with (loaded or not).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::catalog::ModelEntry;
use crate::error::AppError;
use crate::state::AppState;

/// `GET /v1/models`: every model the server can answer with.
pub async fn list_models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .catalog()
        .iter()
        .map(|entry| model_object(&state, entry))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

/// `GET /v1/models/{id}`: one model, or 404.
pub async fn get_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    let entry = state.entry(&id)?;
    Ok(Json(model_object(&state, &entry)))
}

/// A model in OpenAI's shape, with Hearth's extras: its context (as loaded when it is, else
/// as trained), where it runs, and whether it is loaded.
fn model_object(state: &AppState, entry: &ModelEntry) -> Value {
    let running = state.running().filter(|r| r.entry.name == entry.name);
    let context = running
        .as_ref()
        .and_then(|r| r.info.context_length)
        .or(entry.trained_context);
    let device = running.as_ref().map(|r| r.info.device.clone());
    json!({
        "id": entry.name,
        "object": "model",
        "created": state.started_unix(),
        "owned_by": "hearth",
        "context_length": context,
        "backend": entry.kind,
        "device": device,
        "loaded": running.is_some(),
    })
}
