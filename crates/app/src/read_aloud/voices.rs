//! Piper voices as downloads the person asks for (Settings › Read aloud): whether `piper` is
//! installed, the voice Hearth offers for each language and whether it is here, and its
//! download with progress and cancel. The voices and how they are fetched and checked are
//! the hub's ([`hearth_hub::voices`]); a downloaded voice lands in the folder [`Synthesizer`]
//! looks in, so the next sentence read in its language uses it.
//!
//! [`Synthesizer`]: super::voice::Synthesizer

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hearth_hub::voices::{download_voice, voice_for_language, PiperVoiceEntry, VoiceOutcome};
use hearth_hub::{DownloadControl, DownloadOptions, HubClient};
use serde::Serialize;

pub use hearth_hub::Progress;

use super::voice::{find_program, piper_code};
use crate::error::{Error, ErrorCode};
use crate::settings::Language;

/// Whether Piper can speak here, and the voice offered for each language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PiperStatus {
    /// A `piper` program is installed (without it espeak-ng speaks, and voices are not offered).
    pub piper_installed: bool,
    /// One voice per language Hearth speaks.
    pub voices: Vec<PiperVoiceRow>,
}

/// The voice offered for one language.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PiperVoiceRow {
    /// The language it speaks.
    pub language: Language,
    /// Its name (`en_US-lessac-medium`).
    pub name: String,
    /// About how many bytes it takes.
    pub about_bytes: u64,
    /// It is downloaded.
    pub installed: bool,
    /// It is being downloaded now.
    pub downloading: bool,
}

/// How a voice download ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum VoiceDownloaded {
    /// Downloaded and checked; read-aloud uses it from the next sentence on.
    Installed,
    /// Cancelled; nothing of it is kept.
    Cancelled,
}

/// The languages voices are offered for, in Settings' order.
const LANGUAGES: [Language; 5] = [
    Language::En,
    Language::De,
    Language::Fr,
    Language::Es,
    Language::Zh,
];

/// The voices folder and the downloads running into it.
#[derive(Debug)]
pub struct VoiceDownloads {
    folder: PathBuf,
    running: Mutex<HashMap<&'static str, DownloadControl>>,
}

impl VoiceDownloads {
    /// Downloads into `folder`, the one read-aloud looks for voices in.
    pub fn new(folder: PathBuf) -> Self {
        VoiceDownloads {
            folder,
            running: Mutex::new(HashMap::new()),
        }
    }

    /// The voices folder.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// Whether `piper` is on `PATH`, and each language's voice.
    pub fn status(&self) -> PiperStatus {
        self.status_with(std::env::var_os("PATH").as_deref())
    }

    /// [`Self::status`] with the programs in the folders of `path` (a `PATH` value).
    pub fn status_with(&self, path: Option<&std::ffi::OsStr>) -> PiperStatus {
        let running = lock(&self.running);
        let voices = LANGUAGES
            .iter()
            .filter_map(|&language| {
                let voice = offered(language).ok()?;
                Some(PiperVoiceRow {
                    language,
                    name: voice.name.to_string(),
                    about_bytes: voice.about_bytes,
                    installed: voice.is_installed(&self.folder),
                    downloading: running.contains_key(voice.name),
                })
            })
            .collect();
        PiperStatus {
            piper_installed: find_program(path, "piper").is_some(),
            voices,
        }
    }

    /// Downloads the voice of `language` from the Hub (`HF_ENDPOINT` or Hugging Face; offline
    /// mode as the environment says), telling `progress` how it goes.
    pub fn download(
        &self,
        language: Language,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<VoiceDownloaded, Error> {
        self.download_from(&HubClient::from_env(false), language, progress)
    }

    /// [`Self::download`] from `client`'s Hub.
    pub fn download_from(
        &self,
        client: &HubClient,
        language: Language,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<VoiceDownloaded, Error> {
        let voice = offered(language)?;
        let control = DownloadControl::new();
        {
            let mut running = lock(&self.running);
            if running.contains_key(voice.name) {
                return Err(hearth_hub::Error::AlreadyDownloading {
                    name: voice.name.to_string(),
                }
                .into());
            }
            running.insert(voice.name, control.clone());
        }
        let result = download_voice(
            client,
            voice,
            &self.folder,
            &DownloadOptions::default(),
            &control,
            progress,
        );
        lock(&self.running).remove(voice.name);
        match result? {
            VoiceOutcome::Installed | VoiceOutcome::AlreadyInstalled => {
                Ok(VoiceDownloaded::Installed)
            }
            // A pause is not offered: a stop is a cancel.
            VoiceOutcome::Paused | VoiceOutcome::Cancelled => Ok(VoiceDownloaded::Cancelled),
        }
    }

    /// Cancels the download of the voice of `language`; nothing happens when none runs.
    pub fn cancel(&self, language: Language) -> Result<(), Error> {
        let voice = offered(language)?;
        if let Some(control) = lock(&self.running).get(voice.name) {
            control.cancel();
        }
        Ok(())
    }
}

/// The voice offered for `language` (the app's words' language for `System`).
fn offered(language: Language) -> Result<&'static PiperVoiceEntry, Error> {
    voice_for_language(piper_code(language)).ok_or_else(|| {
        Error::new(
            ErrorCode::NotFound,
            format!("Hearth offers no Piper voice for {language:?}."),
        )
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::super::voice::find_piper_voice;
    use super::*;

    /// Writes what a finished download leaves for `voice` in `folder`.
    fn place(voice: &PiperVoiceEntry, folder: &Path, code: &str) {
        std::fs::create_dir_all(folder).unwrap();
        let model = voice.model_path(folder);
        std::fs::write(&model, b"onnx").unwrap();
        std::fs::write(
            format!("{}.json", model.display()),
            format!(r#"{{"language":{{"code":"{code}"}},"audio":{{"sample_rate":22050}}}}"#),
        )
        .unwrap();
    }

    #[test]
    fn every_language_is_offered_one_voice_and_piper_is_looked_for_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let downloads = VoiceDownloads::new(dir.path().join("voices"));
        let status = downloads.status_with(Some(dir.path().as_os_str()));
        assert!(!status.piper_installed);
        let languages: Vec<Language> = status.voices.iter().map(|v| v.language).collect();
        assert_eq!(languages, LANGUAGES);
        assert!(status.voices.iter().all(|v| !v.installed && !v.downloading));
        assert_eq!(offered(Language::System).unwrap().language, "en");

        let piper = dir.path().join("piper");
        std::fs::write(&piper, b"#!/bin/sh\n").unwrap();
        assert!(
            downloads
                .status_with(Some(dir.path().as_os_str()))
                .piper_installed
        );
    }

    #[test]
    fn a_downloaded_voice_is_found_where_read_aloud_looks() {
        let dir = tempfile::tempdir().unwrap();
        let downloads = VoiceDownloads::new(dir.path().join("voices"));
        let french = offered(Language::Fr).unwrap();
        place(french, downloads.folder(), "fr_FR");
        let status = downloads.status_with(None);
        let row = status
            .voices
            .iter()
            .find(|v| v.language == Language::Fr)
            .unwrap();
        assert!(row.installed, "{row:?}");
        let found = find_piper_voice(downloads.folder(), Language::Fr).unwrap();
        assert_eq!(found.model, french.model_path(downloads.folder()));
        assert_eq!(find_piper_voice(downloads.folder(), Language::De), None);
    }

    #[test]
    fn a_voice_already_here_is_not_fetched_again_even_offline() {
        let dir = tempfile::tempdir().unwrap();
        let downloads = VoiceDownloads::new(dir.path().join("voices"));
        place(offered(Language::De).unwrap(), downloads.folder(), "de_DE");
        let offline = HubClient::new("http://127.0.0.1:9", None, true);
        let outcome = downloads.download_from(&offline, Language::De, &mut |_| {});
        assert_eq!(outcome.unwrap(), VoiceDownloaded::Installed);
        let e = downloads
            .download_from(&offline, Language::Es, &mut |_| {})
            .unwrap_err();
        assert!(
            e.to_string().contains("offline") || e.to_string().contains("Offline"),
            "{e}"
        );
        assert!(downloads.cancel(Language::Es).is_ok());
    }
}
