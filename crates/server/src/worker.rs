//! What every generating route shares: reading a JSON body with the field at fault named, and
//! running one answer on a blocking thread through the answer loop every front end uses
//! (`hearth_chat::answer`), with the model loaded on demand, its text sent back piece by piece.
//! A client that goes away (the receiver dropped) stops the generation at the next token.
//! Each answer runs under its client's KV origin ([`origin`]), so the prompt prefixes the
//! backend keeps are reused only for the client that computed them.

use std::hash::{BuildHasher, Hasher};
use std::ops::ControlFlow;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{header, HeaderMap, StatusCode};
use hearth_chat::{Answer, AnswerEvent, AnswerRequest, Input};
use hearth_chat::{ChatOptions, KvOrigin, APP_ORIGIN};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::error::AppError;
use crate::state::{unix_now, AppState, ModelRequest};

/// Pieces buffered between the generating thread and a slow client.
const CHANNEL_CAPACITY: usize = 64;

/// One answer to compute.
#[derive(Debug)]
pub(crate) struct Job {
    /// Which model, with what context and keep-alive.
    pub model: ModelRequest,
    /// The conversation, or raw text to continue.
    pub input: Input,
    /// Sampling and length.
    pub options: ChatOptions,
    /// Strings that end the answer.
    pub stops: Vec<String>,
    /// Whose prompt it is (see [`origin`]).
    pub origin: KvOrigin,
}

/// The origin of requests that carry no API key: all of them share it, and it is never the
/// app's own ([`APP_ORIGIN`]).
const ANONYMOUS_ORIGIN: KvOrigin = APP_ORIGIN + 1;

/// Whose prompt a request brings, for the backend's kept prompt prefixes: each API client is a
/// hash of its `Authorization: Bearer` key, and requests without one share
/// [`ANONYMOUS_ORIGIN`]. No client gets the app's origin, so nobody can time whether the
/// app's conversations (or another key's) began with a text they guess.
pub(crate) fn origin(headers: &HeaderMap) -> KvOrigin {
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, key)| key.trim())
        .filter(|key| !key.is_empty());
    let Some(key) = key else {
        return ANONYMOUS_ORIGIN;
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write(key.as_bytes());
    // The app's and the anonymous origin stay their own (a hash landing on them moves up).
    hasher.finish().max(ANONYMOUS_ORIGIN + 1)
}

/// What the generating thread reports.
pub(crate) enum Progress {
    /// Answer text, stop strings already applied.
    Text(String),
    /// The end: the finished answer (its text was already sent), or the failure. Boxed: it is
    /// sent once per answer, the text pieces many times.
    Done(Box<Result<Finished, AppError>>),
}

/// A finished answer and what it took besides generating.
pub(crate) struct Finished {
    /// The answer, with its receipt.
    pub answer: Answer,
    /// Time spent loading the model for this request (zero when it was loaded).
    pub load: Duration,
}

/// Starts `job` on a blocking thread (holding `permit`, the request's place in line) and
/// returns the stream of its progress.
pub(crate) fn spawn(
    state: &AppState,
    permit: OwnedSemaphorePermit,
    job: Job,
) -> mpsc::Receiver<Progress> {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit; // the place in line is held until generation ends
        generate(&state, job, &tx);
    });
    rx
}

/// Runs one answer with the model (waiting for any before it) and reports to `tx`.
fn generate(state: &AppState, job: Job, tx: &mpsc::Sender<Progress>) {
    if tx.is_closed() {
        tracing::debug!("client left while waiting; not generating");
        return;
    }
    let Job {
        model,
        input,
        options,
        stops,
        origin,
    } = job;
    let request = AnswerRequest {
        input,
        options,
        stops,
        power: None,
        trim_to_fit: false,
    };
    #[allow(clippy::result_large_err)] // the answer loop's error; see `hearth_chat::answer`
    let outcome = state.with_model(&model, |backend| {
        backend.set_kv_origin(origin);
        hearth_chat::answer(backend, request, &mut |event| match event {
            _ if tx.is_closed() => {
                tracing::debug!("client disconnected; cancelling generation");
                ControlFlow::Break(())
            }
            AnswerEvent::Text(text) => match tx.blocking_send(Progress::Text(text)) {
                Ok(()) => ControlFlow::Continue(()),
                Err(_) => ControlFlow::Break(()),
            },
            AnswerEvent::Started(_) | AnswerEvent::Reading(_) | AnswerEvent::Stats(_) => {
                ControlFlow::Continue(())
            }
        })
    });
    let result = match outcome {
        Ok((Ok(answer), load)) => {
            state.record_receipt(&answer.receipt);
            tracing::info!(
                model = %model.name,
                prompt_tokens = answer.receipt.prompt_tokens,
                generated_tokens = answer.receipt.generated_tokens,
                stop = ?answer.stop,
                ttft_secs = answer.receipt.ttft_secs,
                "answer done"
            );
            Ok(Finished { answer, load })
        }
        Ok((Err(answer_error), _)) => Err(AppError::from(answer_error)),
        Err(app_error) => Err(app_error),
    };
    // The client may be gone; then nobody needs the result.
    let _ = tx.blocking_send(Progress::Done(Box::new(result)));
}

/// Waits for the first piece, so a request that fails before generating (a prompt too long,
/// a model that does not load) gets a proper status instead of a stream.
pub(crate) async fn first(rx: &mut mpsc::Receiver<Progress>) -> Result<Progress, AppError> {
    match rx.recv().await.ok_or(AppError::Internal)? {
        Progress::Done(result) => match *result {
            Err(err) => Err(err),
            ok => Ok(Progress::Done(Box::new(ok))),
        },
        text => Ok(text),
    }
}

/// Reads the whole answer: its text and how it ended.
pub(crate) async fn collect(
    mut rx: mpsc::Receiver<Progress>,
) -> Result<(String, Finished), AppError> {
    let mut text = String::new();
    while let Some(progress) = rx.recv().await {
        match progress {
            Progress::Text(piece) => text.push_str(&piece),
            Progress::Done(result) => return Ok((text, (*result)?)),
        }
    }
    tracing::error!("the generating thread ended without a result");
    Err(AppError::Internal)
}

/// Parses a JSON body, naming the field at fault; `what` names the request in messages
/// ("a chat request") and `example` what to send.
pub(crate) fn parse_body<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    state: &AppState,
    what: &str,
    example: &str,
) -> Result<T, AppError> {
    let body = body.map_err(|rejection| body_error(&rejection, state))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(AppError::bad_request(format!(
            "the request body is empty; send a JSON object with {example}"
        )));
    }
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            AppError::bad_request(format!("the request body is not valid JSON: {inner}"))
        } else if path == "." {
            AppError::bad_request(format!("the request body is not {what}: {inner}"))
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
pub(crate) fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(unix_now());
    hasher.finish()
}

/// Nanoseconds, as Ollama writes durations.
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Nanoseconds of a number of seconds (a receipt's timings).
pub(crate) fn nanos_of_secs(secs: f64) -> u64 {
    nanos(Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::ZERO))
}
