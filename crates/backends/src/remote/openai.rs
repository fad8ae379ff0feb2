//! A small blocking client of OpenAI-compatible servers (llama.cpp's server, vLLM, Ollama,
//! Lemonade, FastFlowLM, another Hearth), over `ureq` with rustls.
//!
//! - `GET /v1/models`: the models a server offers ([`OpenAiClient::models`]), and Ollama's
//!   `POST /api/show` for which of them see pictures ([`OpenAiClient::ask_which_see`]);
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
//!   ([`FailureKind::Cut`](hearth_chat::backend::FailureKind::Cut)); the text already passed
//!   on stays with the caller.
//!
//! The client is in parts. This file holds the client and the types its callers see;
//! `address` checks a server address; `models` asks a server what it offers (its models, a
//! context length, token counts); `answer` posts a chat or completion request and hands its
//! text on as it arrives; `request` builds the bodies sent, `stream` reads a streamed
//! answer, and `errors` turns what went wrong into plain words.
//!
//! The API key is sent only to the configured address: redirects are never followed (a redirect
//! is reported as an error that names where it pointed), no proxy from the environment is used,
//! and the key never appears in a message, a `Debug` output or a log line.

use std::time::Duration;

use hearth_chat::backend::{BackendError, BackendTimings};
use serde::{Deserialize, Serialize};

mod address;
mod answer;
mod errors;
mod models;
mod request;
mod stream;
#[cfg(test)]
mod testing;

pub use address::{parse_base_url, BaseUrl};
pub use models::{ServerModel, ASKED_AT_ONCE, MOST_MODELS_ASKED, SHOW_TIMEOUT};
pub use request::ChatRequest;

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
}

#[cfg(test)]
mod tests {
    use super::testing::client;
    use super::*;

    #[test]
    fn keys_never_show_in_debug() {
        let c = client();
        let shown = format!("{c:?} {:?}", ApiKey::new(" sk-SECRET ").unwrap());
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("<hidden>"));
        assert_eq!(ApiKey::new("  "), None);
        assert_eq!(ApiKey::new(" k ").unwrap().expose(), "k");
    }
}
