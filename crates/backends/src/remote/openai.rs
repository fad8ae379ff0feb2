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
//! The client is in three parts: [`request`] builds the bodies sent, [`errors`] turns what went
//! wrong into plain words, and [`stream`] reads a streamed answer.
//!
//! The API key is sent only to the configured address: redirects are never followed (a redirect
//! is reported as an error that names where it pointed), no proxy from the environment is used,
//! and the key never appears in a message, a `Debug` output or a log line.

use std::io::BufReader;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hearth_chat::backend::{BackendError, BackendTimings, FailureKind, TextSink};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod errors;
mod request;
mod stream;

use crate::remote::wire;
use errors::{quote, read_json_text};
pub use request::ChatRequest;
use stream::{Piece, Stream};

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
        let list: wire::ModelList = serde_json::from_value(value).unwrap_or_default();
        let Some(data) = list.data else {
            return Err(self.bad_reply(&format!(
                "its model list has no \"data\" array (starts with {})",
                quote(&text, self.key.as_ref())
            )));
        };
        Ok(data
            .into_iter()
            .filter_map(|m| {
                Some(ServerModel {
                    id: m.id?,
                    owned_by: m.owned_by,
                    context_length: m.max_model_len.map(|n| n as usize),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_engine::{ChatMessage, Role};

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
        let body: Value = serde_json::from_str(&req.body()).unwrap();
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
        let body: Value = serde_json::from_str(&req.completion_body("Once upon")).unwrap();
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
