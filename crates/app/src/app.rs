//! [`App`]: what every front end shares while it runs: its [`Home`], the conversation
//! database, the model in use, the flags that guard and stop an answer, and notices for the
//! user. Cheap to clone (everything is behind `Arc`), so each request can carry one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use hearth_chat::conversations::ConversationStore;
use hearth_hub::{BuiltinKind, DownloadControl};

use crate::error::{Error, ErrorCode, Result};
use crate::home::Home;
use crate::loading::Progress;
use crate::lock::lock;
use crate::models;
use crate::session::Session;
use crate::settings::Settings;

/// How important a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum NoticeLevel {
    /// Good to know.
    Info,
    /// Something needs attention.
    Warning,
    /// Something failed.
    Error,
}

/// A message shown to the user once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Notice {
    /// Importance.
    pub level: NoticeLevel,
    /// Plain words (English).
    pub message: String,
    /// Which notice: the desktop's catalog key is `notice.<code>`, filled with `params`.
    pub code: String,
    /// What the notice names (a file, a reason), by parameter name.
    pub params: std::collections::BTreeMap<String, String>,
}

impl Notice {
    /// A notice: its level, code, what it names and its English words.
    pub fn new(
        level: NoticeLevel,
        code: &str,
        params: &[(&str, String)],
        message: impl Into<String>,
    ) -> Self {
        Self {
            level,
            message: message.into(),
            code: code.to_string(),
            params: params
                .iter()
                .map(|(name, value)| (name.to_string(), value.clone()))
                .collect(),
        }
    }
}

/// The app's shared state. Front ends reach it through methods; its fields are the core's own.
#[derive(Clone)]
pub struct App {
    /// Where things live.
    pub(crate) home: Arc<Home>,
    /// Conversations.
    pub(crate) store: Arc<Mutex<ConversationStore>>,
    /// The model in use (locked for the whole of an answer).
    pub(crate) model: Arc<Mutex<Option<Session>>>,
    /// The last model load error, for the UI.
    pub(crate) model_error: Arc<Mutex<Option<Error>>>,
    /// Set while an answer is being written.
    pub(crate) busy: Arc<AtomicBool>,
    /// Set by Stop; checked between tokens.
    pub(crate) cancel: Arc<AtomicBool>,
    /// Notices collected at start (database recovered, demo model in use).
    pub(crate) notices: Arc<Mutex<Vec<Notice>>>,
    /// Processor threads for the next model opened (the Threads setting; None: automatic).
    pub(crate) cpu_threads: Arc<Mutex<Option<usize>>>,
    /// Downloads running now, by model name (pause and cancel flip their control).
    pub(crate) downloads: Arc<Mutex<HashMap<String, DownloadControl>>>,
    /// The power sources, found on first reading and kept so CPU use is measured between
    /// readings.
    pub(crate) power: Arc<Mutex<Option<hearth_npu::PowerSources>>>,
    /// The document library and the files attached to conversations.
    pub(crate) documents: Arc<crate::documents::Documents>,
    /// Files dropped on the window, waiting for the front end to act on them by token.
    pub(crate) drops: Arc<crate::drop::Drops>,
}

impl App {
    /// Opens the conversation database in `home` (recovering from damage; a notice says so)
    /// and clears, off this thread, what interrupted imports left in the models folder.
    pub fn open(home: Home) -> Result<Self> {
        let (store, recovery) = ConversationStore::open(&home.conversations_db())?;
        let models = home.store();
        std::thread::spawn(move || {
            let freed = models.clear_abandoned_imports();
            if freed > 0 {
                tracing::info!("cleared {freed} bytes left by interrupted imports");
            }
        });
        let mut notices = Vec::new();
        if let Some(r) = recovery {
            notices.push(Notice::new(
                NoticeLevel::Warning,
                "conversations_unreadable",
                &[
                    ("reason", r.reason.to_string()),
                    ("backup", r.backup.display().to_string()),
                ],
                format!(
                    "Your saved conversations could not be read ({}), so Hearth started a new, empty list. The old file is kept at {} in case it can be rescued.",
                    r.reason,
                    r.backup.display()
                ),
            ));
        }
        let documents = crate::documents::Documents::in_home(&home);
        Ok(Self {
            documents: Arc::new(documents),
            drops: Arc::default(),
            home: Arc::new(home),
            store: Arc::new(Mutex::new(store)),
            model: Arc::new(Mutex::new(None)),
            model_error: Arc::new(Mutex::new(None)),
            busy: Arc::new(AtomicBool::new(false)),
            cancel: Arc::new(AtomicBool::new(false)),
            notices: Arc::new(Mutex::new(notices)),
            cpu_threads: Arc::new(Mutex::new(None)),
            downloads: Arc::default(),
            power: Arc::default(),
        })
    }

    /// Where things live.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// The document library and the files attached to conversations.
    pub fn documents(&self) -> &Arc<crate::documents::Documents> {
        &self.documents
    }

    /// The model slot itself, for a front end that answers with the app's model from threads
    /// of its own (the server behind the share switch): it locks the slot for the whole of each
    /// answer, as a turn does, so the two never answer at once.
    pub fn model_slot(&self) -> Arc<Mutex<Option<Session>>> {
        Arc::clone(&self.model)
    }

    /// Puts `session`, opened by the front end, in use as the model (`hearth chat` opens it
    /// where its options say); refused while an answer is being written.
    pub fn use_session(&self, session: Session) -> Result<()> {
        let mut slot = self.claim_model()?;
        self.install(&mut slot, session);
        Ok(())
    }

    /// Applies the app-wide settings that the core acts on: the processor threads for the next
    /// model opened (None: one per physical core), the Python environment FastFlowLM is looked
    /// for in first (Settings › NPU), the languages scans are read in (Settings ›
    /// Files; by default the app's language and English), then the embedding model (an installed one,
    /// or the bundled one when None). Returns whether the embedding model changed: the
    /// library's passages are then embedded again with it, which the front end starts
    /// (`Documents::continue_indexing`) with its own progress events. An embedding model that
    /// is not installed is an error; the threads apply even then.
    pub fn apply_settings(&self, settings: &Settings) -> Result<bool> {
        *lock(&self.cpu_threads) = settings.threads;
        hearth_backends::npu::python_env::set_python_env(settings.flm_python_env.clone());
        self.documents
            .set_scan_languages(settings.scan_languages(|var| std::env::var(var).ok()));
        self.documents.set_rerank_mode(settings.rerank);
        self.documents
            .choose_embedding_model(settings.embedding_model.as_deref())
    }

    /// Add a notice.
    pub fn notify(&self, notice: Notice) {
        lock(&self.notices).push(notice);
    }

    /// The notices not yet shown; each is handed over once.
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut *lock(&self.notices))
    }

    /// Claims the right to write an answer (one at a time); the guard gives it back.
    pub fn begin_answer(&self) -> Result<BusyGuard> {
        self.busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map_err(|_| {
                Error::new(
                    ErrorCode::Busy,
                    "An answer is already being written. Wait for it, or press Stop first.",
                )
            })?;
        Ok(BusyGuard {
            busy: Arc::clone(&self.busy),
            cancel: Arc::clone(&self.cancel),
        })
    }

    /// Whether an answer is being written.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Asks the answer being written to stop. A stop that arrives before the answer's first
    /// token still stops it; with no answer running it does nothing.
    pub fn request_stop(&self) {
        if self.is_busy() {
            self.cancel.store(true, Ordering::Release);
        }
    }

    /// Whether Stop was pressed during this answer.
    pub fn stop_requested(&self) -> bool {
        self.cancel.load(Ordering::Acquire)
    }

    /// The model slot, to replace what it holds; refused while an answer is being written.
    pub fn claim_model(&self) -> Result<MutexGuard<'_, Option<Session>>> {
        self.model.try_lock().map_err(|_| {
            Error::new(
                ErrorCode::Busy,
                "The model is busy writing an answer. Stop it or wait, then try again.",
            )
        })
    }

    /// Puts `session` in use in place of the current model, and clears the last load error.
    pub(crate) fn install(&self, slot: &mut Option<Session>, session: Session) {
        *slot = Some(session);
        *lock(&self.model_error) = None;
    }

    /// Records why no model could be opened, for the UI, and returns it as an error.
    pub(crate) fn model_failed(&self, code: ErrorCode, message: String) -> Error {
        let error = Error::new(code, message);
        *lock(&self.model_error) = Some(error.clone());
        error
    }

    /// Opens the start model if none is open yet: the registry's default, else the first
    /// registered model, else the built-in model (and a notice says what that is). It opens
    /// where [`crate::session::best_backend`] says; when the NPU fails to load it, on the
    /// processor.
    pub fn ensure_model(&self, progress: &Progress) -> Result<()> {
        if lock(&self.model).is_some() {
            return Ok(());
        }
        let all = models::local_models(&self.home);
        let Some(entry) = models::pick_start_model(&all) else {
            return Err(self.model_failed(
                ErrorCode::NoModel,
                "No model is available: nothing is downloaded and the model that comes with Hearth is missing. Open Models to download one.".into(),
            ));
        };
        self.open_local(&entry, None, false, progress)?;
        let notice = match entry.builtin {
            _ if all.len() > 1 => None,
            Some(BuiltinKind::Starter) => Some((
                "starter_opened",
                "No model is downloaded yet, so Hearth opened SmolLM2-135M, the very small assistant that comes with it. It answers offline but makes many mistakes. Open Models to download a bigger one for good answers.",
            )),
            Some(BuiltinKind::Demo) => Some((
                "demo_opened",
                "No model is downloaded yet, so Hearth opened its tiny demo model. It only shows how the app works: it knows a little about Rust and is often wrong. Open Models to download a real one.",
            )),
            None => None,
        };
        if let Some((code, message)) = notice {
            self.notify(Notice::new(NoticeLevel::Info, code, &[], message));
        }
        Ok(())
    }
}

/// Clears the busy and stop flags when the answer ends (also on panic).
pub struct BusyGuard {
    busy: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.cancel.store(false, Ordering::Release);
        self.busy.store(false, Ordering::Release);
    }
}
