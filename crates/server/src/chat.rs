//! `POST /v1/chat/completions`: checks the request, waits its turn for the backend, answers on a
//! blocking thread through the answer loop every front end shares, and replies as one JSON body
//! or as server-sent events. A client that goes away stops its generation at the next token.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::ops::ControlFlow;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use hearth_chat::{Answer, AnswerEvent, AnswerRequest, Input};
use hearth_engine::{ChatMessage, ChatOptions};
use tokio::sync::mpsc;

use crate::error::AppError;
use crate::openai::{
    AssistantMessage, ChatChunk, ChatCompletion, ChatRequest, Choice, ChunkChoice, Delta,
    Generation, Usage,
};
use crate::state::{unix_now, AppState};

/// Pieces buffered between the generating thread and a slow client.
const CHANNEL_CAPACITY: usize = 64;

/// What the generating thread reports.
enum Progress {
    /// Answer text, stop strings already applied.
    Text(String),
    /// The end: the finished answer (its text was already sent), or the failure. Boxed: it is
    /// sent once per answer, the text pieces many times.
    Done(Box<Result<Answer, AppError>>),
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let body = body.map_err(|rejection| body_error(&rejection, &state))?;
    let request = parse_request(&body)?;
    if let Some(model) = &request.model {
        if model != state.model_id() {
            return Err(AppError::ModelNotFound {
                requested: model.clone(),
                served: state.model_id().to_owned(),
            });
        }
    }
    let generation = request.into_generation(random_u64())?;
    let permit = state.admit()?;

    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let worker_state = state.clone();
    let Generation {
        messages,
        options,
        stops,
        stream,
    } = generation;
    tokio::task::spawn_blocking(move || {
        let _permit = permit; // the place in line is held until generation ends
        generate(&worker_state, messages, options, stops, &tx);
    });

    let meta = ResponseMeta {
        id: format!("chatcmpl-{:016x}", random_u64()),
        model: state.model_id().to_owned(),
        created: unix_now(),
    };
    if stream {
        // Wait for the first piece so a request that fails before generating (e.g. a prompt too
        // long for the context) gets a proper status instead of a stream.
        let first = rx.recv().await.ok_or(AppError::Internal)?;
        let first = match first {
            Progress::Done(result) => match *result {
                Err(err) => return Err(err),
                ok => Progress::Done(Box::new(ok)),
            },
            text => text,
        };
        Ok(sse_response(meta, first, rx))
    } else {
        let mut text = String::new();
        while let Some(progress) = rx.recv().await {
            match progress {
                Progress::Text(piece) => text.push_str(&piece),
                Progress::Done(result) => {
                    let answer = (*result)?;
                    return Ok(completion_response(&meta, &text, &answer));
                }
            }
        }
        tracing::error!("the generating thread ended without a result");
        Err(AppError::Internal)
    }
}

/// Runs one answer with the backend (waiting for any before it) and reports to `tx`.
fn generate(
    state: &AppState,
    messages: Vec<ChatMessage>,
    options: ChatOptions,
    stops: Vec<String>,
    tx: &mpsc::Sender<Progress>,
) {
    if tx.is_closed() {
        tracing::debug!("client left while waiting; not generating");
        return;
    }
    let request = AnswerRequest {
        input: Input::Chat(messages),
        options,
        stops,
        telemetry_root: None,
        trim_to_fit: false,
    };
    #[allow(clippy::result_large_err)] // the answer loop's error; see `hearth_chat::answer`
    let outcome = state.with_backend(|backend| {
        hearth_chat::answer(backend, request, &mut |event| match event {
            _ if tx.is_closed() => {
                tracing::debug!("client disconnected; cancelling generation");
                ControlFlow::Break(())
            }
            AnswerEvent::Text(text) => match tx.blocking_send(Progress::Text(text)) {
                Ok(()) => ControlFlow::Continue(()),
                Err(_) => ControlFlow::Break(()),
            },
            AnswerEvent::Started(_) | AnswerEvent::Stats(_) => ControlFlow::Continue(()),
        })
    });
    let result = match outcome {
        Ok(Ok(answer)) => {
            state.record_receipt(&answer.receipt);
            tracing::info!(
                prompt_tokens = answer.receipt.prompt_tokens,
                generated_tokens = answer.receipt.generated_tokens,
                stop = ?answer.stop,
                ttft_secs = answer.receipt.ttft_secs,
                "chat completion done"
            );
            Ok(answer)
        }
        Ok(Err(answer_error)) => Err(AppError::from(answer_error)),
        Err(app_error) => Err(app_error),
    };
    // The client may be gone; then nobody needs the result.
    let _ = tx.blocking_send(Progress::Done(Box::new(result)));
}

struct ResponseMeta {
    id: String,
    model: String,
    created: u64,
}

fn completion_response(meta: &ResponseMeta, text: &str, answer: &Answer) -> Response {
    Json(ChatCompletion {
        id: &meta.id,
        object: "chat.completion",
        created: meta.created,
        model: &meta.model,
        choices: [Choice {
            index: 0,
            message: AssistantMessage {
                role: "assistant",
                content: text,
            },
            finish_reason: answer.stop.finish_reason(),
        }],
        usage: Usage::from(&answer.receipt),
    })
    .into_response()
}

impl ResponseMeta {
    fn chunk(
        &self,
        delta: Delta<'_>,
        finish_reason: Option<&'static str>,
        usage: Option<Usage>,
    ) -> SseEvent {
        let chunk = ChatChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: [ChunkChoice {
                index: 0,
                delta,
                finish_reason,
            }],
            usage,
        };
        json_event(&chunk)
    }
}

fn json_event(value: &impl serde::Serialize) -> SseEvent {
    // Serializing these plain structs cannot fail.
    SseEvent::default().data(serde_json::to_string(value).unwrap_or_default())
}

/// The event stream: a role chunk, one chunk per piece, a last chunk with `finish_reason` and
/// `usage`, then `[DONE]`. Dropping it (the client left) closes `rx`, which cancels generation.
fn sse_response(meta: ResponseMeta, first: Progress, rx: mpsc::Receiver<Progress>) -> Response {
    struct Stream {
        meta: ResponseMeta,
        rx: mpsc::Receiver<Progress>,
        queued: VecDeque<SseEvent>,
        ended: bool,
    }
    let role = Delta {
        role: Some("assistant"),
        content: Some(""),
    };
    let mut state = Stream {
        queued: VecDeque::from([meta.chunk(role, None, None)]),
        meta,
        rx,
        ended: false,
    };
    state
        .queued
        .extend(progress_events(&state.meta, first, &mut state.ended));
    let events = stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.queued.pop_front() {
                return Some((Ok::<_, Infallible>(event), s));
            }
            if s.ended {
                return None;
            }
            match s.rx.recv().await {
                Some(progress) => {
                    let events = progress_events(&s.meta, progress, &mut s.ended);
                    s.queued.extend(events);
                }
                None => {
                    tracing::error!("the generating thread ended without a result");
                    s.ended = true;
                    s.queued
                        .push_back(json_event(&error_body(&AppError::Internal)));
                }
            }
        }
    });
    Sse::new(events).into_response()
}

fn progress_events(meta: &ResponseMeta, progress: Progress, ended: &mut bool) -> Vec<SseEvent> {
    match progress {
        Progress::Text(text) => {
            let delta = Delta {
                role: None,
                content: Some(&text),
            };
            vec![meta.chunk(delta, None, None)]
        }
        Progress::Done(result) => match *result {
            Ok(answer) => {
                *ended = true;
                let delta = Delta {
                    role: None,
                    content: None,
                };
                let reason = answer.stop.finish_reason();
                let usage = Usage::from(&answer.receipt);
                vec![
                    meta.chunk(delta, Some(reason), Some(usage)),
                    SseEvent::default().data("[DONE]"),
                ]
            }
            Err(err) => {
                // The status line is already sent: report the failure in the stream and end it.
                *ended = true;
                vec![json_event(&error_body(&err))]
            }
        },
    }
}

fn error_body(err: &AppError) -> serde_json::Value {
    serde_json::json!({ "error": { "message": err.message(), "code": err.status().as_u16() } })
}

/// Parses the body, naming the field at fault.
fn parse_request(body: &[u8]) -> Result<ChatRequest, AppError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(AppError::bad_request(
            "the request body is empty; send a JSON object with 'messages'",
        ));
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            AppError::bad_request(format!("the request body is not valid JSON: {inner}"))
        } else if path == "." {
            AppError::bad_request(format!("the request body is not a chat request: {inner}"))
        } else {
            AppError::bad_request(format!("'{path}' is invalid: {inner}"))
        }
    })
}

fn body_error(rejection: &BytesRejection, state: &AppState) -> AppError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::PayloadTooLarge {
            limit: state.options().body_limit,
        }
    } else {
        AppError::bad_request(format!(
            "the request body could not be read: {}",
            rejection.body_text()
        ))
    }
}

/// A random number from the standard library's per-process hash keys (no extra dependency):
/// the seed of requests that give none, and response ids.
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(unix_now());
    hasher.finish()
}
