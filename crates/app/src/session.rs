//! A model opened on a backend, ready to answer, and the one rule for where a model runs when
//! the caller does not say ([`best_backend`]): the desktop app, `hearth run` and `hearth chat`
//! all choose through it.

use std::path::PathBuf;

use hearth_backends::npu::{NpuBackend, NpuEventSink, NpuOptions};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_backends::CpuBackend;
use hearth_chat::{Backend, BackendError, BackendInfo};
use serde::Serialize;

use crate::home::Home;
use crate::models::LocalModel;

pub use hearth_backends::KernelLevel;
pub use hearth_chat::BackendKind;

/// Where a local model runs when the caller names no backend: on the NPU when the NPU is ready
/// here (`npu`, the doctor's diagnosis) and FastFlowLM can run this model (its availability,
/// which consults FastFlowLM's known-issues list), else on the processor.
pub fn best_backend(model: &LocalModel, npu: &hearth_npu::Diagnosis) -> BackendKind {
    if npu.ready && model.runs_on_npu() {
        BackendKind::Npu
    } else {
        BackendKind::Cpu
    }
}

/// The backend `choice` names, or the best one for `model` on this machine (the NPU is
/// diagnosed under `home.system_root`).
pub fn backend_for(home: &Home, model: &LocalModel, choice: Option<BackendKind>) -> BackendKind {
    choice.unwrap_or_else(|| best_backend(model, &hearth_npu::diagnose(&home.system_root)))
}

/// What a front end shows about the model in use.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ModelStatus {
    /// Its name in the registry (a remote model: the server's id for it).
    pub name: String,
    /// Folder (empty for a remote model).
    pub path: PathBuf,
    /// Architecture family ("remote" for a model on a server).
    pub family: String,
    /// Number of parameters (0 when unknown: a remote model, a model on the NPU).
    pub parameter_count: usize,
    /// Context length it was loaded with, in tokens (0: unknown, a server that does not say).
    pub context_length: usize,
    /// "q4nx" or "safetensors" ("" for a remote model).
    pub weight_format: String,
    /// Where it runs.
    pub backend_kind: BackendKind,
    /// The backend with detail, e.g. "cpu (avx2)".
    pub backend: String,
    /// The device it runs on.
    pub device: String,
    /// Kernel level in use (e.g. avx2; "" for a remote model).
    pub kernel: String,
    /// Which model came with Hearth, when this is it.
    pub builtin: Option<hearth_hub::BuiltinKind>,
    /// sha256 of the weights file, when known.
    pub sha256: Option<String>,
    /// Whether it reads pictures given with a message (`Backend::sees_pictures`).
    pub sees_pictures: bool,
}

/// How to open a local model.
#[derive(Default)]
pub struct OpenOptions {
    /// Processor threads for Hearth's engine (None: one per physical core).
    pub threads: Option<usize>,
    /// Context length in tokens for Hearth's engine (None: min(4096, the model's maximum)).
    pub context_length: Option<usize>,
    /// SIMD level of Hearth's engine (None: the best this processor has).
    pub kernel: Option<hearth_backends::KernelLevel>,
    /// Try the NPU even for a model FastFlowLM is known to fail with (for testers).
    pub npu_anyway: bool,
    /// Receives FastFlowLM's loading events (None: they are only logged).
    pub npu_events: Option<NpuEventSink>,
    /// Refuse, on the processor, a model that cannot chat (no tokenizer or chat template), as
    /// a server whose routes only chat does; the desktop and `hearth run --raw` open any.
    pub require_chat: bool,
}

impl OpenOptions {
    /// What Hearth's engine loads with: the processor fields (threads, context, kernel level).
    pub(crate) fn cpu_load(&self) -> hearth_backends::LoadOptions {
        hearth_backends::LoadOptions {
            threads: self.threads,
            context_length: self.context_length,
            kernel: self.kernel,
            ..Default::default()
        }
    }
}

/// A model ready to answer.
pub struct Session {
    /// The backend running it.
    pub backend: Box<dyn Backend>,
    /// What it is: the local model, or None for a model on a remote server.
    pub entry: Option<LocalModel>,
    status: ModelStatus,
}

impl Session {
    /// Opens the local model `model` on `backend` (the processor or the NPU; see
    /// [`backend_for`] for the default). On the NPU, FastFlowLM (found as
    /// `hearth_backends::npu::discover::Lookup::from_env` says) reads `home`'s registry, logs
    /// under `home.state_dir`, and is started here, so this returns once the model answers.
    pub fn open(
        home: &Home,
        model: &LocalModel,
        backend: BackendKind,
        options: OpenOptions,
    ) -> Result<Self, BackendError> {
        match backend {
            BackendKind::Cpu => Self::open_cpu(model, &options),
            BackendKind::Npu => Self::open_npu(home, model, options),
            BackendKind::Remote => Err(BackendError::Unsupported(format!(
                "\"{}\" is a model on this computer; a remote server's model is opened with Session::connect_remote",
                model.name
            ))),
        }
    }

    fn open_cpu(model: &LocalModel, options: &OpenOptions) -> Result<Self, BackendError> {
        let load = options.cpu_load();
        let cpu = CpuBackend::open(&model.path, &model.name, &load, model.weights_sha256())?;
        if options.require_chat {
            cpu.require_chat()?;
        }
        let engine = cpu.model().info();
        let info = cpu.info();
        let status = ModelStatus {
            name: model.name.clone(),
            path: model.path.clone(),
            family: engine.family.clone(),
            parameter_count: engine.parameter_count,
            context_length: engine.context_length,
            weight_format: engine.weight_format.clone(),
            backend_kind: info.kind,
            backend: info.label.clone(),
            device: info.device.clone(),
            kernel: engine.kernel.clone(),
            builtin: model.builtin,
            sha256: info.model_sha256.clone(),
            sees_pictures: cpu.sees_pictures(),
        };
        Ok(Self {
            backend: Box::new(cpu),
            entry: Some(model.clone()),
            status,
        })
    }

    fn open_npu(
        home: &Home,
        model: &LocalModel,
        options: OpenOptions,
    ) -> Result<Self, BackendError> {
        let npu_options = NpuOptions {
            npu_anyway: options.npu_anyway,
            ..NpuOptions::new(&home.state_dir)
        };
        let mut npu = NpuBackend::open_found(&home.registry(), &model.name, npu_options)?;
        if let Some(events) = options.npu_events {
            npu.set_event_sink(events);
        }
        npu.start()?;
        let info = npu.info();
        let family = std::fs::read(model.path.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|c| c.get("model_type")?.as_str().map(str::to_owned))
            .unwrap_or_default();
        let status = ModelStatus {
            name: model.name.clone(),
            path: model.path.clone(),
            family,
            parameter_count: 0,
            context_length: info.context_length.unwrap_or(0),
            weight_format: "q4nx".into(),
            backend_kind: info.kind,
            backend: info.label.clone(),
            device: info.device.clone(),
            kernel: String::new(),
            builtin: model.builtin,
            sha256: info.model_sha256.clone(),
            sees_pictures: npu.sees_pictures(),
        };
        Ok(Self {
            backend: Box::new(npu),
            entry: Some(model.clone()),
            status,
        })
    }

    /// Opens `model` on the remote server of `config` (checking that the server has it).
    pub fn connect_remote(config: &RemoteConfig, model: &str) -> Result<Self, BackendError> {
        let remote = RemoteBackend::connect(config, model, ClientOptions::default())?;
        let status = ModelStatus {
            sees_pictures: remote.sees_pictures(),
            ..remote_status(remote.info())
        };
        Ok(Self {
            backend: Box::new(remote),
            entry: None,
            status,
        })
    }

    /// Where it runs.
    pub fn kind(&self) -> BackendKind {
        self.status.backend_kind
    }

    /// Whether it can write on at the end of a cut answer (`Backend::continues_answers`).
    pub fn continues_answers(&self) -> bool {
        self.backend.continues_answers()
    }

    /// Whether it reads pictures given with a message (`Backend::sees_pictures`).
    pub fn sees_pictures(&self) -> bool {
        self.backend.sees_pictures()
    }

    /// The longest side, in pixels, its pictures are downscaled to (`Backend::picture_side`).
    pub fn picture_side(&self) -> u32 {
        self.backend.picture_side()
    }

    /// What a front end shows about it.
    pub fn status(&self) -> ModelStatus {
        self.status.clone()
    }
}

/// What is shown about a model on a remote server: what the server tells, the rest empty.
fn remote_status(info: &BackendInfo) -> ModelStatus {
    ModelStatus {
        name: info.model.clone(),
        path: PathBuf::new(),
        family: "remote".into(),
        parameter_count: 0,
        context_length: info.context_length.unwrap_or(0),
        weight_format: String::new(),
        backend_kind: info.kind,
        backend: info.label.clone(),
        device: info.device.clone(),
        kernel: String::new(),
        builtin: None,
        sha256: None,
        sees_pictures: false,
    }
}
