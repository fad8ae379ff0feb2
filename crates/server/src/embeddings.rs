//! Sentence embeddings: OpenAI's `POST /v1/embeddings` and Ollama's `POST /api/embed` (and its
//! older `POST /api/embeddings`), answered by the embedding model the request names among the
//! server's (Hearth bundles all-MiniLM-L6-v2, a BERT encoder; an installed Qwen3-Embedding runs
//! as a decoder with last-token pooling), run as the document library runs them
//! (`hearth_app::documents::EngineEmbedding`). One is loaded at a time, at the first request
//! naming it, and kept until a request names another. Chat models do not embed: a request
//! naming one is told which models do.
//!
//! Bounded: a request holds at most [`MAX_INPUTS`] texts and [`MAX_TOKENS`] tokens (counted
//! as the model reads them, after cutting), refused by name before any embedding; the texts are
//! embedded [`BATCH`] at a time and the work stops at the next batch when the client leaves;
//! embedding requests wait in a line of their own, so they cannot take chat's places
//! (`crate::embedding_models::EMBEDDING_PLACES`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use hearth_app::documents::EmbeddingModel;
use hearth_wire::ollama::{EmbedReply, EmbedRequest, EmbeddingReply};
use hearth_wire::openai::{
    self as wire, Embedding, EmbeddingInput, EmbeddingList, EmbeddingRequest, EmbeddingVector,
};

use crate::error::{AppError, OllamaError};
use crate::state::AppState;
use crate::worker;

/// The most texts one request may hold (OpenAI's own limit).
pub const MAX_INPUTS: usize = 2048;

/// The most tokens one request may hold, all texts together.
pub const MAX_TOKENS: usize = 65_536;

/// Texts embedded between two checks that the client is still there.
const BATCH: usize = 16;

/// The texts of an `input` (one text or several, as both APIs accept them), or why there are
/// none or too many.
fn texts(input: EmbeddingInput) -> Result<Vec<String>, AppError> {
    let texts = match input {
        EmbeddingInput::One(text) => vec![text],
        EmbeddingInput::Many(texts) => texts,
    };
    if texts.is_empty() {
        return Err(AppError::bad_field(
            "input",
            "input is an empty list; give at least one text",
        ));
    }
    if texts.len() > MAX_INPUTS {
        return Err(AppError::bad_field(
            "input",
            format!(
                "input holds {} texts; send at most {MAX_INPUTS} per request",
                texts.len()
            ),
        ));
    }
    Ok(texts)
}

/// Set when the request's handler is dropped (the client left): the embedding thread stops
/// at its next batch.
struct ClientGone(Arc<AtomicBool>);

impl Drop for ClientGone {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What one embedding run gives back.
struct Embedded {
    model: String,
    vectors: Vec<Vec<f32>>,
    tokens: usize,
    load: Duration,
}

/// Embeds `texts` with the model `requested` names, on a blocking thread, holding a place in
/// the embedding requests' line. A text longer than the model reads is cut, unless `truncate`
/// is false: then it is refused. Stops when the client leaves (this future is dropped).
async fn embed_texts(
    state: &AppState,
    requested: String,
    texts: Vec<String>,
    truncate: bool,
    dimensions: Option<usize>,
) -> Result<Embedded, AppError> {
    let permit = state.embedding_model().admit()?;
    let gone = Arc::new(AtomicBool::new(false));
    let _watch = ClientGone(Arc::clone(&gone));
    let shared = state.clone();
    let job = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let is_chat_model = shared.entry(&requested).is_ok();
        let (embedder, model, load) = shared.embedding_model().get(&requested, is_chat_model)?;
        if let Some(wanted) = dimensions {
            if wanted != embedder.dimension() {
                return Err(AppError::bad_field(
                    "dimensions",
                    format!(
                        "{requested} makes vectors of {} dimensions, not {wanted}; leave 'dimensions' out",
                        embedder.dimension()
                    ),
                ));
            }
        }
        let engine_error = |e: String| {
            tracing::error!(error = %e, "embedding failed");
            AppError::Internal
        };
        let limit = embedder.max_tokens();
        let mut tokens = 0;
        for text in &texts {
            let count = embedder.count_tokens(text).map_err(engine_error)?;
            if !truncate && count > limit {
                return Err(AppError::ContextFull {
                    needed: count,
                    limit,
                });
            }
            tokens += count.min(limit);
            if tokens > MAX_TOKENS {
                return Err(AppError::bad_field(
                    "input",
                    format!(
                        "input holds more than {MAX_TOKENS} tokens; send fewer or shorter texts per request"
                    ),
                ));
            }
        }
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            if gone.load(Ordering::Relaxed) {
                tracing::debug!("client left; embedding stopped");
                return Err(AppError::Internal);
            }
            vectors.extend(embedder.embed(batch).map_err(engine_error)?);
        }
        Ok(Embedded {
            model,
            vectors,
            tokens,
            load,
        })
    });
    job.await.map_err(|e| {
        tracing::error!(error = %e, "the embedding thread ended without a result");
        AppError::Internal
    })?
}

/// `POST /v1/embeddings`: `{object: "list", data: [{object: "embedding", index, embedding}],
/// model, usage: {prompt_tokens, total_tokens}}`.
pub async fn openai_embeddings(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<EmbeddingList>, AppError> {
    // Token-id inputs are refused: they would be ids of another tokenizer. `dimensions` must
    // be the model's when given; `user` is ignored.
    let request: EmbeddingRequest = worker::parse_body(
        body,
        &state,
        "an embeddings request",
        "'model' and 'input' (a text or a list of texts)",
    )?;
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(AppError::bad_field(
                "encoding_format",
                format!("encoding_format {other:?} is not supported; use \"float\" or \"base64\""),
            ))
        }
    };
    let texts = texts(request.input)?;
    let dimensions = request
        .dimensions
        .map(|d| usize::try_from(d).unwrap_or(usize::MAX));
    let embedded = embed_texts(&state, request.model, texts, true, dimensions).await?;
    let data = embedded
        .vectors
        .into_iter()
        .enumerate()
        .map(|(index, vector)| Embedding {
            object: "embedding".to_owned(),
            index,
            embedding: if base64 {
                EmbeddingVector::Base64(base64_f32(&vector))
            } else {
                EmbeddingVector::Float(vector)
            },
        })
        .collect();
    let tokens = embedded.tokens as u64;
    Ok(Json(EmbeddingList {
        object: "list".to_owned(),
        data,
        model: embedded.model,
        usage: wire::Usage {
            prompt_tokens: Some(tokens),
            total_tokens: Some(tokens),
            ..wire::Usage::default()
        },
    }))
}

/// `POST /api/embed`: `{model, embeddings: [[...]], total_duration, load_duration,
/// prompt_eval_count}`.
pub async fn ollama_embed(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<EmbedReply>, OllamaError> {
    let started = Instant::now();
    let request: EmbedRequest =
        worker::parse_body(body, &state, "an embed request", "'model' and 'input'")?;
    let model = crate::ollama::required_model(request.model.as_deref())?.to_owned();
    let input = request
        .input
        .or(request.prompt.map(EmbeddingInput::One))
        .ok_or_else(|| {
            AppError::bad_field("input", "input is required: a text or a list of texts")
        })?;
    let texts = texts(input)?;
    let embedded = embed_texts(
        &state,
        model,
        texts,
        request.truncate.unwrap_or(true),
        request.dimensions,
    )
    .await?;
    Ok(Json(EmbedReply {
        model: embedded.model,
        embeddings: embedded.vectors,
        total_duration: worker::nanos(started.elapsed()),
        load_duration: worker::nanos(embedded.load),
        prompt_eval_count: embedded.tokens,
    }))
}

/// `POST /api/embeddings` (Ollama's older route): `{model, prompt}` gives `{embedding: [...]}`.
pub async fn ollama_embeddings(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<EmbeddingReply>, OllamaError> {
    let request: EmbedRequest = worker::parse_body(
        body,
        &state,
        "an embeddings request",
        "'model' and 'prompt'",
    )?;
    let model = crate::ollama::required_model(request.model.as_deref())?.to_owned();
    let prompt = request
        .prompt
        .ok_or_else(|| AppError::bad_field("prompt", "prompt is required: the text to embed"))?;
    let embedded = embed_texts(&state, model, vec![prompt], true, None).await?;
    let embedding = embedded.vectors.into_iter().next().unwrap_or_default();
    Ok(Json(EmbeddingReply { embedding }))
}

/// The little-endian bytes of `vector` in standard base64 (with padding), as OpenAI sends
/// `encoding_format: "base64"`.
fn base64_f32(vector: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_encoding() {
        // base64.b64encode(struct.pack('<f', 1.0)) == b'AACAPw=='
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        // struct.pack('<3f', 1.0, -2.0, 0.5) -> 'AACAPwAAAMAAAAA/'
        assert_eq!(base64_f32(&[1.0, -2.0, 0.5]), "AACAPwAAAMAAAAA/");
        assert_eq!(base64_f32(&[]), "");
    }
}
