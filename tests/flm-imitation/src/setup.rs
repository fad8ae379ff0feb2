//! What the imitation is told to be: which FastFlowLM release it imitates
//! (`FLM_IMITATION_VERSION`) and what goes wrong (`FLM_IMITATION_FAULT`).

/// The release imitated, from `FLM_IMITATION_VERSION` (default 1.0.6). Where 0.9.45 and 1.0.x
/// differ in what a client can see, [`Release::is_1_0`] picks the behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// As `version` prints it, without the `v`: "1.0.6".
    pub version: String,
}

impl Release {
    pub fn from_env() -> Release {
        Release {
            version: std::env::var("FLM_IMITATION_VERSION").unwrap_or_else(|_| "1.0.6".into()),
        }
    }

    /// A 1.0.x release (or newer), as opposed to the 0.9.x line.
    pub fn is_1_0(&self) -> bool {
        self.at_least(1, 0, 0)
    }

    /// This release is `major.minor.patch` or newer.
    pub fn at_least(&self, major: u32, minor: u32, patch: u32) -> bool {
        let mut parts = self
            .version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let mut next = || parts.next().unwrap_or(0);
        (next(), next(), next()) >= (major, minor, patch)
    }
}

/// What goes wrong, chosen by `FLM_IMITATION_FAULT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// `serve` waits `FLM_IMITATION_DELAY_SECS` after binding before it loads (and serves).
    SlowStart,
    /// `serve` exits 1 while loading, as when XRT cannot open the device.
    ExitAtStart,
    /// The model load fails; the server keeps serving with no model (as FastFlowLM does).
    LoadFails,
    /// The model folder is newer than the program: three warnings and exit 0, not serving.
    Incompatible,
    /// The process exits after the third chunk of the first streamed answer.
    CrashMidStream,
    /// Every answer is labelled `llama3.2:1b`, whatever was asked.
    WrongModel,
    /// The request's answer is an HTTP 200 body `{"error": ...}` from the engine.
    EngineError,
    /// The engine fails after the third chunk of a streamed answer (the process lives on).
    ErrorMidStream,
    /// `validate`: no NPU device.
    ValidateNoDevice,
    /// `validate`: firmware older than 1.1.
    ValidateOldFirmware,
    /// `validate`: locked-memory limit too low.
    ValidateMemlock,
    /// `validate`: kernel older than 6.17 (early return, other fields still true).
    ValidateOldKernel,
}

impl Fault {
    pub fn from_env() -> Fault {
        match std::env::var("FLM_IMITATION_FAULT")
            .unwrap_or_default()
            .as_str()
        {
            "slow-start" => Fault::SlowStart,
            "exit-at-start" => Fault::ExitAtStart,
            "load-fails" => Fault::LoadFails,
            "incompatible" => Fault::Incompatible,
            "crash-mid-stream" => Fault::CrashMidStream,
            "wrong-model" => Fault::WrongModel,
            "engine-error" => Fault::EngineError,
            "error-mid-stream" => Fault::ErrorMidStream,
            "validate-no-device" => Fault::ValidateNoDevice,
            "validate-old-firmware" => Fault::ValidateOldFirmware,
            "validate-memlock" => Fault::ValidateMemlock,
            "validate-old-kernel" => Fault::ValidateOldKernel,
            _ => Fault::None,
        }
    }
}
