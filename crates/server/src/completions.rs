//! `POST /v1/completions`, OpenAI's legacy completions: a prompt in, its continuation out, as
//! one JSON body or as server-sent events. The prompt is continued as raw text, without the
//! chat template (a remote backend sends it to its server's own `/v1/completions`); a backend
//! that only takes conversations (FastFlowLM on the NPU) refuses it plainly with 400.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use hearth_chat::Input;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::{Api, AppError};
use crate::openai::{translate, Requested, StopStrings, Usage};
use crate::state::{unix_now, AppState, ModelRequest};
use crate::worker::{self, Job, Progress};

/// OpenAI's default `max_tokens` for legacy completions.
const DEFAULT_MAX_TOKENS: u64 = 16;

/// `POST /v1/completions` body. Fields Hearth does not use are ignored.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    /// The model id; optional (the loaded or first model), checked when given.
    #[serde(default)]
    pub model: Option<String>,
    /// The text to continue: a string, or a list of one string.
    pub prompt: PromptText,
    /// Stream as server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Most tokens to generate; 16 when absent, as OpenAI.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Sampling temperature; 0 is greedy.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Seed for reproducible sampling.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Stop strings: one or a list.
    #[serde(default)]
    pub stop: Option<StopStrings>,
    /// Text after the completion: refused.
    #[serde(default)]
    pub suffix: Option<String>,
    /// Repeat the prompt before the completion: refused.
    #[serde(default)]
    pub echo: Option<bool>,
    /// Completions per prompt: only 1.
    #[serde(default)]
    pub n: Option<u64>,
    /// Log probabilities: refused.
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// `prompt`: a string or a list of strings (only one is accepted).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PromptText {
    /// One prompt.
    One(String),
    /// Several prompts (or token ids, which fail to parse as strings).
    Many(Vec<String>),
}

impl CompletionRequest {
    /// The prompt, or why the request asks for what Hearth does not do.
    fn prompt(&mut self) -> Result<String, AppError> {
        if self.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(AppError::bad_field(
                "suffix",
                "'suffix' (fill in the middle) is not supported by Hearth's models",
            ));
        }
        if self.echo == Some(true) {
            return Err(AppError::bad_field("echo", "'echo' is not supported"));
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(AppError::bad_field(
                "n",
                "only one completion per request (n = 1)",
            ));
        }
        if self.logprobs.as_ref().is_some_and(|l| !l.is_null()) {
            return Err(AppError::bad_field(
                "logprobs",
                "'logprobs' is not supported",
            ));
        }
        let prompt = match std::mem::replace(&mut self.prompt, PromptText::Many(Vec::new())) {
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
}

/// `POST /v1/completions`.
pub async fn completions(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let mut request: CompletionRequest =
        worker::parse_body(body, &state, "a completion request", "'prompt'")?;
    let entry = state.resolve(request.model.as_deref())?;
    let prompt = request.prompt()?;
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
    };
    let mut rx = worker::spawn(&state, permit, job);
    let meta = Meta {
        id: format!("cmpl-{:016x}", worker::random_u64()),
        model: entry.name,
        created: unix_now(),
    };
    if request.stream.unwrap_or(false) {
        let first = worker::first(&mut rx).await?;
        Ok(sse_response(meta, first, rx))
    } else {
        let (text, finished) = worker::collect(rx).await?;
        let answer = &finished.answer;
        let mut body = meta.object(&text, Some(answer.stop.finish_reason()));
        body["usage"] = json!(Usage::from(&answer.receipt));
        Ok(Json(body).into_response())
    }
}

struct Meta {
    id: String,
    model: String,
    created: u64,
}

impl Meta {
    /// A `text_completion` object with one choice.
    fn object(&self, text: &str, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "text": text,
                "index": 0,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
        })
    }
}

/// The event stream: one object per piece, a last one with `finish_reason` and `usage`, then
/// `[DONE]`. Dropping it (the client left) closes `rx`, which cancels generation.
fn sse_response(meta: Meta, first: Progress, rx: mpsc::Receiver<Progress>) -> Response {
    struct Stream {
        meta: Meta,
        rx: mpsc::Receiver<Progress>,
        queued: VecDeque<SseEvent>,
        ended: bool,
    }
    fn events(s: &mut Stream, progress: Progress) {
        let data = |value: &Value| SseEvent::default().data(value.to_string());
        match progress {
            Progress::Text(text) => s.queued.push_back(data(&s.meta.object(&text, None))),
            Progress::Done(result) => {
                s.ended = true;
                match *result {
                    Ok(finished) => {
                        let answer = &finished.answer;
                        let mut last = s.meta.object("", Some(answer.stop.finish_reason()));
                        last["usage"] = json!(Usage::from(&answer.receipt));
                        s.queued.push_back(data(&last));
                        s.queued.push_back(SseEvent::default().data("[DONE]"));
                    }
                    // The status line is already sent: report the failure in the stream.
                    Err(err) => s.queued.push_back(data(&err.body(Api::OpenAi))),
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
                    s.queued
                        .push_back(SseEvent::default().data(error.to_string()));
                }
            }
        }
    });
    Sse::new(stream).into_response()
}
