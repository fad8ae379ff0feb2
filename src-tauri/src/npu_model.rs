//! A model on the NPU: loading it through FastFlowLM with a visible state, the one-time
//! self-test against the processor, and one prompt run on both side by side.

use std::ops::ControlFlow;
use std::sync::Arc;

use hearth_backends::npu::NpuEvent;
use hearth_backends::selftest::{self, DEFAULT_MAX_TOKENS, PROMPTS};
use hearth_backends::CpuBackend;
use hearth_chat::{AnswerRequest, Backend, BackendKind, Input, Receipt};
use hearth_engine::{ChatMessage, LoadOptions, Role};
use serde::Serialize;

use crate::error::{CommandError, CommandResult};
use crate::fidelity::{self, SavedSelftest};
use crate::paths::LocalModel;
use crate::session::{LoadedModel, ModelStatus};
use crate::state::{lock, AppState};

/// The Tauri event that carries [`ModelLoading`].
pub const LOADING_EVENT: &str = "model-loading";

/// Where loading a model onto the NPU has got to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[derive(ts_rs::TS)]
pub enum LoadingStage {
    /// FastFlowLM is being found and checked.
    Starting,
    /// The model is being loaded onto the NPU (also after a restart).
    Loading,
    /// The NPU's answers are being compared with the processor's (once per model).
    Checking,
    /// The model answers on the NPU.
    Ready,
    /// Loading failed; the message says why.
    Failed,
    /// FastFlowLM was stopped (idle, or replaced); it starts again with the next answer.
    Stopped,
}

/// What the UI shows while a model loads onto the NPU.
#[derive(Debug, Clone, PartialEq, Serialize, ts_rs::TS)]
pub struct ModelLoading {
    /// The model's name.
    pub model: String,
    /// Where it is being loaded.
    pub backend: BackendKind,
    /// How far it got.
    pub stage: LoadingStage,
    /// In plain words.
    pub message: String,
}

/// Receives loading progress (the command sends it to the UI as [`LOADING_EVENT`]).
pub type Progress = Arc<dyn Fn(ModelLoading) + Send + Sync>;

fn report(progress: &Progress, model: &str, stage: LoadingStage, message: impl Into<String>) {
    progress(ModelLoading {
        model: model.to_owned(),
        backend: BackendKind::Npu,
        stage,
        message: message.into(),
    });
}

/// FastFlowLM's events as loading stages.
fn stage_of(event: &NpuEvent) -> LoadingStage {
    match event {
        NpuEvent::Loading { .. } | NpuEvent::Restarting { .. } => LoadingStage::Loading,
        NpuEvent::Ready { .. } => LoadingStage::Ready,
        NpuEvent::Stopped { .. } => LoadingStage::Stopped,
    }
}

/// Loads the local model `name` onto the NPU in place of the current model, which keeps
/// answering if this fails. The first time a model runs on the NPU (or after FastFlowLM
/// changes), its answers are compared with the processor's and the result kept. With
/// `npu_anyway`, a model FastFlowLM is known to fail with is tried all the same.
pub fn load(
    state: &AppState,
    name: &str,
    progress: Progress,
    npu_anyway: bool,
) -> CommandResult<ModelStatus> {
    let entry = crate::answer::local_model(state, name)?;
    if !npu_anyway && !entry.runs_on_npu() {
        let reason = entry.npu_reason().unwrap_or("it is not set up for the NPU");
        return Err(CommandError::new(
            "unsupported",
            format!("\"{name}\" cannot run on the NPU on this computer: {reason}. It runs on the processor."),
        ));
    }
    let mut slot = crate::answer::claim_model(state)?;
    let mut loaded = match open_npu(state, &entry, &progress, npu_anyway) {
        Ok(loaded) => loaded,
        Err(error) => {
            let message = format!(
                "\"{name}\" could not be loaded onto the NPU: {error} The model you had keeps answering."
            );
            report(&progress, name, LoadingStage::Failed, &message);
            return Err(CommandError::new("npu", message));
        }
    };
    if needs_selftest(state, &entry, loaded.backend.as_ref()) {
        report(
            &progress,
            name,
            LoadingStage::Checking,
            "Checking that the NPU writes what the processor writes (once for this model)...",
        );
        if let Err(error) = run_selftest(state, &entry, &mut loaded) {
            // The model still answers; the Models view shows no result, and the next load
            // tries again.
            tracing::warn!("npu self-test of {name} did not run: {error}");
        }
    }
    let status = loaded.status();
    report(
        &progress,
        name,
        LoadingStage::Ready,
        format!("{name} is running on the NPU"),
    );
    tracing::info!("loaded model {name} onto the NPU");
    *slot = Some(loaded);
    *lock(&state.model_error) = None;
    Ok(status)
}

/// Starts FastFlowLM with `entry` on the NPU, reporting each stage to `progress`.
fn open_npu(
    state: &AppState,
    entry: &LocalModel,
    progress: &Progress,
    npu_anyway: bool,
) -> Result<LoadedModel, hearth_chat::BackendError> {
    report(
        progress,
        &entry.name,
        LoadingStage::Starting,
        "Starting FastFlowLM...",
    );
    let sink = {
        let progress = Arc::clone(progress);
        let name = entry.name.clone();
        Box::new(move |event: &NpuEvent| report(&progress, &name, stage_of(event), event.words()))
    };
    let registry = state.paths.store().registry_path();
    LoadedModel::load_npu(entry, &registry, &state.paths.state_dir, sink, npu_anyway)
}

/// Whether the model has no self-test result for the FastFlowLM now in use.
fn needs_selftest(state: &AppState, entry: &LocalModel, npu: &dyn Backend) -> bool {
    let runtime = npu.info().runtime_version.clone().unwrap_or_default();
    fidelity::load(&state.paths.state_dir, &entry.name, entry.sha256.as_deref())
        .is_none_or(|saved| saved.runtime_version != runtime)
}

/// Compares the NPU's greedy answers with the processor's on the fixed prompts and keeps the
/// result.
fn run_selftest(
    state: &AppState,
    entry: &LocalModel,
    loaded: &mut LoadedModel,
) -> Result<(), String> {
    let mut reference = open_cpu(entry).map_err(|e| e.message)?;
    let runtime_version = loaded
        .backend
        .info()
        .runtime_version
        .clone()
        .unwrap_or_default();
    let report = selftest::run(
        loaded.backend.as_mut(),
        &mut reference,
        PROMPTS,
        DEFAULT_MAX_TOKENS,
    );
    let saved = SavedSelftest {
        runtime_version,
        report,
    };
    tracing::info!(
        "npu self-test of {}: {}",
        entry.name,
        saved.summary().summary
    );
    fidelity::save(
        &state.paths.state_dir,
        &entry.name,
        entry.sha256.as_deref(),
        &saved,
    )
}

fn open_cpu(entry: &LocalModel) -> CommandResult<CpuBackend> {
    CpuBackend::open(
        &entry.path,
        &entry.name,
        &LoadOptions::default(),
        entry.sha256.clone(),
    )
    .map_err(|error| {
        CommandError::new(
            "model",
            format!(
                "Hearth could not open \"{}\" on the processor: {error}",
                entry.name
            ),
        )
    })
}

/// One side of a comparison: the answer and its receipt, or why it failed.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[derive(ts_rs::TS)]
#[ts(rename = "BackendRun")]
pub enum Run {
    /// It answered.
    Answered {
        /// The answer.
        text: String,
        /// Speed, time to first token, energy, where it ran.
        receipt: Box<Receipt>,
    },
    /// It failed.
    Failed {
        /// What happened, in plain words.
        error: String,
    },
}

/// One prompt on the NPU and on the processor.
#[derive(Debug, Clone, Serialize, ts_rs::TS)]
#[ts(rename = "BackendComparison")]
pub struct Comparison {
    /// The answer on the NPU.
    pub npu: Run,
    /// The answer on the processor.
    pub cpu: Run,
    /// Whether both answered with the same text.
    pub texts_agree: bool,
}

/// Longest answer of a comparison, in tokens.
pub const COMPARE_MAX_TOKENS: usize = 128;

/// Answers `prompt` with the local model `name` greedily on the NPU and then on the processor
/// (one after the other, so each has the machine and the power meter to itself). The loaded
/// model is used for its side; the other side is opened for the comparison and closed after.
pub fn compare(
    state: &AppState,
    name: &str,
    prompt: &str,
    progress: Progress,
) -> CommandResult<Comparison> {
    crate::answer::validate_text(prompt)?;
    let _busy = crate::answer::begin(state)?;
    let entry = crate::answer::local_model(state, name)?;
    let mut guard = lock(&state.model);
    let loaded = guard
        .as_mut()
        .filter(|l| l.entry.as_ref().is_some_and(|e| e.name == entry.name));
    let npu = match loaded {
        Some(l) if l.kind() == BackendKind::Npu => run_once(state, l.backend.as_mut(), prompt),
        _ if !entry.runs_on_npu() => Run::Failed {
            error: format!(
                "It cannot run on the NPU here: {}.",
                entry.npu_reason().unwrap_or("no reason given")
            ),
        },
        _ => match open_npu(state, &entry, &progress, false) {
            Ok(mut npu) => run_once(state, npu.backend.as_mut(), prompt),
            Err(error) => Run::Failed {
                error: error.to_string(),
            },
        },
    };
    let loaded = guard
        .as_mut()
        .filter(|l| l.entry.as_ref().is_some_and(|e| e.name == entry.name));
    let cpu = match loaded {
        Some(l) if l.kind() == BackendKind::Cpu => run_once(state, l.backend.as_mut(), prompt),
        _ => match open_cpu(&entry) {
            Ok(mut cpu) => run_once(state, &mut cpu, prompt),
            Err(error) => Run::Failed {
                error: error.message,
            },
        },
    };
    let texts_agree = matches!(
        (&npu, &cpu),
        (Run::Answered { text: a, .. }, Run::Answered { text: b, .. }) if a == b
    );
    Ok(Comparison {
        npu,
        cpu,
        texts_agree,
    })
}

/// One greedy answer to `prompt`, with its receipt (energy read while it runs).
fn run_once(state: &AppState, backend: &mut dyn Backend, prompt: &str) -> Run {
    let sensors = hearth_backends::Sensors::new(&state.paths.system_root);
    let request = AnswerRequest {
        input: Input::Chat(vec![ChatMessage::new(Role::User, prompt)]),
        options: selftest::greedy_options(COMPARE_MAX_TOKENS),
        stops: Vec::new(),
        power: Some(&sensors),
        trim_to_fit: false,
    };
    let cancel = &state.cancel;
    let result = hearth_chat::answer(backend, request, &mut |_| {
        if cancel.load(std::sync::atomic::Ordering::Acquire) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    match result {
        Ok(answer) => Run::Answered {
            text: answer.text,
            receipt: Box::new(answer.receipt),
        },
        Err(error) => Run::Failed {
            error: error.to_string(),
        },
    }
}
