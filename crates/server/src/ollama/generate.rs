//! `POST /api/generate`: Ollama's completion of one prompt, through the model's chat template
//! (with an optional `system` message) or, with `raw`, as plain text to continue.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hearth_chat::Input;
use hearth_chat::{ChatMessage, Role};
use hearth_wire::ollama::{Counters, GenerateChunk, GenerateRequest};
use serde_json::Value;

use super::{
    created_at, done_only, load_or_unload, metrics, ndjson_response, required_model, Shape,
};
use crate::error::{AppError, OllamaError};
use crate::state::{AppState, ModelRequest};
use crate::worker::{self, Job};

/// `POST /api/generate`.
pub async fn generate(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, OllamaError> {
    let started = Instant::now();
    let request: GenerateRequest =
        worker::parse_body(body, &state, "a generate request", "'model' and 'prompt'")?;
    let name = required_model(request.common.model.as_deref())?.to_owned();
    let entry = state.entry(&name)?;
    let mapped = super::map(&request.common, worker::random_u64())?;
    state.check_context(&entry, mapped.num_ctx)?;
    let input = input(&request)?;
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

/// What to continue; None for an empty prompt (load or unload only).
fn input(request: &GenerateRequest) -> Result<Option<Input>, AppError> {
    let refuse = |field: &'static str, why: &str| Err(AppError::bad_field(field, why));
    if !request.images.is_empty() && request.raw {
        return refuse(
            "images",
            "images cannot go with raw: true (raw text has no message to carry them)",
        );
    }
    if !request.suffix.is_empty() {
        return refuse(
            "suffix",
            "'suffix' (fill in the middle) is not supported by Hearth's models",
        );
    }
    if !request.template.is_empty() {
        return refuse(
            "template",
            "'template' is not supported: Hearth renders every prompt with the model's own \
             chat template; use raw: true to send a prompt already formatted",
        );
    }
    if !request.context.is_empty() {
        return refuse(
            "context",
            "'context' (deprecated by Ollama) is not supported: send the conversation to \
             /api/chat instead",
        );
    }
    if request.prompt.is_empty() {
        return Ok(None);
    }
    if request.raw {
        if !request.system.is_empty() {
            return refuse(
                "system",
                "raw mode does not support template, system, or context",
            );
        }
        return Ok(Some(Input::Raw(request.prompt.clone())));
    }
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(ChatMessage::new(Role::System, request.system.clone()));
    }
    let pictures = crate::openai::checked_pictures(
        super::chat::base64_images(&request.images, "images", 0)?,
        "images",
        "the prompt",
    )?;
    messages.push(ChatMessage::new(Role::User, request.prompt.clone()).with_pictures(pictures));
    Ok(Some(Input::Chat(messages)))
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
    super::to_value(&GenerateChunk {
        model: model.to_owned(),
        created_at: created_at(),
        response: text.to_owned(),
        done,
        counters,
    })
}
