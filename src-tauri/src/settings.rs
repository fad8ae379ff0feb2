//! App settings (theme, text size, default model, sampling defaults), kept with
//! tauri-plugin-store from Rust, and the sampling settings stored with each conversation.

use serde::{Deserialize, Serialize};

/// Sampling settings as Hearth stores them (a stable on-disk shape; converted to the engine's
/// `SamplingParams` when generating).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sampling {
    /// Randomness; 0 picks the most likely token every time. Default 0.7.
    pub temperature: f32,
    /// Consider only the k most likely tokens (0: all). Default 40.
    pub top_k: usize,
    /// Nucleus sampling mass. Default 0.95.
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the best one. Default 0.05.
    pub min_p: f32,
    /// Penalty on repeating tokens (1: none). Default 1.0.
    pub repetition_penalty: f32,
    /// Random seed (0: a fixed default seed). Default 0.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Clamp every value into the range the engine accepts, so a bad value from the UI or a
    /// hand-edited file never reaches the sampler.
    pub fn clamped(self) -> Self {
        let finite = |v: f32, d: f32| if v.is_finite() { v } else { d };
        let d = Self::default();
        Self {
            temperature: finite(self.temperature, d.temperature).clamp(0.0, 2.0),
            top_k: self.top_k.min(1000),
            top_p: finite(self.top_p, d.top_p).clamp(0.0, 1.0),
            min_p: finite(self.min_p, d.min_p).clamp(0.0, 1.0),
            repetition_penalty: finite(self.repetition_penalty, d.repetition_penalty)
                .clamp(0.5, 2.0),
            seed: self.seed,
        }
    }
}

/// Light, dark, or follow the desktop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Theme {
    /// Follow the desktop's preference (the default).
    #[default]
    System,
    /// Always light.
    Light,
    /// Always dark.
    Dark,
}

/// The longest answer a user may ask for, in tokens.
pub const MAX_ANSWER_TOKENS: usize = 32_768;

/// App-wide settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Colour theme. Default: follow the system.
    pub theme: Theme,
    /// Base text size in CSS pixels (12..=22). Default 15.
    pub font_size: u32,
    /// Model folder name to load at start; None: the newest downloaded model, else the demo.
    pub default_model: Option<String>,
    /// Sampling for new conversations.
    pub sampling: Sampling,
    /// Longest answer for new conversations, in tokens. Default 1024.
    pub max_tokens: usize,
    /// System prompt for new conversations. Default empty.
    pub system_prompt: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            theme: Theme::System,
            font_size: 15,
            default_model: None,
            sampling: Sampling::default(),
            max_tokens: 1024,
            system_prompt: String::new(),
        }
    }
}

impl Settings {
    /// Bring every field into its valid range.
    pub fn clamped(mut self) -> Self {
        self.font_size = self.font_size.clamp(12, 22);
        self.sampling = self.sampling.clamped();
        self.max_tokens = self.max_tokens.clamp(1, MAX_ANSWER_TOKENS);
        self.default_model = self.default_model.filter(|m| !m.trim().is_empty());
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

/// The settings a conversation carries with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConversationSettings {
    /// Instructions given to the model before the conversation. Empty: none.
    pub system_prompt: String,
    /// Sampling for this conversation's answers.
    pub sampling: Sampling,
    /// Longest answer, in tokens.
    pub max_tokens: usize,
    /// Ask reasoning models to think first (None: the model's default).
    pub enable_thinking: Option<bool>,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        Settings::default().conversation_defaults()
    }
}

impl ConversationSettings {
    /// Bring every field into its valid range.
    pub fn clamped(mut self) -> Self {
        self.sampling = self.sampling.clamped();
        self.max_tokens = self.max_tokens.clamp(1, MAX_ANSWER_TOKENS);
        self
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
            sampling: Sampling {
                temperature: f32::NAN,
                top_p: 7.0,
                ..Sampling::default()
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
