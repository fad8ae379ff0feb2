//! App settings (theme, text size, defaults for new conversations, CPU threads), kept with
//! tauri-plugin-store from Rust. The model Hearth opens at start is the registry's default
//! (`hearth_hub::Store::set_default`), not a setting: one place for it.

use hearth_chat::settings::{clamp_sampling, MAX_ANSWER_TOKENS};
use hearth_chat::ConversationSettings;
use hearth_chat::SamplingParams;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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

/// Whether the passages found for a question get a second look by a language model
/// (`crate::documents::rerank`): slower, finds more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum RerankMode {
    /// Only where a question's second look measured under 2 s on this computer (the default).
    #[default]
    Auto,
    /// Always, whatever it costs.
    On,
    /// Never.
    Off,
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
    /// Sampling for new conversations. Default: the engine's, with [`REPETITION_PENALTY`].
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
    /// Whether a GGUF file added to Hearth is copied into its folder instead of linked where it
    /// lies (for files on removable disks). Default off. Its one home is the model registry
    /// (`App::copy_models`): this field carries it to and from Settings.
    pub copy_models: bool,
    /// Settings › Files: the languages scans are read in, as Tesseract names them ("eng",
    /// "deu", "chi_sim"…; an empty list reads no scans). Default None: the app's language and
    /// English ([`Settings::scan_languages`]).
    pub ocr_languages: Option<Vec<String>>,
    /// Settings › NPU: the Python environment where the FastFlow SDK installed FastFlowLM
    /// (`<env>/bin/flm`), looked in first (`hearth_backends::npu::python_env`). Default None:
    /// `HEARTH_FLM`, `PATH`, the standard install, the active environments. Absolute only.
    pub flm_python_env: Option<std::path::PathBuf>,
    /// Settings › General: read every answer aloud as it is written (`crate::read_aloud`).
    /// Default off.
    pub read_answers: bool,
    /// Settings › Files: whether passages get a second look by a language model. Default auto.
    pub rerank: RerankMode,
}

/// The repetition penalty of new conversations: mild, as Ollama's default (the engine reads the
/// last 64 tokens), so a small model such as the starter does not write the same sentence until
/// the length limit (review #20). The engine's own default, which the APIs use, stays 1 (off).
pub const REPETITION_PENALTY: f32 = 1.1;

/// The most languages scans are read in at once (each one slows reading a scan).
pub const MAX_OCR_LANGUAGES: usize = 16;

/// Tesseract's name of the language data for `language` (English for `System`).
pub fn tesseract_name(language: Language) -> &'static str {
    match language {
        Language::System | Language::En => "eng",
        Language::Zh => "chi_sim",
        Language::Es => "spa",
        Language::De => "deu",
        Language::Fr => "fra",
    }
}

/// The most threads the setting accepts.
pub const MAX_THREADS: usize = 256;

impl Default for Settings {
    fn default() -> Self {
        Self {
            theme: Theme::System,
            font_size: 15,
            sampling: SamplingParams {
                repetition_penalty: REPETITION_PENALTY,
                ..SamplingParams::default()
            },
            max_tokens: 1024,
            system_prompt: String::new(),
            threads: None,
            language: Language::System,
            embedding_model: None,
            copy_models: false,
            ocr_languages: None,
            flm_python_env: None,
            read_answers: false,
            rerank: RerankMode::Auto,
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
        self.flm_python_env = self.flm_python_env.filter(|p| p.is_absolute());
        // Tesseract's names are short words of letters, digits and '_'; anything else is not
        // one, and a list of more than a few dozen is not a choice a person made.
        if let Some(languages) = &mut self.ocr_languages {
            languages.retain(|l| {
                !l.is_empty()
                    && l.len() <= 32
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            languages.sort();
            languages.dedup();
            languages.truncate(MAX_OCR_LANGUAGES);
        }
        self
    }

    /// Refuses a choice that cannot work, in words for the field it came from: a FastFlowLM
    /// Python environment (Settings › NPU) must be an absolute folder holding `bin/flm`, where
    /// `pip install fastflow-sdk` puts it. Checked when the user saves; settings read back at
    /// start are only [`clamped`](Self::clamped), so a folder removed later does not stop them.
    pub fn checked(self) -> Result<Self> {
        if let Some(env) = &self.flm_python_env {
            let flm = hearth_backends::npu::python_env::flm_in(env);
            if !env.is_absolute() || !flm.is_file() {
                let folder = env.display().to_string();
                return Err(Error::invalid(format!(
                    "{folder} holds no FastFlowLM (there is no bin/flm in it). Choose the folder of the Python environment where `pip install fastflow-sdk` installed it, or clear the field."
                ))
                .detail("flm_env_missing", &[("folder", folder)]));
            }
        }
        Ok(self)
    }

    /// The languages scans are read in: the choice of Settings › Files, else the app's language
    /// (`system`: the desktop's, from `var` as [`system_language`] reads it) and English.
    pub fn scan_languages(&self, var: impl Fn(&str) -> Option<String>) -> Vec<String> {
        if let Some(chosen) = &self.ocr_languages {
            return chosen.clone();
        }
        let language = match self.language {
            Language::System => system_language(var),
            chosen => chosen,
        };
        let mut languages = vec![tesseract_name(language).to_owned()];
        if language != Language::En {
            languages.push(tesseract_name(Language::En).to_owned());
        }
        languages
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
    fn a_fastflowlm_environment_is_saved_only_where_flm_is() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("venv");
        let with = |env: &std::path::Path| Settings {
            flm_python_env: Some(env.to_path_buf()),
            ..Settings::default()
        };
        let error = with(&env).checked().unwrap_err();
        assert_eq!(error.code, crate::ErrorCode::InvalidInput);
        assert_eq!(error.detail.as_deref(), Some("flm_env_missing"));
        assert!(error.message.contains("bin/flm"), "{}", error.message);
        let relative = with(std::path::Path::new("venv")).checked().unwrap_err();
        assert_eq!(relative.detail.as_deref(), Some("flm_env_missing"));

        std::fs::create_dir_all(env.join("bin")).unwrap();
        std::fs::write(env.join("bin/flm"), "#!/bin/sh\n").unwrap();
        assert_eq!(
            with(&env).checked().unwrap().flm_python_env.as_deref(),
            Some(env.as_path())
        );
        assert!(Settings::default().checked().is_ok(), "none chosen is fine");
    }

    #[test]
    fn review_20_new_conversations_avoid_repeating_mildly() {
        let defaults = Settings::default().conversation_defaults();
        assert_eq!(defaults.sampling.repetition_penalty, 1.1);
        assert_eq!(
            SamplingParams::default().repetition_penalty,
            1.0,
            "the APIs keep it off"
        );
    }

    #[test]
    fn answers_are_not_read_aloud_unless_asked() {
        assert!(!Settings::default().read_answers);
        let s = Settings::from_stored(Some(serde_json::json!({"read_answers": true})));
        assert!(s.read_answers);
    }

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
    fn scans_are_read_in_the_app_language_and_english_unless_chosen() {
        let german = Settings {
            language: Language::De,
            ..Settings::default()
        };
        assert_eq!(german.scan_languages(env(&[])), ["deu", "eng"]);
        let system = Settings::default();
        assert_eq!(
            system.scan_languages(env(&[("LANG", "zh_CN.UTF-8")])),
            ["chi_sim", "eng"]
        );
        assert_eq!(system.scan_languages(env(&[])), ["eng"], "English once");
        let chosen = Settings {
            ocr_languages: Some(vec!["fra".into()]),
            ..german
        };
        assert_eq!(chosen.scan_languages(env(&[])), ["fra"]);
        let none = Settings {
            ocr_languages: Some(vec![]),
            ..Settings::default()
        };
        assert!(
            none.scan_languages(env(&[])).is_empty(),
            "an empty choice reads no scans"
        );
    }

    #[test]
    fn ocr_languages_that_are_not_tesseract_names_are_dropped() {
        let s = Settings::from_stored(Some(serde_json::json!({
            "ocr_languages": ["deu", "../../etc", "eng", "deu", "", "chi_sim"]
        })));
        assert_eq!(
            s.ocr_languages.as_deref(),
            Some(&["chi_sim".to_string(), "deu".into(), "eng".into()][..])
        );
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
