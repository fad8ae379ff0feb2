//! The speech models a server transcribes with: where they are, the one loaded now (the last
//! one asked for), and their line of requests ([`SPEECH_PLACES`]), apart from the chat models'
//! queue; and, when the server was given Hearth's folders, the NPU's Whisper (FastFlowLM, by
//! the app's rule). The route that uses them is `crate::transcriptions`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use hearth_app::speech::{self, SpeechModel};
use hearth_app::ErrorCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::AppError;

/// Transcription requests let in at once: one transcribing and one waiting.
pub const SPEECH_PLACES: usize = 2;

/// The server's speech side: where models are, the one loaded, and its line.
pub(crate) struct SpeechModels {
    dir: Option<PathBuf>,
    /// Hearth's folders, when the NPU may hear (`hearth_app::speech::hear`).
    home: Option<hearth_app::Home>,
    loaded: Mutex<Option<Arc<SpeechModel>>>,
    admission: Arc<Semaphore>,
}

impl SpeechModels {
    pub(crate) fn new(dir: Option<PathBuf>, home: Option<hearth_app::Home>) -> Self {
        SpeechModels {
            dir,
            home,
            loaded: Mutex::new(None),
            admission: Arc::new(Semaphore::new(SPEECH_PLACES)),
        }
    }

    /// Hearth's folders, when the NPU may hear.
    pub(crate) fn home(&self) -> Option<&hearth_app::Home> {
        self.home.as_ref()
    }

    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, AppError> {
        Arc::clone(&self.admission)
            .try_acquire_owned()
            .map_err(|_| AppError::Busy {
                queue: SPEECH_PLACES - 1,
            })
    }

    /// The model `requested` means, loaded (on this thread: call it from a blocking one).
    pub(crate) fn get(&self, requested: Option<&str>) -> Result<Arc<SpeechModel>, AppError> {
        let Some(dir) = &self.dir else {
            return Err(AppError::ModelNotFound {
                requested: requested.unwrap_or(speech::OPENAI_MODEL).to_owned(),
                served: "no speech model (this server was started without a speech models folder)"
                    .to_owned(),
            });
        };
        // Only names inside the folder: a client does not choose paths on this machine.
        if let Some(name) = requested {
            if name.contains(['/', '\\']) || name == ".." || name == "." {
                return Err(AppError::bad_field(
                    "model",
                    "model is a speech model's name, not a path",
                ));
            }
        }
        let folder = speech::find_speech_model_in(dir, requested).map_err(|e| match e.code {
            ErrorCode::NoModel | ErrorCode::ModelNotFound => AppError::ModelNotFound {
                requested: requested.unwrap_or(speech::OPENAI_MODEL).to_owned(),
                served: served(dir),
            },
            _ => AppError::bad_field("model", e.message),
        })?;
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(model) = loaded.as_ref().filter(|m| m.folder() == folder) {
            return Ok(Arc::clone(model));
        }
        *loaded = None;
        let model = speech::load_speech_model(&folder, 0).map_err(|e| {
            tracing::error!(error = %e, "the speech model did not load");
            AppError::LoadFailed {
                model: folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                message: e.message,
            }
        })?;
        let model = Arc::new(model);
        *loaded = Some(Arc::clone(&model));
        Ok(model)
    }
}

/// The speech models a not-found error offers.
fn served(dir: &std::path::Path) -> String {
    let names = speech::speech_models_in(dir);
    if names.is_empty() {
        format!(
            "no speech model (none is installed in {}; {})",
            dir.display(),
            speech::HOW_TO_GET_ONE
        )
    } else {
        format!(
            "the speech models {} ({} is the first)",
            names.join(", "),
            speech::OPENAI_MODEL
        )
    }
}
