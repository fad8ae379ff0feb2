//! Speech on the NPU (`hearth_backends::npu::transcribe`, `NpuBackend::transcribe`,
//! `transcribe_on_npu`) against the imitation as FastFlowLM 0.9.45 and 1.0.14 (both load
//! Whisper with `--asr 1`, standalone or beside a chat model): the WAV Hearth encodes arrives
//! whole (the imitation answers with its length and checksum), a server started for chat is
//! restarted with `--asr 1`, speech with no chat model starts `flm serve --asr 1` with no model,
//! never a second FastFlowLM beside a chat model's, FastFlowLM is shown its own Whisper (the
//! SDK layout: its model_list.json beside its program, Whisper in its own models folder) and
//! a Whisper not downloaded is said in words; a server without `--asr 1` is refused in words,
//! and bad audio or a gone server are plain errors.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use hearth_backends::npu::discover::{self, FlmProgram, Lookup};
use hearth_backends::npu::process::{FlmServer, ServeConfig};
use hearth_backends::npu::transcribe::{self, TranscribeError};
use hearth_backends::npu::whisper;
use hearth_backends::npu::{own_server, transcribe_on_npu, NpuBackend, NpuOptions};
use hearth_chat::{BackendError, FailureKind};

const VERSIONS: [&str; 2] = ["0.9.45", "1.0.14"];
const NAME: &str = "Demo-NPU2";
const TAG: &str = "demo:5m";

/// One FastFlowLM at a time in this process, as in Hearth.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

struct Fixture {
    _dir: tempfile::TempDir,
    flm: PathBuf,
    registry: PathBuf,
    state: PathBuf,
    /// FastFlowLM's own models folder (`~/.config/flm`), holding its Whisper.
    flm_home: PathBuf,
}

fn fixture(version: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("data/models");
    std::fs::create_dir_all(&models).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    std::os::unix::fs::symlink(demo.canonicalize().unwrap(), models.join(NAME)).unwrap();
    let registry = dir.path().join("data/model_list.json");
    let entry = serde_json::json!({
        "model_path": models,
        "models": { "demo": { "5m": {
            "name": NAME, "url": "", "size": 5050000, "flm_min_version": "0.9.0",
            "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
            "default_context_length": 2048,
            "details": { "family": "llama3", "think": false, "parameter_size": "5M",
                         "quantization_level": "Q4_1" },
            "footprint": 0.01
        } } }
    });
    std::fs::write(&registry, entry.to_string()).unwrap();
    let bin = dir.path().join("flm-install");
    std::fs::create_dir_all(bin.join("xclbins").join(NAME)).unwrap();
    let flm = bin.join("flm");
    let script = format!(
        "#!/bin/sh\nexport FLM_IMITATION_VERSION='{version}'\nexport FLM_CONFIG_PATH=\"${{FLM_CONFIG_PATH:-{}}}\"\nexec '{}' \"$@\"\n",
        registry.display(),
        env!("CARGO_BIN_EXE_flm")
    );
    let tmp = bin.join("flm.tmp");
    std::fs::write(&tmp, script).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &flm).unwrap();
    // FastFlowLM's own model list beside its program, as the SDK installs it, with its
    // Whisper; the Whisper pulled into its own models folder.
    let own = serde_json::json!({
        "model_path": "models",
        "models": { "whisper-v3": { "turbo": {
            "name": "Whisper-V3-Turbo-NPU2", "url": "", "size": 1000000000,
            "flm_min_version": "0.9.14", "asr": true,
            "files": ["config.json", "tokenizer.json", "tokenizer_config.json", "model.q4nx"],
            "default_context_length": 448,
            "details": { "family": "whisper-v3", "think": false, "parameter_size": "1B",
                         "quantization_level": "Q4_1" }
        } } }
    });
    std::fs::write(bin.join("model_list.json"), own.to_string()).unwrap();
    let flm_home = dir.path().join("flm-home");
    let whisper = flm_home.join("models/Whisper-V3-Turbo-NPU2");
    std::fs::create_dir_all(&whisper).unwrap();
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.q4nx",
    ] {
        std::fs::write(whisper.join(file), "{}").unwrap();
    }
    let state = dir.path().join("state");
    Fixture {
        _dir: dir,
        flm,
        registry,
        state,
        flm_home,
    }
}

impl Fixture {
    fn program(&self) -> FlmProgram {
        discover::find(&Lookup {
            hearth_flm: Some(self.flm.clone()),
            path: None,
            standard: PathBuf::from("/nonexistent"),
            ..Lookup::default()
        })
        .unwrap()
    }

    fn options(&self) -> NpuOptions {
        NpuOptions {
            start_timeout: Duration::from_secs(60),
            idle_stop: None,
            read_timeout: Duration::from_secs(60),
            flm_models_dir: Some(self.flm_home.clone()),
            ..NpuOptions::new(&self.state)
        }
    }

    fn backend(&self) -> NpuBackend {
        NpuBackend::open(self.program(), &self.registry, TAG, self.options()).unwrap()
    }

    fn speech_only(&self) -> NpuBackend {
        NpuBackend::open_speech(self.program(), &self.registry, self.options())
    }

    fn serve(&self, version: &str, asr: bool) -> FlmServer {
        let registry = if asr {
            whisper::registry_for_asr(&self.flm, &self.registry, &self.state, Some(&self.flm_home))
                .unwrap()
        } else {
            self.registry.clone()
        };
        FlmServer::start(&ServeConfig {
            program: self.flm.clone(),
            version: version.into(),
            tag: TAG.into(),
            ctx_len: 512,
            registry,
            models_root: self.registry.parent().unwrap().to_path_buf(),
            state_dir: self.state.clone(),
            start_timeout: Duration::from_secs(60),
            asr,
        })
        .unwrap()
    }
}

/// 1.5 s of a 440 Hz tone at 16 kHz.
fn tone() -> Vec<f32> {
    (0..24_000)
        .map(|i| (i as f32 * 440.0 * std::f32::consts::TAU / 16_000.0).sin() * 0.5)
        .collect()
}

/// What the imitation says of `samples` when they arrive whole.
fn heard(samples: &[f32]) -> String {
    let wav = transcribe::wav_bytes(samples).unwrap();
    let mut hash: u32 = 0x811c_9dc5;
    for b in &wav[44..] {
        hash = (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193);
    }
    format!(
        "heard {:.3} seconds of 16000 Hz audio in 1 channel(s), {} bytes, checksum {hash:08x}",
        samples.len() as f64 / 16_000.0,
        wav.len() - 44
    )
}

#[test]
fn the_backend_starts_flm_with_asr_and_the_audio_arrives_whole() {
    let _one = serial();
    for version in VERSIONS {
        let f = fixture(version);
        let mut backend = f.backend();
        let samples = tone();
        let text = backend
            .transcribe(&samples, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(text, heard(&samples), "{version}");
        let log = std::fs::read_to_string(backend.log_path()).unwrap();
        assert!(log.contains("ASR mode enabled"), "{version}: {log}");
        assert!(log.contains("raised to 3560 MB"), "{version}: {log}");
        // A second request goes to the same server.
        let pid = backend.server_pid();
        let short = &samples[..8_000];
        assert_eq!(
            backend.transcribe(short, Duration::from_secs(30)).unwrap(),
            heard(short)
        );
        assert_eq!(backend.server_pid(), pid, "{version}");
        backend.stop_server();
    }
}

#[test]
fn a_server_started_for_chat_is_restarted_with_asr() {
    let _one = serial();
    for version in VERSIONS {
        let f = fixture(version);
        let mut backend = f.backend();
        backend.start().unwrap();
        let chat_pid = backend.server_pid().unwrap();
        let samples = tone();
        assert_eq!(
            backend
                .transcribe(&samples, Duration::from_secs(30))
                .unwrap(),
            heard(&samples),
            "{version}"
        );
        assert_ne!(backend.server_pid(), Some(chat_pid), "{version}");
        backend.stop_server();
    }
}

#[test]
fn without_asr_the_server_is_refused_in_words() {
    let _one = serial();
    for version in VERSIONS {
        let f = fixture(version);
        let server = f.serve(version, false);
        let err =
            transcribe::transcribe_on(server.port(), &tone(), Duration::from_secs(30)).unwrap_err();
        assert!(
            matches!(err, TranscribeError::AsrNotLoaded { .. }),
            "{version}: {err}"
        );
        assert!(err.to_string().contains("--asr 1"), "{err}");
        server.stop();
    }
}

#[test]
fn bad_audio_is_refused_before_anything_starts() {
    let _one = serial();
    let f = fixture("1.0.14");
    let mut backend = f.backend();
    for samples in [vec![], vec![0.0, f32::INFINITY]] {
        let err = backend
            .transcribe(&samples, Duration::from_secs(5))
            .unwrap_err();
        assert!(matches!(err, BackendError::Failed { .. }), "{err}");
    }
    assert_eq!(backend.server_pid(), None);
}

#[test]
fn a_gone_server_is_said_plainly() {
    let _one = serial();
    let f = fixture("1.0.14");
    let server = f.serve("1.0.14", true);
    let port = server.port();
    server.stop();
    let err = transcribe::transcribe_on(port, &tone(), Duration::from_secs(5)).unwrap_err();
    assert!(
        matches!(err, TranscribeError::ServerGone { port: p, .. } if p == port),
        "{err}"
    );
    assert!(err.to_string().contains("not answering"), "{err}");
    let kind = match BackendError::failed(FailureKind::Cut, err.to_string()) {
        BackendError::Failed { kind, .. } => kind,
        other => panic!("{other}"),
    };
    assert_eq!(kind, FailureKind::Cut);
}

#[test]
fn speech_with_no_chat_model_starts_flm_with_whisper_alone() {
    let _one = serial();
    for version in VERSIONS {
        let f = fixture(version);
        let mut speech = f.speech_only();
        let samples = tone();
        let text = transcribe_on_npu(&mut speech, &samples, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(text, heard(&samples), "{version}");
        let log = std::fs::read_to_string(speech.log_path()).unwrap();
        // `flm serve` with no tag: nothing but Whisper is loaded.
        assert!(log.contains(" serve  --ctx-len 512"), "{version}: {log}");
        assert!(log.contains("ASR mode enabled"), "{version}: {log}");
        assert!(!log.contains("Loading model"), "{version}: {log}");
        assert_eq!(own_server().map(|s| s.pid), speech.server_pid());
        // It answers no conversation.
        let err = hearth_chat::Backend::prepare(
            &mut speech,
            hearth_chat::backend::Input::Chat(vec![]),
            &hearth_engine::ChatOptions::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("speech only"), "{err}");
        speech.stop_server();
    }
}

#[test]
fn beside_a_chat_model_its_flm_hears_and_no_second_one_starts() {
    let _one = serial();
    for version in VERSIONS {
        let f = fixture(version);
        let mut chat = f.backend();
        chat.start().unwrap();
        let chat_pid = chat.server_pid().unwrap();
        let mut speech = f.speech_only();
        let samples = tone();
        assert_eq!(
            transcribe_on_npu(&mut speech, &samples, Duration::from_secs(30)).unwrap(),
            heard(&samples),
            "{version}"
        );
        // The chat model's server was restarted with Whisper; the speech-only one never ran.
        assert_eq!(speech.server_pid(), None, "{version}");
        let asr_pid = chat.server_pid().unwrap();
        assert_ne!(asr_pid, chat_pid, "{version}");
        let log = std::fs::read_to_string(chat.log_path()).unwrap();
        assert!(
            log.contains(&format!(" serve {TAG} --ctx-len 512 --port")) && log.contains("--asr 1"),
            "{version}: {log}"
        );
        // Again: the same server hears.
        transcribe_on_npu(&mut speech, &samples[..4000], Duration::from_secs(30)).unwrap();
        assert_eq!(chat.server_pid(), Some(asr_pid), "{version}");
        chat.stop_server();
    }
}

#[test]
fn a_whisper_not_downloaded_is_said_and_nothing_starts() {
    let _one = serial();
    let f = fixture("1.0.14");
    std::fs::remove_file(f.flm_home.join("models/Whisper-V3-Turbo-NPU2/model.q4nx")).unwrap();
    let mut speech = f.speech_only();
    let err = transcribe_on_npu(&mut speech, &tone(), Duration::from_secs(30)).unwrap_err();
    assert!(
        matches!(
            err,
            BackendError::Failed {
                kind: FailureKind::NotReady,
                ..
            }
        ),
        "{err}"
    );
    let words = err.to_string();
    assert!(
        words.contains("flm pull whisper-v3:turbo") && words.contains("model.q4nx"),
        "{words}"
    );
    assert_eq!(speech.server_pid(), None);
}

#[test]
fn the_imitation_refuses_asr_without_whisper_in_its_model_list() {
    let _one = serial();
    let f = fixture("1.0.14");
    let err = FlmServer::start(&ServeConfig {
        program: f.flm.clone(),
        version: "1.0.14".into(),
        tag: String::new(),
        ctx_len: 512,
        registry: f.registry.clone(),
        models_root: f.registry.parent().unwrap().to_path_buf(),
        state_dir: f.state.clone(),
        start_timeout: Duration::from_secs(60),
        asr: true,
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("Failed to load ASR model"),
        "{err}"
    );
}
