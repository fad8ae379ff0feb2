//! "Let other apps on this computer use Hearth": what the switch shows, and the choice Hearth
//! remembers. Off until the user turns it on; then on again at every start, at the port chosen
//! ([`ShareChoice`]), until turned off. When on, Hearth's local API (OpenAI's and Ollama's routes,
//! `hearth_server::share`) serves the model the app has open, through the app's own lock on it:
//! no second copy in memory, no second FastFlowLM, and a request while the app answers is told
//! the model is busy. When it cannot start again at a start, the status says why
//! ([`ShareStatus::problem`]), so a plug-in set up yesterday does not stop working silently.

use serde::{Deserialize, Serialize};

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
    /// Why it is off although the user left it on: it could not start again when Hearth
    /// started (None otherwise).
    pub problem: Option<String>,
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
            problem: None,
        }
    }
}

/// The user's choice, remembered across starts: on or off, and the port. Off until switched
/// on; the port is kept when switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ShareChoice {
    /// Serve other apps at every start.
    pub on: bool,
    /// The port asked for ([`OLLAMA_PORT`] unless the user chose another).
    pub port: u16,
}

impl Default for ShareChoice {
    fn default() -> Self {
        ShareChoice {
            on: false,
            port: OLLAMA_PORT,
        }
    }
}

impl ShareChoice {
    /// The choice from its stored JSON; absent or unreadable: off.
    pub fn from_stored(value: Option<serde_json::Value>) -> Self {
        match value.map(serde_json::from_value::<ShareChoice>) {
            Some(Ok(choice)) => choice,
            Some(Err(error)) => {
                tracing::warn!("sharing: the stored choice is unreadable ({error}); it is off");
                ShareChoice::default()
            }
            None => ShareChoice::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_5_the_choice_is_off_until_switched_on_and_keeps_its_port() {
        assert_eq!(
            ShareChoice::from_stored(None),
            ShareChoice {
                on: false,
                port: OLLAMA_PORT
            }
        );
        let on = ShareChoice {
            on: true,
            port: HEARTH_PORT,
        };
        let stored = serde_json::to_value(on).unwrap();
        assert_eq!(
            ShareChoice::from_stored(Some(stored)),
            on,
            "on, at the port chosen"
        );
        assert_eq!(
            ShareChoice::from_stored(Some(serde_json::json!({"on": true}))),
            ShareChoice {
                on: true,
                port: OLLAMA_PORT
            },
            "a missing port is Ollama's"
        );
        assert_eq!(
            ShareChoice::from_stored(Some(serde_json::json!("yes"))),
            ShareChoice::default(),
            "garbage is off"
        );
    }
}
