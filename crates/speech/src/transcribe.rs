//! A Whisper model loaded from its folder, transcribing decoded recordings: the engine's
//! [`Whisper`] behind the speech crate's errors, with the model's name (its folder's) beside it.
//!
//! The contract: [`SpeechModel::load`] reads the folder once (CTranslate2's `model.bin` or
//! transformers' safetensors, see `hearth_engine::whisper`); [`SpeechModel::transcribe`] takes
//! an [`Audio`] (16 kHz mono, from [`crate::decode`]) and calls `progress` after each 30 s
//! window, which may stop it ([`Error::Cancelled`]). `transcribe` takes `&self`: one model may
//! serve several threads, each transcription on its own.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use hearth_engine::whisper::Whisper;
pub use hearth_engine::whisper::{
    Segment, TranscribeOptions, TranscribeProgress, Transcript, WhisperInfo,
};

use crate::decode::Audio;
use crate::error::Error;

/// A speech-to-text model in memory.
pub struct SpeechModel {
    name: String,
    folder: PathBuf,
    whisper: Whisper,
}

impl std::fmt::Debug for SpeechModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpeechModel")
            .field("name", &self.name)
            .field("folder", &self.folder)
            .finish_non_exhaustive()
    }
}

impl SpeechModel {
    /// Loads the Whisper model in `folder`, running on `threads` threads (0: one per core).
    pub fn load(folder: &Path, threads: usize) -> Result<SpeechModel, LoadError> {
        let whisper = Whisper::load(folder, threads).map_err(|e| LoadError {
            folder: folder.to_path_buf(),
            detail: e.to_string(),
        })?;
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "whisper".to_owned());
        Ok(SpeechModel {
            name,
            folder: folder.to_path_buf(),
            whisper,
        })
    }

    /// Its name: the folder's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its folder.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// What the model is: size, format, languages.
    pub fn info(&self) -> WhisperInfo {
        self.whisper.info()
    }

    /// Transcribes `audio`; `progress` sees each finished 30 s window and may stop the work.
    pub fn transcribe(
        &self,
        audio: &Audio,
        options: &TranscribeOptions,
        progress: &mut dyn FnMut(TranscribeProgress) -> ControlFlow<()>,
    ) -> Result<Transcript, Error> {
        if audio.samples.is_empty() {
            return Err(Error::NoAudio);
        }
        if let Some(language) = &options.language {
            let info = self.whisper.info();
            if !info.languages.iter().any(|l| l == language) {
                return Err(Error::Language {
                    language: language.clone(),
                    known: info.languages.join(", "),
                });
            }
        }
        self.whisper
            .transcribe(&audio.samples, options, progress)
            .map_err(|e| match e {
                hearth_engine::Error::Cancelled => Error::Cancelled,
                other => Error::Transcription(other.to_string()),
            })
    }
}

/// Why a speech model did not load: its folder and what was wrong.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the speech model in {} could not be loaded: {detail}", folder.display())]
pub struct LoadError {
    /// The folder.
    pub folder: PathBuf,
    /// What the engine said.
    pub detail: String,
}
