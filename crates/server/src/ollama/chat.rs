//! `POST /api/chat`: Ollama's chat, through the same answer loop as every route.

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

use super::{created_at, metrics, ndjson_response, required_model, Common, Shape};
use crate::error::{AppError, OllamaError};
use crate::state::{AppState, ModelRequest};
use crate::worker::{self, Job};

/// `POST /api/chat` body. Fields Hearth does not use are ignored.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// Model, stream, format, keep_alive, options, think.
    #[serde(flatten)]
    pub common: Common,
    /// The conversation; none only loads (or with `keep_alive: 0` unloads) the model.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools the model may call: refused, Hearth's models do not call tools yet.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

/// One message.
#[derive(Debug, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant` (`tool` is refused).
    pub role: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
    /// Images: refused, Hearth's models read text only.
    #[serde(default)]
    pub images: Option<Vec<Value>>,
    /// Tool calls of an earlier answer: refused with tools.
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
}

/// `POST /api/chat`.
pub async fn chat(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let request: ChatRequest =
        worker::parse_body(body, &state, "a chat request", "'model' and 'messages'")?;
    let name = required_model(request.common.model.as_deref())?.to_owned();
    let entry = state.entry(&name)?;
    let mapped = request.common.map(worker::random_u64())?;
    state.check_context(&entry, mapped.num_ctx)?;
    if request.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(AppError::bad_field(
            "tools",
            format!("\"{name}\" does not support tools: Hearth's models do not call tools yet"),
        )
        .into());
    }
    let messages = request
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.into_chat_message(i))
        .collect::<Result<Vec<_>, _>>()?;
    let model = ModelRequest {
        name: entry.name,
        num_ctx: mapped.num_ctx,
        keep_alive: request.common.keep_alive,
    };
    let permit = state.admit()?;
    if messages.is_empty() {
        let reason = super::generate::load_or_unload(&state, permit, model).await?;
        return Ok(Json(last(&name, "", done_only(reason))).into_response());
    }
    let job = Job {
        model,
        input: Input::Chat(messages),
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

const SHAPE: Shape = Shape { piece, last };

fn piece(model: &str, text: &str) -> Value {
    json!({
        "model": model,
        "created_at": created_at(),
        "message": { "role": "assistant", "content": text },
        "done": false,
    })
}

fn last(model: &str, text: &str, counters: Map<String, Value>) -> Value {
    let mut value = json!({
        "model": model,
        "created_at": created_at(),
        "message": { "role": "assistant", "content": text },
        "done": true,
    });
    if let Value::Object(map) = &mut value {
        map.extend(counters);
    }
    value
}

/// The counters of a request that only loaded or unloaded: just the reason.
pub(crate) fn done_only(reason: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("done_reason".into(), json!(reason));
    map
}

impl Message {
    fn into_chat_message(self, index: usize) -> Result<ChatMessage, AppError> {
        let role = match self.role.as_str() {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                return Err(AppError::bad_field(
                    "messages",
                    format!(
                        "message {index} has role '{other}'; Hearth understands system, user \
                         and assistant (no tools)"
                    ),
                ))
            }
        };
        if self.images.as_ref().is_some_and(|i| !i.is_empty()) {
            return Err(AppError::bad_field(
                "messages",
                format!("message {index} has images; Hearth's models read text only"),
            ));
        }
        if self.tool_calls.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(AppError::bad_field(
                "messages",
                format!("message {index} has tool_calls; Hearth's models do not call tools yet"),
            ));
        }
        Ok(ChatMessage::new(role, self.content))
    }
}
