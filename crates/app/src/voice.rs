//! Speaking to the app: one recording at a time from the microphone (or, for tests, the sound
//! file `HEARTH_TEST_MIC_WAV` names: `hearth_speech::capture`), its live level and time sent to
//! the front end, and on stop its words through the app's speech door ([`crate::speech`]),
//! saying who heard them ("npu" or "cpu").
//!
//! The contract: a front end keeps one [`Voice`]; [`Voice::start`] begins listening (an error
//! when it already listens, or when the microphone cannot be opened: no microphone, in use,
//! permission refused, each its own `detail`); [`Voice::stop`] ends it and transcribes
//! (silence is an error saying so); [`Voice::cancel`] drops the sound. The sound is kept in
//! memory only, never written to disk. [`Voice::status`] says whether anything can hear:
//! a speech model installed, or the NPU; when neither, it offers the catalog's default speech
//! model ([`SpeechOffer`]), which [`download_speech_model`] fetches as any model is pulled (the
//! Models area's pause and cancel apply to it by name). [`spoken_language`] is the language
//! Whisper is told: the conversation's, from its latest messages, else the app's.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hearth_speech::capture::{Capture, CaptureError, CaptureOptions, Level};
use serde::Serialize;

use hearth_hub::DEFAULT_SPEECH_MODEL;

use crate::error::{Error, ErrorCode, Result};
use crate::settings::Language;
use crate::speech::{self, SpeechBackend, SpeechModel, TranscribeOptions};
use crate::App;

/// The live state of a recording, sent to the front end about ten times a second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VoiceLevel {
    /// Seconds recorded.
    pub elapsed_s: f64,
    /// The last 100 ms's RMS level in dBFS (-100 for silence, 0 for full scale).
    pub level_dbfs: f32,
    /// The recording reached its longest (five minutes) and stopped by itself.
    pub limit_reached: bool,
}

/// What listening started on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Listening {
    /// The microphone's name.
    pub device: String,
    /// The longest recording, in seconds.
    pub max_seconds: f64,
}

/// What was heard.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VoiceHeard {
    /// The words, trimmed.
    pub text: String,
    /// Who heard them: "npu" (FastFlowLM's Whisper) or "cpu" (Hearth's own).
    pub backend: String,
    /// The recording's length, in seconds.
    pub duration_s: f64,
    /// Why the NPU was left, when it failed and the processor heard instead.
    pub npu_failure: Option<String>,
}

/// Whether anything can hear on this machine, and where speech models go.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct VoiceStatus {
    /// The installed speech models' names (the first is used).
    pub speech_models: Vec<String>,
    /// The NPU hears (FastFlowLM's Whisper needs no download).
    pub npu_hears: bool,
    /// The folder speech models are looked for in.
    pub speech_models_dir: String,
    /// Listening now.
    pub listening: bool,
    /// Nothing can hear: the speech model offered for download (None when one is installed
    /// or the NPU hears).
    pub offer: Option<SpeechOffer>,
}

/// The speech model offered when none is installed: what the one-click download says.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SpeechOffer {
    /// The name to pull, pause and cancel it by (`whisper-base`).
    pub name: String,
    /// Its download size in bytes.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub size_bytes: u64,
    /// The languages it understands, as ISO 639 codes.
    pub languages: Vec<String>,
    /// Its license.
    pub license: String,
    /// Bytes already downloaded by a paused or interrupted download (0: none).
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub paused_bytes: u64,
    /// It is downloading now.
    pub downloading: bool,
}

/// The one recording of a front end, and the speech model it keeps loaded (clones share them).
#[derive(Default, Clone)]
pub struct Voice {
    capture: Arc<Mutex<Option<Capture>>>,
    model: Arc<Mutex<Option<Arc<SpeechModel>>>>,
}

impl std::fmt::Debug for Voice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Voice").finish_non_exhaustive()
    }
}

impl Voice {
    /// Starts listening with the default options (the microphone, or the test file); `on_level`
    /// sees the level and time.
    pub fn start(&self, on_level: impl Fn(VoiceLevel) + Send + 'static) -> Result<Listening> {
        self.start_with(CaptureOptions::default(), on_level)
    }

    /// Starts listening with `options`.
    pub fn start_with(
        &self,
        options: CaptureOptions,
        on_level: impl Fn(VoiceLevel) + Send + 'static,
    ) -> Result<Listening> {
        let mut slot = lock(&self.capture);
        if slot.as_ref().is_some_and(|c| !c.is_finished()) {
            return Err(Error::new(
                ErrorCode::Busy,
                "Hearth is already listening: stop that recording first.",
            )
            .detail("mic_listening", &[]));
        }
        if let Some(old) = slot.take() {
            old.cancel();
        }
        let max_seconds = options.max_seconds;
        let capture = Capture::start(options, move |level: Level| {
            on_level(VoiceLevel {
                elapsed_s: level.elapsed_s,
                level_dbfs: level.rms_dbfs,
                limit_reached: level.limit_reached,
            })
        })
        .map_err(capture_error)?;
        let listening = Listening {
            device: capture.info().device.clone(),
            max_seconds,
        };
        *slot = Some(capture);
        Ok(listening)
    }

    /// Whether it is listening (or holds a recording that reached its bound).
    pub fn is_listening(&self) -> bool {
        lock(&self.capture).is_some()
    }

    /// Ends the recording and drops its sound.
    pub fn cancel(&self) {
        if let Some(capture) = lock(&self.capture).take() {
            capture.cancel();
        }
    }

    /// Ends the recording and writes down its words, in `language` (a code such as "en"; None:
    /// detected), by chat's rule: the NPU when it hears here, else the processor.
    pub fn stop(&self, app: &App, language: Option<&str>) -> Result<VoiceHeard> {
        let capture = lock(&self.capture).take().ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidInput,
                "Hearth is not listening: press the microphone button to speak.",
            )
            .detail("mic_not_listening", &[])
        })?;
        let audio = capture.stop().map_err(capture_error)?;
        let language = language
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| l.to_ascii_lowercase());
        let options = TranscribeOptions {
            language,
            ..TranscribeOptions::default()
        };
        let what = "what you said";
        let cpu = || {
            let model = self.model(app)?;
            let transcript = model
                .transcribe(&audio, &options, &mut |_| {
                    std::ops::ControlFlow::Continue(())
                })
                .map_err(|e| speech::speech_error(what, e))?;
            Ok((transcript, model.name().to_owned()))
        };
        let heard = speech::hear(
            app.home(),
            SpeechBackend::Auto,
            &audio,
            options.language.as_deref(),
            cpu,
        )?;
        Ok(VoiceHeard {
            text: heard.transcript.text.trim().to_owned(),
            backend: heard.heard.as_str().to_owned(),
            duration_s: audio.duration_s(),
            npu_failure: heard.npu_failure,
        })
    }

    /// Whether anything can hear here, and what to download when nothing can.
    pub fn status(&self, app: &App) -> VoiceStatus {
        let home = app.home();
        let speech_models = speech::speech_models(home);
        let npu_hears = speech::npu::npu_hears_here(home);
        let offer = if speech_models.is_empty() && !npu_hears {
            speech_offer(app)
        } else {
            None
        };
        VoiceStatus {
            speech_models,
            npu_hears,
            speech_models_dir: speech::speech_models_dir(home).display().to_string(),
            listening: self.is_listening(),
            offer,
        }
    }

    /// The default speech model, loaded once and kept (loaded again when it changed).
    fn model(&self, app: &App) -> Result<Arc<SpeechModel>> {
        let folder: PathBuf = speech::find_speech_model(app.home(), None).map_err(|e| {
            if e.code == ErrorCode::NoModel {
                e.detail("no_speech_model", &[])
            } else {
                e
            }
        })?;
        let mut slot = lock(&self.model);
        if let Some(model) = slot.as_ref().filter(|m| m.folder() == folder) {
            return Ok(model.clone());
        }
        let model = Arc::new(speech::load_speech_model(&folder, 0)?);
        *slot = Some(model.clone());
        Ok(model)
    }
}

/// The catalog's default speech model as an offer, with its paused bytes and whether it is
/// downloading now.
fn speech_offer(app: &App) -> Option<SpeechOffer> {
    let entry = hearth_hub::catalog::find(DEFAULT_SPEECH_MODEL)
        .ok()
        .flatten()?;
    let store = app.home().store();
    let paused_bytes = store
        .partial_downloads()
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.name == entry.name)
        .map(|p| p.done_bytes)
        .unwrap_or(0);
    Some(SpeechOffer {
        name: entry.name.clone(),
        size_bytes: entry.download_bytes,
        languages: entry.languages.clone(),
        license: entry.license.clone(),
        paused_bytes,
        downloading: lock(&app.downloads).contains_key(&entry.name),
    })
}

/// Downloads (or resumes) the offered speech model into `models/speech/`, reporting to
/// `progress`, as a model of the Models area is pulled (pause and cancel it by its name); an
/// installed one is not fetched again.
pub fn download_speech_model(
    app: &App,
    progress: &mut dyn FnMut(&crate::model_store::Progress),
) -> Result<crate::model_store::PullResult> {
    app.pull_model(DEFAULT_SPEECH_MODEL.to_string(), progress)
}

/// How many of a conversation's latest messages tell its language.
const LANGUAGE_MESSAGES: usize = 4;

/// The language Whisper is told, as a code: the conversation `conversation_id`'s, told from
/// its latest messages (when that is clear), else `fallback` (the app's language; "system"
/// means the desktop session's).
pub fn spoken_language(app: &App, conversation_id: Option<&str>, fallback: &str) -> String {
    let told = conversation_id
        .and_then(|id| app.conversation(id).ok())
        .and_then(|c| {
            let latest: Vec<&str> = c
                .messages
                .iter()
                .rev()
                .take(LANGUAGE_MESSAGES)
                .map(|m| m.content.as_str())
                .collect();
            crate::read_aloud::language::detect(&latest.join("\n"))
        });
    let language = told.unwrap_or_else(|| {
        let chosen = serde_json::from_value(serde_json::Value::String(fallback.to_owned()))
            .unwrap_or_default();
        crate::read_aloud::app_language(chosen)
    });
    language_code(language)
}

fn language_code(language: Language) -> String {
    match serde_json::to_value(language) {
        Ok(serde_json::Value::String(code)) if code != "system" => code,
        _ => "en".to_owned(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The app's error for a capture failure: the speech crate's words, with a detail per case
/// (the UI's catalog has each in five languages).
pub fn capture_error(error: CaptureError) -> Error {
    let message = error.to_string();
    match error {
        CaptureError::NoMicrophone => {
            Error::new(ErrorCode::NotFound, message).detail("mic_none", &[])
        }
        CaptureError::Busy { device } => {
            Error::new(ErrorCode::Busy, message).detail("mic_busy", &[("device", device)])
        }
        CaptureError::PermissionRefused { device } => Error::new(ErrorCode::AccessDenied, message)
            .detail("mic_refused", &[("device", device)]),
        CaptureError::Silence {
            loudest_dbfs,
            floor_dbfs,
        } => Error::new(ErrorCode::InvalidInput, message).detail(
            "mic_silence",
            &[
                ("loudest", format!("{loudest_dbfs:.0}")),
                ("floor", format!("{floor_dbfs:.0}")),
            ],
        ),
        CaptureError::Lost { .. } => Error::new(ErrorCode::Cut, message).detail("mic_lost", &[]),
        _ => Error::new(ErrorCode::Unsupported, message),
    }
}

#[cfg(test)]
#[path = "voice_tests.rs"]
mod tests;
