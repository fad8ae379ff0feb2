//! A small blocking client of OpenAI-compatible servers (llama.cpp's server, vLLM, Ollama,
//! Lemonade, FastFlowLM, another Hearth), over `ureq` with rustls.
//!
//! - `GET /v1/models`: the models a server offers ([`OpenAiClient::models`]);
//! - `POST /v1/chat/completions` with `stream: true`: the answer as server-sent events, read line
//!   by line as they arrive ([`OpenAiClient::stream_chat`]);
//! - `POST /v1/completions` with `stream: true`: a raw prompt's continuation, read the same way
//!   from `choices[0].text` ([`OpenAiClient::stream_completion`]).
//!
//! What servers do differently, and how it is read:
//! - `usage` may come in every chunk, only in the last one, or never; the last one seen counts.
//!   FastFlowLM adds timing fields to it (`prefill_duration_ttft`, `prefill_speed_tps`,
//!   `decoding_duration`, `decoding_speed_tps`, `load_duration`, each possibly `null`);
//!   llama.cpp's server sends a `timings` object instead. Both become [`BackendTimings`].
//! - Reasoning text (`delta.reasoning_content`, or `delta.reasoning`) is passed on wrapped in
//!   `<think>`…`</think>` so the app folds it like a model's own thinking.
//! - An error can arrive as a JSON body with an `error` key even with HTTP 200 (FastFlowLM), or
//!   as an event in the middle of a stream.
//! - A stream that ends without `[DONE]` or a `finish_reason` was cut: that is an error
//!   ([`FailureKind::Cut`]); the text already passed on stays with the caller.
//!
//! The API key is sent only to the configured address: redirects are never followed (a redirect
//! is reported as an error that names where it pointed), no proxy from the environment is used,
//! and the key never appears in a message, a `Debug` output or a log line.

use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hearth_chat::backend::{BackendError, BackendTimings, FailureKind, TextSink};
use hearth_engine::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::remote::sse::{EventReader, Item, SseError};

/// Most bytes of a JSON reply (`/v1/models`, an error body, a non-streamed answer) read.
const MAX_JSON_BODY: u64 = 8 << 20;
/// Most bytes of one event of a stream (all its lines together: one chunk of JSON).
pub const MAX_EVENT_BYTES: usize = 4 << 20;
/// How often a caller waiting on a silent stream gets an empty piece, to check its Stop.
pub const STOP_CHECK_EVERY: Duration = Duration::from_secs(1);
/// Pieces an answer may run past `max_tokens` (servers count tokens their own way): a quarter
/// more, plus this many.
const ANSWER_MARGIN_TOKENS: usize = 64;
/// A generous bound on the bytes of one token, to bound an answer sent in few large pieces.
const MAX_BYTES_PER_TOKEN: usize = 16;
/// The answer length assumed when a request names none.
const DEFAULT_MAX_TOKENS: usize = 32_768;
/// Most characters of a server's own words quoted in a message.
const MAX_QUOTE: usize = 200;

/// An API key: sent as `Authorization: Bearer <key>`, never shown. `Debug` prints `<hidden>`;
/// serialized as the plain string (for the 0600 settings file only).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text (surrounding whitespace, as pasted, is dropped); None when empty.
    pub fn new(text: &str) -> Option<ApiKey> {
        let text = text.trim();
        (!text.is_empty()).then(|| ApiKey(text.to_owned()))
    }

    /// The key itself, to send. Never log or show it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// How the client connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Longest wait for a connection (name lookup, TCP, TLS). By default, 10 s.
    pub connect_timeout: Duration,
    /// Longest silence while waiting for a reply or in the middle of a stream, and longest
    /// time a stream may go on without text (keep-alive comments do not count): a server
    /// silent for longer is reported as stalled. By default, 60 s (tests use about 1 s).
    pub read_timeout: Duration,
    /// Keep connections open between requests. FastFlowLM closes its socket after every
    /// response, so reusing one fails: turn this off for it. By default, on.
    pub reuse_connections: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            reuse_connections: true,
        }
    }
}

/// A model a server offers, from `/v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerModel {
    /// Its id, as the server wants it in requests.
    pub id: String,
    /// Who owns it, as the server says (`owned_by`).
    pub owned_by: Option<String>,
    /// Positions it holds, when the server says (vLLM's `max_model_len`).
    pub context_length: Option<usize>,
}

/// One request for a streamed chat answer.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The model id, exactly as the server lists it.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Longest answer in tokens.
    pub max_tokens: Option<usize>,
    /// Sampling temperature (0 = greedy).
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k sampling (llama.cpp, vLLM; ignored elsewhere).
    pub top_k: Option<usize>,
    /// Min-p sampling (llama.cpp, vLLM; ignored elsewhere).
    pub min_p: Option<f32>,
    /// Repetition penalty, sent as `repeat_penalty` (llama.cpp) and `repetition_penalty` (vLLM,
    /// FastFlowLM).
    pub repetition_penalty: Option<f32>,
    /// Random seed.
    pub seed: Option<u64>,
    /// More fields sent as they are (e.g. `chat_template_kwargs`, FastFlowLM's `think`).
    pub extra: serde_json::Map<String, Value>,
    /// Stop with [`FailureKind::WrongModel`] when a chunk names another model than `model`
    /// (before any of its text is passed on). By default, off: read
    /// [`StreamOutcome::model`] instead.
    pub require_model: bool,
}

impl ChatRequest {
    /// The JSON body sent.
    pub fn body(&self) -> Value {
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|m| serde_json::json!({ "role": m.role.as_str(), "content": m.content }))
            .collect();
        let mut body = serde_json::Map::new();
        body.insert("model".into(), self.model.clone().into());
        body.insert("messages".into(), messages.into());
        body.insert("stream".into(), true.into());
        // OpenAI and vLLM send `usage` in a last chunk only when asked.
        body.insert(
            "stream_options".into(),
            serde_json::json!({ "include_usage": true }),
        );
        // Absent fields are left out, never sent as null: FastFlowLM fails on a null.
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(name.into(), value);
            }
        };
        put("max_tokens", self.max_tokens.map(Value::from));
        put("temperature", self.temperature.map(|v| rounded(v).into()));
        put("top_p", self.top_p.map(|v| rounded(v).into()));
        put("top_k", self.top_k.map(Value::from));
        put("min_p", self.min_p.map(|v| rounded(v).into()));
        put(
            "repeat_penalty",
            self.repetition_penalty.map(|v| rounded(v).into()),
        );
        put(
            "repetition_penalty",
            self.repetition_penalty.map(|v| rounded(v).into()),
        );
        put("seed", self.seed.map(Value::from));
        for (name, value) in &self.extra {
            body.insert(name.clone(), value.clone());
        }
        Value::Object(body)
    }

    /// The JSON body sent to `/v1/completions` for the raw `prompt`: [`ChatRequest::body`]
    /// with `prompt` in place of `messages`.
    pub fn completion_body(&self, prompt: &str) -> Value {
        let mut body = self.body();
        if let Some(fields) = body.as_object_mut() {
            fields.remove("messages");
            fields.insert("prompt".into(), prompt.into());
        }
        body
    }
}

/// An f32 setting as the decimal people typed (0.7, not 0.699999988079071).
fn rounded(v: f32) -> f64 {
    (v as f64 * 1e6).round() / 1e6
}

/// Token counts a server reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerUsage {
    /// Tokens of the prompt.
    pub prompt_tokens: Option<usize>,
    /// Tokens of the answer.
    pub completion_tokens: Option<usize>,
}

/// How a stream ended without an error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamOutcome {
    /// The model the server says answered (the first chunk's `model`).
    pub model: Option<String>,
    /// `finish_reason` of the last choice (`stop`, `length`, ...), when sent.
    pub finish_reason: Option<String>,
    /// The last `usage` seen, when any.
    pub usage: Option<ServerUsage>,
    /// The server's own timing fields.
    pub timings: BackendTimings,
    /// The caller's sink asked to stop; the connection was dropped.
    pub cancelled: bool,
}

/// A client of one OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiClient {
    base_url: String,
    host_port: String,
    key: Option<ApiKey>,
    options: ClientOptions,
    agent: ureq::Agent,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("base_url", &self.base_url)
            .field("key", &self.key)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A server address that Hearth can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `scheme://host[:port][/path]`, without a trailing `/` or `/v1`.
    pub url: String,
    /// `host:port`, the port filled in from the scheme when not written.
    pub host_port: String,
    /// The host alone (no brackets around an IPv6 address).
    pub host: String,
}

/// Checks a server address and puts it in the form requests are built from: http or https
/// only, a host, no user name, query or fragment; a trailing `/` or `/v1` is dropped so either
/// form can be pasted. The error says what is wrong, in plain words.
pub fn parse_base_url(text: &str) -> Result<BaseUrl, String> {
    let text = text.trim();
    let bad = |why: &str| format!("Hearth cannot use the server address {text:?}: {why}");
    if text.is_empty() {
        return Err("no server address given: enter one like http://192.168.1.20:8000".into());
    }
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(bad(
            "it has no http:// or https:// in front (for example http://192.168.1.20:8000)",
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(bad("only http:// and https:// addresses work")),
    };
    if rest.contains(['?', '#']) {
        return Err(bad("remove the part after ? or #"));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "it has a user name or password in it; put the key in the API key field instead",
        ));
    }
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err(bad("the IPv6 address has no closing ]"));
        };
        (host.to_owned(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (authority.to_owned(), None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return Err(bad(
            "the server name is missing or has characters names cannot have",
        ));
    }
    let port = match port {
        None | Some("") => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad("the port must be a number from 1 to 65535")),
        },
    };
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("the path has spaces or control characters"));
    }
    let mut path = path.trim_end_matches('/');
    if let Some(stripped) = path.strip_suffix("/v1") {
        path = stripped.trim_end_matches('/');
    }
    let authority = authority.to_ascii_lowercase();
    let shown_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_ascii_lowercase()
    };
    Ok(BaseUrl {
        url: format!("{scheme}://{authority}{path}"),
        host_port: format!("{shown_host}:{port}"),
        host: host.to_ascii_lowercase(),
    })
}

impl OpenAiClient {
    /// A client of the server at `base_url` (see [`parse_base_url`]), sending `key` when given.
    /// Fails with [`BackendError::Unsupported`] on an address Hearth cannot use.
    pub fn new(
        base_url: &str,
        key: Option<ApiKey>,
        options: ClientOptions,
    ) -> Result<OpenAiClient, BackendError> {
        let base = parse_base_url(base_url).map_err(BackendError::Unsupported)?;
        let (idle, idle_per_host) = if options.reuse_connections {
            (4, 2)
        } else {
            (0, 0)
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // Never follow a redirect: the key must reach only this address.
            .max_redirects(0)
            .max_redirects_will_error(false)
            // A proxy from the environment would see the key and the conversation.
            .proxy(None)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_per_read(Some(options.read_timeout))
            .timeout_send_request(Some(options.read_timeout))
            .timeout_send_body(Some(options.read_timeout))
            .max_idle_connections(idle)
            .max_idle_connections_per_host(idle_per_host)
            .user_agent(concat!("hearth/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(OpenAiClient {
            base_url: base.url,
            host_port: base.host_port,
            key,
            options,
            agent,
        })
    }

    /// The server's address, as requests are built from it (no trailing `/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `host:port` of the server.
    pub fn host_port(&self) -> &str {
        &self.host_port
    }

    /// Whether a key is sent.
    pub fn has_key(&self) -> bool {
        self.key.is_some()
    }

    /// The models the server offers (`GET /v1/models`).
    pub fn models(&self) -> Result<Vec<ServerModel>, BackendError> {
        let url = format!("{}/v1/models", self.base_url);
        tracing::debug!(url = %url, "listing the server's models");
        let mut request = self.agent.get(&url);
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = request.call().map_err(|e| self.request_error(e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = read_json_text(response.into_body()).map_err(|e| self.body_error(e))?;
        if status != 200 {
            return Err(self.status_error(status, &headers, &text, None));
        }
        let value = self.parse_json(&text)?;
        if let Some(error) = value.get("error") {
            return Err(self.server_error(error));
        }
        let Some(data) = value.get("data").and_then(Value::as_array) else {
            return Err(self.bad_reply(&format!(
                "its model list has no \"data\" array (starts with {})",
                quote(&text, self.key.as_ref())
            )));
        };
        Ok(data
            .iter()
            .filter_map(|m| {
                Some(ServerModel {
                    id: m.get("id")?.as_str()?.to_owned(),
                    owned_by: m.get("owned_by").and_then(Value::as_str).map(str::to_owned),
                    context_length: m
                        .get("max_model_len")
                        .and_then(Value::as_u64)
                        .map(|n| n as usize),
                })
            })
            .collect())
    }

    /// The context length llama.cpp's own server reports at `/props`
    /// (`default_generation_settings.n_ctx`); None from any other server or on any failure.
    pub fn props_context_length(&self) -> Option<usize> {
        let url = format!("{}/props", self.base_url);
        let mut request = self
            .agent
            .get(&url)
            .config()
            .timeout_per_read(Some(self.options.read_timeout.min(Duration::from_secs(5))))
            .build();
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = request.call().ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        let text = read_json_text(response.into_body()).ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        let n = value
            .get("default_generation_settings")?
            .get("n_ctx")?
            .as_u64()?;
        (n > 0).then_some(n as usize)
    }

    /// Tokens of `text` by the server's own tokenizer, for servers that send no `usage` with a
    /// stream: llama-cpp-python's `/extras/tokenize/count`, or the `/tokenize` of llama.cpp's
    /// server (`tokens`) and vLLM (`count`). None when the server has neither or fails.
    /// llama-cpp-python adds the model's BOS token to the count; pass the count of `""` as
    /// `overhead` to take it off.
    pub fn server_token_count(&self, model: &str, text: &str) -> Option<usize> {
        let attempts = [
            (
                "/extras/tokenize/count",
                serde_json::json!({ "input": text, "model": model }),
            ),
            (
                "/tokenize",
                serde_json::json!({
                    "content": text, "add_special": false,
                    "model": model, "prompt": text, "add_special_tokens": false,
                }),
            ),
        ];
        for (path, body) in attempts {
            let url = format!("{}{path}", self.base_url);
            let mut request = self
                .agent
                .post(&url)
                .config()
                .timeout_per_read(Some(self.options.read_timeout.min(Duration::from_secs(10))))
                .build()
                .header("Content-Type", "application/json");
            if let Some(key) = &self.key {
                request = request.header("Authorization", format!("Bearer {}", key.expose()));
            }
            let Ok(response) = request.send(body.to_string()) else {
                return None;
            };
            if response.status().as_u16() != 200 {
                continue;
            }
            let value: Value =
                serde_json::from_str(&read_json_text(response.into_body()).ok()?).ok()?;
            let count = value
                .get("count")
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .or_else(|| value.get("tokens")?.as_array().map(Vec::len));
            if count.is_some() {
                return count;
            }
        }
        None
    }

    /// Streams the answer to `request` (`POST /v1/chat/completions`, `stream: true`), passing
    /// its text to `on_text` as it arrives; `ControlFlow::Break(())` from `on_text` drops the
    /// connection and ends with [`StreamOutcome::cancelled`] set.
    ///
    /// The answer is read on a worker thread, so `on_text` is also called with an empty piece
    /// every [`STOP_CHECK_EVERY`] while nothing arrives: a Stop is seen even when the server
    /// sends no text. The answer is bounded: each event by [`MAX_EVENT_BYTES`], its length by
    /// `max_tokens` plus a margin (then it ends as `finish_reason` "length"), and a stream with
    /// no text for [`ClientOptions::read_timeout`] (keep-alive comments or not) is a stall.
    pub fn stream_chat(
        &self,
        request: &ChatRequest,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        self.stream(request, None, on_text)
    }

    /// Streams the continuation of the raw `prompt` (`POST /v1/completions`, `stream: true`,
    /// no chat template), with `request`'s model and settings; its messages are not sent.
    /// Read, bounded and stopped exactly as [`OpenAiClient::stream_chat`], each event's text
    /// taken from `choices[0].text`.
    pub fn stream_completion(
        &self,
        request: &ChatRequest,
        prompt: &str,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        self.stream(request, Some(prompt), on_text)
    }

    /// A chat answer (`raw_prompt` None) or a raw completion, read on a worker thread.
    fn stream(
        &self,
        request: &ChatRequest,
        raw_prompt: Option<&str>,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        // Bounded, so a server faster than the caller waits for it.
        let (tx, rx) = mpsc::sync_channel::<Piece>(64);
        let client = self.clone();
        let worker_request = request.clone();
        let worker_prompt = raw_prompt.map(str::to_owned);
        let spawned = std::thread::Builder::new()
            .name("hearth-answer-stream".into())
            .spawn(move || {
                let sender = tx.clone();
                let prompt = worker_prompt.as_deref();
                let result = client.stream_here(&worker_request, prompt, &mut |text: &str| {
                    // A send fails once the caller stopped listening: stop reading then.
                    match sender.send(Piece::Text(text.to_owned())) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(_) => ControlFlow::Break(()),
                    }
                });
                let _ = tx.send(Piece::End(result));
            });
        if let Err(e) = spawned {
            tracing::warn!("no thread to read the answer on ({e}); reading it here");
            return self.stream_here(request, raw_prompt, on_text);
        }
        // A backstop for a server that keeps a line open with a byte now and then: the worker
        // sees only whole lines.
        let no_text_limit = self.options.read_timeout + STOP_CHECK_EVERY;
        let mut last_text = Instant::now();
        loop {
            let piece = match rx.recv_timeout(STOP_CHECK_EVERY) {
                Ok(Piece::End(result)) => return result,
                Ok(Piece::Text(text)) => text,
                Err(mpsc::RecvTimeoutError::Timeout) => String::new(),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.failed(
                        FailureKind::Cut,
                        format!(
                            "Reading the answer from {} failed inside Hearth. The part that \
                             arrived is kept; try again.",
                            self.base_url
                        ),
                    ))
                }
            };
            if !piece.is_empty() {
                last_text = Instant::now();
            } else if last_text.elapsed() >= no_text_limit {
                return Err(self.no_text_error());
            }
            if on_text(&piece).is_break() {
                // Dropping the receiver ends the worker at its next piece.
                return Ok(StreamOutcome {
                    cancelled: true,
                    ..StreamOutcome::default()
                });
            }
        }
    }

    /// [`OpenAiClient::stream`] on this thread: `on_text` is called only as the stream gives
    /// something (text, or an empty piece for a keep-alive comment).
    fn stream_here(
        &self,
        request: &ChatRequest,
        raw_prompt: Option<&str>,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        let (url, body) = match raw_prompt {
            None => (
                format!("{}/v1/chat/completions", self.base_url),
                request.body(),
            ),
            Some(prompt) => (
                format!("{}/v1/completions", self.base_url),
                request.completion_body(prompt),
            ),
        };
        tracing::debug!(url = %url, model = %request.model, "streaming an answer");
        let body = body.to_string();
        let mut http = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "text/event-stream, application/json");
        if let Some(key) = &self.key {
            http = http.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = http.send(body).map_err(|e| self.request_error(e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status != 200 {
            let text = read_json_text(response.into_body()).unwrap_or_default();
            return Err(self.status_error(status, &headers, &text, Some(&request.model)));
        }
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let reader = response.into_body().into_reader();
        let reader = BufReader::with_capacity(16 * 1024, reader);
        Stream::new(self, request, reader, on_text, MAX_EVENT_BYTES).run(&content_type)
    }

    /// A stream that went on without text for longer than the read timeout.
    fn no_text_error(&self) -> BackendError {
        self.failed(
            FailureKind::Timeout,
            format!(
                "The server at {} sent no text for {}, only signs that it is still there. It \
                 may be stuck; try again, or restart it.",
                self.base_url,
                Self::secs(self.options.read_timeout)
            ),
        )
    }

    // ---- errors, in plain words ----

    fn failed(&self, kind: FailureKind, message: String) -> BackendError {
        tracing::debug!(kind = ?kind, "{message}");
        BackendError::failed(kind, message)
    }

    fn secs(d: Duration) -> String {
        let s = d.as_secs_f64();
        if s >= 1.0 && s.fract() == 0.0 {
            format!("{s:.0} s")
        } else {
            format!("{s:.1} s")
        }
    }

    /// A failure before any response arrived (connecting, sending, waiting for the headers).
    fn request_error(&self, error: ureq::Error) -> BackendError {
        let url = &self.base_url;
        let https = url.starts_with("https://");
        match classify(&error, https) {
            Transport::Refused => self.failed(
                FailureKind::Refused,
                format!(
                    "Hearth could not reach the server at {url}: nothing is listening there. \
                     Check the address and that the server is running."
                ),
            ),
            Transport::Dns => self.failed(
                FailureKind::Dns,
                format!(
                    "Hearth could not find the server at {url}: its name does not resolve to an \
                     address. Check the spelling of the address, or use the server's IP address."
                ),
            ),
            Transport::Tls(detail) => self.failed(
                FailureKind::Tls,
                format!(
                    "Hearth could not set up a secure (https) connection to {url} ({detail}). \
                     If the server does not use https, use an http:// address; otherwise check \
                     its certificate."
                ),
            ),
            Transport::ConnectTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {url} did not accept a connection within {}. Check the \
                     address and that the server is up; a firewall may be dropping the \
                     connection.",
                    Self::secs(self.options.connect_timeout)
                ),
            ),
            Transport::ReadTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {url} took the request but sent nothing back for {}. It may be \
                     overloaded or stuck; try again, or restart it.",
                    Self::secs(self.options.read_timeout)
                ),
            ),
            Transport::Closed => self.failed(
                FailureKind::Cut,
                format!(
                    "The server at {url} closed the connection without answering. It may have \
                     crashed or restarted; check it and try again."
                ),
            ),
            Transport::Protocol(detail) => self.bad_reply(&format!("not HTTP ({detail})")),
            Transport::Other(detail) => self.failed(
                FailureKind::Refused,
                format!(
                    "Hearth could not talk to the server at {url} ({detail}). Check the address \
                     and that the server is running."
                ),
            ),
        }
    }

    /// A failure while reading a body whose headers arrived.
    fn body_error(&self, error: ureq::Error) -> BackendError {
        match classify(&error, false) {
            Transport::ReadTimeout | Transport::ConnectTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {} stopped sending for {} in the middle of its reply. It may \
                     be overloaded or stuck; try again.",
                    self.base_url,
                    Self::secs(self.options.read_timeout)
                ),
            ),
            _ => self.failed(
                FailureKind::Cut,
                format!(
                    "The reply from {} stopped before its end: the connection closed. The \
                     server may have crashed or restarted; check it and try again.",
                    self.base_url
                ),
            ),
        }
    }

    /// A reply with a status other than 200.
    fn status_error(
        &self,
        status: u16,
        headers: &ureq::http::HeaderMap,
        body: &str,
        model: Option<&str>,
    ) -> BackendError {
        let url = &self.base_url;
        let said = server_words(body, self.key.as_ref())
            .map(|w| format!(" It said: {w}"))
            .unwrap_or_default();
        match status {
            401 | 403 => {
                let message = if self.key.is_some() {
                    format!(
                        "The server at {url} refused the API key (HTTP {status}). Check the key \
                         in the remote server settings."
                    )
                } else {
                    format!(
                        "The server at {url} needs an API key (HTTP {status}). Add the key in \
                         the remote server settings."
                    )
                };
                self.failed(FailureKind::Auth, message)
            }
            404 => match model {
                Some(model) => self.failed(
                    FailureKind::ModelNotFound,
                    format!(
                        "The server at {url} has no model named {model:?} (HTTP 404). Choose one \
                         of the models it lists.{said}"
                    ),
                ),
                None => self.failed(
                    FailureKind::BadReply,
                    format!(
                        "The server at {url} has no /v1/models (HTTP 404): it may not be an \
                         OpenAI-compatible server, or the address needs another path in front \
                         of /v1."
                    ),
                ),
            },
            429 | 503 => {
                let retry = headers
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let when = match retry {
                    Some(secs) => format!("asks to wait {secs} s. Try again then."),
                    None => "cannot take the request now. Try again in a moment.".to_owned(),
                };
                tracing::debug!(status, retry_after = ?retry, "server busy");
                BackendError::Failed {
                    kind: FailureKind::Busy,
                    message: format!("The server at {url} is busy (HTTP {status}) and {when}"),
                    retry_after_secs: retry,
                }
            }
            300..=399 => {
                let to = headers
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(|l| format!(" to {}", quote(l, self.key.as_ref())))
                    .unwrap_or_default();
                self.failed(
                    FailureKind::BadReply,
                    format!(
                        "The server at {url} redirected the request{to} (HTTP {status}). Hearth \
                         does not follow redirects, so the API key never goes to another \
                         address: put the address it points to in the settings."
                    ),
                )
            }
            _ => {
                let message = match serde_json::from_str::<Value>(body)
                    .ok()
                    .and_then(|v| v.get("error").cloned())
                {
                    Some(error) => {
                        return self.failed(
                            FailureKind::Server,
                            format!(
                                "The server at {url} reported an error (HTTP {status}): {}",
                                error_words(&error, self.key.as_ref())
                            ),
                        )
                    }
                    None => format!(
                        "The server at {url} answered with HTTP {status}.{said} Check the \
                         server's log."
                    ),
                };
                self.failed(FailureKind::Server, message)
            }
        }
    }

    /// An `error` object or string a server sent in a 200 reply or in a stream.
    fn server_error(&self, error: &Value) -> BackendError {
        let words = error_words(error, self.key.as_ref());
        let code = error
            .get("code")
            .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
        let kind = match code {
            Some(401 | 403) => FailureKind::Auth,
            Some(404) => FailureKind::ModelNotFound,
            Some(429 | 503) => FailureKind::Busy,
            _ => FailureKind::Server,
        };
        self.failed(
            kind,
            format!("The server at {} reported an error: {words}", self.base_url),
        )
    }

    fn bad_reply(&self, what: &str) -> BackendError {
        self.failed(
            FailureKind::BadReply,
            format!(
                "The server at {} sent a reply Hearth cannot read: {what}. Check that the \
                 address points at an OpenAI-compatible server (llama.cpp server, vLLM, \
                 Ollama, Lemonade).",
                self.base_url
            ),
        )
    }

    fn parse_json(&self, text: &str) -> Result<Value, BackendError> {
        serde_json::from_str(text).map_err(|_| {
            self.bad_reply(&format!(
                "it is not JSON (starts with {})",
                quote(text, self.key.as_ref())
            ))
        })
    }
}

/// What went wrong on the wire, before the plain words.
enum Transport {
    Refused,
    Dns,
    Tls(String),
    ConnectTimeout,
    ReadTimeout,
    Closed,
    Protocol(String),
    Other(String),
}

fn classify(error: &ureq::Error, https: bool) -> Transport {
    use std::io::ErrorKind as K;
    match error {
        ureq::Error::HostNotFound => Transport::Dns,
        ureq::Error::Timeout(t) => match t {
            ureq::Timeout::Connect | ureq::Timeout::Resolve => Transport::ConnectTimeout,
            _ => Transport::ReadTimeout,
        },
        ureq::Error::Tls(what) => Transport::Tls((*what).to_owned()),
        ureq::Error::Rustls(e) => Transport::Tls(e.to_string()),
        ureq::Error::TlsRequired => Transport::Tls("the connection is not secured".into()),
        ureq::Error::Protocol(e) => Transport::Protocol(e.to_string()),
        ureq::Error::Io(e) => {
            if let Some(rustls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Transport::Tls(rustls.to_string());
            }
            match e.kind() {
                K::ConnectionRefused => Transport::Refused,
                K::TimedOut | K::WouldBlock => Transport::ReadTimeout,
                // A TLS handshake with something that does not speak TLS, or that hung up.
                K::InvalidData if https => Transport::Tls(e.to_string()),
                _ if https && e.to_string().contains("handshake") => Transport::Tls(e.to_string()),
                K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                    Transport::Closed
                }
                // std reports a failed getaddrinfo with this text and no distinct kind.
                _ if e.to_string().contains("failed to lookup address") => Transport::Dns,
                _ => Transport::Other(e.to_string()),
            }
        }
        other => Transport::Other(other.to_string()),
    }
}

fn read_json_text(body: ureq::Body) -> Result<String, ureq::Error> {
    let mut text = String::new();
    body.into_with_config()
        .limit(MAX_JSON_BODY)
        .reader()
        .read_to_string(&mut text)
        .map_err(ureq::Error::from)?;
    Ok(text)
}

/// Text a server sent, safe to show: control characters dropped, the key (if echoed) hidden,
/// at most [`MAX_QUOTE`] characters, in quotes.
fn quote(text: &str, key: Option<&ApiKey>) -> String {
    format!("\"{}\"", clean(text, key))
}

fn clean(text: &str, key: Option<&ApiKey>) -> String {
    let mut text = text.trim().to_owned();
    if let Some(key) = key {
        text = text.replace(key.expose(), "<hidden>");
    }
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_QUOTE)
        .collect();
    if text.chars().count() > MAX_QUOTE {
        out.push('…');
    }
    out
}

/// The words of an `error` value: `{"message": ...}`, a plain string, or the JSON itself.
fn error_words(error: &Value, key: Option<&ApiKey>) -> String {
    let text = match error {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => error.to_string(),
        },
        other => other.to_string(),
    };
    clean(&text, key)
}

/// What an error body says, when it says anything readable.
fn server_words(body: &str, key: Option<&ApiKey>) -> Option<String> {
    if body.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match v.get("error").or_else(|| v.get("detail")) {
            Some(e) => Some(error_words(e, key)),
            None => Some(clean(body, key)),
        },
        Err(_) => Some(clean(body, key)),
    }
}

/// What the worker reading an answer passes to the caller.
enum Piece {
    /// Answer text; empty for a keep-alive comment.
    Text(String),
    /// The stream ended.
    End(Result<StreamOutcome, BackendError>),
}

/// One streamed answer being read.
struct Stream<'c, 's, R: Read> {
    client: &'c OpenAiClient,
    request: &'c ChatRequest,
    events: EventReader<BufReader<R>>,
    on_text: TextSink<'s>,
    outcome: StreamOutcome,
    in_think: bool,
    done: bool,
    /// Text pieces passed on, and their bytes.
    texts: usize,
    text_bytes: usize,
    /// When text last came (or the stream began).
    last_text: Instant,
    /// Most pieces and bytes read before the answer is cut at its length.
    max_pieces: usize,
    max_bytes: usize,
}

impl<'c, 's, R: Read> Stream<'c, 's, R> {
    fn new(
        client: &'c OpenAiClient,
        request: &'c ChatRequest,
        reader: BufReader<R>,
        on_text: TextSink<'s>,
        max_event_bytes: usize,
    ) -> Self {
        let asked = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let max_pieces = asked
            .saturating_add(asked / 4)
            .saturating_add(ANSWER_MARGIN_TOKENS);
        Stream {
            client,
            request,
            events: EventReader::new(reader, max_event_bytes),
            on_text,
            outcome: StreamOutcome::default(),
            in_think: false,
            done: false,
            texts: 0,
            text_bytes: 0,
            last_text: Instant::now(),
            max_pieces,
            max_bytes: max_pieces.saturating_mul(MAX_BYTES_PER_TOKEN),
        }
    }

    fn run(&mut self, content_type: &str) -> Result<StreamOutcome, BackendError> {
        let json_body = content_type.contains("json") || {
            // No or another content type: look at the first byte.
            let peek = match self.events.get_mut().fill_buf() {
                Ok(peek) => peek,
                Err(e) => return Err(self.read_error(e)),
            };
            let first = peek.iter().find(|b| !b.is_ascii_whitespace()).copied();
            match first {
                Some(b'{') => true,
                Some(b'd' | b':' | b'e' | b'i' | b'r') | None => false,
                Some(_) => {
                    let start = String::from_utf8_lossy(&peek[..peek.len().min(80)]).to_string();
                    return Err(self.client.bad_reply(&format!(
                        "it is neither JSON nor an event stream (starts with {})",
                        quote(&start, self.client.key.as_ref())
                    )));
                }
            }
        };
        if json_body {
            self.read_json_answer()?;
        } else {
            self.read_events()?;
        }
        // FastFlowLM ends a failed generation with finish_reason "error" and no other word.
        if !self.outcome.cancelled && self.outcome.finish_reason.as_deref() == Some("error") {
            return Err(self.client.failed(
                FailureKind::Server,
                format!(
                    "The server at {} stopped the answer with an error. The part that arrived is \
                     kept. Check the server's log.",
                    self.client.base_url
                ),
            ));
        }
        Ok(std::mem::take(&mut self.outcome))
    }

    /// A whole JSON body instead of events: an error (FastFlowLM before the first chunk), or
    /// a server that ignored `stream: true` and sent the answer at once.
    fn read_json_answer(&mut self) -> Result<(), BackendError> {
        let mut text = String::new();
        self.events
            .get_mut()
            .take(MAX_JSON_BODY)
            .read_to_string(&mut text)
            .map_err(|e| self.read_error(e))?;
        let value = self.client.parse_json(&text)?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(self.client.server_error(error));
        }
        let choice = value.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
            self.client.bad_reply(&format!(
                "its JSON has no answer in it (starts with {})",
                quote(&text, self.client.key.as_ref())
            ))
        })?;
        self.note_model(&value)?;
        if self.pass_choice(choice, "message").is_break() {
            self.outcome.cancelled = true;
            return Ok(());
        }
        self.note_finish(choice);
        self.note_usage(&value);
        self.close_think();
        self.done = true;
        Ok(())
    }

    /// Server-sent events, one at a time as they arrive.
    fn read_events(&mut self) -> Result<(), BackendError> {
        loop {
            let item = match self.events.next_item() {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(SseError::Io(e)) => return Err(self.read_error(e)),
                Err(e @ SseError::EventTooLong { .. }) => {
                    return Err(self.client.bad_reply(&e.to_string()))
                }
            };
            let flow = match item {
                Item::Event { name, data } => self.handle_event(&name, &data)?,
                // A keep-alive: a chance for the caller to stop, but not text.
                Item::Comment => (self.on_text)(""),
                Item::Unknown(line) if self.texts == 0 && self.outcome.model.is_none() => {
                    return Err(self.client.bad_reply(&format!(
                        "it is not an event stream (a line reads {})",
                        quote(&line, self.client.key.as_ref())
                    )));
                }
                Item::Unknown(_) => ControlFlow::Continue(()), // ignored, as the format says
            };
            if flow.is_break() {
                self.outcome.cancelled = true;
                return Ok(());
            }
            if self.done {
                return Ok(());
            }
            if self.last_text.elapsed() >= self.client.options.read_timeout {
                return Err(self.client.no_text_error());
            }
        }
        self.close_think();
        if self.outcome.finish_reason.is_some() {
            // Some servers end with a finish_reason and close without [DONE].
            return Ok(());
        }
        let message = if self.texts == 0 {
            format!(
                "The server at {} ended its reply before any of the answer arrived. Check the \
                 server's log: it may have failed to load the model, or crashed.",
                self.client.base_url
            )
        } else {
            format!(
                "The answer from {} stopped before its end: the connection closed in the middle \
                 of the answer. The part that arrived is kept. The server may have crashed or \
                 restarted; check it and try again.",
                self.client.base_url
            )
        };
        Err(self.client.failed(FailureKind::Cut, message))
    }

    fn handle_event(&mut self, name: &str, data: &str) -> Result<ControlFlow<()>, BackendError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.close_think();
            self.done = true;
            return Ok(ControlFlow::Continue(()));
        }
        let value: Value = serde_json::from_str(data).map_err(|_| {
            self.client.bad_reply(&format!(
                "one of its events is not JSON ({})",
                quote(data, self.client.key.as_ref())
            ))
        })?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(self.client.server_error(error));
        }
        if name == "error" {
            return Err(self.client.server_error(&value));
        }
        self.note_model(&value)?;
        self.note_usage(&value);
        let mut flow = ControlFlow::Continue(());
        if let Some(choice) = value.get("choices").and_then(|c| c.get(0)) {
            flow = self.pass_choice(choice, "delta");
            self.note_finish(choice);
        }
        Ok(flow)
    }

    /// Passes a choice's text on: a chat answer's in its `delta` (or whole `message`, named
    /// by `chat_field`), a raw completion's in its `text`.
    fn pass_choice(&mut self, choice: &Value, chat_field: &str) -> ControlFlow<()> {
        if let Some(delta) = choice.get(chat_field) {
            return self.pass_delta(delta);
        }
        match choice.get("text").and_then(Value::as_str) {
            Some(text) if !text.is_empty() => self.pass_text(text.to_owned()),
            _ => ControlFlow::Continue(()),
        }
    }

    /// Passes a delta's (or message's) text on: reasoning inside `<think>`…`</think>`.
    fn pass_delta(&mut self, delta: &Value) -> ControlFlow<()> {
        let text_of = |name: &str| {
            delta
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        let mut piece = String::new();
        if let Some(reasoning) = text_of("reasoning_content").or_else(|| text_of("reasoning")) {
            if !self.in_think {
                piece.push_str("<think>");
                self.in_think = true;
            }
            piece.push_str(reasoning);
        }
        if let Some(content) = text_of("content") {
            if self.in_think {
                piece.push_str("</think>");
                self.in_think = false;
            }
            piece.push_str(content);
        }
        if piece.is_empty() {
            return ControlFlow::Continue(());
        }
        self.pass_text(piece)
    }

    /// Passes a piece of the answer on, ending the answer at its length when the server goes
    /// on past `max_tokens`.
    fn pass_text(&mut self, piece: String) -> ControlFlow<()> {
        self.texts += 1;
        self.text_bytes += piece.len();
        self.last_text = Instant::now();
        if self.texts > self.max_pieces || self.text_bytes > self.max_bytes {
            // The server ignores max_tokens: end the answer at its length here.
            tracing::warn!(
                pieces = self.texts,
                bytes = self.text_bytes,
                max_tokens = ?self.request.max_tokens,
                "the server went on past the answer's length; Hearth stopped reading"
            );
            self.outcome.finish_reason = Some("length".into());
            self.close_think();
            self.done = true;
            return ControlFlow::Continue(());
        }
        (self.on_text)(&piece)
    }

    fn close_think(&mut self) {
        if self.in_think {
            self.in_think = false;
            // The stream is ending: a Break here has nothing left to stop.
            let _ = (self.on_text)("</think>");
        }
    }

    fn note_model(&mut self, value: &Value) -> Result<(), BackendError> {
        let Some(model) = value.get("model").and_then(Value::as_str) else {
            return Ok(());
        };
        if self.outcome.model.is_none() {
            if self.request.require_model && model != self.request.model {
                return Err(self.client.failed(
                    FailureKind::WrongModel,
                    format!(
                        "The server at {} answered with the model {:?}, not {:?} that was asked \
                         for. Check which models the server has loaded.",
                        self.client.base_url,
                        clean(model, self.client.key.as_ref()),
                        self.request.model
                    ),
                ));
            }
            self.outcome.model = Some(model.to_owned());
        }
        Ok(())
    }

    fn note_finish(&mut self, choice: &Value) {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.outcome.finish_reason = Some(reason.to_owned());
        }
    }

    fn note_usage(&mut self, value: &Value) {
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).map(|n| n as usize);
            self.outcome.usage = Some(ServerUsage {
                prompt_tokens: count("prompt_tokens"),
                completion_tokens: count("completion_tokens"),
            });
            let secs = |name: &str| usage.get(name).and_then(Value::as_f64);
            let t = &mut self.outcome.timings;
            t.load_secs = secs("load_duration").or(t.load_secs);
            t.prefill_secs = secs("prefill_duration_ttft").or(t.prefill_secs);
            t.prefill_tokens_per_s = secs("prefill_speed_tps").or(t.prefill_tokens_per_s);
            t.decode_secs = secs("decoding_duration").or(t.decode_secs);
            t.decode_tokens_per_s = secs("decoding_speed_tps").or(t.decode_tokens_per_s);
        }
        // llama.cpp's server: milliseconds and rates in a `timings` object.
        if let Some(timings) = value.get("timings").filter(|t| t.is_object()) {
            let num = |name: &str| timings.get(name).and_then(Value::as_f64);
            let t = &mut self.outcome.timings;
            t.prefill_secs = num("prompt_ms").map(|ms| ms / 1000.0).or(t.prefill_secs);
            t.prefill_tokens_per_s = num("prompt_per_second").or(t.prefill_tokens_per_s);
            t.decode_secs = num("predicted_ms").map(|ms| ms / 1000.0).or(t.decode_secs);
            t.decode_tokens_per_s = num("predicted_per_second").or(t.decode_tokens_per_s);
        }
    }

    fn read_error(&self, error: std::io::Error) -> BackendError {
        let error = ureq::Error::from(error);
        let stalled = matches!(
            classify(&error, false),
            Transport::ReadTimeout | Transport::ConnectTimeout
        );
        let url = &self.client.base_url;
        let secs = OpenAiClient::secs(self.client.options.read_timeout);
        if stalled {
            let message = if self.texts > 0 {
                format!(
                    "The server at {url} stopped sending for {secs} in the middle of the answer. \
                     The part that arrived is kept. The server may be overloaded or stuck; try \
                     again."
                )
            } else {
                format!(
                    "The server at {url} started its reply but sent nothing more for {secs}. It \
                     may be overloaded or stuck; try again, or restart it."
                )
            };
            self.client.failed(FailureKind::Timeout, message)
        } else {
            self.client.failed(
                FailureKind::Cut,
                format!(
                    "The answer from {url} stopped before its end: the connection broke in the \
                     middle of the answer. The part that arrived is kept. The server may have \
                     crashed or restarted; check it and try again."
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_engine::Role;

    fn client() -> OpenAiClient {
        OpenAiClient::new(
            "http://127.0.0.1:9/v1/",
            ApiKey::new("sk-SECRET"),
            ClientOptions::default(),
        )
        .unwrap()
    }

    fn request() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::new(Role::User, "hi")],
            ..Default::default()
        }
    }

    /// Reads `body` as a stream with `content_type`, collecting the text passed on.
    fn read(
        body: &str,
        content_type: &str,
        req: &ChatRequest,
    ) -> (Result<StreamOutcome, BackendError>, Vec<String>) {
        read_limited(body, content_type, req, MAX_EVENT_BYTES)
    }

    /// [`read`] with events of at most `max_event_bytes`. Empty pieces (keep-alives) are not
    /// collected.
    fn read_limited(
        body: &str,
        content_type: &str,
        req: &ChatRequest,
        max_event_bytes: usize,
    ) -> (Result<StreamOutcome, BackendError>, Vec<String>) {
        let client = client();
        let mut pieces = Vec::new();
        let mut sink = |t: &str| {
            if !t.is_empty() {
                pieces.push(t.to_owned());
            }
            ControlFlow::Continue(())
        };
        let reader = BufReader::new(body.as_bytes());
        let result =
            Stream::new(&client, req, reader, &mut sink, max_event_bytes).run(content_type);
        (result, pieces)
    }

    fn kind(e: &BackendError) -> FailureKind {
        match e {
            BackendError::Failed { kind, .. } => *kind,
            other => panic!("not a failure: {other:?}"),
        }
    }

    #[test]
    fn base_urls_are_normalized() {
        let u = parse_base_url("http://10.0.0.5:8000/v1/").unwrap();
        assert_eq!(u.url, "http://10.0.0.5:8000");
        assert_eq!(u.host_port, "10.0.0.5:8000");
        let u = parse_base_url(" HTTPS://Box.lan/api/v1 ").unwrap();
        assert_eq!(u.url, "https://box.lan/api");
        assert_eq!(u.host_port, "box.lan:443");
        let u = parse_base_url("http://[::1]:8080").unwrap();
        assert_eq!(u.host_port, "[::1]:8080");
        assert_eq!(u.host, "::1");
        assert_eq!(parse_base_url("http://gpu/").unwrap().url, "http://gpu");
    }

    #[test]
    fn bad_base_urls_say_why() {
        for (text, words) in [
            ("ftp://x", "only http:// and https://"),
            ("10.0.0.5:8000", "no http:// or https://"),
            ("http://user:pw@h", "API key field"),
            ("http://h:99999", "port"),
            ("http://h?x=1", "after ?"),
            ("http://", "server name"),
            ("", "no server address"),
        ] {
            let e = parse_base_url(text).unwrap_err();
            assert!(e.contains(words), "{text:?}: {e}");
        }
    }

    #[test]
    fn keys_never_show_in_debug() {
        let c = client();
        let shown = format!("{c:?} {:?}", ApiKey::new(" sk-SECRET ").unwrap());
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("<hidden>"));
        assert_eq!(ApiKey::new("  "), None);
        assert_eq!(ApiKey::new(" k ").unwrap().expose(), "k");
    }

    #[test]
    fn request_body_leaves_out_unset_fields() {
        let mut req = request();
        req.temperature = Some(0.7);
        req.repetition_penalty = Some(1.1);
        let body = req.body();
        assert_eq!(body["stream"], true);
        assert_eq!(body["temperature"], 0.7);
        assert_eq!(body["repeat_penalty"], 1.1);
        assert_eq!(body["repetition_penalty"], 1.1);
        assert_eq!(body["messages"][0]["role"], "user");
        assert!(body.get("top_p").is_none(), "no nulls: {body}");
        assert!(body.get("seed").is_none());
    }

    #[test]
    fn usage_in_the_last_chunk_with_null_timings() {
        let body = concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
            ": keep-alive\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":null},\"finish_reason\":\"stop\"}],",
            "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"load_duration\":0.0,",
            "\"prefill_duration_ttft\":0.21,\"prefill_speed_tps\":null,\"decoding_duration\":0.5,\"decoding_speed_tps\":40.5}}\n\n",
            "data: [DONE]\n\n"
        );
        let (out, pieces) = read(body, "text/event-stream", &request());
        let out = out.unwrap();
        assert_eq!(pieces, ["Hel", "lo"]);
        assert_eq!(out.finish_reason.as_deref(), Some("stop"));
        assert_eq!(out.model.as_deref(), Some("m"));
        assert_eq!(
            out.usage,
            Some(ServerUsage {
                prompt_tokens: Some(12),
                completion_tokens: Some(2)
            })
        );
        assert_eq!(out.timings.prefill_secs, Some(0.21));
        assert_eq!(out.timings.prefill_tokens_per_s, None);
        assert_eq!(out.timings.decode_tokens_per_s, Some(40.5));
        assert_eq!(out.timings.load_secs, Some(0.0));
    }

    #[test]
    fn llama_cpp_timings_are_read() {
        let body = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],\"timings\":{\"prompt_n\":5,\"prompt_ms\":250.0,\"prompt_per_second\":20.0,\"predicted_ms\":1000.0,\"predicted_per_second\":9.5}}\r\n\r\ndata: [DONE]\r\n\r\n";
        let (out, _) = read(body, "text/event-stream", &request());
        let out = out.unwrap();
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert_eq!(out.timings.prefill_secs, Some(0.25));
        assert_eq!(out.timings.decode_secs, Some(1.0));
        assert_eq!(out.timings.decode_tokens_per_s, Some(9.5));
        assert_eq!(out.usage, None);
    }

    #[test]
    fn reasoning_is_wrapped_in_think_tags() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\" ok\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Yes\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let (out, pieces) = read(body, "text/event-stream", &request());
        out.unwrap();
        assert_eq!(pieces.concat(), "<think>hmm ok</think>Yes");
        // Reasoning only, then the end: the tag is still closed.
        let body = "data: {\"choices\":[{\"delta\":{\"reasoning\":\"x\"}}]}\n\ndata: [DONE]\n\n";
        let (_, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(pieces.concat(), "<think>x</think>");
    }

    #[test]
    fn an_error_with_status_200_is_an_error() {
        let (out, _) = read(
            "{\"error\":\"Failed to load qwen3:1.7b model!\"}",
            "application/json",
            &request(),
        );
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Server);
        assert!(e.to_string().contains("Failed to load"), "{e}");
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"boom sk-SECRET\",\"code\":500}}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(pieces, ["a"]);
        assert!(e.to_string().contains("boom <hidden>"), "{e}");
    }

    #[test]
    fn a_stream_without_an_end_is_cut() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(kind(&out.unwrap_err()), FailureKind::Cut);
        assert_eq!(pieces, ["a"]);
        // A finish_reason without [DONE] is a complete answer.
        let body =
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n";
        let (out, _) = read(body, "", &request());
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("stop"));
        // Nothing at all: cut too, and said so.
        let (out, _) = read("", "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Cut);
        assert!(
            e.to_string().contains("before any of the answer arrived"),
            "{e}"
        );
    }

    #[test]
    fn non_json_and_non_sse_are_bad_replies() {
        for (body, ct) in [
            ("<html>502 Bad Gateway</html>", "text/html"),
            ("data: hello\n\n", "text/event-stream"),
            ("{not json", "application/json"),
            ("hello there\n\n", "text/event-stream"),
        ] {
            let (out, _) = read(body, ct, &request());
            let e = out.unwrap_err();
            assert_eq!(kind(&e), FailureKind::BadReply, "{body}: {e}");
            assert!(e.to_string().contains("cannot read"), "{e}");
        }
    }

    #[test]
    fn a_whole_json_answer_is_accepted() {
        let body = r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let (out, pieces) = read(body, "application/json", &request());
        let out = out.unwrap();
        assert_eq!(pieces, ["Hi!"]);
        assert_eq!(out.usage.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn completion_text_pieces_are_read_streamed_or_whole() {
        let body =
            "data: {\"model\":\"m\",\"choices\":[{\"text\":\"Once\",\"finish_reason\":null}]}\n\n\
                    data: {\"choices\":[{\"text\":\" upon\",\"finish_reason\":\"length\"}]}\n\n\
                    data: [DONE]\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(pieces, ["Once", " upon"]);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("length"));
        let whole = r#"{"model":"m","choices":[{"text":"Hi!","finish_reason":"stop"}]}"#;
        let (out, pieces) = read(whole, "application/json", &request());
        assert_eq!(pieces, ["Hi!"]);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn a_completion_body_has_the_prompt_in_place_of_messages() {
        let mut req = request();
        req.max_tokens = Some(5);
        let body = req.completion_body("Once upon");
        assert_eq!(body["prompt"], "Once upon");
        assert!(body.get("messages").is_none(), "{body}");
        assert_eq!(body["max_tokens"], 5);
        assert_eq!(body["stream"], true);
    }

    #[test]
    fn the_wrong_model_is_caught_before_its_text() {
        let mut req = request();
        req.require_model = true;
        let body =
            "data: {\"model\":\"llama3.2:1b\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &req);
        assert_eq!(kind(&out.unwrap_err()), FailureKind::WrongModel);
        assert!(pieces.is_empty());
    }

    #[test]
    fn break_stops_reading() {
        let client = client();
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n";
        let mut seen = Vec::new();
        let mut sink = |t: &str| {
            seen.push(t.to_owned());
            ControlFlow::Break(())
        };
        let req = request();
        let reader = BufReader::new(body.as_bytes());
        let out = Stream::new(&client, &req, reader, &mut sink, MAX_EVENT_BYTES)
            .run("text/event-stream")
            .unwrap();
        assert!(out.cancelled);
        assert_eq!(seen, ["a"]);
    }

    #[test]
    fn transport_failures_map_to_kinds_and_plain_words() {
        let c = client();
        let io = |kind: std::io::ErrorKind, text: &str| {
            ureq::Error::Io(std::io::Error::new(kind, text.to_owned()))
        };
        let cases = [
            (
                ureq::Error::Timeout(ureq::Timeout::Connect),
                FailureKind::Timeout,
                "did not accept a connection within 10 s",
            ),
            (
                ureq::Error::Timeout(ureq::Timeout::PerRead),
                FailureKind::Timeout,
                "sent nothing back for 60 s",
            ),
            (
                ureq::Error::HostNotFound,
                FailureKind::Dns,
                "does not resolve",
            ),
            (
                io(
                    std::io::ErrorKind::Other,
                    "failed to lookup address information: Name or service not known",
                ),
                FailureKind::Dns,
                "does not resolve",
            ),
            (
                io(std::io::ErrorKind::ConnectionRefused, "refused"),
                FailureKind::Refused,
                "nothing is listening there",
            ),
            (
                io(std::io::ErrorKind::ConnectionReset, "reset"),
                FailureKind::Cut,
                "closed the connection without answering",
            ),
            (
                ureq::Error::Tls("bad certificate"),
                FailureKind::Tls,
                "(bad certificate)",
            ),
        ];
        for (error, kind_wanted, words) in cases {
            let e = c.request_error(error);
            assert_eq!(kind(&e), kind_wanted, "{e}");
            assert!(e.to_string().contains(words), "{e}");
            assert!(e.to_string().contains("http://127.0.0.1:9"), "{e}");
        }
    }

    #[test]
    fn statuses_map_to_kinds_and_plain_words() {
        let c = client();
        let mut headers = ureq::http::HeaderMap::new();
        headers.insert("retry-after", "30".parse().unwrap());
        headers.insert("location", "http://elsewhere:1/v1/models".parse().unwrap());
        let cases = [
            (401, FailureKind::Auth, "refused the API key (HTTP 401)"),
            (403, FailureKind::Auth, "refused the API key (HTTP 403)"),
            (404, FailureKind::ModelNotFound, "no model named \"m\""),
            (429, FailureKind::Busy, "asks to wait 30 s"),
            (503, FailureKind::Busy, "busy (HTTP 503)"),
            (
                307,
                FailureKind::BadReply,
                "to \"http://elsewhere:1/v1/models\"",
            ),
            (500, FailureKind::Server, "(HTTP 500): out of memory"),
            (502, FailureKind::Server, "HTTP 502. It said: Bad Gateway"),
        ];
        for (status, kind_wanted, words) in cases {
            let body = match status {
                500 => r#"{"error":{"message":"out of memory"}}"#,
                502 => "Bad Gateway",
                _ => r#"{"error":"sk-SECRET is wrong"}"#,
            };
            let e = c.status_error(status, &headers, body, Some("m"));
            assert_eq!(kind(&e), kind_wanted, "{status}: {e}");
            assert!(e.to_string().contains(words), "{status}: {e}");
            assert!(!e.to_string().contains("SECRET"), "{status}: {e}");
        }
        let e = c.status_error(429, &headers, "", None);
        assert!(matches!(
            e,
            BackendError::Failed {
                retry_after_secs: Some(30),
                ..
            }
        ));
        let e = c.status_error(404, &headers, "", None);
        assert!(e.to_string().contains("has no /v1/models"), "{e}");
    }

    #[test]
    fn finish_reason_error_is_a_server_error() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Server);
        assert!(
            e.to_string().contains("stopped the answer with an error"),
            "{e}"
        );
        assert_eq!(pieces, ["a"]);
    }

    #[test]
    fn multi_line_data_is_joined() {
        let body = "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}, \"finish_reason\":\"stop\"}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        out.unwrap();
        assert_eq!(pieces, ["x"]);
    }

    fn chunk(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
    }

    #[test]
    fn an_event_is_bounded_in_all_its_data_lines() {
        // Each line is short, but together they pass the limit: refused, not gathered.
        let body = format!("{}\n\n", "data: 0123456789012345678\n".repeat(10));
        let (out, _) = read_limited(&body, "text/event-stream", &request(), 100);
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::BadReply, "{e}");
        assert!(e.to_string().contains("events is longer than"), "{e}");
        // Events under the limit, one after another, are all read.
        let body = format!("{}data: [DONE]\n\n", chunk("ab").repeat(20));
        let (out, pieces) = read_limited(&body, "text/event-stream", &request(), 100);
        out.unwrap();
        assert_eq!(pieces.concat(), "ab".repeat(20));
    }

    #[test]
    fn an_answer_past_max_tokens_ends_at_its_length() {
        let mut req = request();
        req.max_tokens = Some(8);
        let body = chunk("tok").repeat(1000);
        let (out, pieces) = read(&body, "text/event-stream", &req);
        let out = out.unwrap();
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert!(
            pieces.len() <= 8 + 2 + ANSWER_MARGIN_TOKENS,
            "{}",
            pieces.len()
        );
        // Few pieces of many bytes are bounded too.
        let big = "x".repeat(4000);
        let body = chunk(&big).repeat(100);
        let (out, pieces) = read(&body, "text/event-stream", &req);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("length"));
        let bytes: usize = pieces.iter().map(String::len).sum();
        assert!(bytes <= (8 + 2 + ANSWER_MARGIN_TOKENS) * MAX_BYTES_PER_TOKEN + big.len());
    }
}
