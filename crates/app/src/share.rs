//! "Let other apps on this computer use Hearth": what the switch shows. Off by default; when on,
//! Hearth's local API (OpenAI's and Ollama's routes, `hearth_server::share`) serves the model
//! the app has open, through the app's own lock on it: no second copy in memory, no second
//! FastFlowLM, and a request while the app answers is told the model is busy.

use serde::Serialize;

/// The port Ollama listens on, which apps made for Ollama call by default.
pub const OLLAMA_PORT: u16 = 11434;

/// The port `hearth serve` listens on by default, beside a running Ollama.
pub const HEARTH_PORT: u16 = 11435;

/// Whether other apps can use Hearth now, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ShareStatus {
    /// Whether the switch is on.
    pub on: bool,
    /// The address to paste into the other app, e.g. `http://127.0.0.1:11434` (None when off).
    pub url: Option<String>,
    /// The port asked for.
    pub wanted_port: u16,
    /// Another program already listens at the wanted port, so Hearth took a free one (`url`
    /// says which).
    pub port_taken: bool,
    /// The model other apps get: the one open in the app (None when off or none is open).
    pub model: Option<String>,
}

impl ShareStatus {
    /// The switch off.
    pub fn off(wanted_port: u16) -> Self {
        ShareStatus {
            on: false,
            url: None,
            wanted_port,
            port_taken: false,
            model: None,
        }
    }
}
