//! What a front end is told while a model loads ([`ModelLoading`], sent through a [`Progress`]).
//! Its own module so the app state that reports it and the NPU code that produces most of it
//! both name it without naming each other.

use std::sync::Arc;

use hearth_chat::BackendKind;
use serde::Serialize;

/// The name of the event that carries [`ModelLoading`] to the desktop UI.
pub const LOADING_EVENT: &str = "model-loading";

/// Where loading a model onto the NPU has got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum LoadingStage {
    /// FastFlowLM is being found and checked.
    Starting,
    /// The model is being loaded onto the NPU (also after a restart).
    Loading,
    /// The NPU's answers are being compared with the processor's (once per model).
    Checking,
    /// The model answers on the NPU.
    Ready,
    /// Loading failed; the message says why.
    Failed,
    /// FastFlowLM was stopped (idle, or replaced); it starts again with the next answer.
    Stopped,
}

/// What a front end shows while a model loads onto the NPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelLoading {
    /// The model's name.
    pub model: String,
    /// Where it is being loaded.
    pub backend: BackendKind,
    /// How far it got.
    pub stage: LoadingStage,
    /// In plain words.
    pub message: String,
}

/// Receives loading progress (the desktop sends it to the UI as [`LOADING_EVENT`]).
pub type Progress = Arc<dyn Fn(ModelLoading) + Send + Sync>;

/// A [`Progress`] that only logs (front ends with nothing to show it on).
pub fn logged_progress() -> Progress {
    Arc::new(|loading: ModelLoading| tracing::info!("{}: {}", loading.model, loading.message))
}
