//! The desktop app's "Let other apps on this computer use Hearth" switch: this API served on
//! 127.0.0.1 from inside the app over the model the app has open ([`hearth_app::App::model`]),
//! through the app's own lock on it. No second copy of the model is loaded and no second
//! FastFlowLM started; a request while the app answers gets the busy answer (503), and the app's
//! next answer waits for a request being answered. When the app opens another model, other apps
//! get that one. At a start, [`Sharing::restore`] turns it on again when the user left it on
//! ([`ShareChoice`]); when that fails, the status says why until the user acts.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use hearth_app::share::{ShareChoice, ShareStatus, OLLAMA_PORT};
use hearth_app::{App, Error, ErrorCode, Session};
use hearth_chat::{Backend, BackendInfo};

use crate::held::{HeldModel, Unavailable};
use crate::running::{self, RunningServer};
use crate::state::{AppState, ServerOptions};

/// The app's model as the server borrows it.
struct AppModel {
    /// The app's lock: held for the whole of an answer, the app's or the server's.
    model: Arc<Mutex<Option<Session>>>,
    /// What was loaded when last seen, for listings while the app holds the lock.
    seen: Mutex<Option<BackendInfo>>,
}

impl AppModel {
    fn saw(&self, slot: &Option<Session>) -> Option<BackendInfo> {
        let info = slot.as_ref().map(|s| s.backend.info().clone());
        *lock(&self.seen) = info.clone();
        info
    }
}

impl HeldModel for AppModel {
    /// While the app answers (or opens a model) its lock is taken: what was loaded when last
    /// seen (nothing, when sharing began during that answer).
    fn info(&self) -> Option<BackendInfo> {
        match self.model.try_lock() {
            Ok(slot) => self.saw(&slot),
            Err(TryLockError::Poisoned(poisoned)) => self.saw(&poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => lock(&self.seen).clone(),
        }
    }

    fn try_with(&self, f: &mut dyn FnMut(&mut dyn Backend)) -> Result<(), Unavailable> {
        // The app recovers its lock from a panic the same way (`hearth_app::app::lock`).
        let mut slot = match self.model.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(Unavailable::InUse),
        };
        self.saw(&slot);
        let session = slot.as_mut().ok_or(Unavailable::NotLoaded)?;
        f(session.backend.as_mut());
        Ok(())
    }
}

/// The switch: off, or serving at an address. One per app; cheap to clone (one `Arc`), so a
/// front end can hand it to a worker thread.
#[derive(Default, Clone)]
pub struct Sharing {
    state: Arc<Mutex<State>>,
}

struct State {
    running: Option<Serving>,
    /// The port asked for last (kept while off, for the next switch-on).
    port: u16,
    /// Why it could not start again at this start (cleared when the user acts).
    problem: Option<String>,
}

impl Default for State {
    fn default() -> Self {
        State {
            running: None,
            port: OLLAMA_PORT,
            problem: None,
        }
    }
}

struct Serving {
    server: RunningServer,
    model: Arc<AppModel>,
}

impl Sharing {
    /// Turns sharing on at `port` (Ollama's [`OLLAMA_PORT`], or another; a taken port falls
    /// back to a free one, and the status says so). Already on at another port: moves there.
    pub fn start(&self, app: &App, port: u16) -> Result<ShareStatus, Error> {
        let mut held = lock(&self.state);
        held.port = port;
        held.problem = None;
        let running = &mut held.running;
        if let Some(serving) = running.as_ref() {
            if serving.server.wanted_port() == port {
                return Ok(status_of(serving));
            }
        }
        // Off first, so the old port is free when the new one is the one it fell back from.
        if let Some(old) = running.take() {
            old.server.stop();
        }
        let model = Arc::new(AppModel {
            model: app.model_slot(),
            seen: Mutex::new(None),
        });
        let state = AppState::lent(model.clone(), ServerOptions::default());
        let server = running::start(state, port).map_err(|e| {
            Error::new(
                ErrorCode::Internal,
                format!(
                    "Hearth could not start serving other apps on this computer ({e}). Try \
                     another port, or turn the switch off and on again."
                ),
            )
        })?;
        let serving = Serving { server, model };
        let status = status_of(&serving);
        *running = Some(serving);
        Ok(status)
    }

    /// Turns sharing off; the port is free when this returns (and kept for the next start).
    pub fn stop(&self) -> ShareStatus {
        let mut state = lock(&self.state);
        state.problem = None;
        if let Some(serving) = state.running.take() {
            serving.server.stop();
        }
        ShareStatus::off(state.port)
    }

    /// At a start: sharing as the user left it. On: started at the remembered port (a taken
    /// port falls back to a free one, and the status says so); when it cannot start, it stays
    /// off and the status's `problem` says why.
    pub fn restore(&self, app: &App, choice: ShareChoice) -> ShareStatus {
        if !choice.on {
            lock(&self.state).port = choice.port;
            return self.status();
        }
        match self.start(app, choice.port) {
            Ok(status) => status,
            Err(error) => {
                tracing::warn!("sharing could not start again: {}", error.message);
                lock(&self.state).problem = Some(error.message);
                self.status()
            }
        }
    }

    /// Whether other apps can use Hearth now, where, and with which model.
    pub fn status(&self) -> ShareStatus {
        let state = lock(&self.state);
        match state.running.as_ref() {
            Some(serving) => status_of(serving),
            None => ShareStatus {
                problem: state.problem.clone(),
                ..ShareStatus::off(state.port)
            },
        }
    }
}

fn status_of(serving: &Serving) -> ShareStatus {
    ShareStatus {
        on: true,
        url: Some(serving.server.url()),
        wanted_port: serving.server.wanted_port(),
        port_taken: serving.server.fell_back(),
        model: serving.model.info().map(|info| info.model),
        problem: None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
