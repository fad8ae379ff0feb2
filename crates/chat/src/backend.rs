//! The one interface every place that runs a model implements: Hearth's CPU engine, the NPU
//! through FastFlowLM, and a remote OpenAI-compatible server. The answer loop
//! ([`crate::answer`]) drives it; nothing above it knows which backend answers.
//!
//! A backend is opened for one model. It tells what it is ([`BackendInfo`]), turns a
//! conversation into a [`Prompt`] it can count, and generates an answer to that prompt as a
//! stream of text that the caller can stop.

use std::ops::ControlFlow;
use std::str::FromStr;

use hearth_engine::{ChatMessage, ChatOptions, KvOrigin, PrefillProgress, StopReason};
use serde::{Deserialize, Serialize};

/// Where answers are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum BackendKind {
    /// Hearth's own engine on this computer's processor.
    Cpu,
    /// This computer's NPU, through FastFlowLM.
    Npu,
    /// An OpenAI-compatible server elsewhere (vLLM, llama-server, Ollama, another Hearth).
    Remote,
}

impl BackendKind {
    /// Every kind, best first when more than one can run a model.
    pub const ALL: [BackendKind; 3] = [BackendKind::Npu, BackendKind::Cpu, BackendKind::Remote];

    /// The short name used on the command line and in files: `cpu`, `npu`, `remote`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Npu => "npu",
            BackendKind::Remote => "remote",
        }
    }

    /// Where the answer is computed, in plain words ("this computer's processor").
    pub fn place(self) -> &'static str {
        match self {
            BackendKind::Cpu => "this computer's processor",
            BackendKind::Npu => "this computer's NPU",
            BackendKind::Remote => "a remote server",
        }
    }

    /// Whether the conversation leaves this computer.
    pub fn leaves_this_computer(self) -> bool {
        self == BackendKind::Remote
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(BackendKind::Cpu),
            "npu" => Ok(BackendKind::Npu),
            "remote" => Ok(BackendKind::Remote),
            other => Err(format!("unknown backend {other:?}: use cpu, npu or remote")),
        }
    }
}

/// Whether a backend can run a given model now, and why not when it cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Availability {
    /// Which backend.
    pub kind: BackendKind,
    /// True when it can answer with this model now.
    pub usable: bool,
    /// Why not, in plain words with what to do (None when usable).
    pub reason: Option<String>,
    /// Whether the model reads pictures given with a message on this backend: FastFlowLM's
    /// `vlm` mark on the NPU, the server's word or the user's switch on a remote server, never
    /// on the CPU engine (it reads text only). Said even when the backend is not usable now,
    /// so that a model's card and the picker can tell which models see.
    #[serde(default)]
    pub sees_pictures: bool,
}

impl Availability {
    /// Usable now.
    pub fn usable(kind: BackendKind) -> Self {
        Availability {
            kind,
            usable: true,
            reason: None,
            sees_pictures: false,
        }
    }

    /// Not usable, for `reason`.
    pub fn unusable(kind: BackendKind, reason: impl Into<String>) -> Self {
        Availability {
            kind,
            usable: false,
            reason: Some(reason.into()),
            sees_pictures: false,
        }
    }

    /// The same, saying whether the model sees pictures there.
    pub fn seeing(self, sees_pictures: bool) -> Self {
        Availability {
            sees_pictures,
            ..self
        }
    }
}

/// What an opened backend is: shown in the app, on receipts and by `hearth run --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// Which kind.
    pub kind: BackendKind,
    /// A label with detail, e.g. "cpu (avx512vnni)", "npu (FastFlowLM 1.0.6)",
    /// "remote (http://gpu-box:8000)".
    pub label: String,
    /// The device: the CPU's name, "AMD XDNA 2 NPU", or the server's address.
    pub device: String,
    /// The model's name as the user knows it (registry name, or the server's model id).
    pub model: String,
    /// Positions the model can hold (prompt plus answer); None when the backend cannot tell.
    pub context_length: Option<usize>,
    /// sha256 of the weights file, when known (local models).
    pub model_sha256: Option<String>,
    /// Version of the program that runs the model, when it is not Hearth (FastFlowLM's).
    pub runtime_version: Option<String>,
}

/// What to continue: a conversation (through the model's chat template) or plain text.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Messages, rendered with the model's chat template and the assistant's turn opened.
    Chat(Vec<ChatMessage>),
    /// Messages whose last one is the assistant's answer cut short, rendered with that answer's
    /// turn left open so the model writes on where it stopped. Only a backend that renders the
    /// template itself can ([`Backend::continues_answers`]); the others refuse it.
    Continue(Vec<ChatMessage>),
    /// Text continued as it is, with no template (`hearth run --raw`).
    Raw(String),
}

/// How many tokens a prompt takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCount {
    /// The number.
    pub tokens: usize,
    /// False when estimated (a remote model whose tokenizer Hearth does not have).
    pub exact: bool,
}

/// An input prepared for one backend: counted, and for local models already tokenized (so the
/// answer uses exactly the ids that were counted).
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// What is sent.
    pub input: Input,
    /// Its size.
    pub count: TokenCount,
    /// Token ids, when the backend tokenizes locally.
    pub tokens: Option<Vec<u32>>,
}

/// Timing fields a backend reports itself (FastFlowLM's and Hearth's server's `usage`), next to
/// the wall-clock ones Hearth measures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BackendTimings {
    /// Seconds spent loading the model for this request.
    pub load_secs: Option<f64>,
    /// Seconds spent reading the prompt.
    pub prefill_secs: Option<f64>,
    /// Prompt tokens run through the model in those seconds; the others' keys and values were
    /// kept from earlier turns (Hearth's engine keeps them, see its `kv_store`). None when the
    /// backend does not say.
    #[serde(default)]
    pub prefill_tokens: Option<usize>,
    /// Prompt tokens read per second (of those run through the model).
    pub prefill_tokens_per_s: Option<f64>,
    /// Seconds spent writing the answer.
    pub decode_secs: Option<f64>,
    /// Answer tokens per second.
    pub decode_tokens_per_s: Option<f64>,
}

/// How a generation ended, as the backend reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Tokens the model read.
    pub prompt_tokens: TokenCount,
    /// Tokens it wrote.
    pub generated_tokens: TokenCount,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// The backend's own timings.
    pub timings: BackendTimings,
}

/// Why a backend failed, by kind, so the app can say what to do next to where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing listens at the address.
    Refused,
    /// The server's name could not be resolved.
    Dns,
    /// The secure connection could not be set up (certificate, protocol).
    Tls,
    /// The server did not answer in time.
    Timeout,
    /// The server refused the key (401/403).
    Auth,
    /// The server does not have the model (404).
    ModelNotFound,
    /// The server is busy (429/503); try again later.
    Busy,
    /// The answer stopped before its end (connection cut, server crashed).
    Cut,
    /// The reply was not what an OpenAI-compatible server sends.
    BadReply,
    /// The model that answered is not the one asked for.
    WrongModel,
    /// The backend program is missing, too old or not ready.
    NotReady,
    /// The server reported an error of its own.
    Server,
}

/// What can go wrong in a backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Hearth's engine failed (bad model, prompt too long, tokenizer).
    #[error(transparent)]
    Engine(#[from] hearth_engine::Error),
    /// This backend cannot do what was asked (e.g. raw text on a server that only chats).
    #[error("{0}")]
    Unsupported(String),
    /// A server or child process failed; `message` says what happened and what to do.
    #[error("{message}")]
    Failed {
        /// What kind of failure.
        kind: FailureKind,
        /// Plain words.
        message: String,
        /// Seconds the server asked to wait before trying again (429/503).
        retry_after_secs: Option<u64>,
    },
}

impl BackendError {
    /// A failure of `kind`.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        BackendError::Failed {
            kind,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    /// The refusal of a backend that cannot hold its answers to a JSON format or schema
    /// (`ChatOptions::format`); `runner` names the program that runs the model.
    pub fn structured_output_unsupported(runner: &str) -> Self {
        BackendError::Unsupported(format!(
            "structured output (a JSON format or schema) needs the processor backend: {runner} \
             cannot hold the model's answer to a format; answer this request on the cpu backend \
             (`--backend cpu`, or the processor in the app's model menu)"
        ))
    }

    /// A stable code for the UI and scripts.
    pub fn code(&self) -> &'static str {
        match self {
            BackendError::Engine(hearth_engine::Error::ContextFull { .. }) => "context",
            BackendError::Engine(_) => "model",
            BackendError::Unsupported(_) => "unsupported",
            BackendError::Failed { kind, .. } => match kind {
                FailureKind::Refused | FailureKind::Dns | FailureKind::Tls => "connection",
                FailureKind::Timeout => "timeout",
                FailureKind::Auth => "auth",
                FailureKind::ModelNotFound => "model_not_found",
                FailureKind::Busy => "busy",
                FailureKind::Cut => "cut",
                FailureKind::BadReply => "bad_reply",
                FailureKind::WrongModel => "wrong_model",
                FailureKind::NotReady => "not_ready",
                FailureKind::Server => "server",
            },
        }
    }
}

/// Receives answer text as it is written; `ControlFlow::Break(())` stops the generation.
/// An empty piece carries no text: a backend waiting on a server sends one now and then so
/// that a Stop is seen while nothing arrives.
pub type TextSink<'a> = &'a mut dyn FnMut(&str) -> ControlFlow<()>;

/// What a backend tells while it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendEvent<'a> {
    /// How much of the prompt has been read (the part not already cached), from backends that
    /// can tell: the cpu one, after each chunk of its prefill. FastFlowLM and remote servers
    /// say nothing until the first text.
    Reading(PrefillProgress),
    /// A piece of the answer, as [`TextSink`] receives it (an empty one carries no text).
    Text(&'a str),
}

/// Receives a backend's events; `ControlFlow::Break(())` stops the generation (also while the
/// prompt is read, where the backend can stop there).
pub type EventSink<'a> = &'a mut dyn FnMut(BackendEvent<'_>) -> ControlFlow<()>;

/// A place that runs one model. `Send` so the app and the server can answer on a worker thread.
pub trait Backend: Send {
    /// What it is.
    fn info(&self) -> &BackendInfo;

    /// Renders, tokenizes (where it can) and counts `input` as this backend will send it.
    fn prepare(&mut self, input: Input, options: &ChatOptions) -> Result<Prompt, BackendError>;

    /// Tokens of a piece of text alone (no template): used to estimate which old turns to leave
    /// out when a conversation is too long. Estimated where the backend has no tokenizer.
    fn count_text(&self, text: &str) -> TokenCount;

    /// Generates the answer to `prompt`, streaming its reading progress and text to `on_event`
    /// (stop strings are applied by the caller, not here). Under a JSON `options.format` the
    /// answer is that JSON (the cpu backend constrains its sampling, a remote one passes the
    /// format on as OpenAI's `response_format`), or the backend refuses with
    /// [`BackendError::structured_output_unsupported`].
    fn generate(
        &mut self,
        prompt: Prompt,
        options: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError>;

    /// Sets whose prompts come from now on: the app's own conversations ([`APP_ORIGIN`]) or
    /// one client of a server. A backend that keeps computed prompt prefixes (the cpu one)
    /// reuses one only for a prompt of the same origin, so how fast an answer starts says
    /// nothing of another origin's prompts. Backends that keep none here (FastFlowLM, a remote
    /// server) ignore it, which is what this default does.
    fn set_kv_origin(&mut self, _origin: KvOrigin) {}

    /// Whether it can write on at the end of a cut answer ([`Input::Continue`]): only a backend
    /// that renders the chat template itself can leave the answer's turn open. A server renders
    /// its own and FastFlowLM takes only whole messages, so this default says no.
    fn continues_answers(&self) -> bool {
        false
    }

    /// Whether the model reads pictures given with a message ([`ChatMessage::pictures`]): a
    /// FastFlowLM vision model, a remote model that says it sees. Hearth's own engine has no
    /// vision encoder yet, so this default says no, and a backend that says no is never given a
    /// picture: the answer loop refuses first ([`BackendError::sees_no_pictures`]).
    fn sees_pictures(&self) -> bool {
        false
    }

    /// The longest side, in pixels, the model's pictures should have: what
    /// [`crate::picture::check_picture`] downscales to for it.
    fn picture_side(&self) -> u32 {
        crate::picture::DEFAULT_LONGEST_SIDE
    }
}

impl BackendError {
    /// The refusal of a backend whose model does not read pictures, before anything is sent.
    pub fn sees_no_pictures(info: &BackendInfo) -> Self {
        BackendError::Unsupported(format!(
            "{} on {} does not see pictures: choose a model that sees (one marked \"sees \
             pictures\"), or remove the picture and ask in words",
            info.model,
            info.kind.place()
        ))
    }

    /// A server's refusal of a picture, with its own words.
    pub fn picture_refused(words: &str) -> Self {
        BackendError::failed(
            FailureKind::Server,
            format!("the server refused the picture: {}", words.trim()),
        )
    }
}

/// Whether any of `input`'s messages carries a picture.
pub fn has_pictures(input: &Input) -> bool {
    match input {
        Input::Chat(messages) | Input::Continue(messages) => {
            messages.iter().any(|m| !m.pictures.is_empty())
        }
        Input::Raw(_) => false,
    }
}

/// The origin of the app's own conversations (the engine's default): a caller that shares a
/// backend with a server sets it before each of its answers.
pub const APP_ORIGIN: KvOrigin = 0;

/// Tokens of `text` alone: counted by `tokenizer` (exact) when there is one and it can read the
/// text, else estimated with [`estimate_tokens`].
pub fn count_tokens(tokenizer: Option<&hearth_engine::TextTokenizer>, text: &str) -> TokenCount {
    match tokenizer.map(|t| t.encode(text, false)) {
        Some(Ok(ids)) => TokenCount {
            tokens: ids.len(),
            exact: true,
        },
        _ => estimate_tokens(text),
    }
}

/// A token estimate for text whose tokenizer is unknown: about 4 characters per token in English
/// for the BPE vocabularies of current models; rounded up so an estimate errs long.
pub fn estimate_tokens(text: &str) -> TokenCount {
    TokenCount {
        tokens: text.chars().count().div_ceil(4),
        exact: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_from_the_command_line() {
        assert_eq!("CPU".parse::<BackendKind>().unwrap(), BackendKind::Cpu);
        assert_eq!(" npu".parse::<BackendKind>().unwrap(), BackendKind::Npu);
        let e = "gpu".parse::<BackendKind>().unwrap_err();
        assert!(e.contains("cpu, npu or remote"), "{e}");
        for kind in BackendKind::ALL {
            assert_eq!(kind.as_str().parse::<BackendKind>().unwrap(), kind);
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
    }

    #[test]
    fn only_remote_leaves_the_computer() {
        assert!(BackendKind::Remote.leaves_this_computer());
        assert!(!BackendKind::Cpu.leaves_this_computer());
        assert!(!BackendKind::Npu.leaves_this_computer());
    }

    #[test]
    fn the_structured_output_refusal_says_where_it_works() {
        let e = BackendError::structured_output_unsupported("FastFlowLM");
        assert_eq!(e.code(), "unsupported");
        let words = e.to_string();
        assert!(
            words.contains("FastFlowLM") && words.contains("--backend cpu"),
            "{words}"
        );
    }

    #[test]
    fn estimates_round_up() {
        assert_eq!(estimate_tokens("").tokens, 0);
        assert_eq!(estimate_tokens("abcde").tokens, 2);
        assert!(!estimate_tokens("x").exact);
    }
}
