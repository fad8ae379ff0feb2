//! App settings (theme, text size, defaults for new conversations, CPU threads), kept with
//! tauri-plugin-store from Rust. The model Hearth opens at start is the registry's default
//! (`hearth_hub::Store::set_default`), not a setting: one place for it.

use hearth_chat::settings::{clamp_sampling, MAX_ANSWER_TOKENS};
use hearth_chat::ConversationSettings;
use hearth_chat::SamplingParams;
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

/// The language of the app's words: the system's, or one Hearth ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Language {
    /// Follow the desktop session's locale (the default).
    #[default]
    System,
    /// English.
    En,
    /// Simplified Chinese.
    Zh,
    /// Spanish.
    Es,
    /// German.
    De,
    /// French.
    Fr,
}

/// The language the desktop session asks for: the first of LC_ALL, LC_MESSAGES and LANG that is
/// set and not empty, as the C library would choose it; English when that is C/POSIX or a
/// language Hearth does not ship. `var` reads an environment variable (`std::env::var`). The
/// string is parsed, not given to setlocale, so a locale that is not generated on this system
/// still chooses its language.
pub fn system_language(var: impl Fn(&str) -> Option<String>) -> Language {
    let chosen = ["LC_ALL", "LC_MESSAGES", "LANG"]
        .into_iter()
        .filter_map(&var)
        .find(|value| !value.is_empty())
        .unwrap_or_default();
    // "zh_CN.UTF-8@variant" -> "zh"
    let code = chosen
        .split(['_', '.', '@', '-'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match code.as_str() {
        "zh" => Language::Zh,
        "es" => Language::Es,
        "de" => Language::De,
        "fr" => Language::Fr,
        _ => Language::En,
    }
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
    /// The language of the app's words. Default: the system's.
    pub language: Language,
    /// The installed embedding model that searches the user's files by meaning, by name
    /// (`Documents::choose_embedding_model`). Default None: the bundled all-MiniLM-L6-v2.
    pub embedding_model: Option<String>,
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
            language: Language::System,
            embedding_model: None,
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

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn system_language_follows_lc_all_then_lc_messages_then_lang() {
        let all = [
            ("LC_ALL", "de_DE.UTF-8"),
            ("LC_MESSAGES", "fr_FR.UTF-8"),
            ("LANG", "es_ES.UTF-8"),
        ];
        assert_eq!(system_language(env(&all)), Language::De);
        assert_eq!(system_language(env(&all[1..])), Language::Fr);
        assert_eq!(system_language(env(&all[2..])), Language::Es);
        let empty_all = [("LC_ALL", ""), ("LANG", "zh_CN.UTF-8")];
        assert_eq!(
            system_language(env(&empty_all)),
            Language::Zh,
            "an empty variable is unset"
        );
    }

    #[test]
    fn system_language_parses_locales_not_generated_here() {
        for (value, language) in [
            ("zh_CN.UTF-8", Language::Zh),
            ("zh_TW", Language::Zh),
            ("fr_CA.utf8@euro", Language::Fr),
            ("de", Language::De),
            ("C.UTF-8", Language::En),
            ("POSIX", Language::En),
            ("ja_JP.UTF-8", Language::En),
        ] {
            assert_eq!(
                system_language(env(&[("LANG", value)])),
                language,
                "{value}"
            );
        }
        assert_eq!(system_language(env(&[])), Language::En, "nothing set");
    }

    #[test]
    fn language_is_saved_in_lowercase_and_defaults_to_system() {
        let s = Settings::from_stored(Some(serde_json::json!({"language": "zh"})));
        assert_eq!(s.language, Language::Zh);
        assert_eq!(Settings::default().language, Language::System);
        assert_eq!(serde_json::to_value(Language::De).unwrap(), "de");
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
