//! [`NpuBackend`]: a model from Hearth's registry answered by FastFlowLM on the NPU.
//!
//! At most one `flm serve` in the process (a backend that needs the NPU stops another
//! backend's idle server), started on the first answer (or [`NpuBackend::start`])
//! with the context length the conversation needs, restarted with a larger one when a longer
//! conversation comes, stopped after some idle minutes and when the backend is dropped. The
//! caller sees loading through [`NpuEvent`]s. Answers stream over FastFlowLM's OpenAI API;
//! the model named in every chunk must be the one asked for ([`FailureKind::WrongModel`]).
//! When FastFlowLM dies in the middle of an answer, the text so far is kept by the answer loop,
//! the error says what happened ([`FailureKind::Cut`], with FastFlowLM's last log lines), and
//! FastFlowLM is restarted once; after a second crash in a row it is left stopped so the caller
//! can fall back to the CPU. Before a conversation that does not go on from what FastFlowLM's
//! prompt cache holds, the cache is cleared ([`crate::npu::prompt_cache`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hearth_chat::backend::{
    count_tokens, estimate_tokens, Backend, BackendError, BackendEvent, BackendInfo, BackendKind,
    EventSink, FailureKind, Generation, Input, Prompt, TextSink, TokenCount,
};
use hearth_chat::picture::picture_tokens;
use hearth_engine::{ChatMessage, ChatOptions, ChatTemplate, StopReason, TextTokenizer};
use serde_json::{json, Value};

use crate::npu::discover::{self, FlmProgram};
use crate::npu::known_issues;
use crate::npu::process::{FlmServer, ServeConfig};
use crate::npu::prompt_cache::{clearing_messages, CacheState};
use crate::npu::registry::FlmRegistry;
use crate::remote::openai::{ChatRequest, ClientOptions, OpenAiClient, ServerUsage};

mod speech;
pub use speech::transcribe_on_npu;

/// The smallest `--ctx-len` FastFlowLM accepts.
pub const MIN_CTX_LEN: usize = 512;

/// After this many answers stopped early, FastFlowLM is restarted before the next one: it
/// never frees the connection slot of a stream whose client left, and refuses every
/// connection once its 10 slots are gone.
const ABORTED_STREAMS_BEFORE_RESTART: u32 = 8;

/// The backend whose FastFlowLM holds the NPU (at most one runs in this process).
static NPU_OWNER: Mutex<Option<Weak<Shared>>> = Mutex::new(None);

/// How the backend runs FastFlowLM.
#[derive(Debug, Clone)]
pub struct NpuOptions {
    /// Where FastFlowLM's log goes (`fastflowlm.log`, private, rotated at 5 MB). Hearth's
    /// state folder.
    pub state_dir: PathBuf,
    /// How long loading the model may take. By default, 180 s.
    pub start_timeout: Duration,
    /// Stop FastFlowLM after this long without an answer; `None` keeps it running. By default,
    /// 10 minutes.
    pub idle_stop: Option<Duration>,
    /// How long to wait for each piece of an answer (the first one includes reading the
    /// prompt). By default, 300 s.
    pub read_timeout: Duration,
    /// Run a model on the NPU even when FastFlowLM is known to fail with it
    /// ([`crate::npu::known_issues`]), for testers. By default, off.
    pub npu_anyway: bool,
    /// Start FastFlowLM with `--asr 1`, so its Whisper is loaded beside the model for
    /// [`NpuBackend::transcribe`] (which turns this on by itself when first asked). By
    /// default, off.
    pub asr: bool,
    /// FastFlowLM's own models folder, where `flm pull whisper-v3:turbo` puts its Whisper
    /// ([`crate::npu::whisper`]). By default `$FLM_MODEL_PATH`, else `~/.config/flm`.
    pub flm_models_dir: Option<PathBuf>,
}

impl NpuOptions {
    /// The defaults, with the log in `state_dir`.
    pub fn new(state_dir: impl Into<PathBuf>) -> NpuOptions {
        NpuOptions {
            state_dir: state_dir.into(),
            start_timeout: Duration::from_secs(180),
            idle_stop: Some(Duration::from_secs(600)),
            read_timeout: Duration::from_secs(300),
            npu_anyway: false,
            asr: false,
            flm_models_dir: crate::npu::whisper::default_flm_models_dir(),
        }
    }
}

/// What happens to FastFlowLM, for a visible loading state.
#[derive(Debug, Clone, PartialEq)]
pub enum NpuEvent {
    /// Loading the model onto the NPU (FastFlowLM is starting).
    Loading {
        /// The model's tag.
        model: String,
        /// The context length reserved.
        ctx_len: usize,
    },
    /// The model is on the NPU and FastFlowLM answers.
    Ready {
        /// The model's tag.
        model: String,
        /// Seconds loading took.
        secs: f64,
        /// FastFlowLM's process id.
        pid: u32,
    },
    /// FastFlowLM is being restarted.
    Restarting {
        /// Why, in plain words.
        reason: String,
    },
    /// FastFlowLM was stopped (idle, or replaced).
    Stopped {
        /// Why, in plain words.
        reason: String,
    },
}

impl NpuEvent {
    /// The event in plain words, for a status line ("Loading qwen3:1.7b onto the NPU...").
    pub fn words(&self) -> String {
        match self {
            NpuEvent::Loading { model, .. } => format!("Loading {model} onto the NPU..."),
            NpuEvent::Ready { model, secs, .. } => {
                format!("{model} is on the NPU (loaded in {secs:.1} s)")
            }
            NpuEvent::Restarting { reason } => format!("Restarting FastFlowLM: {reason}"),
            NpuEvent::Stopped { reason } => format!("FastFlowLM stopped: {reason}"),
        }
    }
}

/// Receives [`NpuEvent`]s, from the answering thread or the idle timer's.
pub type NpuEventSink = Box<dyn FnMut(&NpuEvent) + Send>;

/// The server slot shared with the idle timer.
struct Slot {
    server: Option<FlmServer>,
    last_used: Instant,
    busy: bool,
    closed: bool,
    aborted_streams: u32,
    /// What the running server's prompt cache holds.
    cache: CacheState,
    /// How the running server was started (to restart it with Whisper for speech).
    config: Option<ServeConfig>,
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
    sink: Mutex<Option<NpuEventSink>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn emit(&self, event: NpuEvent) {
        tracing::info!(?event, "npu");
        if let Some(sink) = self.sink.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            sink(&event);
        }
    }
}

/// A registry model answered by FastFlowLM on the NPU.
pub struct NpuBackend {
    info: BackendInfo,
    program: FlmProgram,
    tag: String,
    registry: PathBuf,
    models_root: PathBuf,
    options: NpuOptions,
    tokenizer: Option<TextTokenizer>,
    template: Option<ChatTemplate>,
    shared: Arc<Shared>,
    idle_timer: Option<JoinHandle<()>>,
    crashes_in_a_row: u32,
    /// FastFlowLM's own check passed (run once, before the first start).
    validated: bool,
    /// Whether the model reads pictures (the registry's `vlm`).
    sees_pictures: bool,
}

impl std::fmt::Debug for NpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NpuBackend")
            .field("info", &self.info)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl NpuBackend {
    /// Opens `model` (a registry name or `family:size` tag) of the registry `registry`
    /// (Hearth's `model_list.json`) on FastFlowLM `program`. Nothing starts yet.
    pub fn open(
        program: FlmProgram,
        registry: &Path,
        model: &str,
        options: NpuOptions,
    ) -> Result<NpuBackend, BackendError> {
        let file = FlmRegistry::read(registry).map_err(|e| {
            BackendError::failed(
                FailureKind::NotReady,
                format!(
                    "could not read the model registry {}: {e}",
                    registry.display()
                ),
            )
        })?;
        let (tag, entry) = file.find(model).ok_or_else(|| {
            BackendError::failed(
                FailureKind::ModelNotFound,
                format!(
                    "{model} is not in the model registry {}: `hearth list` shows the models",
                    registry.display()
                ),
            )
        })?;
        let availability = if options.npu_anyway {
            if let Some(issue) = known_issues::known_issue(&program.version, entry) {
                tracing::warn!(
                    model = %entry.name,
                    issue = issue.issue,
                    "npu: trying a model FastFlowLM is known to fail with, as asked"
                );
            }
            discover::npu_support_anyway(&program, entry)
        } else {
            discover::npu_support(&program, entry)
        };
        if let Some(reason) = availability.reason {
            return Err(BackendError::failed(FailureKind::NotReady, reason));
        }
        // FastFlowLM joins FLM_MODEL_PATH, the registry's model_path and the entry's name as
        // paths: an absolute model_path (what Hearth writes) stands alone, and a relative one
        // is taken from the registry's folder, which is where Hearth keeps `models/`.
        let models_root = registry
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let folder = models_root.join(&file.model_path).join(&entry.name);
        let config: Option<Value> = std::fs::read(folder.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let positions = config
            .as_ref()
            .and_then(|c| c.get("max_position_embeddings"))
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        let context_length = match (entry.default_context_length.map(|n| n as usize), positions) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let tokenizer = TextTokenizer::from_file(&folder.join("tokenizer.json")).ok();
        let tokenizer_config: Option<Value> = std::fs::read(folder.join("tokenizer_config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let template = ChatTemplate::from_dir(&folder, tokenizer_config.as_ref())
            .ok()
            .flatten();
        let sha256 = entry
            .hearth
            .as_ref()
            .and_then(|h| h.files.get("model.q4nx"))
            .map(|f| f.sha256.clone());
        let info = BackendInfo {
            kind: BackendKind::Npu,
            label: format!("npu ({})", program.label()),
            device: "AMD XDNA 2 NPU".into(),
            model: entry.name.clone(),
            context_length,
            model_sha256: sha256,
            runtime_version: Some(program.version.clone()),
        };
        let mut backend = NpuBackend::assemble(info, program, registry, models_root, options);
        backend.tag = tag;
        backend.tokenizer = tokenizer;
        backend.template = template;
        backend.sees_pictures = entry.vlm;
        Ok(backend)
    }

    /// A backend with no model yet (its idle timer started), for [`NpuBackend::open`] and
    /// [`NpuBackend::open_speech`].
    fn assemble(
        info: BackendInfo,
        program: FlmProgram,
        registry: &Path,
        models_root: PathBuf,
        options: NpuOptions,
    ) -> NpuBackend {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                server: None,
                last_used: Instant::now(),
                busy: false,
                closed: false,
                aborted_streams: 0,
                cache: CacheState::Fresh,
                config: None,
            }),
            wake: Condvar::new(),
            sink: Mutex::new(None),
        });
        let idle_timer = options.idle_stop.map(|idle| {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("hearth-flm-idle".into())
                .spawn(move || idle_timer(&shared, idle))
                .expect("the idle timer thread starts")
        });
        NpuBackend {
            info,
            program,
            tag: String::new(),
            registry: registry.to_path_buf(),
            models_root,
            options,
            tokenizer: None,
            template: None,
            shared,
            idle_timer,
            crashes_in_a_row: 0,
            validated: false,
            sees_pictures: false,
        }
    }

    /// The model a status line names: the chat model's tag, or Whisper's for speech only.
    fn shown_model(&self) -> &str {
        if self.tag.is_empty() {
            crate::npu::transcribe::ASR_MODEL
        } else {
            &self.tag
        }
    }

    /// Like [`NpuBackend::open`], with the FastFlowLM this process finds
    /// ([`crate::npu::python_env::lookup`]: `HEARTH_FLM`, the Python environment chosen in
    /// Settings, `flm` on `PATH`, the standard install, `oflm`), refused when older than [`discover::MIN_VERSION`].
    pub fn open_found(
        registry: &Path,
        model: &str,
        options: NpuOptions,
    ) -> Result<NpuBackend, BackendError> {
        let program = discover::find(&crate::npu::python_env::lookup())?;
        NpuBackend::open(program, registry, model, options)
    }

    /// Where loading and stopping are reported ("loading the model onto the NPU").
    pub fn set_event_sink(&mut self, sink: NpuEventSink) {
        *self.shared.sink.lock().unwrap_or_else(|e| e.into_inner()) = Some(sink);
    }

    /// The model's FastFlowLM tag (`family:size`).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// FastFlowLM as found.
    pub fn program(&self) -> &FlmProgram {
        &self.program
    }

    /// FastFlowLM's process id, while it runs.
    pub fn server_pid(&self) -> Option<u32> {
        self.shared.lock().server.as_ref().map(FlmServer::pid)
    }

    /// FastFlowLM's log file (in the state folder).
    pub fn log_path(&self) -> PathBuf {
        self.options
            .state_dir
            .join(crate::npu::process::LOG_FILE_NAME)
    }

    /// Loads the model onto the NPU now (with the smallest context), so the first answer does
    /// not wait for it.
    pub fn start(&mut self) -> Result<(), BackendError> {
        self.ensure_server(MIN_CTX_LEN)
    }

    /// Stops FastFlowLM now (it starts again on the next answer).
    pub fn stop_server(&mut self) {
        let server = self.shared.lock().server.take();
        if let Some(server) = server {
            server.stop();
        }
    }

    /// The `--ctx-len` for `needed` positions: a power of two of at least 512 (FastFlowLM
    /// reserves the whole KV cache up front, so no more than needed), at most the model's
    /// context length.
    pub fn ctx_len_for(&self, needed: usize) -> usize {
        let want = needed.max(MIN_CTX_LEN).next_power_of_two();
        match self.info.context_length {
            Some(limit) => want.min(limit.max(MIN_CTX_LEN)),
            None => want,
        }
    }

    fn serve_config(&self, ctx_len: usize) -> ServeConfig {
        ServeConfig {
            program: self.program.path.clone(),
            version: self.program.version.clone(),
            tag: self.tag.clone(),
            ctx_len,
            registry: self.registry.clone(),
            models_root: self.models_root.clone(),
            state_dir: self.options.state_dir.clone(),
            start_timeout: self.options.start_timeout,
            asr: self.options.asr,
        }
    }

    /// A running server with at least `ctx_len` positions.
    fn ensure_server(&mut self, ctx_len: usize) -> Result<(), BackendError> {
        // Lock order: the NPU's owner, then a slot (never the other way round).
        let mut owner = NPU_OWNER.lock().unwrap_or_else(|e| e.into_inner());
        let mut slot = self.shared.lock();
        let aborted = slot.aborted_streams;
        let reason = match slot.server.as_mut() {
            None => None,
            Some(s) => match s.exit_status() {
                Some(status) => Some(format!("FastFlowLM had stopped ({status})")),
                None if s.ctx_len() < ctx_len => Some(format!(
                    "the conversation needs {ctx_len} positions, FastFlowLM was started with {}",
                    s.ctx_len()
                )),
                None if self.options.asr && !s.asr() => {
                    Some("speech needs FastFlowLM's Whisper, which loads with --asr 1".to_string())
                }
                None if aborted >= ABORTED_STREAMS_BEFORE_RESTART => {
                    Some("answers stopped early use up FastFlowLM's connections".to_string())
                }
                None => return Ok(()),
            },
        };
        if let Some(old) = slot.server.take() {
            old.stop();
            self.shared.emit(NpuEvent::Stopped {
                reason: reason.unwrap_or_default(),
            });
        }
        slot.aborted_streams = 0;
        // One FastFlowLM at a time: another backend's server gives the NPU up (it starts again
        // on that backend's next answer), unless it is answering right now.
        let other = owner
            .as_ref()
            .and_then(Weak::upgrade)
            .filter(|o| !Arc::ptr_eq(o, &self.shared));
        if let Some(other) = other {
            let mut theirs = other.lock();
            if theirs.busy {
                return Err(BackendError::Failed {
                    kind: FailureKind::Busy,
                    message:
                        "the NPU is answering with another model: try again when it has finished"
                            .into(),
                    retry_after_secs: Some(1),
                });
            }
            if let Some(server) = theirs.server.take() {
                drop(theirs);
                server.stop();
                other.emit(NpuEvent::Stopped {
                    reason: format!("{} needed the NPU", self.tag),
                });
            }
        }
        if !self.validated {
            // As Lemonade does: FastFlowLM's own check first, whose failures say what to fix,
            // rather than a failed start with its engine's words.
            let report = discover::validate_with(&self.program, Some(&self.registry))?;
            if !report.ready {
                let problems: Vec<String> = report
                    .checks
                    .iter()
                    .filter(|c| c.status == hearth_npu::Status::Problem)
                    .map(|c| match &c.fix {
                        Some(fix) => format!("{} To fix: {fix}", c.summary),
                        None => c.summary.clone(),
                    })
                    .collect();
                return Err(BackendError::failed(
                    FailureKind::NotReady,
                    format!(
                        "the NPU is not ready for FastFlowLM: {}",
                        problems.join(" Also: ")
                    ),
                ));
            }
            self.validated = true;
        }
        let mut config = self.serve_config(ctx_len);
        if config.asr {
            config.registry = crate::npu::whisper::registry_for_asr(
                &config.program,
                &config.registry,
                &config.state_dir,
                self.options.flm_models_dir.as_deref(),
            )?;
        }
        self.shared.emit(NpuEvent::Loading {
            model: self.shown_model().to_owned(),
            ctx_len,
        });
        let started = Instant::now();
        let server = FlmServer::start(&config)?;
        self.shared.emit(NpuEvent::Ready {
            model: self.shown_model().to_owned(),
            secs: started.elapsed().as_secs_f64(),
            pid: server.pid(),
        });
        slot.server = Some(server);
        slot.config = Some(config);
        slot.cache = CacheState::Fresh;
        slot.last_used = Instant::now();
        *owner = Some(Arc::downgrade(&self.shared));
        Ok(())
    }

    /// After a cut answer: whether FastFlowLM died, and if so the words for it (and a restart,
    /// once).
    fn after_cut(&mut self, cause: String) -> BackendError {
        let mut slot = self.shared.lock();
        let ended = slot
            .server
            .as_mut()
            .and_then(|s| s.wait_exit(Duration::from_secs(1)));
        let Some((status, tail)) = ended else {
            return BackendError::failed(
                FailureKind::Cut,
                format!("the answer from FastFlowLM stopped before its end: {cause}; the text so far is kept"),
            );
        };
        let dead = slot.server.take().expect("a server was running");
        let log = dead.log_path();
        let ctx_len = dead.ctx_len();
        drop(dead);
        drop(slot);
        self.crashes_in_a_row += 1;
        let mut message = format!(
            "FastFlowLM stopped in the middle of the answer ({status}); the text so far is kept. Its last lines:\n  {}\n(full log: {}).",
            tail.join("\n  "),
            log.display()
        );
        if self.crashes_in_a_row == 1 {
            self.shared.emit(NpuEvent::Restarting {
                reason: format!("FastFlowLM stopped ({status})"),
            });
            match self.ensure_server(ctx_len) {
                Ok(()) => {
                    message.push_str(" Hearth restarted it: try again, or answer on the CPU.")
                }
                Err(e) => message.push_str(&format!(" Restarting it failed too: {e}")),
            }
        } else {
            message.push_str(
                " It stopped again after a restart, so Hearth left it stopped: answer on the CPU.",
            );
        }
        BackendError::failed(FailureKind::Cut, message)
    }

    fn chat_request(&self, messages: &[ChatMessage], options: &ChatOptions) -> ChatRequest {
        let s = &options.sampling;
        let mut extra = serde_json::Map::new();
        if let Some(think) = options.enable_thinking {
            extra.insert("think".into(), json!(think));
        }
        ChatRequest {
            model: self.tag.clone(),
            messages: messages.to_vec(),
            max_tokens: Some(options.max_tokens.max(1)),
            temperature: Some(s.temperature),
            top_p: Some(s.top_p),
            top_k: Some(if s.temperature <= 0.0 { 1 } else { s.top_k }),
            // FastFlowLM reads min_p into an integer (anything below 1 becomes 0): left out.
            min_p: None,
            repetition_penalty: Some(s.repetition_penalty),
            // FastFlowLM ignores it.
            seed: None,
            extra,
            // FastFlowLM answers with llama3.2:1b when it does not know the model asked for.
            require_model: true,
        }
    }

    /// The OpenAI client for the server on `port`, with no connection reuse (FastFlowLM
    /// closes every connection after its response).
    fn client(&self, port: u16) -> Result<OpenAiClient, BackendError> {
        OpenAiClient::new(
            &format!("http://127.0.0.1:{port}"),
            None,
            ClientOptions {
                connect_timeout: Duration::from_secs(5),
                read_timeout: self.options.read_timeout,
                reuse_connections: false,
            },
        )
    }

    /// Clears the prompt cache of the server on `port` before `messages`: one answer of one
    /// token to [`clearing_messages`], which FastFlowLM never takes from its cache.
    fn clear_prompt_cache(
        &mut self,
        port: u16,
        messages: &[ChatMessage],
        options: &ChatOptions,
    ) -> Result<(), Failure> {
        tracing::info!(model = %self.tag, "npu: clearing FastFlowLM's prompt cache");
        let mut request = self.chat_request(&clearing_messages(messages), options);
        request.max_tokens = Some(1);
        let client = self.client(port).map_err(Failure::Done)?;
        match client.stream_chat(&request, &mut |_| std::ops::ControlFlow::Continue(())) {
            Ok(_) => Ok(()),
            Err(e) => Err(Failure::Cut(format!(
                "clearing FastFlowLM's prompt cache failed: {}",
                flm_words(&e.to_string(), &format!("http://127.0.0.1:{port}"))
            ))),
        }
    }

    /// Streams one answer from the server on `port` through the OpenAI client; `answer` gets
    /// the whole text FastFlowLM wrote.
    fn stream(
        &mut self,
        port: u16,
        request: &ChatRequest,
        prompt_count: TokenCount,
        on_text: TextSink<'_>,
        answer: &mut String,
    ) -> Result<Generation, Failure> {
        let base = format!("http://127.0.0.1:{port}");
        let client = self.client(port).map_err(Failure::Done)?;
        let mut pieces = 0usize;
        let result = client.stream_chat(request, &mut |text: &str| {
            pieces += usize::from(!text.is_empty());
            answer.push_str(text);
            on_text(text)
        });
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(BackendError::Failed {
                kind: FailureKind::Cut | FailureKind::Refused,
                message,
                ..
            }) => return Err(Failure::Cut(flm_words(&message, &base))),
            Err(BackendError::Failed {
                kind: FailureKind::WrongModel,
                message,
                ..
            }) => {
                self.shared.lock().aborted_streams += 1;
                // The client quotes the model that answered first.
                let answered = message.split('"').nth(1).unwrap_or("another model");
                return Err(Failure::Done(BackendError::failed(
                    FailureKind::WrongModel,
                    format!(
                        "FastFlowLM answered with {answered}, not {}, so the answer was refused: FastFlowLM falls back to llama3.2:1b when it does not find the model asked for. Check that {} is in Hearth's model list and its folder is complete.",
                        self.tag, self.info.model
                    ),
                )));
            }
            Err(BackendError::Failed {
                kind,
                message,
                retry_after_secs,
            }) => {
                return Err(Failure::Done(BackendError::Failed {
                    kind,
                    message: flm_words(&message, &base),
                    retry_after_secs,
                }))
            }
            Err(other) => return Err(Failure::Done(other)),
        };
        if outcome.cancelled {
            // The client dropped the connection: FastFlowLM cancels, but keeps the slot.
            self.shared.lock().aborted_streams += 1;
        }
        let usage = outcome.usage.unwrap_or(ServerUsage {
            prompt_tokens: None,
            completion_tokens: None,
        });
        let stop_reason = if outcome.cancelled {
            StopReason::Cancelled
        } else {
            match outcome.finish_reason.as_deref() {
                Some("length") => StopReason::MaxTokens,
                Some("cancel") => StopReason::Cancelled,
                _ => StopReason::EndOfTurn,
            }
        };
        Ok(Generation {
            // FastFlowLM counts only the prompt tokens it had not cached: Hearth's own exact
            // count of the whole prompt is the one that means something.
            prompt_tokens: match (prompt_count.exact, usage.prompt_tokens) {
                (false, Some(n)) => TokenCount {
                    tokens: n,
                    exact: true,
                },
                _ => prompt_count,
            },
            generated_tokens: match usage.completion_tokens {
                Some(n) if !outcome.cancelled => TokenCount {
                    tokens: n,
                    exact: true,
                },
                _ => TokenCount {
                    tokens: pieces,
                    exact: false,
                },
            },
            stop_reason,
            timings: outcome.timings,
        })
    }
}

/// The client's words about "the server at http://127.0.0.1:port", about FastFlowLM.
fn flm_words(message: &str, base: &str) -> String {
    message
        .replace(&format!("The server at {base}"), "FastFlowLM")
        .replace(&format!("the server at {base}"), "FastFlowLM")
        .replace(&format!("from {base}"), "from FastFlowLM")
        .replace(base, "FastFlowLM")
}

/// How a streamed answer failed.
enum Failure {
    /// Final: report as it is.
    Done(BackendError),
    /// The connection broke: FastFlowLM may have died.
    Cut(String),
}

fn idle_timer(shared: &Shared, idle: Duration) {
    let mut slot = shared.lock();
    loop {
        if slot.closed {
            return;
        }
        let idle_for = slot.last_used.elapsed();
        if slot.server.is_some() && !slot.busy && idle_for >= idle {
            let server = slot.server.take().expect("checked above");
            drop(slot);
            server.stop();
            shared.emit(NpuEvent::Stopped {
                reason: format!("no answer for {} s", idle.as_secs()),
            });
            slot = shared.lock();
            continue;
        }
        let wait = if slot.server.is_some() && !slot.busy {
            idle.saturating_sub(idle_for).max(Duration::from_millis(50))
        } else {
            Duration::from_secs(1)
        };
        slot = shared
            .wake
            .wait_timeout(slot, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

impl Drop for NpuBackend {
    fn drop(&mut self) {
        let server = {
            let mut slot = self.shared.lock();
            slot.closed = true;
            slot.server.take()
        };
        self.shared.wake.notify_all();
        if let Some(server) = server {
            server.stop();
        }
        if let Some(t) = self.idle_timer.take() {
            let _ = t.join();
        }
    }
}

impl Backend for NpuBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn prepare(&mut self, input: Input, options: &ChatOptions) -> Result<Prompt, BackendError> {
        if self.tag.is_empty() {
            return Err(BackendError::Unsupported(
                "this FastFlowLM was started for speech only, with no chat model".into(),
            ));
        }
        let Input::Chat(messages) = &input else {
            return Err(BackendError::Unsupported(
                "FastFlowLM only answers conversations, not raw text: use the cpu backend for --raw"
                    .into(),
            ));
        };
        if !options.format.is_text() {
            return Err(BackendError::structured_output_unsupported("FastFlowLM"));
        }
        let count = match (&self.template, &self.tokenizer) {
            (Some(template), Some(tokenizer)) => {
                let text = template.render(messages, true, options.enable_thinking)?;
                TokenCount {
                    tokens: tokenizer.encode(&text, false)?.len(),
                    exact: true,
                }
            }
            _ => {
                let text: String = messages.iter().map(|m| m.content.as_str()).collect();
                let mut c = estimate_tokens(&text);
                c.tokens += 8 * messages.len();
                c
            }
        };
        // The template renders no picture: each counts as estimated.
        let pictures: usize = messages
            .iter()
            .flat_map(|m| &m.pictures)
            .map(picture_tokens)
            .sum();
        let count = TokenCount {
            tokens: count.tokens + pictures,
            exact: count.exact && pictures == 0,
        };
        Ok(Prompt {
            input,
            count,
            tokens: None,
        })
    }

    fn count_text(&self, text: &str) -> TokenCount {
        count_tokens(self.tokenizer.as_ref(), text)
    }

    fn sees_pictures(&self) -> bool {
        self.sees_pictures
    }

    fn generate(
        &mut self,
        prompt: Prompt,
        options: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError> {
        // FastFlowLM does not say how far it has read the prompt: only text comes.
        let on_text = &mut |piece: &str| on_event(BackendEvent::Text(piece));
        let Input::Chat(messages) = &prompt.input else {
            return Err(BackendError::Unsupported(
                "FastFlowLM only answers conversations, not raw text".into(),
            ));
        };
        if !options.format.is_text() {
            return Err(BackendError::structured_output_unsupported("FastFlowLM"));
        }
        let pictures = messages.iter().any(|m| !m.pictures.is_empty());
        if pictures && !self.sees_pictures {
            return Err(BackendError::sees_no_pictures(&self.info));
        }
        if self.crashes_in_a_row >= 2 {
            return Err(BackendError::failed(
                FailureKind::NotReady,
                "FastFlowLM stopped twice in the middle of an answer, so Hearth does not start it again: answer on the CPU, or reopen the model to try the NPU again",
            ));
        }
        let ctx_len = self.ctx_len_for(prompt.count.tokens + options.max_tokens);
        let answer_began = std::time::SystemTime::now();
        self.ensure_server(ctx_len)?;
        let port = {
            let mut slot = self.shared.lock();
            slot.busy = true;
            slot.server.as_ref().map(FlmServer::port)
        };
        let request = self.chat_request(messages, options);
        let clear = self.shared.lock().cache.needs_clearing(messages);
        let mut answer = String::new();
        let result = match port {
            Some(port) => {
                let cleared = if clear {
                    self.clear_prompt_cache(port, messages, options)
                } else {
                    Ok(())
                };
                cleared
                    .and_then(|()| self.stream(port, &request, prompt.count, on_text, &mut answer))
            }
            None => Err(Failure::Cut("FastFlowLM was stopped".into())),
        };
        {
            let mut slot = self.shared.lock();
            slot.busy = false;
            slot.last_used = Instant::now();
            slot.cache = match &result {
                Ok(g) if g.stop_reason != StopReason::Cancelled => {
                    CacheState::answered(messages, &answer)
                }
                _ => CacheState::Unknown,
            };
        }
        self.shared.wake.notify_all();
        match result {
            Ok(generation) => {
                self.crashes_in_a_row = 0;
                Ok(generation)
            }
            // FastFlowLM's refusal of a picture (a status with its words), said as one.
            Err(Failure::Done(BackendError::Failed {
                kind: FailureKind::Server | FailureKind::BadReply,
                message,
                ..
            })) if pictures => Err(BackendError::picture_refused(&message)),
            Err(Failure::Done(e)) => Err(with_npu_faults(e, answer_began)),
            Err(Failure::Cut(cause)) => Err(with_npu_faults(self.after_cut(cause), answer_began)),
        }
    }
}

// ---------------------------------------------------------------- the NPU's own word

/// Adds to an answer FastFlowLM cut or let time out whether the NPU itself reported a fault
/// since the answer began (its hardware contexts and last device error, read through the
/// driver by `hearth_npu::check_faults_since`), so a device fault is told apart from a
/// FastFlowLM failure. Other errors pass unchanged.
fn with_npu_faults(error: BackendError, answer_began: std::time::SystemTime) -> BackendError {
    match error {
        BackendError::Failed {
            kind: kind @ (FailureKind::Cut | FailureKind::Timeout),
            message,
            retry_after_secs,
        } => {
            let npu = hearth_npu::check_faults_since(answer_began);
            tracing::warn!(?npu, "the NPU's own word on a failed answer");
            BackendError::Failed {
                kind,
                message: format!("{message} {}", npu.words()),
                retry_after_secs,
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_words_name_fastflowlm() {
        let base = "http://127.0.0.1:41234";
        assert_eq!(
            flm_words(
                "The server at http://127.0.0.1:41234 reported an error: boom",
                base
            ),
            "FastFlowLM reported an error: boom"
        );
    }
}
