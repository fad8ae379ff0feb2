//! The read-only routes: `GET /v1/models` (OpenAI), `GET /api/tags` and `GET /api/version`
//! (Ollama-style, for readiness probes).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::error::AppError;
use crate::state::AppState;

/// `GET /v1/models`: the one served model.
pub async fn list_models(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "object": "list", "data": [model_object(&state)] }))
}

/// `GET /v1/models/{id}`: the served model, or 404.
pub async fn get_model(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AppError> {
    if id != state.model_id() {
        return Err(AppError::ModelNotFound {
            requested: id,
            served: state.model_id().to_owned(),
        });
    }
    Ok(Json(model_object(&state)))
}

fn model_object(state: &AppState) -> Value {
    let info = state.info();
    json!({
        "id": info.model,
        "object": "model",
        "created": state.started_unix(),
        "owned_by": "hearth",
        "context_length": info.context_length,
        "backend": info.kind,
        "device": info.device,
    })
}

/// `GET /api/tags`: the served model in Ollama's shape.
pub async fn tags(State(state): State<AppState>) -> Json<Value> {
    let info = state.info();
    Json(json!({
        "models": [{
            "name": info.model,
            "model": info.model,
            "details": { "backend": info.label },
        }]
    }))
}

/// `GET /api/version`: Hearth's version.
pub async fn version() -> Json<Value> {
    Json(json!({ "version": env!("CARGO_PKG_VERSION") }))
}
