//! The `remote` backend: a model on an OpenAI-compatible server somewhere else (llama.cpp's
//! server, vLLM, Ollama, Lemonade, another Hearth), reached over HTTP or HTTPS.
//!
//! - [`openai`]: the blocking client (`/v1/models`, streamed `/v1/chat/completions`, and
//!   `/v1/completions` for raw text), its errors in plain words, and the API key that is never
//!   shown;
//! - [`config`]: the server's address, key and model, saved privately (0600) as `remote.json`;
//! - [`sse`]: server-sent events read with a bound on each event.
//!
//! The request and reply bodies are `hearth_wire::openai`'s, shared with Hearth's server.
//!
//! Counting: the server's `usage` is exact and used whenever it is sent. Before the answer (to
//! fit the conversation) and when a server sends no `usage`, Hearth counts with the model's
//! `tokenizer.json` if the settings name one, and otherwise estimates (marked not exact, so the
//! receipt says "approximate"). An answer sent without `usage` is counted by the server's own
//! tokenizer endpoint where it has one (llama-cpp-python never sends `usage` in a stream).
//!
//! Pictures: a model sees them when Ollama's `/api/show` lists `vision` among its capabilities
//! (asked for a listed model's first few, bounded, when the list is shown, and for the model
//! opened) or when the user marked it in the settings ([`RemoteConfig::sees_pictures`]: the
//! mark adds to Ollama's word, never takes it away); they go as
//! `image_url` parts (`data:image/...;base64,`). A model that does not see is never sent one,
//! and a server's refusal of one is said as "the server refused the picture: ...".

pub mod config;
pub mod openai;
pub mod sse;

use hearth_engine::{ChatMessage, ChatOptions, ResponseFormat, StopReason, TextTokenizer};

pub use config::{RemoteConfig, RemoteConfigError};
use hearth_chat::backend::{
    count_tokens, estimate_tokens, Backend, BackendError, BackendEvent, BackendInfo, BackendKind,
    EventSink, FailureKind, Generation, Input, Prompt, TokenCount,
};
pub use openai::{ApiKey, ChatRequest, ClientOptions, OpenAiClient, ServerModel, StreamOutcome};

/// Tokens a chat template adds around each message (role markers, separators): an estimate,
/// since the server's template is not known here.
const TEMPLATE_TOKENS_PER_MESSAGE: usize = 4;
/// Tokens that open the assistant's turn.
const TEMPLATE_TOKENS_AT_END: usize = 3;

use hearth_chat::picture::picture_tokens;
/// Most model names listed in the error for a model the server does not have.
const MODELS_LISTED: usize = 20;

/// Checks that the server at `url` answers (sending `key` when given) and returns the models it
/// offers, those Ollama says see pictures marked: what the app's "Test connection" and model
/// picker show. Errors say what happened and what to do, in plain words;
/// [`BackendError::code`] tells the kind (`connection`, `auth`, ...).
pub fn test_connection(url: &str, key: Option<ApiKey>) -> Result<Vec<ServerModel>, BackendError> {
    let client = OpenAiClient::new(url, key, ClientOptions::default())?;
    let mut models = client.models()?;
    client.ask_which_see(&mut models);
    Ok(models)
}

/// One model on one remote server.
pub struct RemoteBackend {
    client: OpenAiClient,
    info: BackendInfo,
    tokenizer: Option<TextTokenizer>,
    /// Whether the server counts tokens itself (see [`OpenAiClient::server_token_count`]),
    /// with what it adds to every count: unknown until a stream comes without usage.
    server_counter: ServerCounter,
    /// Whether the model sees pictures: Ollama says so, or the user marked it.
    sees_pictures: bool,
}

/// What is known of a server's own token counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerCounter {
    /// Not asked yet.
    Unknown,
    /// It counts, adding this many tokens (a BOS) to every text.
    Counts { overhead: usize },
    /// It cannot.
    Absent,
}

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBackend")
            .field("client", &self.client)
            .field("info", &self.info)
            .field("tokenizer", &self.tokenizer.is_some())
            .finish()
    }
}

impl RemoteBackend {
    /// The models the server in `config` offers, for the user to choose from, those Ollama
    /// says see pictures marked ([`OpenAiClient::ask_which_see`]; the user's own marks are in
    /// `config`, [`RemoteConfig::marked_seeing`]).
    pub fn list_models(
        config: &RemoteConfig,
        options: ClientOptions,
    ) -> Result<Vec<ServerModel>, BackendError> {
        let client = OpenAiClient::new(&config.base_url, config.api_key.clone(), options)?;
        let mut models = client.models()?;
        client.ask_which_see(&mut models);
        Ok(models)
    }

    /// Opens `model` on the server in `config`: checks that the server lists it (the error
    /// names the ones it has otherwise), learns its context length where the server tells it
    /// (vLLM's `max_model_len`, llama.cpp's `/props`), and loads the tokenizer the settings
    /// name, if any.
    pub fn connect(
        config: &RemoteConfig,
        model: &str,
        options: ClientOptions,
    ) -> Result<RemoteBackend, BackendError> {
        Self::connect_known(config, model, None, options)
    }

    /// [`RemoteBackend::connect`] when the server's word on whether `model` sees pictures is
    /// known already (`server_sees`, from [`RemoteBackend::list_models`]): it is not asked
    /// again. None asks it, as `connect` does.
    pub fn connect_known(
        config: &RemoteConfig,
        model: &str,
        server_sees: Option<bool>,
        options: ClientOptions,
    ) -> Result<RemoteBackend, BackendError> {
        let client = OpenAiClient::new(&config.base_url, config.api_key.clone(), options)?;
        let models = client.models()?;
        let Some(found) = models.iter().find(|m| m.id == model) else {
            let has = if models.is_empty() {
                "It lists no models: load one on the server first.".to_owned()
            } else {
                let mut names: Vec<&str> = models
                    .iter()
                    .take(MODELS_LISTED)
                    .map(|m| m.id.as_str())
                    .collect();
                if models.len() > MODELS_LISTED {
                    names.push("…");
                }
                format!("It has: {}.", names.join(", "))
            };
            return Err(BackendError::failed(
                FailureKind::ModelNotFound,
                format!(
                    "The server at {} has no model named {model:?}. {has} Choose one of these.",
                    client.base_url()
                ),
            ));
        };
        let context_length = found
            .context_length
            .or_else(|| client.props_context_length());
        // A model the user marked needs no asking; otherwise Ollama's word, from the list
        // shown or asked now (other servers have no /api/show and say nothing).
        let sees_pictures = config.marked_seeing(model)
            || server_sees
                .or_else(|| client.ollama_sees_pictures(model))
                .unwrap_or(false);
        let tokenizer = match &config.tokenizer {
            Some(path) => Some(TextTokenizer::from_file(path)?),
            None => None,
        };
        let info = BackendInfo {
            kind: BackendKind::Remote,
            label: format!("remote ({})", client.base_url()),
            device: client.host_port().to_owned(),
            model: model.to_owned(),
            context_length,
            model_sha256: None,
            runtime_version: None,
        };
        tracing::info!(
            server = %client.base_url(),
            model,
            context_length = ?context_length,
            tokenizer = tokenizer.is_some(),
            sees_pictures,
            "opened a remote model"
        );
        Ok(RemoteBackend {
            client,
            info,
            tokenizer,
            server_counter: ServerCounter::Unknown,
            sees_pictures,
        })
    }

    /// The client used (for its address and options).
    pub fn client(&self) -> &OpenAiClient {
        &self.client
    }

    /// Tokens of an answer the server sent no usage for: with the local tokenizer, else with
    /// the server's own (llama-cpp-python sends no usage in streams), else estimated.
    fn count_answer(&mut self, answer: &str) -> TokenCount {
        if self.tokenizer.is_some() {
            return self.count_text(answer);
        }
        let model = self.info.model.clone();
        if self.server_counter == ServerCounter::Unknown {
            self.server_counter = match self.client.server_token_count(&model, "") {
                Some(overhead) => ServerCounter::Counts { overhead },
                None => ServerCounter::Absent,
            };
            tracing::debug!(counter = ?self.server_counter, "asked whether the server counts tokens");
        }
        if let ServerCounter::Counts { overhead } = self.server_counter {
            if let Some(n) = self.client.server_token_count(&model, answer) {
                return TokenCount {
                    tokens: n.saturating_sub(overhead),
                    exact: true,
                };
            }
        }
        estimate_tokens(answer)
    }

    /// The request for `messages` with `options`. Only sampling fields servers accept are
    /// sent; stop strings are not (the answer loop applies them on every backend).
    fn request(&self, messages: Vec<ChatMessage>, options: &ChatOptions) -> ChatRequest {
        let s = &options.sampling;
        let mut extra = serde_json::Map::new();
        if let Some(thinking) = options.enable_thinking {
            // vLLM and llama.cpp pass these to the chat template.
            extra.insert(
                "chat_template_kwargs".into(),
                serde_json::json!({ "enable_thinking": thinking }),
            );
        }
        if let Some(format) = openai_response_format(&options.format) {
            extra.insert("response_format".into(), format);
        }
        ChatRequest {
            model: self.info.model.clone(),
            messages,
            max_tokens: Some(options.max_tokens),
            temperature: Some(s.temperature),
            top_p: Some(s.top_p),
            // 0 (keep all) is an error on some vLLM versions: leave it to the server's default.
            top_k: (s.top_k > 0).then_some(s.top_k),
            // Sent even when off: servers' defaults differ (llama-cpp-python's min_p is 0.05
            // and its repeat penalty 1.1), and Hearth's settings must hold on every backend.
            min_p: Some(s.min_p),
            repetition_penalty: Some(s.repetition_penalty),
            seed: Some(s.seed),
            extra,
            require_model: false,
        }
    }
}

/// Why a server is not asked to write on at the end of a cut answer: servers render their own
/// chat template, and few of them can leave an answer's turn open (none the same way).
fn cannot_continue() -> BackendError {
    BackendError::Unsupported(
        "a server cannot be asked to write on at the end of a cut answer; ask it to go on in a \
         new answer"
            .into(),
    )
}

impl Backend for RemoteBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn prepare(&mut self, input: Input, _options: &ChatOptions) -> Result<Prompt, BackendError> {
        // The server renders its own template (and may add a BOS to raw text): only the text
        // can be counted here, so the total is an estimate even with the tokenizer. The
        // server's usage is exact.
        let tokens = match &input {
            Input::Chat(messages) => {
                messages
                    .iter()
                    .map(|m| {
                        self.count_text(&m.content).tokens
                            + TEMPLATE_TOKENS_PER_MESSAGE
                            + m.pictures.iter().map(picture_tokens).sum::<usize>()
                    })
                    .sum::<usize>()
                    + TEMPLATE_TOKENS_AT_END
            }
            Input::Raw(text) => self.count_text(text).tokens,
            Input::Continue(_) => return Err(cannot_continue()),
        };
        Ok(Prompt {
            input,
            count: TokenCount {
                tokens,
                exact: false,
            },
            tokens: None,
        })
    }

    fn count_text(&self, text: &str) -> TokenCount {
        count_tokens(self.tokenizer.as_ref(), text)
    }

    fn sees_pictures(&self) -> bool {
        self.sees_pictures
    }

    fn generate(
        &mut self,
        prompt: Prompt,
        options: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError> {
        // A server does not say how far it has read the prompt: only text comes.
        let mut answer = String::new();
        let mut pass_on = |piece: &str| {
            answer.push_str(piece);
            on_event(BackendEvent::Text(piece))
        };
        let (request, outcome) = match prompt.input {
            Input::Chat(messages) => {
                let pictures = messages.iter().any(|m| !m.pictures.is_empty());
                if pictures && !self.sees_pictures {
                    return Err(BackendError::sees_no_pictures(&self.info));
                }
                let request = self.request(messages, options);
                let outcome = match self.client.stream_chat(&request, &mut pass_on) {
                    // A server that cannot read the picture says so with an error status
                    // (400 from vLLM and llama-server, 500 from Ollama): in its words.
                    Err(BackendError::Failed {
                        kind: FailureKind::Server | FailureKind::BadReply,
                        message,
                        ..
                    }) if pictures => return Err(picture_refused(&message)),
                    other => other?,
                };
                (request, outcome)
            }
            Input::Raw(text) => {
                let mut request = self.request(Vec::new(), options);
                // No template renders raw text.
                request.extra.remove("chat_template_kwargs");
                let outcome = self
                    .client
                    .stream_completion(&request, &text, &mut pass_on)?;
                (request, outcome)
            }
            Input::Continue(_) => return Err(cannot_continue()),
        };
        if let Some(answered) = outcome.model.as_deref().filter(|m| *m != request.model) {
            // Servers report aliases or file paths here; worth a note, not a failure.
            tracing::debug!(asked = %request.model, answered, "the server names the model differently");
        }
        let usage = outcome.usage.unwrap_or(openai::ServerUsage {
            prompt_tokens: None,
            completion_tokens: None,
        });
        let prompt_tokens = match usage.prompt_tokens {
            Some(tokens) => TokenCount {
                tokens,
                exact: true,
            },
            None => prompt.count,
        };
        let generated_tokens = match usage.completion_tokens {
            Some(tokens) => TokenCount {
                tokens,
                exact: true,
            },
            None => self.count_answer(&answer),
        };
        let stop_reason = if outcome.cancelled {
            StopReason::Cancelled
        } else if outcome.finish_reason.as_deref() == Some("length") {
            StopReason::MaxTokens
        } else {
            StopReason::EndOfTurn
        };
        Ok(Generation {
            prompt_tokens,
            generated_tokens,
            stop_reason,
            timings: outcome.timings,
        })
    }
}

/// A server's refusal of a message with pictures: its words, and what the user can do.
fn picture_refused(message: &str) -> BackendError {
    BackendError::picture_refused(&format!(
        "{}. If this model does not see pictures, choose one that does, or turn its \"sees \
         pictures\" switch off in Settings, under Remote server; or send the message without \
         the picture.",
        message.trim().trim_end_matches('.')
    ))
}

/// `format` as OpenAI's `response_format` (vLLM, llama.cpp's server, Ollama's OpenAI API and
/// Hearth's own accept it); None for free text, which is every server's default.
fn openai_response_format(format: &ResponseFormat) -> Option<serde_json::Value> {
    match format {
        ResponseFormat::Text => None,
        ResponseFormat::JsonObject => Some(serde_json::json!({ "type": "json_object" })),
        ResponseFormat::JsonSchema(schema) => Some(serde_json::json!({
            "type": "json_schema",
            "json_schema": { "name": "answer", "schema": schema, "strict": true }
        })),
    }
}
