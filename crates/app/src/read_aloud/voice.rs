//! The synthesizer programs that say a sentence: espeak-ng (always; the .deb depends on it),
//! or Piper where a `piper` program, a Piper voice of the language and a player (`aplay` or
//! `paplay`) are installed.
//!
//! Each runs as a separate program, never linked (espeak-ng is GPL), one process per
//! sentence with the sentence on its standard input, tied to Hearth with the npu crate's
//! [`spawn_tied`] (its own process group, SIGKILL when Hearth dies). [`Utterance::wait`]
//! polls it every [`POLL`] so a stop kills it at once.
//!
//! A Piper voice is a `NAME.onnx` file with its `NAME.onnx.json` in Hearth's voices folder
//! (`<data>/hearth/voices/`); its language is the JSON's `language.code` ("de_DE"). Settings ›
//! Read aloud downloads the one Hearth offers for a language there ([`super::voices`]); a
//! voice a person puts there by hand is found the same way.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hearth_npu::bounded::spawn_tied;

use crate::settings::Language;

/// How often a speaking program is checked for its end or a stop.
pub const POLL: Duration = Duration::from_millis(10);

/// Most bytes of a program's error output kept, to say what went wrong.
const STDERR_KEPT: u64 = 16 * 1024;

/// Largest Piper voice description read (they are a few kilobytes).
const MAX_VOICE_JSON: u64 = 1024 * 1024;

/// Where the speech goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// The sound device.
    Speakers,
    /// One WAV file per sentence in this folder (`0001.wav`, …): for tests, on machines
    /// without a sound device.
    WavFiles(PathBuf),
}

/// Why a sentence could not be said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VoiceError {
    /// espeak-ng is not installed.
    #[error(
        "Reading aloud needs espeak-ng, which is not installed. Install it (on Debian or \
         Ubuntu: sudo apt install espeak-ng) and try again."
    )]
    EspeakMissing,
    /// espeak-ng has no voice for the language.
    #[error(
        "espeak-ng has no {language} voice on this computer. Install espeak-ng-data (on Debian \
         or Ubuntu: sudo apt install espeak-ng-data) and try again."
    )]
    VoiceMissing {
        /// The language, in English.
        language: String,
    },
    /// No sound device could be opened.
    #[error(
        "No sound device could be opened to read aloud. Check that speakers or headphones are \
         connected and not muted, then try again."
    )]
    NoSoundDevice,
    /// The program failed in another way.
    #[error("Reading aloud failed: {program} stopped with {detail}.")]
    Failed {
        /// The program.
        program: String,
        /// How it ended and what it said.
        detail: String,
    },
}

/// The language's name in English, for messages.
pub fn language_name(language: Language) -> &'static str {
    match language {
        Language::System | Language::En => "English",
        Language::Zh => "Chinese",
        Language::Es => "Spanish",
        Language::De => "German",
        Language::Fr => "French",
    }
}

/// espeak-ng's voice for a Hearth language.
pub fn espeak_voice(language: Language) -> &'static str {
    match language {
        Language::System | Language::En => "en",
        Language::Zh => "cmn",
        Language::Es => "es",
        Language::De => "de",
        Language::Fr => "fr-fr",
    }
}

/// The two-letter code a Piper voice's `language.code` starts with.
pub(crate) fn piper_code(language: Language) -> &'static str {
    match language {
        Language::System | Language::En => "en",
        Language::Zh => "zh",
        Language::Es => "es",
        Language::De => "de",
        Language::Fr => "fr",
    }
}

/// The first `name` in the folders of `path` (a `PATH` value) that is a file.
pub fn find_program(path: Option<&OsStr>, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A Piper voice found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PiperVoice {
    /// The `.onnx` file.
    pub model: PathBuf,
    /// Its samples per second.
    pub sample_rate: u32,
    /// Its language code ("de_DE").
    pub code: String,
}

/// Reads a Piper voice's description (`NAME.onnx.json`): its language and sample rate.
/// Refuses a file too large, not JSON, or without them.
pub fn read_piper_voice(model: &Path) -> Result<PiperVoice, String> {
    let json = PathBuf::from(format!("{}.json", model.display()));
    let file = std::fs::File::open(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    let mut text = String::new();
    file.take(MAX_VOICE_JSON + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", json.display()))?;
    if text.len() as u64 > MAX_VOICE_JSON {
        return Err(format!(
            "{} is larger than a voice description",
            json.display()
        ));
    }
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON ({e})", json.display()))?;
    let code = value["language"]["code"]
        .as_str()
        .filter(|c| !c.is_empty() && c.len() <= 16)
        .ok_or_else(|| format!("{} names no language", json.display()))?;
    let sample_rate = value["audio"]["sample_rate"]
        .as_u64()
        .filter(|r| (8_000..=96_000).contains(r))
        .ok_or_else(|| format!("{} has no usable sample rate", json.display()))?;
    Ok(PiperVoice {
        model: model.to_path_buf(),
        sample_rate: sample_rate as u32,
        code: code.to_string(),
    })
}

/// The first Piper voice of `language` in `folder` (by file name), if any.
pub fn find_piper_voice(folder: &Path, language: Language) -> Option<PiperVoice> {
    let mut models: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    models
        .into_iter()
        .find_map(|model| match read_piper_voice(&model) {
            Ok(voice) if voice.code.to_lowercase().starts_with(piper_code(language)) => Some(voice),
            Ok(_) => None,
            Err(why) => {
                tracing::warn!("read aloud: skipping a Piper voice: {why}");
                None
            }
        })
}

/// The programs that speak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesizer {
    /// espeak-ng.
    pub espeak: PathBuf,
    /// Piper and where its voices are, when `piper` is installed.
    pub piper: Option<(PathBuf, PathBuf)>,
}

impl Synthesizer {
    /// The programs installed here; `voices` is where Piper voices are looked for.
    pub fn find(voices: Option<&Path>) -> Result<Synthesizer, VoiceError> {
        Self::find_in(std::env::var_os("PATH").as_deref(), voices)
    }

    /// The programs installed in the folders of `path` (a `PATH` value).
    pub fn find_in(path: Option<&OsStr>, voices: Option<&Path>) -> Result<Synthesizer, VoiceError> {
        let espeak = find_program(path, "espeak-ng").ok_or(VoiceError::EspeakMissing)?;
        let piper = find_program(path, "piper").zip(voices.map(Path::to_path_buf));
        Ok(Synthesizer { espeak, piper })
    }

    /// Starts saying `sentence` in `language`: the `index`th sentence (from 1) to `output`.
    pub fn start(
        &self,
        sentence: &str,
        language: Language,
        output: &Output,
        index: usize,
    ) -> Result<Utterance, VoiceError> {
        if let Some(utterance) = self.start_piper(sentence, language, output, index) {
            return Ok(utterance);
        }
        self.start_espeak(espeak_voice(language), sentence, language, output, index)
    }

    /// Starts espeak-ng saying `sentence` with its voice `voice` (of `language`).
    fn start_espeak(
        &self,
        voice: &str,
        sentence: &str,
        language: Language,
        output: &Output,
        index: usize,
    ) -> Result<Utterance, VoiceError> {
        let mut cmd = Command::new(&self.espeak);
        cmd.args(["-v", voice, "--stdin"]).stdout(Stdio::null());
        if let Output::WavFiles(folder) = output {
            cmd.arg("-w").arg(folder.join(format!("{index:04}.wav")));
        }
        let child = spawn_with_text(cmd, sentence).map_err(|e| VoiceError::Failed {
            program: self.espeak.display().to_string(),
            detail: format!("could not start ({e})"),
        })?;
        Ok(Utterance::new(vec![child], language, "espeak-ng"))
    }

    /// Piper, when it, a voice of `language` and a player are here; `None` otherwise (then
    /// espeak-ng speaks). A Piper that cannot start is logged and left for espeak-ng.
    fn start_piper(
        &self,
        sentence: &str,
        language: Language,
        output: &Output,
        index: usize,
    ) -> Option<Utterance> {
        let (piper, voices) = self.piper.as_ref()?;
        let voice = find_piper_voice(voices, language)?;
        let mut cmd = Command::new(piper);
        cmd.arg("--model").arg(&voice.model);
        let started = match output {
            Output::WavFiles(folder) => {
                cmd.arg("--output_file")
                    .arg(folder.join(format!("{index:04}.wav")))
                    .stdout(Stdio::null());
                spawn_with_text(cmd, sentence).map(|c| vec![c])
            }
            Output::Speakers => {
                let player = player_command(voice.sample_rate)?;
                cmd.arg("--output-raw").stdout(Stdio::piped());
                spawn_with_text(cmd, sentence).and_then(|mut synth| {
                    let raw = synth.stdout.take().expect("stdout is piped");
                    let mut player = player;
                    player.stdin(Stdio::from(raw)).stderr(Stdio::piped());
                    match spawn_tied(player) {
                        Ok(play) => Ok(vec![synth, play]),
                        Err(e) => {
                            let _ = synth.kill();
                            let _ = synth.wait();
                            Err(e)
                        }
                    }
                })
            }
        };
        match started {
            Ok(children) => Some(Utterance::new(children, language, "piper")),
            Err(e) => {
                tracing::warn!("read aloud: Piper could not start ({e}); espeak-ng speaks");
                None
            }
        }
    }
}

/// A player of raw 16-bit mono sound at `rate`, on its standard input.
fn player_command(rate: u32) -> Option<Command> {
    let path = std::env::var_os("PATH");
    if let Some(aplay) = find_program(path.as_deref(), "aplay") {
        let mut cmd = Command::new(aplay);
        cmd.args(["-q", "-t", "raw", "-f", "S16_LE", "-c", "1", "-r"])
            .arg(rate.to_string());
        return Some(cmd);
    }
    let paplay = find_program(path.as_deref(), "paplay")?;
    let mut cmd = Command::new(paplay);
    cmd.args(["--raw", "--format=s16le", "--channels=1"])
        .arg(format!("--rate={rate}"));
    Some(cmd)
}

/// Starts `cmd` tied to Hearth with `text` on its standard input (then closed) and its error
/// output piped; the caller chooses where its standard output goes.
fn spawn_with_text(mut cmd: Command, text: &str) -> std::io::Result<Child> {
    cmd.stdin(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn_tied(cmd)?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A sentence is far smaller than a pipe's buffer; a program that ends without reading it
    // is told by its exit.
    let _ = stdin.write_all(text.as_bytes());
    let _ = stdin.write_all(b"\n");
    Ok(child)
}

/// A sentence being said: its processes (a synthesizer, and a player after it for Piper).
#[derive(Debug)]
pub struct Utterance {
    children: Vec<Child>,
    stderr: Vec<Option<std::thread::JoinHandle<Vec<u8>>>>,
    language: Language,
    program: &'static str,
}

/// How an utterance ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Said {
    /// All of it.
    Done,
    /// Stopped on request.
    Stopped,
}

impl Utterance {
    fn new(mut children: Vec<Child>, language: Language, program: &'static str) -> Self {
        let stderr = children
            .iter_mut()
            .map(|c| c.stderr.take().map(drain_stderr))
            .collect();
        Utterance {
            children,
            stderr,
            language,
            program,
        }
    }

    /// The process ids (for tests that check none is left).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits until it is said, or `stop` is set (then kills it at once).
    pub fn wait(mut self, stop: &AtomicBool) -> Result<Said, VoiceError> {
        let mut statuses = vec![None; self.children.len()];
        loop {
            if stop.load(Ordering::SeqCst) {
                self.kill();
                return Ok(Said::Stopped);
            }
            for (child, status) in self.children.iter_mut().zip(statuses.iter_mut()) {
                if status.is_none() {
                    *status = child.try_wait().ok().flatten();
                }
            }
            if statuses.iter().all(Option::is_some) {
                break;
            }
            std::thread::sleep(POLL);
        }
        let errors: Vec<String> = self
            .stderr
            .iter_mut()
            .map(|h| {
                h.take()
                    .and_then(|h| h.join().ok())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            })
            .collect();
        let said = errors.join("\n");
        if said.contains("voice does not exist") {
            return Err(VoiceError::VoiceMissing {
                language: language_name(self.language).to_string(),
            });
        }
        // espeak-ng exits with 0 when it cannot open the sound device, and says so.
        if [
            "Unknown PCM",
            "cannot find card",
            "snd_pcm_open",
            "Connection refused",
            "pa_simple",
        ]
        .iter()
        .any(|s| said.contains(s))
        {
            return Err(VoiceError::NoSoundDevice);
        }
        for status in statuses.into_iter().flatten() {
            if !status.success() {
                let last = said
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                return Err(VoiceError::Failed {
                    program: self.program.to_string(),
                    detail: format!("{status}{}{last}", if last.is_empty() { "" } else { ": " }),
                });
            }
        }
        Ok(Said::Done)
    }

    fn kill(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Utterance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads the start of a program's error output on a thread (so it never blocks on a full
/// pipe), dropping the rest.
fn drain_stderr(mut stderr: ChildStderr) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut stderr).take(STDERR_KEPT).read_to_end(&mut kept);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        kept
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_language_has_an_espeak_voice() {
        assert_eq!(espeak_voice(Language::De), "de");
        assert_eq!(espeak_voice(Language::Zh), "cmn");
        assert_eq!(espeak_voice(Language::System), "en");
    }

    #[test]
    fn a_missing_espeak_is_said_plainly() {
        let dir = tempfile::tempdir().unwrap();
        let e = Synthesizer::find_in(Some(dir.path().as_os_str()), None).unwrap_err();
        assert_eq!(e, VoiceError::EspeakMissing);
        assert!(e.to_string().contains("sudo apt install espeak-ng"), "{e}");
        assert_eq!(
            Synthesizer::find_in(None, None).unwrap_err(),
            VoiceError::EspeakMissing
        );
    }

    #[test]
    fn a_missing_voice_is_said_plainly() {
        let synthesizer = Synthesizer::find(None).expect("espeak-ng is installed (setup.sh)");
        let dir = tempfile::tempdir().unwrap();
        let output = Output::WavFiles(dir.path().to_path_buf());
        let utterance = synthesizer
            .start_espeak("zz-no-such-voice", "Hallo.", Language::De, &output, 1)
            .unwrap();
        let e = utterance.wait(&AtomicBool::new(false)).unwrap_err();
        assert_eq!(
            e,
            VoiceError::VoiceMissing {
                language: "German".into()
            }
        );
        assert!(e.to_string().contains("no German voice"), "{e}");
    }

    #[test]
    fn each_language_is_said_to_a_wav_file() {
        let synthesizer = Synthesizer::find(None).expect("espeak-ng is installed (setup.sh)");
        let dir = tempfile::tempdir().unwrap();
        let output = Output::WavFiles(dir.path().to_path_buf());
        let languages = [
            (Language::En, "Hello."),
            (Language::De, "Hallo."),
            (Language::Fr, "Bonjour."),
            (Language::Es, "Hola."),
            (Language::Zh, "你好。"),
        ];
        for (index, (language, words)) in languages.into_iter().enumerate() {
            let utterance = synthesizer
                .start(words, language, &output, index + 1)
                .unwrap();
            assert_eq!(
                utterance.wait(&AtomicBool::new(false)),
                Ok(Said::Done),
                "{language:?}"
            );
            let wav = std::fs::read(dir.path().join(format!("{:04}.wav", index + 1))).unwrap();
            assert!(wav.starts_with(b"RIFF") && wav.len() > 1000, "{language:?}");
        }
    }

    #[test]
    fn piper_voices_are_found_by_language_and_bad_descriptions_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, json: &str| {
            std::fs::write(dir.path().join(name), b"onnx").unwrap();
            std::fs::write(dir.path().join(format!("{name}.json")), json).unwrap();
        };
        write(
            "a-de.onnx",
            r#"{"language":{"code":"de_DE"},"audio":{"sample_rate":22050}}"#,
        );
        write("b-fr.onnx", r#"{"language":{"code":"fr_FR"}}"#);
        write("c-fr.onnx", "not json");
        std::fs::write(dir.path().join("d-es.onnx"), b"onnx").unwrap();
        let de = find_piper_voice(dir.path(), Language::De).unwrap();
        assert_eq!(de.sample_rate, 22050);
        assert_eq!(de.code, "de_DE");
        assert_eq!(find_piper_voice(dir.path(), Language::Fr), None);
        assert_eq!(find_piper_voice(dir.path(), Language::Es), None);
        let e = read_piper_voice(&dir.path().join("b-fr.onnx")).unwrap_err();
        assert!(e.contains("no usable sample rate"), "{e}");
        let e = read_piper_voice(&dir.path().join("c-fr.onnx")).unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
        let e = read_piper_voice(&dir.path().join("d-es.onnx")).unwrap_err();
        assert!(e.contains("d-es.onnx.json"), "{e}");
    }
}
