//! `POST /api/chat`: Ollama's chat, through the same answer loop as every route.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_chat::Input;
use hearth_chat::{ChatMessage, Role};
use hearth_wire::ollama::{ChatChunk, ChatRequest, Counters, Message, ReplyMessage};
use serde_json::Value;

use super::{created_at, done_only, metrics, ndjson_response, required_model, Shape};
use crate::error::{AppError, OllamaError};
use crate::state::{AppState, ModelRequest};
use crate::worker::{self, Job};

/// `POST /api/chat`.
pub async fn chat(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let request: ChatRequest =
        worker::parse_body(body, &state, "a chat request", "'model' and 'messages'")?;
    let name = required_model(request.common.model.as_deref())?.to_owned();
    let entry = state.entry(&name)?;
    let mapped = super::map(&request.common, worker::random_u64())?;
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
        .map(|(i, m)| chat_message(m, i))
        .collect::<Result<Vec<_>, _>>()?;
    let model = ModelRequest {
        name: entry.name,
        num_ctx: mapped.num_ctx,
        keep_alive: request.common.keep_alive,
    };
    let permit = state.admit()?;
    if messages.is_empty() {
        let reason = super::load_or_unload(&state, permit, model).await?;
        return Ok(Json(last(&name, "", done_only(reason))).into_response());
    }
    let job = Job {
        model,
        input: Input::Chat(messages),
        options: mapped.options,
        stops: mapped.stops,
        origin: worker::origin(&headers),
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
    chunk(model, text, None)
}

fn last(model: &str, text: &str, counters: Counters) -> Value {
    chunk(model, text, Some(counters))
}

fn chunk(model: &str, text: &str, counters: Option<Counters>) -> Value {
    let done = counters.is_some();
    super::to_value(&ChatChunk {
        model: model.to_owned(),
        created_at: created_at(),
        message: ReplyMessage {
            role: "assistant",
            content: text.to_owned(),
        },
        done,
        counters,
    })
}

/// One of Ollama's messages as Hearth's, refusing what Hearth's models cannot read.
fn chat_message(message: Message, index: usize) -> Result<ChatMessage, AppError> {
    let role = match message.role.as_str() {
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
    let images = message.images.unwrap_or_default();
    if !images.is_empty() && role != Role::User {
        return Err(AppError::bad_field(
            "messages",
            format!(
                "message {index} is not the user's but has images; pictures go in user messages"
            ),
        ));
    }
    let pictures = crate::openai::checked_pictures(
        base64_images(&images, "messages", index)?,
        "messages",
        &format!("message {index}"),
    )?;
    if message.tool_calls.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(AppError::bad_field(
            "messages",
            format!("message {index} has tool_calls; Hearth's models do not call tools yet"),
        ));
    }
    Ok(ChatMessage::new(role, message.content).with_pictures(pictures))
}

/// Ollama's `images`: a list of base64 strings (anything else is refused on `param`).
pub(super) fn base64_images<'a>(
    images: &'a [serde_json::Value],
    param: &'static str,
    index: usize,
) -> Result<Vec<&'a str>, AppError> {
    images
        .iter()
        .map(|image| {
            image.as_str().ok_or_else(|| {
                AppError::bad_field(
                    param,
                    format!("message {index} has an image that is not a base64 string"),
                )
            })
        })
        .collect()
}
