//! Chatting with a model, the same way in the desktop app, `hearth run`/`chat` and
//! `hearth serve`.
//!
//! - [`backend`]: the [`Backend`] interface every place that runs a model implements, and its
//!   kinds ([`BackendKind`]: cpu, npu, remote; their implementations are in `hearth_backends`);
//! - [`answer`]: the answer loop (fit to context, generate, stop strings, live numbers, power,
//!   receipt) over any backend;
//! - [`context`]: which old turns to leave out when a conversation is too long;
//! - [`stop`]: stop strings applied to streamed text;
//! - [`energy`]: what an answer cost in energy, measured by a [`PowerMeter`] the caller hands in;
//! - [`clock`]: the times chat records;
//! - [`conversations`] and [`settings`]: the saved conversations (SQLite) and their settings;
//! - [`picture`]: checking a picture given with a message (format, bounds, downscaling).
//!
//! No Tauri, HTTP serving or UI here: the front ends are thin layers over these.

pub mod answer;
pub mod backend;
pub mod clock;
pub mod context;
pub mod conversations;
pub mod energy;
pub mod picture;
pub mod settings;
pub mod stop;

pub use answer::{
    answer, Answer, AnswerError, AnswerEvent, AnswerRequest, AnswerStart, AnswerStop, LiveStats,
    Receipt,
};
pub use backend::{
    Availability, Backend, BackendError, BackendEvent, BackendInfo, BackendKind, BackendTimings,
    FailureKind, Generation, Input, Prompt, TokenCount, APP_ORIGIN,
};
pub use energy::{EnergyReport, Measurement, PowerMeter};
// The words every caller of the answer loop speaks: messages, their roles, the options of one
// answer. They are the engine's types, named here so front ends depend on the loop, not on
// the engine.
pub use hearth_engine::{
    ChatMessage, ChatOptions, Error as EngineError, GenerationStats, KvOrigin, Picture,
    PictureFormat, PrefillProgress, ResponseFormat, Role, SamplingParams, StopReason,
};
pub use picture::{check_picture, PictureError};
pub use settings::ConversationSettings;
