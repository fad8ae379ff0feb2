//! Choosing the model in use: at start, from the model list, or a remote server's model.

use hearth_backends::remote::RemoteConfig;
use hearth_chat::BackendKind;
use serde::Serialize;

use crate::app::{App, Notice};
use crate::error::{Error, ErrorCode, Result};
use crate::loading::Progress;
use crate::lock::lock;
use crate::models::{self, LocalModel};
use crate::session::{self, ModelStatus, OpenOptions, Session};
use crate::settings::{system_language, Language};
use crate::turn::MAX_MESSAGE_CHARS;

/// What a front end needs at start.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct AppStatus {
    /// The model in use, if any.
    pub model: Option<ModelStatus>,
    /// Why no model is in use (its code for the front end's own words, and the English text).
    pub model_error: Option<Error>,
    /// Notices not yet shown.
    pub notices: Vec<Notice>,
    /// Where Hearth keeps its data.
    pub data_dir: String,
    /// Where a save dialog opens (Documents, else home), when there is a home folder.
    pub documents_dir: Option<String>,
    /// The longest message, in characters.
    pub max_message_chars: usize,
    /// The bounds on a message's pictures.
    pub picture_limits: crate::pictures::PictureLimits,
    /// The desktop session's language (LC_ALL, LC_MESSAGES, LANG), for the setting "Automatic".
    pub system_language: Language,
}

impl App {
    /// Opens the start model if needed (loading onto the NPU is reported to `progress`), then
    /// reports the app's status. Notices are handed over once.
    pub fn status(&self, progress: &Progress) -> AppStatus {
        if let Err(error) = self.ensure_model(progress) {
            tracing::warn!("no model at start: {}", error.message);
        }
        let model = self
            .model
            .try_lock()
            .ok()
            .and_then(|m| m.as_ref().map(Session::status));
        AppStatus {
            model,
            model_error: lock(&self.model_error).clone(),
            notices: self.take_notices(),
            data_dir: self.home.data_dir.display().to_string(),
            documents_dir: self.home.documents_dir().map(|d| d.display().to_string()),
            max_message_chars: MAX_MESSAGE_CHARS,
            picture_limits: crate::pictures::PICTURE_LIMITS,
            system_language: system_language(|name| std::env::var(name).ok()),
        }
    }

    /// Puts the model `name` in use: a local one on `backend` (None: the best one here, see
    /// [`session::best_backend`]), or with `backend: Remote` the model of that id on the saved
    /// remote server. `npu_anyway` loads it on the NPU even when FastFlowLM is known to fail
    /// with it. Loading onto the NPU is reported to `progress`.
    pub fn select_model(
        &self,
        name: &str,
        backend: Option<BackendKind>,
        npu_anyway: bool,
        progress: &Progress,
    ) -> Result<ModelStatus> {
        if backend == Some(BackendKind::Remote) {
            return self.select_remote_model(name);
        }
        let entry = models::local_model(&self.home, name)?;
        self.open_local(&entry, backend, npu_anyway, progress)
    }

    /// Opens `entry` where `choice` says (None: the best backend). When the best backend was
    /// the NPU and it fails to load, the model opens on the processor and the failure is
    /// logged; a backend the caller chose reports its failure.
    pub(crate) fn open_local(
        &self,
        entry: &LocalModel,
        choice: Option<BackendKind>,
        npu_anyway: bool,
        progress: &Progress,
    ) -> Result<ModelStatus> {
        let kind = if npu_anyway {
            BackendKind::Npu
        } else {
            session::backend_for(&self.home, entry, choice)
        };
        match kind {
            BackendKind::Npu => match self.load_npu(entry, progress, npu_anyway) {
                Err(error) if choice.is_none() && !npu_anyway && error.code != ErrorCode::Busy => {
                    tracing::warn!("{}; opening it on the processor", error.message);
                    self.load_cpu(entry)
                }
                loaded => loaded,
            },
            _ => self.load_cpu(entry),
        }
    }

    /// Loads `entry` into Hearth's engine on the processor, in place of the current model.
    fn load_cpu(&self, entry: &LocalModel) -> Result<ModelStatus> {
        let mut slot = self.claim_model()?;
        *slot = None; // free the old model's memory first
        let options = OpenOptions {
            threads: *lock(&self.cpu_threads),
            ..OpenOptions::default()
        };
        match Session::open(&self.home, entry, BackendKind::Cpu, options) {
            Ok(session) => {
                let status = session.status();
                tracing::info!("loaded model {} from {}", entry.name, entry.path.display());
                self.install(&mut slot, session);
                Ok(status)
            }
            Err(error) => Err(self.model_failed(
                ErrorCode::Model,
                format!(
                    "Hearth could not open the model \"{}\": {error}",
                    entry.name
                ),
            )),
        }
    }

    /// Opens `model` on the saved remote server in place of the current model; the choice is
    /// saved with the server's settings.
    fn select_remote_model(&self, model: &str) -> Result<ModelStatus> {
        let config_dir = &self.home.config_dir;
        let mut config = RemoteConfig::load(config_dir)?.ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                "No remote server is set. Add one in Settings, under Remote server.",
            )
        })?;
        let mut slot = self.claim_model()?;
        let session = Session::connect_remote(&config, model)?;
        let status = session.status();
        tracing::info!("answers now come from {model} on {}", config.base_url);
        self.install(&mut slot, session);
        if config.model.as_deref() != Some(model) {
            config.model = Some(model.to_owned());
            config.save(config_dir)?;
        }
        Ok(status)
    }

    /// The models Hearth can open here (the registry's, the default first, then the built-in
    /// one).
    pub fn local_models(&self) -> Vec<LocalModel> {
        models::local_models(&self.home)
    }
}
