//! What every request shares: the backend behind a mutex (one generation at a time), the queue
//! bound, and the server's settings.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hearth_chat::{Backend, BackendInfo, Receipt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{AppError, Error};

/// Default request body limit: 4 MiB, far more than any chat needs.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// Default number of requests that may wait while one generates.
pub const DEFAULT_QUEUE: usize = 8;

/// Most requests that may wait for the model; more is refused by [`ServerOptions::validate`].
pub const MAX_QUEUE: usize = 1024;

/// Default number of connections served at once; more wait in the kernel's backlog.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Default time a connection may take to send a request's headers (or sit idle between
/// requests) before it is closed.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default time a request's body may take to arrive.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How the server behaves. `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Requests that may wait for the model while one generates; past that, 503.
    /// By default [`DEFAULT_QUEUE`].
    pub queue: usize,
    /// Largest request body accepted, in bytes; past that, 413. By default [`DEFAULT_BODY_LIMIT`].
    pub body_limit: usize,
    /// Host names or addresses accepted in `Host`/`Origin` besides loopback ones (for a server
    /// deliberately exposed on a network). By default none.
    pub allowed_hosts: Vec<String>,
    /// Connections served at once (1 to 4096); further ones wait to be accepted, so an idle
    /// flood cannot exhaust the process's file descriptors. By default
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Time allowed to send a request's headers, and to sit idle between requests; the
    /// connection is closed past it. By default [`DEFAULT_HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// Time allowed for a request's body to arrive; past it, 408. By default
    /// [`DEFAULT_BODY_TIMEOUT`].
    pub body_timeout: Duration,
}

impl ServerOptions {
    /// Checks every setting is within bounds, with a plain message saying which is not.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |message: String| Err(Error::InvalidOption(message));
        if self.queue > MAX_QUEUE {
            return invalid(format!(
                "a queue of {} requests is too long; use at most {MAX_QUEUE}",
                self.queue
            ));
        }
        if !(1..=4096).contains(&self.max_connections) {
            return invalid(format!(
                "{} connections at once is out of range; use 1 to 4096",
                self.max_connections
            ));
        }
        if self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            return invalid("the header and body timeouts must be longer than zero".into());
        }
        Ok(())
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            queue: DEFAULT_QUEUE,
            body_limit: DEFAULT_BODY_LIMIT,
            allowed_hosts: Vec::new(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// Shared server state; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Shared>,
}

struct Shared {
    backend: Mutex<Box<dyn Backend>>,
    info: BackendInfo,
    options: ServerOptions,
    /// One permit per request allowed in (the one generating plus the queue).
    admission: Arc<Semaphore>,
    last_receipt: Mutex<Option<Receipt>>,
    started_unix: u64,
}

impl AppState {
    /// Serves the model `backend` runs (Hearth's engine, the NPU, or a remote server: a
    /// local model must be able to chat, see `CpuBackend::require_chat`).
    pub fn new(backend: Box<dyn Backend>, options: ServerOptions) -> AppState {
        let info = backend.info().clone();
        // Bounded here too, so that an unchecked value can never overflow or panic.
        let admission = Arc::new(Semaphore::new(options.queue.min(MAX_QUEUE) + 1));
        AppState {
            inner: Arc::new(Shared {
                backend: Mutex::new(backend),
                info,
                options,
                admission,
                last_receipt: Mutex::new(None),
                started_unix: unix_now(),
            }),
        }
    }

    /// The served model's description.
    pub fn info(&self) -> &BackendInfo {
        &self.inner.info
    }

    /// The id clients use in `model` (the model's name).
    pub fn model_id(&self) -> &str {
        &self.inner.info.model
    }

    /// The server's settings.
    pub fn options(&self) -> &ServerOptions {
        &self.inner.options
    }

    /// The receipt of the last answer that ended (cancelled ones included).
    pub fn last_receipt(&self) -> Option<Receipt> {
        lock(&self.inner.last_receipt).clone()
    }

    pub(crate) fn allowed_hosts(&self) -> &[String] {
        &self.inner.options.allowed_hosts
    }

    pub(crate) fn started_unix(&self) -> u64 {
        self.inner.started_unix
    }

    /// A place in line for the model, or 503 when the queue is full.
    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, AppError> {
        Arc::clone(&self.inner.admission)
            .try_acquire_owned()
            .map_err(|_| AppError::Busy {
                queue: self.inner.options.queue,
            })
    }

    /// Runs `f` with the backend on the calling (blocking) thread, waiting for the generation
    /// before it to end.
    pub(crate) fn with_backend<T>(
        &self,
        f: impl FnOnce(&mut dyn Backend) -> T,
    ) -> Result<T, AppError> {
        let mut backend = self.inner.backend.lock().map_err(|_| {
            // A generation panicked: the KV cache may be half-written, so refuse rather than
            // answer from a corrupt state.
            tracing::error!("the model lock is poisoned by an earlier failure");
            AppError::Internal
        })?;
        Ok(f(backend.as_mut()))
    }

    pub(crate) fn record_receipt(&self, receipt: &Receipt) {
        *lock(&self.inner.last_receipt) = Some(receipt.clone());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) use hearth_chat::unix_now;
