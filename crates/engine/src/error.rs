//! The engine's error type: every variant says what failed, on which file or value, and what the
//! user can do about it.

use std::path::PathBuf;

/// Everything that can go wrong while loading a model or generating with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model folder's weights or config could not be read or do not agree.
    #[error("engine: cannot load the model in {dir}: {source}")]
    Load {
        /// The model folder.
        dir: PathBuf,
        /// What the weight reader found.
        #[source]
        source: q4nx::Error,
    },
    /// The model folder is readable but something in it is inconsistent or unsupported.
    #[error("engine: the model in {dir} cannot be used: {reason}")]
    InvalidModel {
        /// The model folder.
        dir: PathBuf,
        /// What is wrong, in plain words.
        reason: String,
    },
    /// `tokenizer.json` or the chat template could not be read.
    #[error("engine: cannot read {path}: {reason}")]
    Tokenizer {
        /// The file that failed.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Text was given but the model folder has no `tokenizer.json`.
    #[error(
        "engine: the model in {dir} has no tokenizer.json, so it cannot read or write text; \
         give token ids instead (`hearth generate --tokens 1,2,3`, `hearth logits --tokens 1,2,3`) \
         or add the model's tokenizer.json to the folder"
    )]
    NoTokenizer {
        /// The model folder.
        dir: PathBuf,
    },
    /// Messages were given but the model folder declares no chat template.
    #[error(
        "engine: the model in {dir} has no chat template (neither chat_template.jinja nor a \
         chat_template in tokenizer_config.json); use `hearth generate --tokens` or add one"
    )]
    NoChatTemplate {
        /// The model folder.
        dir: PathBuf,
    },
    /// The chat template failed to render (it may raise on purpose, e.g. on a bad role order).
    #[error("engine: the chat template failed: {reason}")]
    ChatTemplate {
        /// The template engine's message.
        reason: String,
    },
    /// The chat template was stopped at one of the limits every render runs within: it loops
    /// without end, builds huge text, or nests without end. The template comes with the
    /// model's files, so the model is refused.
    #[error(
        "engine: the chat template of {model} was stopped: {limit}. No real template needs \
         that, so the model's files are broken or hostile and Hearth will not use this model; \
         use another model, or ask its publisher for a fixed chat template"
    )]
    ChatTemplateLimit {
        /// The model whose template it is.
        model: String,
        /// Which limit, in plain words.
        limit: String,
    },
    /// Tokenizing or decoding failed.
    #[error("engine: tokenizer failed: {reason}")]
    Tokenize {
        /// The tokenizer's message.
        reason: String,
    },
    /// A prompt with no tokens.
    #[error("engine: the prompt is empty: give at least one token or some text")]
    EmptyPrompt,
    /// A token id that the model's vocabulary does not have.
    #[error(
        "engine: token id {token} at position {position} is out of range: \
         the model's vocabulary has {vocab_size} ids (0..{vocab_size})"
    )]
    TokenOutOfRange {
        /// The bad id.
        token: u32,
        /// Its index in the prompt.
        position: usize,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// The prompt (plus what must be generated) does not fit in the context.
    #[error(
        "engine: the context is full: {needed} tokens are needed but the context holds {limit}; \
         start a new conversation, shorten the prompt, or load the model with a longer context"
    )]
    ContextFull {
        /// Tokens that would be in the context.
        needed: usize,
        /// The context length the model was loaded with.
        limit: usize,
    },
    /// A sampling setting outside its valid range.
    #[error("engine: invalid sampling setting: {reason}")]
    InvalidSampling {
        /// Which setting and why.
        reason: String,
    },
    /// A response format (structured output) that cannot be followed: a schema keyword Hearth
    /// does not enforce, a schema no value can match, or a vocabulary that cannot write it.
    #[error("engine: cannot follow the response format: {reason}")]
    ResponseFormat {
        /// What, where in the schema, and what to do instead.
        reason: String,
    },
    /// A load setting (context length, threads) outside what this model or machine can do.
    #[error("engine: invalid load setting: {reason}")]
    InvalidLoadOption {
        /// Which setting, why, and what to use instead.
        reason: String,
    },
    /// Audio that cannot be transcribed (no samples, values that are not numbers, a language
    /// the speech model does not know).
    #[error("engine: cannot transcribe: {reason}")]
    Audio {
        /// What is wrong and what to do.
        reason: String,
    },
    /// The caller stopped the work (a transcription's progress callback said stop).
    #[error("engine: stopped on request")]
    Cancelled,
}

impl Error {
    pub(crate) fn invalid_model(dir: &std::path::Path, reason: impl Into<String>) -> Self {
        Error::InvalidModel {
            dir: dir.to_path_buf(),
            reason: reason.into(),
        }
    }
}
