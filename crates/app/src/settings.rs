//! App settings (theme, text size, defaults for new conversations, CPU threads), kept with
//! tauri-plugin-store from Rust. The model Hearth opens at start is the registry's default
//! (`hearth_hub::Store::set_default`), not a setting: one place for it.

use hearth_chat::settings::{clamp_sampling, MAX_ANSWER_TOKENS};
use hearth_chat::ConversationSettings;
use hearth_engine::SamplingParams;
use serde::{Deserialize, Serialize};

/// Light, dark, or follow the desktop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Theme {
    /// Follow the desktop's preference (the default).
    #[default]
    System,
    /// Always light.
    Light,
    /// Always dark.
    Dark,
}

/// App-wide settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Settings {
    /// Colour theme. Default: follow the system.
    pub theme: Theme,
    /// Base text size in CSS pixels (12..=22). Default 15.
    pub font_size: u32,
    /// Sampling for new conversations.
    pub sampling: SamplingParams,
    /// Longest answer for new conversations, in tokens. Default 1024.
    pub max_tokens: usize,
    /// System prompt for new conversations. Default empty.
    pub system_prompt: String,
    /// Processor threads Hearth's engine uses (1..=[`MAX_THREADS`]); None, the default: one per
    /// physical core. Applies to the next model loaded.
    pub threads: Option<usize>,
}

/// The most threads the setting accepts.
pub const MAX_THREADS: usize = 256;

impl Default for Settings {
    fn default() -> Self {
        Self {
            theme: Theme::System,
            font_size: 15,
            sampling: SamplingParams::default(),
            max_tokens: 1024,
            system_prompt: String::new(),
            threads: None,
        }
    }
}

impl Settings {
    /// Bring every field into its valid range.
    pub fn clamped(mut self) -> Self {
        self.font_size = self.font_size.clamp(12, 22);
        self.sampling = clamp_sampling(self.sampling);
        self.max_tokens = self.max_tokens.clamp(1, MAX_ANSWER_TOKENS);
        self.threads = self.threads.map(|t| t.clamp(1, MAX_THREADS));
        self
    }

    /// Read settings from their stored JSON; anything unreadable falls back to the defaults.
    pub fn from_stored(value: Option<serde_json::Value>) -> Self {
        match value.map(serde_json::from_value::<Settings>) {
            Some(Ok(settings)) => settings.clamped(),
            Some(Err(error)) => {
                tracing::warn!("settings: stored settings unreadable ({error}); using defaults");
                Settings::default()
            }
            None => Settings::default(),
        }
    }
}

impl Settings {
    /// Settings for a new conversation, from the app defaults.
    pub fn conversation_defaults(&self) -> ConversationSettings {
        ConversationSettings {
            system_prompt: self.system_prompt.clone(),
            sampling: self.sampling,
            max_tokens: self.max_tokens,
            enable_thinking: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_take_defaults() {
        let s = Settings::from_stored(Some(serde_json::json!({"theme": "dark"})));
        assert_eq!(s.theme, Theme::Dark);
        assert_eq!(s.font_size, 15, "absent fields keep their default");
    }

    #[test]
    fn garbage_falls_back_to_defaults() {
        let s = Settings::from_stored(Some(serde_json::json!({"theme": 42})));
        assert_eq!(
            s,
            Settings::default(),
            "an unreadable file must not stop the app"
        );
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        let s = Settings {
            font_size: 400,
            max_tokens: 0,
            sampling: SamplingParams {
                temperature: f32::NAN,
                top_p: 7.0,
                ..SamplingParams::default()
            },
            ..Settings::default()
        }
        .clamped();
        assert_eq!(s.font_size, 22);
        assert_eq!(s.max_tokens, 1);
        assert_eq!(s.sampling.temperature, 0.7, "NaN becomes the default");
        assert_eq!(s.sampling.top_p, 1.0);
    }
}
