//! Speech to text, the app's door to it: where speech models live, which one a request means,
//! loading it, and transcribing a file or an upload, always on this machine (also when the
//! chat model is a remote server's). The CLI's `hearth transcribe`, the server's
//! `/v1/audio/transcriptions` and (issue 52) the desktop's microphone all come through here.
//!
//! Where: each speech model is a folder `<data>/models/speech/<name>/`
//! (`$XDG_DATA_HOME/hearth/models/speech/`, [`speech_models_dir`]) holding a Whisper model as
//! faster-whisper (CTranslate2's `model.bin`, `config.json`, `vocabulary.*` or
//! `tokenizer.json`) or transformers (`model.safetensors`, `config.json`, `tokenizer.json`)
//! save it. The default is the first by name; `whisper-1` (OpenAI's name) means the default.
//! `hearth pull whisper-base` and the microphone's offer ([`crate::voice`]) download one there
//! (`hearth_hub::speech`); a folder the person put there is used the same way.
//!
//! On a ready NPU with FastFlowLM, its Whisper may hear instead, by chat's rule ([`npu`]).

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

pub use hearth_speech::{
    decode_bytes, decode_file, Audio, Limits, Segment, SpeechModel, TranscribeOptions,
    TranscribeProgress, Transcript, WhisperInfo,
};

use crate::error::{Error, ErrorCode, Result};
use crate::home::Home;

pub mod npu;
pub use npu::{
    hear, hear_on_cpu, speech_backend, speech_backend_for, transcribe_choosing,
    use_desktop_flm_env, Heard, HeardText, HeardTranscript, SpeechBackend, NPU_ASR_MODEL,
};

/// OpenAI's model name, meaning the default speech model.
pub const OPENAI_MODEL: &str = "whisper-1";

/// How a person gets a speech model today, said in every "none found" error.
pub const HOW_TO_GET_ONE: &str = "run `hearth pull whisper-base` (Whisper base, 148 MB; the desktop's microphone button offers the same download), or put a Whisper model folder (faster-whisper's model.bin or transformers' model.safetensors, with config.json and its vocabulary) there";

/// Where speech models live: `<data>/models/speech/`.
pub fn speech_models_dir(home: &Home) -> PathBuf {
    home.data_dir.join("models").join("speech")
}

/// Whether `dir` holds a Whisper model's files (not whether they load).
pub fn looks_like_speech_model(dir: &Path) -> bool {
    dir.join("config.json").is_file()
        && (dir.join("model.bin").is_file() || dir.join("model.safetensors").is_file())
}

/// The installed speech models' names, sorted (the first is the default).
pub fn speech_models(home: &Home) -> Vec<String> {
    speech_models_in(&speech_models_dir(home))
}

/// The speech models' names in the folder `dir`, sorted.
pub fn speech_models_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| looks_like_speech_model(&e.path()))
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

/// The folder of the speech model `requested` means: None or `whisper-1` the default, a name
/// one under [`speech_models_dir`], anything else a folder path. A plain error says where
/// models are looked for and how to get one.
pub fn find_speech_model(home: &Home, requested: Option<&str>) -> Result<PathBuf> {
    find_speech_model_in(&speech_models_dir(home), requested)
}

/// [`find_speech_model`] with the speech models in the folder `dir`.
pub fn find_speech_model_in(dir: &Path, requested: Option<&str>) -> Result<PathBuf> {
    let dir = dir.to_path_buf();
    let requested = requested.map(str::trim).filter(|r| !r.is_empty());
    match requested {
        None => {}
        Some(name) if name.eq_ignore_ascii_case(OPENAI_MODEL) => {}
        Some(name) => {
            let simple = !name.contains(['/', '\\']) && name != "." && name != "..";
            if simple && looks_like_speech_model(&dir.join(name)) {
                return Ok(dir.join(name));
            }
            let path = PathBuf::from(name);
            if path.is_dir() {
                if looks_like_speech_model(&path) {
                    return Ok(path);
                }
                return Err(Error::new(
                    ErrorCode::InvalidModel,
                    format!(
                        "{} is not a speech model folder: it needs config.json and model.bin (faster-whisper) or model.safetensors (transformers)",
                        path.display()
                    ),
                ));
            }
            let installed = speech_models_in(&dir);
            let have = if installed.is_empty() {
                format!("none is installed in {}; {HOW_TO_GET_ONE}", dir.display())
            } else {
                format!("installed: {}", installed.join(", "))
            };
            return Err(Error::new(
                ErrorCode::ModelNotFound,
                format!("no speech model \"{name}\" ({have})"),
            ));
        }
    }
    match speech_models_in(&dir).first() {
        Some(name) => Ok(dir.join(name)),
        None => Err(Error::new(
            ErrorCode::NoModel,
            format!(
                "no speech model is installed: Hearth looks in {}; {HOW_TO_GET_ONE}",
                dir.display()
            ),
        )),
    }
}

/// Loads the speech model in `folder` on `threads` threads (0: one per core).
pub fn load_speech_model(folder: &Path, threads: usize) -> Result<SpeechModel> {
    SpeechModel::load(folder, threads)
        .map_err(|e| Error::new(ErrorCode::InvalidModel, e.to_string()))
}

/// The app's error for an audio or transcription failure; `what` names the file ("meeting.mp3",
/// "the uploaded file"), which the speech crate's messages follow.
pub fn speech_error(what: &str, error: hearth_speech::Error) -> Error {
    use hearth_speech::Error as E;
    let code = match &error {
        E::Io(_) => ErrorCode::NotFound,
        E::Unsupported { .. } | E::NotAudio { .. } => ErrorCode::Unsupported,
        E::Cancelled => ErrorCode::Cut,
        E::Transcription(_) => ErrorCode::Model,
        _ => ErrorCode::InvalidInput,
    };
    Error::new(code, format!("{what} {error}"))
}

/// Decodes and transcribes the sound file at `path` with `model`, within `limits`.
pub fn transcribe_file(
    model: &SpeechModel,
    path: &Path,
    limits: &Limits,
    options: &TranscribeOptions,
    progress: &mut dyn FnMut(TranscribeProgress) -> ControlFlow<()>,
) -> Result<Transcript> {
    let what = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let audio = decode_file(path, limits).map_err(|e| speech_error(&what, e))?;
    model
        .transcribe(&audio, options, progress)
        .map_err(|e| speech_error(&what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(dir: &Path) -> Home {
        Home {
            data_dir: dir.join("data"),
            config_dir: dir.join("config"),
            state_dir: dir.join("state"),
            builtin: None,
            system_root: PathBuf::from("/"),
        }
    }

    fn model_folder(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("config.json"), "{}").unwrap();
        std::fs::write(dir.join("model.bin"), "").unwrap();
    }

    #[test]
    fn the_default_is_the_first_installed_and_whisper_1_means_it() {
        let tmp = tempfile::tempdir().unwrap();
        let home = home(tmp.path());
        let err = find_speech_model(&home, None).unwrap_err();
        assert_eq!(err.code, ErrorCode::NoModel);
        assert!(err.message.contains("models/speech"), "{}", err.message);
        assert!(
            err.message.contains("hearth pull whisper-base"),
            "{}",
            err.message
        );
        let dir = speech_models_dir(&home);
        model_folder(&dir.join("whisper-small"));
        model_folder(&dir.join("whisper-base"));
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        assert_eq!(speech_models(&home), ["whisper-base", "whisper-small"]);
        assert_eq!(
            find_speech_model(&home, None).unwrap(),
            dir.join("whisper-base")
        );
        assert_eq!(
            find_speech_model(&home, Some("whisper-1")).unwrap(),
            dir.join("whisper-base")
        );
        assert_eq!(
            find_speech_model(&home, Some("whisper-small")).unwrap(),
            dir.join("whisper-small")
        );
        let err = find_speech_model(&home, Some("large")).unwrap_err();
        assert_eq!(err.code, ErrorCode::ModelNotFound);
        assert!(
            err.message
                .contains("installed: whisper-base, whisper-small"),
            "{}",
            err.message
        );
        // A folder by path; one that is not a model is said to be not one.
        let elsewhere = tmp.path().join("elsewhere");
        model_folder(&elsewhere);
        assert_eq!(
            find_speech_model(&home, elsewhere.to_str()).unwrap(),
            elsewhere
        );
        let err = find_speech_model(&home, dir.join("empty").to_str()).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidModel);
    }
}
