//! What every request shares: the model in memory behind a mutex (one generation at a time;
//! loaded on demand and unloaded when its keep-alive ends, or lent by its holder), the queue
//! bound, and the server's settings.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use hearth_chat::{Backend, BackendInfo, Receipt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::catalog::{LocalModels, ModelEntry};
use crate::embedding_models::{EmbeddingModels, EmbeddingSource};
use crate::error::{AppError, Error};
use crate::held::{HeldModel, Unavailable};
use hearth_wire::{KeepAlive, DEFAULT_KEEP_ALIVE};

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
    /// Web origins besides this machine's own pages that may call the server from a browser
    /// (and get CORS headers), as Ollama's `OLLAMA_ORIGINS`: `app://obsidian.md`,
    /// `chrome-extension://ID`, or a pattern with one `*` such as `vscode-webview://*`.
    /// By default none.
    pub allowed_origins: Vec<String>,
    /// How long a model loaded on demand stays loaded after a request that does not say
    /// (`keep_alive`). By default five minutes, as Ollama.
    pub keep_alive: KeepAlive,
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
    /// The models `/v1/embeddings` and `/api/embed` answer with, by the name a request gives
    /// (one loaded at a time, at the first request naming it). By default none: those requests
    /// are told the server has none.
    pub embedding_models: Vec<EmbeddingSource>,
    /// Where `/v1/audio/transcriptions` finds speech models (a folder of Whisper model
    /// folders, the app's `speech::speech_models_dir`). By default none: those requests are
    /// told the server has none.
    pub speech_models_dir: Option<std::path::PathBuf>,
    /// Hearth's folders, for speech on the NPU (FastFlowLM's Whisper, by the app's rule in
    /// `hearth_app::speech::hear`). By default none: the processor hears every recording.
    pub speech_home: Option<hearth_app::Home>,
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
            allowed_origins: Vec::new(),
            keep_alive: DEFAULT_KEEP_ALIVE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            embedding_models: Vec::new(),
            speech_models_dir: None,
            speech_home: None,
        }
    }
}

/// Shared server state; cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Shared>,
}

struct Shared {
    /// The model in memory; locked for the whole of a generation (with a held model it stays
    /// empty, and its lock makes the server's own requests take turns).
    slot: Mutex<Option<Loaded>>,
    /// What `/api/ps` shows, kept beside the slot so it can be read while a model answers.
    running: Mutex<Option<Running>>,
    models: Models,
    options: ServerOptions,
    /// One permit per request allowed in (the one generating plus the queue).
    admission: Arc<Semaphore>,
    last_receipt: Mutex<Option<Receipt>>,
    started_unix: u64,
    /// The embedding models, each loaded at its first use.
    embedding: EmbeddingModels,
    /// The speech models (`/v1/audio/transcriptions`).
    speech: crate::speech_models::SpeechModels,
}

/// Where models come from.
enum Models {
    /// One backend opened before the server started; it stays loaded.
    Pinned(ModelEntry),
    /// The app's local models, opened through the app on request.
    Local(LocalModels),
    /// The model another part of the program holds (the desktop app's), used when it is free.
    Held(Arc<dyn HeldModel>),
}

/// A model in memory.
struct Loaded {
    name: String,
    backend: Box<dyn Backend>,
}

/// A loaded model as `/api/ps` shows it.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    /// The catalog's entry.
    pub entry: ModelEntry,
    /// The backend's description (with the context it was loaded with).
    pub info: BackendInfo,
    /// When it will be unloaded; None while it answers or when kept until replaced.
    pub expires: Option<Instant>,
}

/// Which model a request wants, and how.
#[derive(Debug, Clone)]
pub(crate) struct ModelRequest {
    /// The catalog's name for it.
    pub name: String,
    /// Positions the request needs (Ollama's `num_ctx`): a model loaded with less is loaded
    /// again with this many.
    pub num_ctx: Option<usize>,
    /// How long it stays loaded afterwards; None: the server's default.
    pub keep_alive: Option<KeepAlive>,
}

impl ModelRequest {
    /// The model `name`, as it is loaded, with the server's keep-alive.
    pub fn named(name: String) -> Self {
        ModelRequest {
            name,
            num_ctx: None,
            keep_alive: None,
        }
    }
}

impl AppState {
    /// Serves the model `backend` runs (Hearth's engine, the NPU, or a remote server, opened
    /// through `hearth_app::Session`; a local model must be able to chat, see
    /// `OpenOptions::require_chat`). It stays loaded for the server's life; requests for other
    /// models get 404.
    pub fn new(backend: Box<dyn Backend>, options: ServerOptions) -> AppState {
        let info = backend.info().clone();
        let entry = ModelEntry::of_backend(&info);
        let running = Running {
            entry: entry.clone(),
            info: info.clone(),
            expires: None,
        };
        let loaded = Loaded {
            name: info.model.clone(),
            backend,
        };
        AppState::build(Models::Pinned(entry), Some(loaded), Some(running), options)
    }

    /// Serves the installed `models`, loading the one a request names on Hearth's engine (one
    /// at a time: loading another unloads the one before) and unloading it when its
    /// keep-alive ends.
    pub fn on_demand(models: LocalModels, options: ServerOptions) -> AppState {
        AppState::build(Models::Local(models), None, None, options)
    }

    /// Serves whatever model `held` holds (the desktop app's loaded model), with its holder's
    /// lock: a request while the holder answers gets 503, a request for another model 404.
    /// The holder keeps it loaded; requests' `keep_alive` does not unload it.
    pub fn lent(held: Arc<dyn HeldModel>, options: ServerOptions) -> AppState {
        AppState::build(Models::Held(held), None, None, options)
    }

    fn build(
        models: Models,
        loaded: Option<Loaded>,
        running: Option<Running>,
        options: ServerOptions,
    ) -> AppState {
        // Bounded here too, so that an unchecked value can never overflow or panic.
        let admission = Arc::new(Semaphore::new(options.queue.min(MAX_QUEUE) + 1));
        let embedding = EmbeddingModels::new(options.embedding_models.clone());
        let speech = crate::speech_models::SpeechModels::new(
            options.speech_models_dir.clone(),
            options.speech_home.clone(),
        );
        AppState {
            inner: Arc::new(Shared {
                slot: Mutex::new(loaded),
                running: Mutex::new(running),
                models,
                options,
                admission,
                last_receipt: Mutex::new(None),
                started_unix: unix_now(),
                embedding,
                speech,
            }),
        }
    }

    /// Every model this server can answer with, in listing order.
    pub(crate) fn catalog(&self) -> Vec<ModelEntry> {
        match &self.inner.models {
            Models::Pinned(entry) => vec![entry.clone()],
            Models::Local(local) => local.models().iter().map(ModelEntry::of_model).collect(),
            Models::Held(held) => held.info().iter().map(ModelEntry::of_backend).collect(),
        }
    }

    /// The catalog's entry for `requested` (exact name, any case, or with `:latest`), or 404.
    pub(crate) fn entry(&self, requested: &str) -> Result<ModelEntry, AppError> {
        let one = |entry: ModelEntry| {
            let wanted = requested.strip_suffix(":latest").unwrap_or(requested);
            entry.name.eq_ignore_ascii_case(wanted).then_some(entry)
        };
        let found = match &self.inner.models {
            Models::Pinned(entry) => one(entry.clone()),
            Models::Local(local) => local.find(requested).map(ModelEntry::of_model),
            Models::Held(held) => held
                .info()
                .and_then(|info| one(ModelEntry::of_backend(&info))),
        };
        found.ok_or_else(|| AppError::ModelNotFound {
            requested: requested.to_owned(),
            served: self.names(),
        })
    }

    /// The model a request that may leave `model` out is for: the one named, else the one
    /// loaded, else the first installed.
    pub(crate) fn resolve(&self, model: Option<&str>) -> Result<ModelEntry, AppError> {
        if let Some(name) = model {
            return self.entry(name);
        }
        if let Some(running) = self.running() {
            return Ok(running.entry);
        }
        self.catalog()
            .into_iter()
            .next()
            .ok_or_else(|| AppError::ModelNotFound {
                requested: String::new(),
                served: self.names(),
            })
    }

    /// Checks `num_ctx` fits the model before anything is loaded or unloaded.
    pub(crate) fn check_context(
        &self,
        entry: &ModelEntry,
        num_ctx: Option<usize>,
    ) -> Result<(), AppError> {
        let Some(wanted) = num_ctx else {
            return Ok(());
        };
        // A pinned backend's entry holds the context it was opened with: all there is.
        match entry.trained_context {
            Some(limit) if wanted > limit => Err(AppError::ContextTooLarge {
                model: entry.name.clone(),
                requested: wanted,
                limit,
                reloadable: matches!(self.inner.models, Models::Local(_)),
            }),
            _ => Ok(()),
        }
    }

    fn names(&self) -> String {
        let names = self.model_names();
        if names.is_empty() {
            "no models (none is installed; `hearth pull` downloads one)".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// The names of every model this server can answer with.
    pub fn model_names(&self) -> Vec<String> {
        self.catalog().into_iter().map(|e| e.name).collect()
    }

    /// Loads `name` now (a server started for one model loads it before it listens, so a model
    /// that cannot load fails at once); it stays for the server's default keep-alive.
    pub fn preload(&self, name: &str) -> Result<(), AppError> {
        let entry = self.entry(name)?;
        self.with_model(&ModelRequest::named(entry.name), |_| ())
            .map(|_| ())
    }

    /// The loaded model, for `/api/ps`.
    pub(crate) fn running(&self) -> Option<Running> {
        if let Models::Held(held) = &self.inner.models {
            return held.info().map(|info| Running {
                entry: ModelEntry::of_backend(&info),
                info,
                expires: None,
            });
        }
        lock(&self.inner.running).clone()
    }

    /// The embedding models (`/v1/embeddings`, `/api/embed`).
    pub(crate) fn embedding_model(&self) -> &EmbeddingModels {
        &self.inner.embedding
    }

    /// The speech models (`/v1/audio/transcriptions`).
    pub(crate) fn speech_models(&self) -> &crate::speech_models::SpeechModels {
        &self.inner.speech
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

    pub(crate) fn allowed_origins(&self) -> &[String] {
        &self.inner.options.allowed_origins
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

    /// Runs `f` with the model `request` names on the calling (blocking) thread, waiting for
    /// the generation before it to end; loads the model first when it is not loaded (or was
    /// loaded with less context than `num_ctx`), and afterwards keeps it for its keep-alive.
    /// Returns `f`'s value and the time spent loading.
    pub(crate) fn with_model<T>(
        &self,
        request: &ModelRequest,
        f: impl FnOnce(&mut dyn Backend) -> T,
    ) -> Result<(T, Duration), AppError> {
        if let Models::Held(held) = &self.inner.models {
            return self.with_held(held.as_ref(), request, f);
        }
        let mut slot = self.inner.slot.lock().map_err(|_| {
            // A generation panicked: the KV cache may be half-written, so refuse rather than
            // answer from a corrupt state.
            tracing::error!("the model lock is poisoned by an earlier failure");
            AppError::Internal
        })?;
        let load = self.ensure_loaded(&mut slot, request)?;
        // Answering: not to be unloaded meanwhile.
        self.set_expiry(None);
        let loaded = slot.as_mut().ok_or(AppError::Internal)?;
        let value = f(loaded.backend.as_mut());
        self.keep_after_use(&mut slot, request.keep_alive, Instant::now());
        Ok((value, load))
    }

    /// [`AppState::with_model`] over a held model: the server's own requests take turns on the
    /// slot's lock; the holder's lock is only tried, so a request while the holder answers is
    /// told at once that the model is busy rather than waiting behind it.
    fn with_held<T>(
        &self,
        held: &dyn HeldModel,
        request: &ModelRequest,
        f: impl FnOnce(&mut dyn Backend) -> T,
    ) -> Result<(T, Duration), AppError> {
        let _turn = lock(&self.inner.slot);
        let mut f = Some(f);
        let mut value = None;
        let mut loaded_name = None;
        held.try_with(&mut |backend| {
            let name = &backend.info().model;
            // The holder may have switched models since the request was checked.
            if !name.eq_ignore_ascii_case(&request.name) {
                loaded_name = Some(name.clone());
            } else if let Some(f) = f.take() {
                value = Some(f(backend));
            }
        })
        .map_err(|why| match why {
            Unavailable::InUse => AppError::InUse,
            Unavailable::NotLoaded => self.not_found(&request.name),
        })?;
        match value {
            Some(value) => Ok((value, Duration::ZERO)),
            None => {
                tracing::debug!(loaded = ?loaded_name, "the held model changed under a request");
                Err(self.not_found(&request.name))
            }
        }
    }

    fn not_found(&self, requested: &str) -> AppError {
        AppError::ModelNotFound {
            requested: requested.to_owned(),
            served: self.names(),
        }
    }

    /// Loads `request`'s model into `slot` if it is not there as wanted; the time it took.
    fn ensure_loaded(
        &self,
        slot: &mut Option<Loaded>,
        request: &ModelRequest,
    ) -> Result<Duration, AppError> {
        let loaded_context = slot
            .as_ref()
            .filter(|l| l.name == request.name)
            .map(|l| l.backend.info().context_length);
        let too_small = |context: Option<usize>| match (request.num_ctx, context) {
            (Some(wanted), Some(have)) => wanted > have,
            _ => false,
        };
        match (loaded_context, &self.inner.models) {
            (Some(context), _) if !too_small(context) => Ok(Duration::ZERO),
            (Some(context), Models::Pinned(entry)) => Err(AppError::ContextTooLarge {
                model: entry.name.clone(),
                requested: request.num_ctx.unwrap_or_default(),
                limit: context.unwrap_or_default(),
                reloadable: false,
            }),
            (_, Models::Held(_)) => Err(AppError::Internal), // answered by `with_held`
            (None, Models::Pinned(entry)) => {
                // Unreachable through the routes (they check the name first), kept plain.
                Err(AppError::ModelNotFound {
                    requested: request.name.clone(),
                    served: entry.name.clone(),
                })
            }
            (_, Models::Local(local)) => {
                let model = local
                    .find(&request.name)
                    .ok_or_else(|| AppError::ModelNotFound {
                        requested: request.name.clone(),
                        served: self.names(),
                    })?;
                // One model at a time: the one before leaves memory before the next loads.
                if let Some(old) = slot.take() {
                    tracing::info!(model = %old.name, "unloading to load {}", model.name);
                }
                *lock(&self.inner.running) = None;
                let started = Instant::now();
                let backend = local.open(model, request.num_ctx)?;
                let took = started.elapsed();
                let info = backend.info().clone();
                tracing::info!(
                    model = %model.name,
                    context = ?info.context_length,
                    secs = took.as_secs_f64(),
                    "model loaded"
                );
                *lock(&self.inner.running) = Some(Running {
                    entry: ModelEntry::of_model(model),
                    info,
                    expires: None,
                });
                *slot = Some(Loaded {
                    name: model.name.clone(),
                    backend,
                });
                Ok(took)
            }
        }
    }

    /// After a request: unloads at once for a zero keep-alive, else sets when to unload.
    /// A pinned or held backend stays loaded whatever the request said.
    fn keep_after_use(&self, slot: &mut Option<Loaded>, keep: Option<KeepAlive>, now: Instant) {
        if let Models::Pinned(_) | Models::Held(_) = self.inner.models {
            return;
        }
        match keep.unwrap_or(self.inner.options.keep_alive) {
            KeepAlive::Forever => self.set_expiry(None),
            keep if keep.is_zero() => {
                if let Some(old) = slot.take() {
                    tracing::info!(model = %old.name, "unloaded (keep_alive 0)");
                }
                *lock(&self.inner.running) = None;
            }
            KeepAlive::For(duration) => self.set_expiry(now.checked_add(duration)),
        }
    }

    fn set_expiry(&self, expires: Option<Instant>) {
        if let Some(running) = lock(&self.inner.running).as_mut() {
            running.expires = expires;
        }
    }

    /// Loads the model `request` names and sets its keep-alive, without generating (Ollama's
    /// empty prompt); with a zero keep-alive, unloads it instead if it is loaded. Returns
    /// whether it is loaded afterwards (a pinned backend always is; a held one while its
    /// holder has it loaded).
    pub(crate) fn load_or_unload(&self, request: &ModelRequest) -> Result<bool, AppError> {
        if let Models::Held(_) = &self.inner.models {
            return Ok(self.entry(&request.name).is_ok());
        }
        let unload = request.keep_alive.is_some_and(KeepAlive::is_zero);
        if unload {
            let mut slot = lock(&self.inner.slot);
            if slot.as_ref().is_some_and(|l| l.name == request.name) {
                self.keep_after_use(&mut slot, request.keep_alive, Instant::now());
            }
            return Ok(slot.as_ref().is_some_and(|l| l.name == request.name));
        }
        self.with_model(request, |_| ())?;
        Ok(true)
    }

    /// Unloads the model whose keep-alive ended by `now`; skipped while it answers (the lock is
    /// held then, and its keep-alive starts only when it ends). Returns whether one was
    /// unloaded. The server calls it about once a second; tests pass the instant they want.
    pub fn unload_expired(&self, now: Instant) -> bool {
        let Ok(mut slot) = self.inner.slot.try_lock() else {
            return false;
        };
        let mut running = lock(&self.inner.running);
        let expired = running
            .as_ref()
            .and_then(|r| r.expires)
            .is_some_and(|at| at <= now);
        if !expired {
            return false;
        }
        if let Some(old) = slot.take() {
            tracing::info!(model = %old.name, "unloaded: its keep_alive ended");
        }
        *running = None;
        true
    }

    /// The wall-clock time a monotonic `instant` stands for (for `expires_at`).
    pub(crate) fn wall_clock(instant: Instant) -> SystemTime {
        let now = Instant::now();
        let wall = SystemTime::now();
        match instant.checked_duration_since(now) {
            Some(ahead) => wall.checked_add(ahead),
            None => wall.checked_sub(now.duration_since(instant)),
        }
        .unwrap_or(wall)
    }

    pub(crate) fn record_receipt(&self, receipt: &Receipt) {
        *lock(&self.inner.last_receipt) = Some(receipt.clone());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) use hearth_chat::clock::unix_now;
