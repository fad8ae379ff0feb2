//! Ollama's API, as Ollama answers it (its `docs/api.md` and `api/types.go`): `POST /api/chat`
//! and `/api/generate` streamed as newline-delimited JSON unless `"stream": false`, `POST
//! /api/show`, `GET /api/tags`, `/api/ps` and `/api/version` (`POST /api/embed` with the
//! embedding model is in `crate::embeddings`). Errors are `{"error": "..."}`.
//!
//! This module holds what the routes share: the request fields common to chat and generate,
//! `options` mapped onto Hearth's sampling, and the newline-delimited JSON stream. Where Hearth
//! differs from Ollama is written in docs/ollama-api.md.

pub mod chat;
pub mod generate;
pub mod models;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::{Instant, SystemTime};

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use hearth_chat::Receipt;
use hearth_chat::{ChatOptions, ResponseFormat, SamplingParams};
use hearth_wire::ollama::{Common, Counters};
use serde_json::Value;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::catalog::rfc3339;
use crate::error::{Api, AppError};
use crate::state::{AppState, ModelRequest};
use crate::worker::{nanos, nanos_of_secs, Finished, Progress};

/// Options Ollama accepts that Hearth reads but that change nothing here (the engine picks its
/// own threads, batch and memory layout); accepted so clients that send them still work.
const IGNORED_OPTIONS: &[&str] = &[
    "num_keep",
    "typical_p",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "penalize_newline",
    "numa",
    "num_batch",
    "num_gpu",
    "main_gpu",
    "use_mmap",
    "use_mlock",
    "num_thread",
    "low_vram",
    "vocab_only",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "tfs_z",
    "draft_num_predict",
];

/// `options` and the other common fields, checked and mapped onto Hearth's settings.
#[derive(Debug)]
pub struct Mapped {
    /// Sampling, length and thinking.
    pub options: ChatOptions,
    /// Stop strings.
    pub stops: Vec<String>,
    /// Context the request needs (`num_ctx`).
    pub num_ctx: Option<usize>,
    /// Stream or not.
    pub stream: bool,
}

/// Checks the common fields and maps them; `default_seed` is used when `options.seed` is
/// absent or negative (Ollama's "random").
pub fn map(common: &Common, default_seed: u64) -> Result<Mapped, AppError> {
    let mut options = ChatOptions {
        format: response_format(common.format.as_ref())?,
        // Ollama's default num_predict is -1: until the model ends or the context fills.
        max_tokens: usize::MAX,
        enable_thinking: think(common.think.as_ref())?,
        ..ChatOptions::default()
    };
    let mut sampling = SamplingParams {
        seed: default_seed,
        ..SamplingParams::default()
    };
    let mut stops = Vec::new();
    let mut num_ctx = None;
    for (key, value) in common.options.iter().flatten() {
        match key.as_str() {
            "temperature" => sampling.temperature = float(key, value)?,
            "top_p" => sampling.top_p = float(key, value)?,
            "min_p" => sampling.min_p = float(key, value)?,
            "repeat_penalty" => sampling.repetition_penalty = float(key, value)?,
            "top_k" => {
                sampling.top_k = usize::try_from(integer(key, value)?).map_err(|_| {
                    AppError::bad_request("option 'top_k' must be 0 (all tokens) or more")
                })?
            }
            "seed" => {
                let seed = integer(key, value)?;
                if seed >= 0 {
                    sampling.seed = seed as u64;
                }
            }
            "num_predict" => {
                options.max_tokens = match integer(key, value)? {
                    // -1: no limit; -2: fill the context. Both end at the context here.
                    -1 | -2 => usize::MAX,
                    n if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
                    n => {
                        return Err(AppError::bad_request(format!(
                            "option 'num_predict' is {n}; use at least 1, or -1 for no limit"
                        )))
                    }
                }
            }
            "num_ctx" => {
                let n = integer(key, value)?;
                if n < 1 {
                    return Err(AppError::bad_request(format!(
                        "option 'num_ctx' is {n}; use at least 1"
                    )));
                }
                num_ctx = Some(usize::try_from(n).unwrap_or(usize::MAX));
            }
            "stop" => stops = strings(key, value)?,
            known if IGNORED_OPTIONS.contains(&known) => {}
            unknown => {
                // As Ollama: an unknown option is logged and ignored.
                tracing::warn!(option = unknown, "invalid option provided; ignored");
            }
        }
    }
    sampling
        .validate()
        .map_err(|e| AppError::bad_request(format!("invalid options: {e}")))?;
    options.sampling = sampling;
    Ok(Mapped {
        options,
        stops,
        num_ctx,
        stream: common.stream.unwrap_or(true),
    })
}

/// `format`: `"json"` for any JSON object, or a JSON schema the answer must match (checked
/// here, so a schema Hearth cannot follow is refused before any work).
fn response_format(format: Option<&Value>) -> Result<ResponseFormat, AppError> {
    let format = match format {
        None | Some(Value::Null) => return Ok(ResponseFormat::Text),
        Some(Value::String(s)) if s.is_empty() => return Ok(ResponseFormat::Text),
        Some(Value::String(s)) if s == "json" => ResponseFormat::JsonObject,
        Some(schema @ Value::Object(_)) => ResponseFormat::JsonSchema(schema.clone()),
        Some(other) => {
            return Err(AppError::bad_field(
                "format",
                format!("'format' must be \"json\" or a JSON schema object, not {other}"),
            ))
        }
    };
    format
        .validate()
        .map_err(|e| AppError::bad_field("format", format!("invalid format: {e}")))?;
    Ok(format)
}

/// `think`: a boolean goes to the chat template as `enable_thinking`; levels are refused.
fn think(value: Option<&Value>) -> Result<Option<bool>, AppError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(AppError::bad_field(
            "think",
            format!(
                "think {other} is not supported: Hearth passes think true or false to the \
                 model's chat template and has no thinking levels"
            ),
        )),
    }
}

fn float(key: &str, value: &Value) -> Result<f32, AppError> {
    value.as_f64().map(|v| v as f32).ok_or_else(|| {
        AppError::bad_request(format!("option '{key}' must be a number, not {value}"))
    })
}

fn integer(key: &str, value: &Value) -> Result<i64, AppError> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        _ => None,
    }
    .ok_or_else(|| AppError::bad_request(format!("option '{key}' must be an integer, not {value}")))
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, AppError> {
    let bad = || {
        AppError::bad_request(format!(
            "option '{key}' must be a list of strings, not {value}"
        ))
    };
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(list) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(bad))
            .collect(),
        _ => Err(bad()),
    }
}

/// The model a request names: required, as in Ollama.
pub(crate) fn required_model(model: Option<&str>) -> Result<&str, AppError> {
    match model {
        Some(name) if !name.trim().is_empty() => Ok(name),
        _ => Err(AppError::bad_field("model", "model is required")),
    }
}

/// Ollama's counters and durations (nanoseconds) for a finished answer, on the final object
/// of a stream or the one object of a plain answer.
pub(crate) fn metrics(finished: &Finished, started: Instant) -> Counters {
    let receipt: &Receipt = &finished.answer.receipt;
    let prefill_secs = receipt
        .backend_timings
        .as_ref()
        .and_then(|t| t.prefill_secs)
        .unwrap_or(receipt.ttft_secs);
    Counters {
        done_reason: finished.answer.stop.finish_reason().to_string(),
        total_duration: Some(nanos(started.elapsed())),
        load_duration: Some(nanos(finished.load)),
        prompt_eval_count: Some(receipt.prompt_tokens),
        prompt_eval_duration: Some(nanos_of_secs(prefill_secs)),
        eval_count: Some(receipt.generated_tokens),
        eval_duration: Some(nanos_of_secs(receipt.decode_secs)),
    }
}

/// The counters of a request that only loaded or unloaded: just the reason.
pub(crate) fn done_only(reason: &str) -> Counters {
    Counters {
        done_reason: reason.to_string(),
        ..Counters::default()
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

/// A wire reply as the JSON value a stream line or a whole answer is written from. Ollama's
/// reply types hold only strings, numbers, lists and string-keyed maps, which always serialize.
pub(crate) fn to_value(reply: &impl serde::Serialize) -> Value {
    serde_json::to_value(reply).expect("an Ollama reply serializes")
}

/// `created_at` now.
pub(crate) fn created_at() -> String {
    rfc3339(SystemTime::now())
}

/// How a route turns progress into objects: one per piece of text, and the last one.
pub(crate) struct Shape {
    /// The object carrying a piece of text (`done: false`).
    pub piece: fn(&str, &str) -> Value,
    /// The last object (`done: true`) from the model's name, the whole text (empty when
    /// streamed) and the counters.
    pub last: fn(&str, &str, Counters) -> Value,
}

/// The newline-delimited JSON stream of an answer: one object per piece, then the last with
/// the counters, or `{"error": ...}` if the answer fails midway. Dropping it (the client left)
/// closes `rx`, which cancels the generation.
pub(crate) fn ndjson_response(
    model: String,
    shape: Shape,
    started: Instant,
    first: Progress,
    rx: mpsc::Receiver<Progress>,
) -> Response {
    struct Stream {
        model: String,
        shape: Shape,
        started: Instant,
        rx: mpsc::Receiver<Progress>,
        queued: VecDeque<Bytes>,
        ended: bool,
    }
    let line = |value: &Value| {
        let mut text = value.to_string();
        text.push('\n');
        Bytes::from(text)
    };
    let to_lines = move |s: &mut Stream, progress: Progress| match progress {
        Progress::Text(text) => s.queued.push_back(line(&(s.shape.piece)(&s.model, &text))),
        Progress::Done(result) => {
            s.ended = true;
            let value = match *result {
                Ok(finished) => (s.shape.last)(&s.model, "", metrics(&finished, s.started)),
                Err(err) => err.body(Api::Ollama),
            };
            s.queued.push_back(line(&value));
        }
    };
    let mut state = Stream {
        model,
        shape,
        started,
        rx,
        queued: VecDeque::new(),
        ended: false,
    };
    to_lines(&mut state, first);
    let lines = stream::unfold(state, move |mut s| async move {
        loop {
            if let Some(bytes) = s.queued.pop_front() {
                return Some((Ok::<_, Infallible>(bytes), s));
            }
            if s.ended {
                return None;
            }
            match s.rx.recv().await {
                Some(progress) => to_lines(&mut s, progress),
                None => {
                    tracing::error!("the generating thread ended without a result");
                    s.ended = true;
                    s.queued
                        .push_back(line(&AppError::Internal.body(Api::Ollama)));
                }
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn common_of(json: Value) -> Common {
        serde_json::from_value(json).expect("valid fields")
    }

    #[test]
    fn options_map_onto_hearths_sampling() {
        let m = map(
            &common_of(json!({"options": {
                "temperature": 0, "top_k": 5, "top_p": 0.5, "min_p": 0.1, "repeat_penalty": 1.1,
                "seed": 42, "num_predict": 7, "num_ctx": 64, "stop": ["x"], "num_thread": 8,
                "made_up": 1
            }})),
            1,
        )
        .unwrap();
        let s = &m.options.sampling;
        assert_eq!(
            (s.temperature, s.top_k, s.top_p, s.min_p, s.seed),
            (0.0, 5, 0.5, 0.1, 42)
        );
        assert_eq!(s.repetition_penalty, 1.1);
        assert_eq!(m.options.max_tokens, 7);
        assert_eq!(m.num_ctx, Some(64));
        assert_eq!(m.stops, ["x"]);
        assert!(m.stream, "Ollama streams by default");
    }

    #[test]
    fn defaults_follow_ollama_where_hearth_can() {
        let m = map(
            &common_of(json!({"stream": false, "options": {"seed": -1, "num_predict": -1}})),
            9,
        )
        .unwrap();
        assert!(!m.stream);
        assert_eq!(m.options.sampling.seed, 9, "a negative seed is random");
        assert_eq!(m.options.max_tokens, usize::MAX, "-1 is no limit");
    }

    #[test]
    fn bad_options_are_refused_naming_the_option() {
        for (options, says) in [
            (
                json!({"temperature": "hot"}),
                "'temperature' must be a number",
            ),
            (json!({"top_p": 0}), "top_p"),
            (json!({"num_predict": 0}), "'num_predict' is 0"),
            (json!({"num_ctx": 1.5}), "'num_ctx' must be an integer"),
            (json!({"stop": [1]}), "'stop' must be a list of strings"),
        ] {
            let err = map(&common_of(json!({ "options": options })), 0).unwrap_err();
            assert_eq!(err.status(), 400);
            assert!(err.message().contains(says), "{}", err.message());
        }
    }

    #[test]
    fn think_levels_and_bad_formats_are_refused_and_json_formats_map() {
        assert_eq!(
            map(&common_of(json!({"think": true})), 0)
                .unwrap()
                .options
                .enable_thinking,
            Some(true)
        );
        assert!(map(&common_of(json!({"think": "high"})), 0).is_err());
        assert!(map(&common_of(json!({"format": 3})), 0).is_err());
        let json_mode = map(&common_of(json!({"format": "json"})), 0).unwrap();
        assert_eq!(json_mode.options.format, ResponseFormat::JsonObject);
        let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}}});
        let with_schema = map(&common_of(json!({ "format": schema })), 0).unwrap();
        assert_eq!(
            with_schema.options.format,
            ResponseFormat::JsonSchema(schema)
        );
    }
}
