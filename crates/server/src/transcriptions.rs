//! OpenAI's `POST /v1/audio/transcriptions`: a multipart form with the sound `file`, `model`
//! (`whisper-1` means the default speech model, else a speech model's name), `language` and
//! `response_format` (`json`: `{text}`, `text`: the plain text, `verbose_json`: with
//! `language`, `duration` and `segments`), answered through the app's speech door
//! (`hearth_app::speech::hear`), always on this machine, whatever the chat model is: by
//! FastFlowLM's Whisper on the NPU when the server was given Hearth's folders and a usable NPU
//! with FastFlowLM is here (the model `whisper-1`, none, or `whisper-v3:turbo`; the processor
//! when the NPU fails), else by Hearth's own Whisper (a speech model named by the request
//! always runs on the processor). Who heard it is the header `X-Hearth-Backend` (`npu` or
//! `cpu`) and, in `json` and `verbose_json`, an extra field `backend`; OpenAI's fields are
//! unchanged.
//!
//! Bounds, as numbers: an upload of at most [`MAX_UPLOAD_BYTES`] (25 MiB, OpenAI's limit; the
//! route's own body limit, above the chat routes'), at most [`MAX_SECONDS`] of sound (checked
//! from the file's header before decoding). Admission is the other routes': a loopback `Host`
//! and `Origin` (the guard), the body read within the body timeout, and a line of its own
//! ([`SPEECH_PLACES`](crate::speech_models::SPEECH_PLACES): one transcribing, one waiting; more get 503), so transcriptions never
//! take the chat models' places. One speech model is kept loaded, the last one used. A client
//! that leaves stops the transcription at its next 30 s window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use hearth_app::speech::{self, HeardTranscript, Limits, SpeechBackend, TranscribeOptions};
use hearth_app::ErrorCode;

use crate::error::AppError;
use crate::state::AppState;

/// The header saying who heard a recording: `npu` or `cpu`.
pub const BACKEND_HEADER: &str = "x-hearth-backend";

/// The route's path.
pub const PATH: &str = "/v1/audio/transcriptions";

/// Largest upload: 25 MiB, as OpenAI's API.
pub const MAX_UPLOAD_BYTES: usize = 25 * 1024 * 1024;

/// Longest recording: two hours.
pub const MAX_SECONDS: f64 = 2.0 * 3600.0;

/// What a transcription request asks.
#[derive(Debug, Default)]
struct Form {
    file: Option<(Option<String>, axum::body::Bytes)>,
    model: Option<String>,
    language: Option<String>,
    response_format: Option<String>,
    timestamps: bool,
}

/// How the answer is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Text,
    VerboseJson,
}

async fn read_form(mut multipart: Multipart) -> Result<Form, AppError> {
    let mut form = Form::default();
    let broken = |e: axum::extract::multipart::MultipartError| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            return AppError::PayloadTooLarge {
                limit: MAX_UPLOAD_BYTES,
            };
        }
        AppError::bad_request(format!(
            "the form could not be read: {}; send multipart/form-data with a 'file' field",
            e.body_text()
        ))
    };
    while let Some(field) = multipart.next_field().await.map_err(broken)? {
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "file" => {
                let file_name = field.file_name().map(str::to_owned);
                let bytes = field.bytes().await.map_err(broken)?;
                form.file = Some((file_name, bytes));
            }
            "model"
            | "language"
            | "response_format"
            | "timestamp_granularities[]"
            | "timestamp_granularities" => {
                let text = field.text().await.map_err(broken)?;
                if text.len() > 256 {
                    return Err(AppError::bad_request(format!(
                        "the field '{name}' is too long"
                    )));
                }
                let text = text.trim().to_owned();
                match name.as_str() {
                    "model" => form.model = Some(text),
                    "language" => form.language = Some(text).filter(|t| !t.is_empty()),
                    "response_format" => form.response_format = Some(text),
                    _ => form.timestamps |= text == "segment",
                }
            }
            // prompt, temperature and fields of later API versions are read and left aside.
            _ => {
                field.bytes().await.map_err(broken)?;
            }
        }
    }
    Ok(form)
}

/// Set when the handler is dropped (the client left): the transcription stops at its next
/// window.
struct ClientGone(Arc<AtomicBool>);

impl Drop for ClientGone {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `POST /v1/audio/transcriptions`.
pub async fn transcriptions(
    State(state): State<AppState>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, AppError> {
    let multipart = multipart.map_err(|e| {
        AppError::bad_request(format!(
            "{}; send the sound as multipart/form-data with a 'file' field",
            e.body_text()
        ))
    })?;
    let form = read_form(multipart).await?;
    let format = match form.response_format.as_deref() {
        None | Some("") | Some("json") => Format::Json,
        Some("text") => Format::Text,
        Some("verbose_json") => Format::VerboseJson,
        Some(other) => {
            return Err(AppError::bad_field(
                "response_format",
                format!(
                    "response_format \"{other}\" is not supported; use json, text or verbose_json"
                ),
            ))
        }
    };
    let (file_name, bytes) = form.file.ok_or_else(|| {
        AppError::bad_field(
            "file",
            "the form has no 'file': attach the sound file as the field 'file'",
        )
    })?;
    let permit = state.speech_models().admit()?;
    let gone = Arc::new(AtomicBool::new(false));
    let _watch = ClientGone(Arc::clone(&gone));
    let shared = state.clone();
    let requested = form.model.filter(|m| !m.is_empty());
    let options = TranscribeOptions {
        language: form.language,
        timestamps: form.timestamps || format == Format::VerboseJson,
        ..TranscribeOptions::default()
    };
    let job = tokio::task::spawn_blocking(move || -> Result<HeardTranscript, AppError> {
        let _permit = permit;
        let extension = file_name
            .as_deref()
            .and_then(|n| n.rsplit_once('.'))
            .map(|(_, ext)| ext.to_ascii_lowercase());
        let limits = Limits {
            max_bytes: MAX_UPLOAD_BYTES as u64,
            max_seconds: MAX_SECONDS,
        };
        let what = "the uploaded file";
        let audio = speech::decode_bytes(bytes, extension.as_deref(), &limits)
            .map_err(|e| input_error(speech::speech_error(what, e)))?;
        // whisper-1 (or no name) lets the rule choose; FastFlowLM's own name asks for the NPU;
        // any other name is a speech model of this machine's processor.
        let npu_name = speech::NPU_ASR_MODEL;
        let choice = match requested.as_deref() {
            None => SpeechBackend::Auto,
            Some(m) if m.eq_ignore_ascii_case(speech::OPENAI_MODEL) => SpeechBackend::Auto,
            Some(m) if m.eq_ignore_ascii_case(npu_name) => SpeechBackend::Npu,
            Some(_) => SpeechBackend::Cpu,
        };
        let cpu_model = match &requested {
            Some(m) if m.eq_ignore_ascii_case(npu_name) => None,
            other => other.clone(),
        };
        let mut cpu_error: Option<AppError> = None;
        let cpu = || {
            let model = shared
                .speech_models()
                .get(cpu_model.as_deref())
                .map_err(|e| {
                    let words = hearth_app::Error::new(ErrorCode::NoModel, format!("{e:?}"));
                    cpu_error = Some(e);
                    words
                })?;
            let mut progress = |_| {
                if gone.load(Ordering::Relaxed) {
                    std::ops::ControlFlow::Break(())
                } else {
                    std::ops::ControlFlow::Continue(())
                }
            };
            let transcript = model
                .transcribe(&audio, &options, &mut progress)
                .map_err(|e| speech::speech_error(what, e))?;
            Ok((transcript, model.name().to_owned()))
        };
        let heard = match shared.speech_models().home() {
            Some(home) => speech::hear(home, choice, &audio, options.language.as_deref(), cpu),
            None if choice == SpeechBackend::Npu => {
                return Err(AppError::bad_field(
                    "model",
                    format!(
                        "{npu_name} runs on the NPU, which this server does not use for speech"
                    ),
                ))
            }
            None => speech::hear_on_cpu(cpu),
        };
        match heard {
            Ok(heard) => Ok(heard),
            Err(_) if cpu_error.is_some() => Err(cpu_error.take().expect("checked")),
            Err(e) if choice == SpeechBackend::Npu => {
                tracing::warn!(error = %e.message, "the NPU could not transcribe");
                Err(AppError::LoadFailed {
                    model: npu_name.to_owned(),
                    message: e.message,
                })
            }
            Err(e) => Err(input_error(e)),
        }
    });
    let heard = job.await.map_err(|e| {
        tracing::error!(error = %e, "the transcription thread ended without a result");
        AppError::Internal
    })??;
    let backend = heard.heard.as_str();
    let transcript = heard.transcript;
    let mut response = match format {
        Format::Text => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", transcript.text),
        )
            .into_response(),
        Format::Json => {
            axum::Json(serde_json::json!({ "text": transcript.text, "backend": backend }))
                .into_response()
        }
        Format::VerboseJson => {
            let segments: Vec<serde_json::Value> = transcript
                .segments
                .iter()
                .enumerate()
                .map(|(id, s)| {
                    serde_json::json!({
                        "id": id,
                        "start": seconds(s.start_s),
                        "end": seconds(s.end_s),
                        "text": s.text,
                    })
                })
                .collect();
            axum::Json(serde_json::json!({
                "task": "transcribe",
                "language": language_name(&transcript.language),
                "duration": seconds(transcript.duration_s),
                "text": transcript.text,
                "segments": segments,
                "backend": backend,
            }))
            .into_response()
        }
    };
    response.headers_mut().insert(
        BACKEND_HEADER,
        axum::http::HeaderValue::from_static(backend),
    );
    Ok(response)
}
/// An app error from decoding or transcribing: the file's fault is a 400 on `file`, the
/// rest a 500 (logged).
fn input_error(error: hearth_app::Error) -> AppError {
    match error.code {
        ErrorCode::InvalidInput | ErrorCode::Unsupported => {
            AppError::bad_field("file", error.message)
        }
        ErrorCode::Cut => {
            tracing::debug!("client left; transcription stopped");
            AppError::Internal
        }
        _ => {
            tracing::error!(error = %error.message, "transcription failed");
            AppError::Internal
        }
    }
}

/// Seconds to the millisecond.
fn seconds(s: f32) -> f64 {
    (f64::from(s) * 1000.0).round() / 1000.0
}

/// The language as OpenAI's verbose_json names it (lowercase English), for the languages
/// Hearth speaks; any other stays its code.
fn language_name(code: &str) -> String {
    match code {
        "en" => "english",
        "zh" => "chinese",
        "de" => "german",
        "fr" => "french",
        "es" => "spanish",
        other => other,
    }
    .to_owned()
}
