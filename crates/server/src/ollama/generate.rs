//! `POST /api/generate`: Ollama's completion of one prompt, through the model's chat template
//! (with an optional `system` message) or, with `raw`, as plain text to continue.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_chat::Input;
use hearth_engine::{ChatMessage, Role};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::OwnedSemaphorePermit;

use super::chat::done_only;
use super::{created_at, metrics, ndjson_response, required_model, Common, Shape};
use crate::error::{AppError, OllamaError};
use crate::state::{AppState, ModelRequest};
use crate::worker::{self, Job};

/// `POST /api/generate` body. Fields Hearth does not use are ignored.
#[derive(Debug, Deserialize)]
pub struct GenerateRequest {
    /// Model, stream, format, keep_alive, options, think.
    #[serde(flatten)]
    pub common: Common,
    /// The prompt; empty only loads (or with `keep_alive: 0` unloads) the model.
    #[serde(default)]
    pub prompt: String,
    /// A system message put before the prompt.
    #[serde(default)]
    pub system: String,
    /// Continue the prompt as it is, without the chat template.
    #[serde(default)]
    pub raw: bool,
    /// Text after the answer (fill-in-the-middle): refused.
    #[serde(default)]
    pub suffix: String,
    /// A template of the request's own: refused, the model's own template is used.
    #[serde(default)]
    pub template: String,
    /// Token ids of an earlier answer (deprecated by Ollama): refused.
    #[serde(default)]
    pub context: Vec<Value>,
    /// Images: refused, Hearth's models read text only.
    #[serde(default)]
    pub images: Vec<Value>,
}

/// `POST /api/generate`.
pub async fn generate(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let request: GenerateRequest =
        worker::parse_body(body, &state, "a generate request", "'model' and 'prompt'")?;
    let name = required_model(request.common.model.as_deref())?.to_owned();
    let entry = state.entry(&name)?;
    let mapped = request.common.map(worker::random_u64())?;
    state.check_context(&entry, mapped.num_ctx)?;
    let input = request.input()?;
    let model = ModelRequest {
        name: entry.name,
        num_ctx: mapped.num_ctx,
        keep_alive: request.common.keep_alive,
    };
    let permit = state.admit()?;
    let Some(input) = input else {
        let reason = load_or_unload(&state, permit, model).await?;
        return Ok(Json(last(&name, "", done_only(reason))).into_response());
    };
    let job = Job {
        model,
        input,
        options: mapped.options,
        stops: mapped.stops,
    };
    let mut rx = worker::spawn(&state, permit, job);
    if mapped.stream {
        let first = worker::first(&mut rx).await?;
        Ok(ndjson_response(name, SHAPE, started, first, rx))
    } else {
        let (text, finished) = worker::collect(rx).await?;
        Ok(Json(last(&name, &text, metrics(&finished, started))).into_response())
    }
}

impl GenerateRequest {
    /// What to continue; None for an empty prompt (load or unload only).
    fn input(&self) -> Result<Option<Input>, AppError> {
        let refuse = |field: &'static str, why: &str| Err(AppError::bad_field(field, why));
        if !self.images.is_empty() {
            return refuse(
                "images",
                "images are not supported: Hearth's models read text only",
            );
        }
        if !self.suffix.is_empty() {
            return refuse(
                "suffix",
                "'suffix' (fill in the middle) is not supported by Hearth's models",
            );
        }
        if !self.template.is_empty() {
            return refuse(
                "template",
                "'template' is not supported: Hearth renders every prompt with the model's own \
                 chat template; use raw: true to send a prompt already formatted",
            );
        }
        if !self.context.is_empty() {
            return refuse(
                "context",
                "'context' (deprecated by Ollama) is not supported: send the conversation to \
                 /api/chat instead",
            );
        }
        if self.prompt.is_empty() {
            return Ok(None);
        }
        if self.raw {
            if !self.system.is_empty() {
                return refuse(
                    "system",
                    "raw mode does not support template, system, or context",
                );
            }
            return Ok(Some(Input::Raw(self.prompt.clone())));
        }
        let mut messages = Vec::new();
        if !self.system.is_empty() {
            messages.push(ChatMessage::new(Role::System, self.system.clone()));
        }
        messages.push(ChatMessage::new(Role::User, self.prompt.clone()));
        Ok(Some(Input::Chat(messages)))
    }
}

/// Loads the model (or with `keep_alive: 0` unloads it) without generating, as Ollama does for
/// an empty prompt; Ollama's `done_reason` for it: `load` when the model is loaded afterwards
/// (a pinned backend stays), else `unload`.
pub(crate) async fn load_or_unload(
    state: &AppState,
    permit: OwnedSemaphorePermit,
    model: ModelRequest,
) -> Result<&'static str, AppError> {
    let state = state.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        state.load_or_unload(&model)
    })
    .await
    .map_err(|e| {
        tracing::error!("loading failed: {e}");
        AppError::Internal
    })??;
    Ok(if loaded { "load" } else { "unload" })
}

const SHAPE: Shape = Shape { piece, last };

fn piece(model: &str, text: &str) -> Value {
    json!({
        "model": model,
        "created_at": created_at(),
        "response": text,
        "done": false,
    })
}

fn last(model: &str, text: &str, counters: Map<String, Value>) -> Value {
    let mut value = json!({
        "model": model,
        "created_at": created_at(),
        "response": text,
        "done": true,
    });
    if let Value::Object(map) = &mut value {
        map.extend(counters);
    }
    value
}
