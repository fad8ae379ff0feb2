//! The NPU: its status and power readings, a model loaded through FastFlowLM with a visible
//! state, the one-time
//! self-test against the processor, and one prompt run on both side by side.
//!
//! The self-test ([`selftest`]), one timed answer ([`timed_answer`]), the NPU's status
//! ([`status`]) and the FastFlowLM found here ([`fastflowlm`]) are plain functions as well, for
//! the front ends that hold no [`App`] (`hearth selftest`, `hearth doctor` and its report).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_backends::npu::NpuEvent;
use hearth_backends::selftest::{self, DEFAULT_MAX_TOKENS, PROMPTS};
use hearth_backends::CpuBackend;
use hearth_chat::{AnswerRequest, Backend, BackendKind, Input, Receipt};
use hearth_chat::{ChatMessage, Role};
use serde::Serialize;

use crate::app::App;
use crate::ask::Question;
use crate::error::{Error, ErrorCode, Result};
use crate::fidelity::{self, SavedSelftest};
use crate::home::Home;
use crate::lock::lock;
use crate::models::{self, LocalModel};
use crate::session::{ModelStatus, OpenOptions, Session};

// The NPU's records front ends receive, and who holds the NPU in words.
pub use hearth_npu::{holder_words, Diagnosis, PowerSample};

// The self-test's comparison, which the app keeps for each model (`fidelity::SavedSelftest`)
// and front ends show prompt by prompt: the app's word for it is the backends' type.
pub use hearth_backends::selftest::FidelityReport;

/// How many tokens each self-test answer has, unless a front end asks for another length.
pub const SELFTEST_MAX_TOKENS: usize = DEFAULT_MAX_TOKENS;

// Loading progress, which front ends name here (its home is `loading`, beside the app state
// that reports it).
pub use crate::loading::{logged_progress, LoadingStage, ModelLoading, Progress, LOADING_EVENT};

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

impl App {
    /// Whether the NPU can run models here and, if not, what to fix (the `hearth doctor`
    /// report, with FastFlowLM's own check folded in).
    pub fn npu_status(&self) -> hearth_npu::Diagnosis {
        hearth_backends::npu::npu_status(&self.home.system_root)
    }

    /// One reading of power and utilization. Reads sysfs only: it never wakes the NPU.
    pub fn power_sample(&self) -> hearth_npu::PowerSample {
        let mut sources = lock(&self.power);
        sources
            .get_or_insert_with(|| hearth_npu::PowerSources::discover(&self.home.system_root))
            .sample(0.0)
    }

    /// Loads the local model `entry` onto the NPU in place of the current model, which keeps
    /// answering if this fails. The first time a model runs on the NPU (or after FastFlowLM
    /// changes), its answers are compared with the processor's and the result kept. With
    /// `npu_anyway`, a model FastFlowLM is known to fail with is tried all the same.
    pub(crate) fn load_npu(
        &self,
        entry: &LocalModel,
        progress: &Progress,
        npu_anyway: bool,
    ) -> Result<ModelStatus> {
        let name = &entry.name;
        if !npu_anyway && !entry.runs_on_npu() {
            let reason = entry.npu_reason().unwrap_or("it is not set up for the NPU");
            return Err(Error::new(
                ErrorCode::Unsupported,
                format!("\"{name}\" cannot run on the NPU on this computer: {reason}. It runs on the processor."),
            ));
        }
        let mut slot = self.claim_model()?;
        let mut loaded = match self.open_npu(entry, progress, npu_anyway) {
            Ok(loaded) => loaded,
            Err(error) => {
                let message = format!(
                    "\"{name}\" could not be loaded onto the NPU: {error} The model you had keeps answering."
                );
                report(progress, name, LoadingStage::Failed, &message);
                return Err(Error::new(ErrorCode::Npu, message));
            }
        };
        if self.needs_selftest(entry, loaded.backend.as_ref()) {
            report(
                progress,
                name,
                LoadingStage::Checking,
                "Checking that the NPU writes what the processor writes (once for this model)...",
            );
            if let Err(error) = self.run_selftest(entry, &mut loaded) {
                // The model still answers; the Models view shows no result, and the next load
                // tries again.
                tracing::warn!("npu self-test of {name} did not run: {error}");
            }
        }
        let status = loaded.status();
        report(
            progress,
            name,
            LoadingStage::Ready,
            format!("{name} is running on the NPU"),
        );
        tracing::info!("loaded model {name} onto the NPU");
        self.install(&mut slot, loaded);
        Ok(status)
    }

    /// Starts FastFlowLM with `entry` on the NPU, reporting each stage to `progress`.
    fn open_npu(
        &self,
        entry: &LocalModel,
        progress: &Progress,
        npu_anyway: bool,
    ) -> std::result::Result<Session, hearth_chat::BackendError> {
        report(
            progress,
            &entry.name,
            LoadingStage::Starting,
            "Starting FastFlowLM...",
        );
        let sink = {
            let progress = Arc::clone(progress);
            let name = entry.name.clone();
            Box::new(move |event: &NpuEvent| {
                report(&progress, &name, stage_of(event), event.words())
            })
        };
        let options = OpenOptions {
            npu_anyway,
            npu_events: Some(sink),
            ..OpenOptions::default()
        };
        Session::open(&self.home, entry, BackendKind::Npu, options)
    }

    /// Whether the model has no self-test result for the FastFlowLM now in use.
    fn needs_selftest(&self, entry: &LocalModel, npu: &dyn Backend) -> bool {
        let runtime = npu.info().runtime_version.clone().unwrap_or_default();
        fidelity::load(&self.home.state_dir, &entry.name, entry.sha256.as_deref())
            .is_none_or(|saved| saved.runtime_version != runtime)
    }

    /// Compares the NPU's greedy answers with the processor's on the fixed prompts and keeps
    /// the result.
    fn run_selftest(
        &self,
        entry: &LocalModel,
        loaded: &mut Session,
    ) -> std::result::Result<(), String> {
        let mut reference = open_cpu(entry, &OpenOptions::default()).map_err(|e| e.message)?;
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
            &self.home.state_dir,
            &entry.name,
            entry.sha256.as_deref(),
            &saved,
        )
    }

    /// Answers `prompt` with the local model `name` greedily on the NPU and then on the
    /// processor (one after the other, so each has the machine and the power meter to itself).
    /// The model in use is used for its side; the other side is opened for the comparison and
    /// closed after.
    pub fn compare_backends(
        &self,
        name: &str,
        prompt: &str,
        progress: Progress,
    ) -> Result<Comparison> {
        crate::turn::validate_text(prompt)?;
        let _busy = self.begin_answer()?;
        let entry = models::local_model(&self.home, name)?;
        let mut guard = lock(&self.model);
        let loaded = guard
            .as_mut()
            .filter(|l| l.entry.as_ref().is_some_and(|e| e.name == entry.name));
        let npu = match loaded {
            Some(l) if l.kind() == BackendKind::Npu => self.run_once(l.backend.as_mut(), prompt),
            _ if !entry.runs_on_npu() => Run::Failed {
                error: format!(
                    "It cannot run on the NPU here: {}.",
                    entry.npu_reason().unwrap_or("no reason given")
                ),
            },
            _ => match self.open_npu(&entry, &progress, false) {
                Ok(mut npu) => self.run_once(npu.backend.as_mut(), prompt),
                Err(error) => Run::Failed {
                    error: error.to_string(),
                },
            },
        };
        let loaded = guard
            .as_mut()
            .filter(|l| l.entry.as_ref().is_some_and(|e| e.name == entry.name));
        let cpu = match loaded {
            Some(l) if l.kind() == BackendKind::Cpu => self.run_once(l.backend.as_mut(), prompt),
            _ => match open_cpu(&entry, &OpenOptions::default()) {
                Ok(mut cpu) => self.run_once(&mut cpu, prompt),
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

    /// One greedy answer to `prompt`, with its receipt (energy read while it runs, by the one
    /// power rule).
    fn run_once(&self, backend: &mut dyn Backend, prompt: &str) -> Run {
        let meter = crate::ask::power_meter(&self.home, backend.info().kind);
        let request = AnswerRequest {
            input: Input::Chat(vec![ChatMessage::new(Role::User, prompt)]),
            options: selftest::greedy_options(COMPARE_MAX_TOKENS),
            stops: Vec::new(),
            power: meter.as_ref().map(|m| m as &dyn hearth_chat::PowerMeter),
            trim_to_fit: false,
        };
        let result = hearth_chat::answer(backend, request, &mut |_| {
            if self.stop_requested() {
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
}

/// The reference side of a self-test or comparison: `entry` in Hearth's engine, with the
/// processor fields of `options` (threads, context length, kernel level).
fn open_cpu(entry: &LocalModel, options: &OpenOptions) -> Result<CpuBackend> {
    CpuBackend::open(
        &entry.path,
        &entry.name,
        &options.cpu_load(),
        entry.sha256.clone(),
    )
    .map_err(|error| {
        Error::new(
            ErrorCode::Model,
            format!(
                "Hearth could not open \"{}\" on the processor: {error}",
                entry.name
            ),
        )
    })
}

/// Whether the NPU of the system under `root` can run models and, if not, what to fix: the
/// NPU's own checks, with FastFlowLM's `validate --json` folded in on the live system (`root`
/// is `/`). [`App::npu_status`] is this for the app's system.
pub fn status(root: &Path) -> Diagnosis {
    hearth_backends::npu::npu_status(root)
}

/// Compares `candidate`'s greedy answers with Hearth's engine's on the self-test's fixed
/// prompts, at most `max_tokens` tokens each. The engine is the reference: it opens `entry`
/// with the processor fields of `reference` (threads, context length, kernel level), and a
/// model that cannot chat (no tokenizer or chat template) is refused, since the prompts are
/// chat messages.
pub fn selftest(
    entry: &LocalModel,
    reference: &OpenOptions,
    candidate: &mut Session,
    max_tokens: usize,
) -> Result<FidelityReport> {
    let mut cpu = open_cpu(entry, reference)?;
    cpu.require_chat()?;
    Ok(selftest::run(
        candidate.backend.as_mut(),
        &mut cpu,
        PROMPTS,
        max_tokens,
    ))
}

/// One greedy answer of at most `max_tokens` tokens to the self-test's first prompt on
/// `session`, its power read by the rule every turn follows ([`crate::ask`]): how a tester's
/// report times a backend.
pub fn timed_answer(home: &Home, session: &mut Session, max_tokens: usize) -> Run {
    let question = Question {
        input: Input::Chat(vec![ChatMessage::new(Role::User, PROMPTS[0])]),
        options: selftest::greedy_options(max_tokens),
        stops: Vec::new(),
        trim_to_fit: false,
    };
    match crate::ask::stream(home, session, question, &mut |_| ControlFlow::Continue(())) {
        Ok(answer) => Run::Answered {
            text: answer.text,
            receipt: Box::new(answer.receipt),
        },
        Err(error) => Run::Failed {
            error: error.to_string(),
        },
    }
}

/// The FastFlowLM program found on this computer, as a tester's report describes it.
#[derive(Debug)]
pub struct FastFlowLm {
    /// Which program and version, e.g. "FastFlowLM 1.0.6".
    pub program: String,
    /// The executable.
    pub path: PathBuf,
    /// Its version, e.g. "1.0.6".
    pub version: String,
    /// How it is installed: "package (system XRT)", "FastFlow SDK (Python environment)"...
    pub install: &'static str,
    /// The NPU runtime its binary links, "HRX" or "XRT", when it names one.
    pub runtime: Option<&'static str>,
    /// What its own `validate --json` says (FastFlowLM's record, serializable as it is), or
    /// why it could not run.
    pub validate: std::result::Result<hearth_backends::npu::ValidateReport, String>,
}

/// The FastFlowLM this process would start (found as [`Session::open`] finds it) and what its
/// own check says, or why none could be used.
pub fn fastflowlm() -> std::result::Result<FastFlowLm, String> {
    use hearth_backends::npu::{find, validate, Lookup};
    let program = find(&Lookup::from_env()).map_err(|e| e.to_string())?;
    Ok(FastFlowLm {
        program: program.label(),
        validate: validate(&program).map_err(|e| e.to_string()),
        install: program.layout.words(),
        runtime: program.runtime.map(|r| r.label()),
        path: program.path,
        version: program.version,
    })
}

/// One side of a comparison: the answer and its receipt, or why it failed.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "BackendRun"))]
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
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "BackendComparison"))]
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
