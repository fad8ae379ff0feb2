//! The `npu` backend: models on the NPU through FastFlowLM (`flm`, or the open-kernel fork
//! `oflm`) run as a child process.
//!
//! - [`discover`]: finding the program and its version (at least [`MIN_VERSION`]), its own
//!   `validate --json` check folded into the NPU status, and [`npu_support`] (can it run this
//!   model: an engine for the family, kernels for the name);
//! - [`process`]: one `flm serve` on a free loopback port, started on demand and ready when its
//!   log says so and it answers; its output drained into a private, rotated log; stopped with
//!   SIGTERM then SIGKILL, and never left behind when Hearth dies (`PR_SET_PDEATHSIG`);
//!   its output read in lines of 64 KiB, and `version` and `validate` capped in size and time,
//!   through the npu crate's bounded runner ([`hearth_npu::bounded`], which the doctor shares);
//! - [`marker`]: the mark every process of a server carries, to stop those that left its
//!   process group and those a Hearth killed uncleanly left behind;
//! - [`backend`]: [`NpuBackend`], the [`crate::Backend`] over all that; answers stream through
//!   the OpenAI client of [`crate::remote::openai`], with no connection reuse (FastFlowLM
//!   closes every connection after its response);
//! - [`install`]: which kind of install it is (portable tarball, package with the system's
//!   XRT, package built for the HRX runtime) and what each needs;
//! - [`known_issues`]: models FastFlowLM is known to fail with, by version and issue (they run
//!   on the processor unless a tester asks for the NPU anyway);
//! - [`python_env`]: the Python environment chosen in Settings (the FastFlow SDK's
//!   `<env>/bin/flm`), looked in first;
//! - [`transcribe`]: speech to text with FastFlowLM's Whisper (`--asr 1`,
//!   `/v1/audio/transcriptions`), through [`NpuBackend::transcribe`] (a chat model's server,
//!   restarted with Whisper) or [`backend::transcribe_on_npu`] (whichever FastFlowLM this
//!   process runs, else one started for speech only: `flm serve --asr 1` with no model);
//! - [`whisper`]: the model list that shows FastFlowLM where its Whisper is;
//! - [`prompt_cache`]: clearing FastFlowLM's prompt cache when a conversation does not go on
//!   from what it holds (its checksum misses some edits).
//!
//! FastFlowLM reads Hearth's own registry (`FLM_CONFIG_PATH` = Hearth's `model_list.json`) and
//! model folders (`FLM_MODEL_PATH`): nothing is copied, nothing is written into FastFlowLM's files.

pub mod backend;
pub mod discover;
pub mod install;
pub mod known_issues;
pub mod marker;
pub mod process;
pub mod prompt_cache;
pub mod python_env;
pub mod registry;
pub mod transcribe;
pub mod whisper;

use std::path::PathBuf;

pub use backend::{transcribe_on_npu, NpuBackend, NpuEvent, NpuEventSink, NpuOptions};
pub use discover::{
    find, fold_validate, npu_availability, npu_status, npu_support, npu_support_anyway,
    registry_availabilities, registry_availability, validate, Flavor, FlmProgram, Lookup,
    ValidateReport, MIN_VERSION,
};
pub use process::{own_server, OwnServer};

use hearth_chat::backend::{BackendError, FailureKind};

/// What can go wrong with FastFlowLM, in plain words with what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpuError {
    /// No program was found.
    #[error("FastFlowLM is not installed (looked for {searched}): install it from the ROCm/FastFlowLM releases on GitHub, or set HEARTH_FLM to the path of flm")]
    NotInstalled {
        /// Where it was looked for.
        searched: String,
    },
    /// `HEARTH_FLM` names something that is not an executable file.
    #[error("HEARTH_FLM is {path}, which is not an executable file: correct or unset it")]
    NotExecutable {
        /// The path given.
        path: PathBuf,
    },
    /// The Python environment chosen in Settings has no FastFlowLM.
    #[error("the Python environment {} chosen in Settings holds no FastFlowLM (no executable bin/flm): install it there with `pip install fastflow-sdk`, or clear the setting", .env.display())]
    NoFlmInPythonEnv {
        /// The environment chosen.
        env: PathBuf,
    },
    /// The version could not be read.
    #[error(
        "{path} printed no version for `version --json` (it printed {output:?}): is it FastFlowLM?"
    )]
    VersionUnknown {
        /// The program.
        path: PathBuf,
        /// What it printed (shortened).
        output: String,
    },
    /// The version is below [`MIN_VERSION`].
    #[error("FastFlowLM {found} ({path}) is too old: Hearth needs {needed} or newer; update it from the ROCm/FastFlowLM releases")]
    TooOld {
        /// The program.
        path: PathBuf,
        /// Its version.
        found: String,
        /// The minimum.
        needed: String,
    },
    /// A short command (`version`, `validate`) could not run, printed too much or did not
    /// finish.
    #[error(transparent)]
    Run(#[from] hearth_npu::bounded::RunError),
    /// The NPU is held by another process, so FastFlowLM (1.0.8 and later open it in every
    /// process) would not start, and Hearth did not start a second one beside its own.
    #[error("the NPU is busy: {holders} is using it, so FastFlowLM ({}) cannot be asked now. Close that program or wait until it finishes", .path.display())]
    DeviceBusy {
        /// The program.
        path: PathBuf,
        /// Who holds the NPU, in words ("flm (process 4242)", "another user's program").
        holders: String,
    },
    /// The server could not be started.
    #[error("could not start FastFlowLM ({path}): {detail}")]
    Spawn {
        /// The program.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The server exited before it was ready.
    #[error("FastFlowLM stopped while starting ({status}){}", tail_words(.log_tail))]
    Exited {
        /// Its exit status in words.
        status: String,
        /// Its last log lines.
        log_tail: Vec<String>,
    },
    /// The server started but could not load the model (it keeps running without one).
    #[error("FastFlowLM could not load {model} onto the NPU: {detail}{}", tail_words(.log_tail))]
    LoadFailed {
        /// The model tag.
        model: String,
        /// Its error line.
        detail: String,
        /// Its last log lines.
        log_tail: Vec<String>,
    },
    /// The server was not ready in time.
    #[error("FastFlowLM did not finish loading the model within {secs} s, so Hearth stopped it{}", tail_words(.log_tail))]
    StartTimeout {
        /// The time limit.
        secs: u64,
        /// Its last log lines.
        log_tail: Vec<String>,
    },
    /// FastFlowLM's Whisper (`whisper-v3:turbo`) cannot be handed to it: not downloaded, or
    /// its model list unreadable ([`whisper`]).
    #[error("FastFlowLM's Whisper (whisper-v3:turbo) cannot be used: {detail}. Until then Hearth's own Whisper hears on the processor")]
    WhisperMissing {
        /// What is missing, and what to do.
        detail: String,
    },
    /// A file in Hearth's state folder could not be written.
    #[error("could not write {path}: {detail}")]
    Log {
        /// The log file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
}

fn tail_words(tail: &[String]) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(". Its last lines:\n  {}", tail.join("\n  "))
    }
}

impl From<NpuError> for BackendError {
    fn from(e: NpuError) -> Self {
        let kind = match &e {
            NpuError::StartTimeout { .. } => FailureKind::Timeout,
            NpuError::DeviceBusy { .. } => FailureKind::Busy,
            _ => FailureKind::NotReady,
        };
        BackendError::failed(kind, e.to_string())
    }
}
