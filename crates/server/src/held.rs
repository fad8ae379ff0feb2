//! A model another part of the program holds, lent to the server between its own uses: the
//! desktop app's loaded model, served to other apps on this computer without a second copy in
//! memory or a second FastFlowLM. While its holder answers with it, the server says it is busy
//! (503) instead of waiting behind it.

use hearth_chat::{Backend, BackendInfo};

/// Why a held model cannot answer a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// Its holder is using it (answering, or loading another model).
    InUse,
    /// No model is loaded.
    NotLoaded,
}

/// A model behind its holder's own lock, the one the holder's answers take.
pub trait HeldModel: Send + Sync {
    /// What is loaded now; None when nothing is. Answers at once, also while the holder is
    /// answering with the model.
    fn info(&self) -> Option<BackendInfo>;

    /// Runs `f` with the model if it is free now, holding the holder's lock meanwhile; never
    /// waits for the holder.
    fn try_with(&self, f: &mut dyn FnMut(&mut dyn Backend)) -> Result<(), Unavailable>;
}
