//! OpenAI's read-only routes: `GET /v1/models` and `GET /v1/models/{id}`, every model this
//! server can answer with (loaded or not).

use axum::extract::{Path, State};
use axum::Json;
use hearth_wire::openai::{Model, ModelList};

use crate::catalog::ModelEntry;
use crate::error::AppError;
use crate::state::AppState;

/// `GET /v1/models`: every model the server can answer with.
pub async fn list_models(State(state): State<AppState>) -> Json<ModelList> {
    let data = state
        .catalog()
        .iter()
        .map(|entry| model_object(&state, entry))
        .collect();
    Json(ModelList {
        object: Some("list".to_owned()),
        data: Some(data),
    })
}

/// `GET /v1/models/{id}`: one model, or 404.
pub async fn get_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Model>, AppError> {
    let entry = state.entry(&id)?;
    Ok(Json(model_object(&state, &entry)))
}

/// A model in OpenAI's shape, with Hearth's extras: its context (as loaded when it is, else
/// as trained), where it runs, and whether it is loaded.
fn model_object(state: &AppState, entry: &ModelEntry) -> Model {
    let running = state.running().filter(|r| r.entry.name == entry.name);
    let context = running
        .as_ref()
        .and_then(|r| r.info.context_length)
        .or(entry.trained_context);
    let device = running.as_ref().map(|r| r.info.device.clone());
    Model {
        id: Some(entry.name.clone()),
        object: Some("model".to_owned()),
        created: Some(state.started_unix()),
        owned_by: Some("hearth".to_owned()),
        max_model_len: None,
        context_length: context.map(|n| n as u64),
        backend: Some(entry.kind.as_str().to_owned()),
        device,
        loaded: Some(running.is_some()),
    }
}
