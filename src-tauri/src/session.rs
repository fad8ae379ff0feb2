//! The loaded model: which one, where it runs, and what the UI shows about it.

use std::path::PathBuf;

use hearth_backends::npu::{NpuBackend, NpuEventSink, NpuOptions};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_backends::CpuBackend;
use hearth_chat::{Backend, BackendKind};
use serde::Serialize;

use crate::paths::LocalModel;

/// What the UI shows about the loaded model.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
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
}

/// A model ready to answer.
pub struct LoadedModel {
    /// The backend running it.
    pub backend: Box<dyn Backend>,
    /// What it is: the local model, or None for a model on a remote server.
    pub entry: Option<LocalModel>,
    /// Answers in a row that FastFlowLM failed (on the NPU; the app moves the model to the
    /// processor after two).
    pub npu_failures: u32,
    status: ModelStatus,
}

impl LoadedModel {
    /// Loads `entry` into Hearth's engine. The weights' sha256 comes from the registry, or the
    /// built-in model's folder; a built-in model without that record (the demo, a few MB) is
    /// hashed here.
    pub fn load(
        entry: &LocalModel,
        threads: Option<usize>,
    ) -> Result<Self, hearth_chat::BackendError> {
        let sha256 = entry.sha256.clone().or_else(|| {
            entry
                .builtin
                .is_some()
                .then(|| hearth_hub::sha256_file(&entry.path.join("model.q4nx")).ok())
                .flatten()
                .map(|record| record.sha256)
        });
        let options = hearth_engine::LoadOptions {
            threads,
            ..Default::default()
        };
        let cpu = CpuBackend::open(&entry.path, &entry.name, &options, sha256)?;
        let engine = cpu.model().info();
        let info = cpu.info();
        let status = ModelStatus {
            name: entry.name.clone(),
            path: entry.path.clone(),
            family: engine.family.clone(),
            parameter_count: engine.parameter_count,
            context_length: engine.context_length,
            weight_format: engine.weight_format.clone(),
            backend_kind: info.kind,
            backend: info.label.clone(),
            device: info.device.clone(),
            kernel: engine.kernel.clone(),
            builtin: entry.builtin,
            sha256: info.model_sha256.clone(),
        };
        Ok(Self {
            backend: Box::new(cpu),
            entry: Some(entry.clone()),
            npu_failures: 0,
            status,
        })
    }

    /// Loads the registered model `entry` onto the NPU through FastFlowLM (found as
    /// `hearth_backends::npu::discover::Lookup::from_env` says) and waits until it answers.
    /// Loading is reported to `events`; FastFlowLM's log goes to `state_dir`. `npu_anyway`
    /// tries a model FastFlowLM is known to fail with.
    pub fn load_npu(
        entry: &LocalModel,
        registry: &std::path::Path,
        state_dir: &std::path::Path,
        events: NpuEventSink,
        npu_anyway: bool,
    ) -> Result<Self, hearth_chat::BackendError> {
        let options = NpuOptions {
            npu_anyway,
            ..NpuOptions::new(state_dir)
        };
        let mut npu = NpuBackend::open_found(registry, &entry.name, options)?;
        npu.set_event_sink(events);
        npu.start()?;
        let info = npu.info();
        let family = std::fs::read(entry.path.join("config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|c| c.get("model_type")?.as_str().map(str::to_owned))
            .unwrap_or_default();
        let status = ModelStatus {
            name: entry.name.clone(),
            path: entry.path.clone(),
            family,
            parameter_count: 0,
            context_length: info.context_length.unwrap_or(0),
            weight_format: "q4nx".into(),
            backend_kind: info.kind,
            backend: info.label.clone(),
            device: info.device.clone(),
            kernel: String::new(),
            builtin: entry.builtin,
            sha256: info.model_sha256.clone(),
        };
        Ok(Self {
            backend: Box::new(npu),
            entry: Some(entry.clone()),
            npu_failures: 0,
            status,
        })
    }

    /// Opens `model` on the remote server of `config` (checking that the server has it).
    pub fn connect_remote(
        config: &RemoteConfig,
        model: &str,
    ) -> Result<Self, hearth_chat::BackendError> {
        let remote = RemoteBackend::connect(config, model, ClientOptions::default())?;
        let status = remote_status(remote.info());
        Ok(Self {
            backend: Box::new(remote),
            entry: None,
            npu_failures: 0,
            status,
        })
    }

    /// Where it runs.
    pub fn kind(&self) -> BackendKind {
        self.status.backend_kind
    }

    /// Status for the UI.
    pub fn status(&self) -> ModelStatus {
        self.status.clone()
    }
}

/// What the UI shows about a model on a remote server: what the server tells, the rest empty.
fn remote_status(info: &hearth_chat::BackendInfo) -> ModelStatus {
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
    }
}
