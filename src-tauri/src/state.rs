//! Everything the commands share: paths, the conversation database, the loaded model, the
//! flags that guard and stop an answer, and notices for the user.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use hearth_chat::conversations::{ConversationStore, StoreError};

use crate::paths::Paths;
use crate::session::LoadedModel;

/// How important a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[derive(ts_rs::TS)]
pub enum NoticeLevel {
    /// Good to know.
    Info,
    /// Something needs attention.
    Warning,
    /// Something failed.
    Error,
}

/// A message shown to the user once, at the top of the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
pub struct Notice {
    /// Importance.
    pub level: NoticeLevel,
    /// Plain words.
    pub message: String,
}

/// Shared app state (cheap to clone: everything is behind `Arc`).
#[derive(Clone)]
pub struct AppState {
    /// Where things live.
    pub paths: Arc<Paths>,
    /// Conversations.
    pub store: Arc<Mutex<ConversationStore>>,
    /// The loaded model (locked for the whole of an answer).
    pub model: Arc<Mutex<Option<LoadedModel>>>,
    /// The last model load error, for the UI.
    pub model_error: Arc<Mutex<Option<String>>>,
    /// Set while an answer is being written.
    pub busy: Arc<AtomicBool>,
    /// Set by Stop; checked between tokens.
    pub cancel: Arc<AtomicBool>,
    /// Notices collected at start (database recovered, demo model in use).
    pub notices: Arc<Mutex<Vec<Notice>>>,
    /// Processor threads for the next model loaded (the Threads setting; None: automatic).
    pub cpu_threads: Arc<Mutex<Option<usize>>>,
}

/// Lock a mutex, recovering from a panic in another holder (the data stays usable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl AppState {
    /// Open the conversation database (recovering from damage) and set up empty state.
    pub fn open(paths: Paths) -> Result<Self, StoreError> {
        let (store, recovery) = ConversationStore::open(&paths.conversations_db())?;
        // What killed GGUF imports left in the downloads folder (hidden work folders of up to a
        // whole converted model, lock files) is cleared once at start, off the window's thread.
        let models = paths.store();
        std::thread::spawn(move || {
            let freed = models.clear_abandoned_imports();
            if freed > 0 {
                tracing::info!("cleared {freed} bytes left by interrupted imports");
            }
        });
        let mut notices = Vec::new();
        if let Some(r) = recovery {
            notices.push(Notice {
                level: NoticeLevel::Warning,
                message: format!(
                    "Your saved conversations could not be read ({}), so Hearth started a new, empty list. The old file is kept at {} in case it can be rescued.",
                    r.reason,
                    r.backup.display()
                ),
            });
        }
        Ok(Self {
            paths: Arc::new(paths),
            store: Arc::new(Mutex::new(store)),
            model: Arc::new(Mutex::new(None)),
            model_error: Arc::new(Mutex::new(None)),
            busy: Arc::new(AtomicBool::new(false)),
            cancel: Arc::new(AtomicBool::new(false)),
            notices: Arc::new(Mutex::new(notices)),
            cpu_threads: Arc::new(Mutex::new(None)),
        })
    }

    /// Add a notice.
    pub fn notify(&self, level: NoticeLevel, message: impl Into<String>) {
        lock(&self.notices).push(Notice {
            level,
            message: message.into(),
        });
    }

    /// Mark the app busy with an answer; None if it already is.
    pub fn begin_answer(&self) -> Option<BusyGuard> {
        self.busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        Some(BusyGuard {
            busy: Arc::clone(&self.busy),
            cancel: Arc::clone(&self.cancel),
        })
    }

    /// Ask the answer being written to stop. A stop that arrives before the answer's first
    /// token still stops it; with no answer running it does nothing.
    pub fn request_stop(&self) {
        if self.busy.load(Ordering::Acquire) {
            self.cancel.store(true, Ordering::Release);
        }
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
