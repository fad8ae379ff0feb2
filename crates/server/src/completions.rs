//! `POST /v1/completions`, OpenAI's legacy completions: a prompt in, its continuation out, as
//! one JSON body or as server-sent events. The prompt is continued as raw text, without the
//! chat template (a remote backend sends it to its server's own `/v1/completions`); a backend
//! that only takes conversations (FastFlowLM on the NPU) refuses it plainly with 400.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use hearth_chat::Input;
use hearth_wire::openai::{Choice, CompletionRequest, PromptText};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::{Api, AppError};
use crate::openai::{self, json_event, translate, ReplyMeta, Requested};
use crate::state::{unix_now, AppState, ModelRequest};
use crate::worker::{self, Job, Progress};

/// OpenAI's default `max_tokens` for legacy completions.
const DEFAULT_MAX_TOKENS: u64 = 16;

/// The request's prompt, or why it asks for what Hearth does not do.
fn prompt(request: &mut CompletionRequest) -> Result<String, AppError> {
    if request.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(AppError::bad_field(
            "suffix",
            "'suffix' (fill in the middle) is not supported by Hearth's models",
        ));
    }
    if request.echo == Some(true) {
        return Err(AppError::bad_field("echo", "'echo' is not supported"));
    }
    if request.n.is_some_and(|n| n != 1) {
        return Err(AppError::bad_field(
            "n",
            "only one completion per request (n = 1)",
        ));
    }
    if request.logprobs.as_ref().is_some_and(|l| !l.is_null()) {
        return Err(AppError::bad_field(
            "logprobs",
            "'logprobs' is not supported",
        ));
    }
    let prompt = match std::mem::take(&mut request.prompt) {
        PromptText::One(text) => text,
        PromptText::Many(mut list) if list.len() == 1 => list.remove(0),
        PromptText::Many(list) => {
            return Err(AppError::bad_field(
                "prompt",
                format!("'prompt' has {} texts; give one", list.len()),
            ))
        }
    };
    if prompt.is_empty() {
        return Err(AppError::bad_field("prompt", "'prompt' is empty"));
    }
    Ok(prompt)
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let mut request: CompletionRequest =
        worker::parse_body(body, &state, "a completion request", "'prompt'")?;
    let entry = state.resolve(request.model.as_deref())?;
    let prompt = prompt(&mut request)?;
    let (options, stops) = translate(
        Requested {
            max_tokens: Some(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
            temperature: request.temperature,
            top_p: request.top_p,
            seed: request.seed,
            stop: request.stop.take(),
            response_format: None,
        },
        worker::random_u64(),
    )?;
    let permit = state.admit()?;
    let job = Job {
        model: ModelRequest::named(entry.name.clone()),
        input: Input::Raw(prompt),
        options,
        stops,
        origin: worker::origin(&headers),
    };
    let mut rx = worker::spawn(&state, permit, job);
    let meta = ReplyMeta {
        id: format!("cmpl-{:016x}", worker::random_u64()),
        object: "text_completion",
        model: entry.name,
        created: unix_now(),
    };
    if request.stream.unwrap_or(false) {
        let first = worker::first(&mut rx).await?;
        Ok(sse_response(meta, first, rx))
    } else {
        let (text, finished) = worker::collect(rx).await?;
        let answer = &finished.answer;
        let choice = text_choice(text, Some(answer.stop.finish_reason()));
        let usage = openai::usage(&answer.receipt);
        Ok(Json(meta.reply(choice, Some(usage))).into_response())
    }
}

/// A `text_completion`'s choice: `text`, null `logprobs`, the finish reason once known.
fn text_choice(text: String, finish_reason: Option<&str>) -> Choice {
    Choice {
        text: Some(text),
        logprobs: Some(Value::Null),
        finish_reason: finish_reason.map(str::to_owned),
        ..Choice::default()
    }
}

/// The event stream: one object per piece, a last one with `finish_reason` and `usage`, then
/// `[DONE]`. Dropping it (the client left) closes `rx`, which cancels generation.
fn sse_response(meta: ReplyMeta, first: Progress, rx: mpsc::Receiver<Progress>) -> Response {
    struct Stream {
        meta: ReplyMeta,
        rx: mpsc::Receiver<Progress>,
        queued: VecDeque<SseEvent>,
        ended: bool,
    }
    fn events(s: &mut Stream, progress: Progress) {
        match progress {
            Progress::Text(text) => {
                let reply = s.meta.reply(text_choice(text, None), None);
                s.queued.push_back(json_event(&reply));
            }
            Progress::Done(result) => {
                s.ended = true;
                match *result {
                    Ok(finished) => {
                        let answer = &finished.answer;
                        let choice = text_choice(String::new(), Some(answer.stop.finish_reason()));
                        let last = s.meta.reply(choice, Some(openai::usage(&answer.receipt)));
                        s.queued.push_back(json_event(&last));
                        s.queued.push_back(SseEvent::default().data("[DONE]"));
                    }
                    // The status line is already sent: report the failure in the stream.
                    Err(err) => s.queued.push_back(json_event(&err.body(Api::OpenAi))),
                }
            }
        }
    }
    let mut state = Stream {
        meta,
        rx,
        queued: VecDeque::new(),
        ended: false,
    };
    events(&mut state, first);
    let stream = stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.queued.pop_front() {
                return Some((Ok::<_, Infallible>(event), s));
            }
            if s.ended {
                return None;
            }
            match s.rx.recv().await {
                Some(progress) => events(&mut s, progress),
                None => {
                    tracing::error!("the generating thread ended without a result");
                    s.ended = true;
                    let error = AppError::Internal.body(Api::OpenAi);
                    s.queued.push_back(json_event(&error));
                }
            }
        }
    });
    Sse::new(stream).into_response()
}
