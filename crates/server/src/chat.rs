//! `POST /v1/chat/completions`: checks the request, waits its turn for the backend, answers on a
//! blocking thread through the answer loop every front end shares, and replies as one JSON body
//! or as server-sent events. A client that goes away stops its generation at the next token.

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
use hearth_chat::{Answer, Input};
use hearth_wire::openai::{ChatRequest, Choice, Delta, Usage};
use tokio::sync::mpsc;

use crate::error::{Api, AppError};
use crate::openai::{self, json_event, Generation, ReplyMeta};
use crate::state::{unix_now, AppState, ModelRequest};
use crate::worker::{self, Job, Progress};

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, AppError> {
    let request: ChatRequest = worker::parse_body(body, &state, "a chat request", "'messages'")?;
    let entry = state.resolve(request.model.as_deref())?;
    let generation = openai::generation(request, worker::random_u64())?;
    let permit = state.admit()?;
    let Generation {
        messages,
        options,
        stops,
        stream,
    } = generation;
    let job = Job {
        model: ModelRequest::named(entry.name.clone()),
        input: Input::Chat(messages),
        options,
        stops,
        origin: worker::origin(&headers),
    };
    let mut rx = worker::spawn(&state, permit, job);
    let meta = ReplyMeta {
        id: format!("chatcmpl-{:016x}", worker::random_u64()),
        object: if stream {
            "chat.completion.chunk"
        } else {
            "chat.completion"
        },
        model: entry.name,
        created: unix_now(),
    };
    if stream {
        let first = worker::first(&mut rx).await?;
        Ok(sse_response(meta, first, rx))
    } else {
        let (text, finished) = worker::collect(rx).await?;
        Ok(completion_response(&meta, text, &finished.answer))
    }
}

fn completion_response(meta: &ReplyMeta, text: String, answer: &Answer) -> Response {
    let choice = Choice {
        message: Some(Delta {
            role: Some("assistant".to_owned()),
            content: Some(text),
            ..Delta::default()
        }),
        finish_reason: Some(answer.stop.finish_reason().to_owned()),
        ..Choice::default()
    };
    Json(meta.reply(choice, Some(openai::usage(&answer.receipt)))).into_response()
}

/// One chunk of a streamed answer.
fn chunk(
    meta: &ReplyMeta,
    delta: Delta,
    finish_reason: Option<&str>,
    usage: Option<Usage>,
) -> SseEvent {
    let choice = Choice {
        delta: Some(delta),
        finish_reason: finish_reason.map(str::to_owned),
        ..Choice::default()
    };
    json_event(&meta.reply(choice, usage))
}

/// The event stream: a role chunk, one chunk per piece, a last chunk with `finish_reason` and
/// `usage`, then `[DONE]`. Dropping it (the client left) closes `rx`, which cancels generation.
fn sse_response(meta: ReplyMeta, first: Progress, rx: mpsc::Receiver<Progress>) -> Response {
    struct Stream {
        meta: ReplyMeta,
        rx: mpsc::Receiver<Progress>,
        queued: VecDeque<SseEvent>,
        ended: bool,
    }
    let role = Delta {
        role: Some("assistant".to_owned()),
        content: Some(String::new()),
        ..Delta::default()
    };
    let mut state = Stream {
        queued: VecDeque::from([chunk(&meta, role, None, None)]),
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
                        .push_back(json_event(&AppError::Internal.body(Api::OpenAi)));
                }
            }
        }
    });
    Sse::new(events).into_response()
}

fn progress_events(meta: &ReplyMeta, progress: Progress, ended: &mut bool) -> Vec<SseEvent> {
    match progress {
        Progress::Text(text) => {
            let delta = Delta {
                content: Some(text),
                ..Delta::default()
            };
            vec![chunk(meta, delta, None, None)]
        }
        Progress::Done(result) => match *result {
            Ok(finished) => {
                let answer = finished.answer;
                *ended = true;
                let reason = answer.stop.finish_reason();
                let usage = openai::usage(&answer.receipt);
                vec![
                    chunk(meta, Delta::default(), Some(reason), Some(usage)),
                    SseEvent::default().data("[DONE]"),
                ]
            }
            Err(err) => {
                // The status line is already sent: report the failure in the stream and end it.
                *ended = true;
                vec![json_event(&err.body(Api::OpenAi))]
            }
        },
    }
}
