//! Speech on the NPU through the one FastFlowLM this process runs.
//!
//! Contract: [`NpuBackend::transcribe`] hears through a backend's own server, started, or
//! restarted, with `--asr 1` (a chat model's server keeps its model and context length);
//! [`NpuBackend::open_speech`] is a backend with no chat model, whose server is `flm serve
//! --asr 1` with no tag (FastFlowLM's `model-faker`: nothing but Whisper is loaded);
//! [`transcribe_on_npu`] is what a front end calls: the FastFlowLM this process already runs
//! (a chat model's, restarted with Whisper when it has none, or an earlier speech-only one)
//! hears it, else the speech-only backend starts one, so there is never a second `flm` beside
//! Hearth's own in this process. FastFlowLM is handed a model list that shows it its Whisper
//! ([`crate::npu::whisper`]); a Whisper not downloaded is a failure in words, never a download.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hearth_chat::backend::{BackendError, BackendInfo, BackendKind, FailureKind};

use super::{NpuBackend, NpuEvent, NpuOptions, Shared, MIN_CTX_LEN, NPU_OWNER};
use crate::npu::discover::FlmProgram;
use crate::npu::process::FlmServer;
use crate::npu::prompt_cache::CacheState;
use crate::npu::transcribe::{self, TranscribeError, ASR_MODEL};

impl NpuBackend {
    /// A backend for speech only: FastFlowLM started with `--asr 1` and no chat model, reading
    /// Hearth's registry `registry` (with FastFlowLM's own Whisper entry added). Nothing
    /// starts yet; it cannot answer a conversation.
    pub fn open_speech(program: FlmProgram, registry: &Path, options: NpuOptions) -> NpuBackend {
        let info = BackendInfo {
            kind: BackendKind::Npu,
            label: format!("npu ({})", program.label()),
            device: "AMD XDNA 2 NPU".into(),
            model: ASR_MODEL.into(),
            context_length: None,
            model_sha256: None,
            runtime_version: Some(program.version.clone()),
        };
        let models_root = registry
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let options = NpuOptions {
            asr: true,
            ..options
        };
        NpuBackend::assemble(info, program, registry, models_root, options)
    }

    /// Transcribes `samples` (16 kHz mono) with FastFlowLM's Whisper, on the one FastFlowLM
    /// this backend runs: started, or restarted, with `--asr 1` when it runs without
    /// (keeping its context length), then asked `POST /v1/audio/transcriptions`, waiting at
    /// most `timeout`. The NPU answers one request at a time, as for chat.
    pub fn transcribe(
        &mut self,
        samples: &[f32],
        timeout: Duration,
    ) -> Result<String, BackendError> {
        // Refuse bad audio before anything starts.
        transcribe::check_samples(samples)
            .map_err(|e| BackendError::failed(FailureKind::NotReady, e.to_string()))?;
        self.options.asr = true;
        let ctx_len = self
            .shared
            .lock()
            .server
            .as_ref()
            .map_or(MIN_CTX_LEN, FlmServer::ctx_len);
        self.ensure_server(ctx_len)?;
        hear_on(&self.shared, samples, timeout)
    }

    /// Whether FastFlowLM runs for this backend now (started and not stopped).
    pub fn is_serving(&self) -> bool {
        self.shared.lock().server.is_some()
    }
}

/// Transcribes `samples` on the NPU without a second FastFlowLM in this process: the one a
/// chat model's backend runs hears it (restarted with `--asr 1`, keeping its model, when it was
/// started without), else `speech_only` ([`NpuBackend::open_speech`]) starts or reuses its own.
/// A chat backend answering right now makes this a [`FailureKind::Busy`] failure.
pub fn transcribe_on_npu(
    speech_only: &mut NpuBackend,
    samples: &[f32],
    timeout: Duration,
) -> Result<String, BackendError> {
    transcribe::check_samples(samples)
        .map_err(|e| BackendError::failed(FailureKind::NotReady, e.to_string()))?;
    let other = NPU_OWNER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(Weak::upgrade)
        .filter(|o| !Arc::ptr_eq(o, &speech_only.shared));
    if let Some(other) = other {
        if with_whisper(&other, speech_only.options.flm_models_dir.as_deref())? {
            return hear_on(&other, samples, timeout);
        }
    }
    speech_only.transcribe(samples, timeout)
}

/// Makes the running server of `owner` one with Whisper (restarting it with `--asr 1` and the
/// same model and context length when needed); false when it runs no server.
fn with_whisper(owner: &Shared, flm_models_dir: Option<&Path>) -> Result<bool, BackendError> {
    let mut slot = owner.lock();
    let alive = match slot.server.as_mut() {
        Some(server) => server.exit_status().is_none(),
        None => false,
    };
    let Some(config) = slot.config.clone().filter(|_| alive) else {
        return Ok(false);
    };
    if slot.busy {
        return Err(BackendError::Failed {
            kind: FailureKind::Busy,
            message: "the NPU is answering a conversation: the processor hears this one".into(),
            retry_after_secs: Some(1),
        });
    }
    if config.asr {
        return Ok(true);
    }
    let mut config = config;
    config.asr = true;
    config.registry = crate::npu::whisper::registry_for_asr(
        &config.program,
        &config.registry,
        &config.state_dir,
        flm_models_dir,
    )?;
    if let Some(old) = slot.server.take() {
        old.stop();
    }
    owner.emit(NpuEvent::Restarting {
        reason: "speech needs FastFlowLM's Whisper, which loads with --asr 1".into(),
    });
    let server = FlmServer::start(&config)?;
    slot.server = Some(server);
    slot.config = Some(config);
    slot.cache = CacheState::Fresh;
    slot.last_used = Instant::now();
    Ok(true)
}

/// Sends `samples` to the server of `shared` (marked busy meanwhile).
fn hear_on(shared: &Shared, samples: &[f32], timeout: Duration) -> Result<String, BackendError> {
    let port = {
        let mut slot = shared.lock();
        slot.busy = true;
        slot.server.as_ref().map(FlmServer::port)
    };
    let result = match port {
        Some(port) => transcribe::transcribe_on(port, samples, timeout),
        None => Err(TranscribeError::ServerGone {
            port: 0,
            detail: "FastFlowLM was stopped".into(),
        }),
    };
    {
        let mut slot = shared.lock();
        slot.busy = false;
        slot.last_used = Instant::now();
    }
    shared.wake.notify_all();
    result.map_err(|e| {
        let kind = match e {
            TranscribeError::Timeout { .. } => FailureKind::Timeout,
            TranscribeError::ServerGone { .. } => FailureKind::Cut,
            TranscribeError::BadAnswer { .. } => FailureKind::BadReply,
            _ => FailureKind::NotReady,
        };
        BackendError::failed(kind, e.to_string())
    })
}
