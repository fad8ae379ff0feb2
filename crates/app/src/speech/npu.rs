//! Which engine hears a recording, by chat's rule: FastFlowLM's Whisper on the NPU when a
//! usable NPU with FastFlowLM is there (the diagnosis [`crate::session::best_backend`] reads),
//! else Hearth's own Whisper on the processor; a failure on the NPU falls back to the
//! processor, as an answer does (`turn.rs`, `npu_failure`), and the result says who heard it.
//!
//! Contract: [`speech_backend`] is the choice; [`transcribe_choosing`] runs it, given the NPU's
//! transcription and the processor's. [`hear`] is the door the CLI's `hearth transcribe` and
//! the server's `/v1/audio/transcriptions` go through: it takes decoded audio and a
//! [`SpeechBackend`] (`auto`, `npu`, `cpu`), and on the NPU hears through
//! [`hearth_backends::npu::transcribe_on_npu`]: the FastFlowLM this process already runs for a
//! chat model (restarted with Whisper), else one started for speech only, never a second one
//! (`auto` falls back to the processor on an NPU failure, `npu` does not). The Python
//! environment chosen in the desktop's Settings › NPU is read by the command line through
//! [`use_desktop_flm_env`].

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use hearth_backends::npu::{self as flm, NpuBackend, NpuOptions};
use hearth_speech::{Audio, Segment, Transcript};

use crate::home::Home;
use hearth_chat::BackendError;

use crate::error::Result;

/// Who heard a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// FastFlowLM's Whisper on the NPU.
    Npu,
    /// Hearth's own Whisper on the processor.
    Cpu,
}

impl Heard {
    /// "npu" or "cpu", as receipts and `--json` say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Heard::Npu => "npu",
            Heard::Cpu => "cpu",
        }
    }
}

/// What a recording said, who heard it, and why the NPU was left when it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct HeardText<T = String> {
    /// The transcript (its text, or the whole of it).
    pub text: T,
    /// Who heard it.
    pub heard: Heard,
    /// The NPU's failure, in words, when the processor heard it after the NPU failed.
    pub npu_failure: Option<String>,
}

/// Chat's rule for speech on this machine's NPU diagnosis: the NPU when it is ready and
/// FastFlowLM was found, else the processor.
pub fn speech_backend_for(npu: &hearth_npu::Diagnosis) -> Heard {
    speech_backend(npu.ready, npu.fastflowlm.executable.is_some())
}

/// Chat's rule for speech: the NPU when it is `ready` (`Diagnosis::ready`, what
/// `best_backend` reads) and FastFlowLM was found, else the processor.
pub fn speech_backend(ready: bool, flm_found: bool) -> Heard {
    if ready && flm_found {
        Heard::Npu
    } else {
        Heard::Cpu
    }
}

/// Transcribes with `npu` when given (the rule chose the NPU), falling back to `cpu` when the
/// NPU fails the way chat falls back from it (a [`BackendError::Failed`]: FastFlowLM gone,
/// Whisper not loaded, out of time); other NPU errors are returned. Without `npu`, the
/// processor hears it. Both give a `T` (the text, or a transcript with its model's name).
pub fn transcribe_choosing<T>(
    npu: Option<&mut dyn FnMut() -> std::result::Result<T, BackendError>>,
    cpu: impl FnOnce() -> Result<T>,
) -> Result<HeardText<T>> {
    let npu_failure = match npu {
        None => None,
        Some(npu) => match npu() {
            Ok(text) => {
                return Ok(HeardText {
                    text,
                    heard: Heard::Npu,
                    npu_failure: None,
                })
            }
            Err(error @ BackendError::Failed { .. }) => {
                tracing::warn!(%error, "speech: the NPU failed; the processor hears it");
                Some(error.to_string())
            }
            Err(error) => return Err(crate::error::Error::from(error)),
        },
    };
    Ok(HeardText {
        text: cpu()?,
        heard: Heard::Cpu,
        npu_failure,
    })
}

/// Which engine a caller asks to hear with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeechBackend {
    /// The NPU when it is usable here, else the processor; the processor also when the NPU
    /// fails.
    #[default]
    Auto,
    /// FastFlowLM's Whisper on the NPU, or an error.
    Npu,
    /// Hearth's own Whisper on the processor.
    Cpu,
}

impl std::str::FromStr for SpeechBackend {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(SpeechBackend::Auto),
            "npu" => Ok(SpeechBackend::Npu),
            "cpu" => Ok(SpeechBackend::Cpu),
            other => Err(crate::error::Error::new(
                crate::error::ErrorCode::InvalidInput,
                format!("\"{other}\" is not a speech backend: use auto, npu or cpu"),
            )),
        }
    }
}

/// A transcript, who heard it, and why the NPU was left when it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct HeardTranscript {
    /// What was said (from the NPU: one segment over the whole audio, the language as asked
    /// or empty, since FastFlowLM answers only the text).
    pub transcript: Transcript,
    /// Its model's name ("whisper-v3:turbo" on the NPU).
    pub model: String,
    /// Who heard it.
    pub heard: Heard,
    /// The NPU's failure, in words, when the processor heard it after the NPU failed.
    pub npu_failure: Option<String>,
}

/// FastFlowLM's Whisper, the model the NPU hears with.
pub const NPU_ASR_MODEL: &str = flm::transcribe::ASR_MODEL;

/// Hears with the processor only, through `cpu` (a front end that does not use the NPU).
pub fn hear_on_cpu(cpu: impl FnOnce() -> Result<(Transcript, String)>) -> Result<HeardTranscript> {
    let (transcript, model) = cpu()?;
    Ok(HeardTranscript {
        transcript,
        model,
        heard: Heard::Cpu,
        npu_failure: None,
    })
}

/// The speech-only FastFlowLM backend of this process, opened at the first NPU transcription.
static SPEECH_ONLY: Mutex<Option<NpuBackend>> = Mutex::new(None);

/// Whether the NPU hears by chat's rule on this machine: ready (the diagnosis under
/// `home.system_root`) and a FastFlowLM found where this process looks
/// ([`flm::python_env::lookup`]: `HEARTH_FLM`, the chosen Python environment, the system).
pub fn npu_hears_here(home: &Home) -> bool {
    let diagnosis = hearth_npu::diagnose(&home.system_root);
    let found = diagnosis.fastflowlm.executable.is_some()
        || hearth_npu::software::locate_flm(&flm::python_env::lookup()).is_ok();
    speech_backend(diagnosis.ready, found) == Heard::Npu
}

/// How long FastFlowLM may take for `seconds` of audio: a minute, plus the audio's length.
fn npu_timeout(seconds: f64) -> Duration {
    Duration::from_secs(60 + seconds.ceil().max(0.0) as u64)
}

/// Transcribes 16 kHz `samples` with FastFlowLM's Whisper, never starting a second FastFlowLM
/// beside the one this process runs.
pub fn transcribe_on_npu(
    home: &Home,
    samples: &[f32],
) -> std::result::Result<String, BackendError> {
    let mut slot = SPEECH_ONLY.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        let program = flm::find(&flm::python_env::lookup())?;
        let options = NpuOptions::new(&home.state_dir);
        *slot = Some(NpuBackend::open_speech(program, &home.registry(), options));
    }
    let backend = slot.as_mut().expect("opened above");
    let seconds = samples.len() as f64 / f64::from(flm::transcribe::SAMPLE_RATE);
    flm::transcribe_on_npu(backend, samples, npu_timeout(seconds))
}

/// Stops the speech-only FastFlowLM this process started, if any (a command that is done).
pub fn stop_npu_speech() {
    let backend = SPEECH_ONLY.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(backend);
}

/// Hears `audio` with the engine `choice` names (`language`: what the caller asked, kept on
/// an NPU transcript), the processor through `cpu` (which loads Hearth's Whisper only when it
/// is needed, and returns the transcript and its model's name).
pub fn hear(
    home: &Home,
    choice: SpeechBackend,
    audio: &Audio,
    language: Option<&str>,
    cpu: impl FnOnce() -> Result<(Transcript, String)>,
) -> Result<HeardTranscript> {
    let on_npu = match choice {
        SpeechBackend::Cpu => false,
        SpeechBackend::Npu => true,
        SpeechBackend::Auto => npu_hears_here(home),
    };
    let duration_s = audio.samples.len() as f32 / flm::transcribe::SAMPLE_RATE as f32;
    let npu_transcript = |text: String| {
        let transcript = Transcript {
            language: language.unwrap_or_default().to_owned(),
            segments: vec![Segment {
                start_s: 0.0,
                end_s: duration_s,
                text: text.clone(),
            }],
            text,
            duration_s,
        };
        (transcript, flm::transcribe::ASR_MODEL.to_owned())
    };
    let mut npu = || transcribe_on_npu(home, &audio.samples).map(npu_transcript);
    if choice == SpeechBackend::Npu {
        let (transcript, model) = npu().map_err(crate::error::Error::from)?;
        return Ok(HeardTranscript {
            transcript,
            model,
            heard: Heard::Npu,
            npu_failure: None,
        });
    }
    let heard = transcribe_choosing(on_npu.then_some(&mut npu as &mut dyn FnMut() -> _), cpu)?;
    let (transcript, model) = heard.text;
    Ok(HeardTranscript {
        transcript,
        model,
        heard: heard.heard,
        npu_failure: heard.npu_failure,
    })
}

/// The desktop app's settings file (tauri-plugin-store's, in the app's data folder:
/// `$XDG_DATA_HOME/ai.hearth.desktop/settings.json`), beside Hearth's data folder.
pub fn desktop_settings_file(home: &Home) -> Option<PathBuf> {
    Some(
        home.data_dir
            .parent()?
            .join("ai.hearth.desktop")
            .join("settings.json"),
    )
}

/// The Python environment chosen in the desktop's Settings › NPU, read from `file` (absent,
/// unreadable, malformed or over 1 MB: none).
pub fn stored_flm_env(file: &Path) -> Option<PathBuf> {
    let len = std::fs::metadata(file).ok()?.len();
    if len > 1024 * 1024 {
        tracing::warn!(file = %file.display(), "settings: the file is too large to be settings");
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(file).ok()?).ok()?;
    crate::settings::Settings::from_stored(value.get("settings").cloned()).flm_python_env
}

/// Where FastFlowLM is looked for first by this process: `explicit` (`--flm-env DIR`), else the
/// desktop's choice; returns the one now in use.
pub fn use_desktop_flm_env(home: &Home, explicit: Option<PathBuf>) -> Option<PathBuf> {
    let chosen = explicit.or_else(|| desktop_settings_file(home).and_then(|f| stored_flm_env(&f)));
    flm::python_env::set_python_env(chosen.clone());
    chosen
}

/// Where this process finds FastFlowLM (the lookup of [`flm::python_env::lookup`]) and in
/// words which place that is: the Python environment chosen (`chosen`, from Settings or
/// `--flm-env`), `HEARTH_FLM`, the system path, the standard install, a Python environment,
/// a portable install, the fork `oflm`; or why none was found.
pub fn flm_found(chosen: Option<&Path>) -> (Option<PathBuf>, String) {
    use hearth_npu::software::{locate_flm, FlmSource};
    match locate_flm(&flm::python_env::lookup()) {
        Ok(found) => {
            let place = match found.source {
                FlmSource::HearthFlm
                    if chosen.is_some_and(|env| flm::python_env::flm_in(env) == found.path) =>
                {
                    "the Python environment chosen in Settings (FastFlow SDK)".to_owned()
                }
                FlmSource::HearthFlm => "HEARTH_FLM".to_owned(),
                FlmSource::FlmOnPath => "the system path (PATH)".to_owned(),
                FlmSource::Standard => "the standard install".to_owned(),
                FlmSource::PythonEnv => "a Python environment (FastFlow SDK)".to_owned(),
                FlmSource::UserInstall => "a portable install in your home folder".to_owned(),
                FlmSource::OflmOnPath => "the open-kernel fork oflm on PATH".to_owned(),
            };
            (Some(found.path), place)
        }
        Err(hearth_npu::software::FlmNotFound::NotExecutable { .. }) if chosen.is_some() => (
            None,
            format!(
                "the Python environment {} holds no FastFlowLM (no executable bin/flm): install it there with `pip install fastflow-sdk`, or choose another folder",
                chosen.map(Path::display).expect("checked")
            ),
        ),
        Err(e) => (None, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_chat::FailureKind;

    #[test]
    fn the_npu_hears_when_ready_and_a_failure_falls_back_to_the_cpu() {
        assert_eq!(speech_backend(true, true), Heard::Npu);
        assert_eq!(speech_backend(true, false), Heard::Cpu);
        assert_eq!(speech_backend(false, true), Heard::Cpu);

        let mut on_npu = || Ok::<_, BackendError>("from the npu".to_string());
        let heard = transcribe_choosing(Some(&mut on_npu), || panic!("not asked")).unwrap();
        assert_eq!(
            (heard.heard.as_str(), heard.text.as_str()),
            ("npu", "from the npu")
        );

        let mut gone = || {
            Err(BackendError::failed(
                FailureKind::Cut,
                "FastFlowLM is not answering on port 1",
            ))
        };
        let heard =
            transcribe_choosing(Some(&mut gone), || Ok("from the cpu".to_string())).unwrap();
        assert_eq!(heard.heard, Heard::Cpu);
        assert_eq!(heard.text, "from the cpu");
        assert!(heard.npu_failure.unwrap().contains("not answering"));

        let heard = transcribe_choosing(None, || Ok("cpu only".to_string())).unwrap();
        assert_eq!((heard.heard, heard.npu_failure), (Heard::Cpu, None));
    }

    #[test]
    fn the_desktop_choice_is_read_and_a_broken_file_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("settings.json");
        assert_eq!(stored_flm_env(&file), None);
        std::fs::write(&file, r#"{"settings": {"flm_python_env": "/opt/venv"}}"#).unwrap();
        assert_eq!(stored_flm_env(&file), Some(PathBuf::from("/opt/venv")));
        // A relative folder is not kept (Settings::clamped); garbage and a cut file are none.
        std::fs::write(&file, r#"{"settings": {"flm_python_env": "venv"}}"#).unwrap();
        assert_eq!(stored_flm_env(&file), None);
        std::fs::write(&file, r#"{"settings": {"flm_py"#).unwrap();
        assert_eq!(stored_flm_env(&file), None);
        std::fs::write(&file, [0xffu8, 0, 1]).unwrap();
        assert_eq!(stored_flm_env(&file), None);
    }

    #[test]
    fn speech_backends_are_named_auto_npu_cpu() {
        assert_eq!("NPU".parse::<SpeechBackend>().unwrap(), SpeechBackend::Npu);
        assert_eq!("cpu".parse::<SpeechBackend>().unwrap(), SpeechBackend::Cpu);
        assert_eq!(
            "auto".parse::<SpeechBackend>().unwrap(),
            SpeechBackend::Auto
        );
        let err = "gpu".parse::<SpeechBackend>().unwrap_err();
        assert!(err.message.contains("auto, npu or cpu"), "{}", err.message);
    }
}
