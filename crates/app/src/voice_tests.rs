//! Speaking to the app through the capture's test hook (a WAV played as the microphone) and
//! the committed tiny Whisper (random weights: what it writes is not words, but it runs the
//! whole path): start, levels, stop and transcribe, cancel, one recording at a time, silence
//! and a missing speech model said in words.

use super::*;
use crate::Home;
use hearth_speech::capture::CaptureSource;
use std::path::Path;
use std::sync::mpsc;

fn home(dir: &Path) -> Home {
    Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: PathBuf::from("/"),
    }
}

/// The committed tiny Whisper, copied in as the installed speech model.
fn install_tiny_whisper(home: &Home) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper/tiny");
    let to = speech::speech_models_dir(home).join("whisper-tiny");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A 16 kHz mono 16-bit WAV: a 300 Hz tone at `amplitude` for `seconds`.
fn wav(path: &Path, seconds: f32, amplitude: f32) {
    let n = (seconds * 16_000.0) as usize;
    let data: Vec<u8> = (0..n)
        .map(|i| amplitude * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 16_000.0).sin())
        .flat_map(|s| ((s * 32767.0) as i16).to_le_bytes())
        .collect();
    let mut bytes = b"RIFF".to_vec();
    bytes.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    for v in [16u32, 0x0001_0001, 16_000, 32_000, 0x0010_0002] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&(data.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&data);
    std::fs::write(path, bytes).unwrap();
}

fn from_file(path: &Path) -> CaptureOptions {
    CaptureOptions {
        source: CaptureSource::File {
            path: path.to_path_buf(),
            speed: 100.0,
        },
        ..CaptureOptions::default()
    }
}

/// Waits on the levels (not the clock) until `seconds` are recorded.
fn wait_for(levels: &mpsc::Receiver<VoiceLevel>, seconds: f64) {
    for level in levels.iter() {
        if level.elapsed_s >= seconds {
            return;
        }
    }
}

#[test]
fn spoken_words_are_heard_by_the_processor_and_one_recording_runs_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let home = home(tmp.path());
    install_tiny_whisper(&home);
    let app = App::open(home).unwrap();
    let sound = tmp.path().join("spoken.wav");
    wav(&sound, 1.0, 0.3);
    let voice = Voice::default();
    let status = voice.status(&app);
    assert_eq!(status.speech_models, ["whisper-tiny"]);
    assert!(!status.listening);

    let (tx, rx) = mpsc::channel();
    let listening = voice
        .start_with(from_file(&sound), move |l| {
            let _ = tx.send(l);
        })
        .unwrap();
    assert_eq!(listening.device, "spoken.wav");
    assert_eq!(listening.max_seconds, 300.0);
    assert!(voice.status(&app).listening);
    let again = voice.start_with(from_file(&sound), |_| {}).unwrap_err();
    assert_eq!(
        (again.code, again.detail.as_deref()),
        (ErrorCode::Busy, Some("mic_listening"))
    );
    wait_for(&rx, 1.2);
    let heard = voice.stop(&app, Some("en")).unwrap();
    assert_eq!(heard.backend, "cpu");
    assert!(heard.duration_s >= 1.2, "{heard:?}");
    assert_eq!(heard.text, heard.text.trim());
    assert!(!voice.is_listening());

    // Stopping again: nothing is being recorded, in words.
    let error = voice.stop(&app, None).unwrap_err();
    assert_eq!(error.detail.as_deref(), Some("mic_not_listening"));
}

#[test]
fn silence_a_missing_model_and_cancel_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let app = App::open(home(tmp.path())).unwrap();
    let voice = Voice::default();

    let quiet = tmp.path().join("quiet.wav");
    wav(&quiet, 0.5, 0.0);
    let (tx, rx) = mpsc::channel();
    voice
        .start_with(from_file(&quiet), move |l| {
            let _ = tx.send(l);
        })
        .unwrap();
    wait_for(&rx, 0.4);
    let error = voice.stop(&app, None).unwrap_err();
    assert_eq!(error.detail.as_deref(), Some("mic_silence"));
    assert_eq!(error.params["floor"], "-50");
    assert!(
        error.message.starts_with("Nothing was heard"),
        "{}",
        error.message
    );

    let spoken = tmp.path().join("spoken.wav");
    wav(&spoken, 0.5, 0.3);
    let (tx, rx) = mpsc::channel();
    voice
        .start_with(from_file(&spoken), move |l| {
            let _ = tx.send(l);
        })
        .unwrap();
    wait_for(&rx, 0.4);
    let error = voice.stop(&app, None).unwrap_err();
    assert_eq!(error.code, ErrorCode::NoModel);
    assert_eq!(error.detail.as_deref(), Some("no_speech_model"));

    voice.start_with(from_file(&spoken), |_| {}).unwrap();
    voice.cancel();
    assert!(!voice.is_listening());
}

#[test]
fn capture_errors_carry_their_case() {
    let busy = capture_error(CaptureError::Busy {
        device: "USB Mic".into(),
    });
    assert_eq!(busy.detail.as_deref(), Some("mic_busy"));
    assert_eq!(busy.params["device"], "USB Mic");
    assert_eq!(
        capture_error(CaptureError::NoMicrophone).detail.as_deref(),
        Some("mic_none")
    );
    let refused = capture_error(CaptureError::PermissionRefused {
        device: "default".into(),
    });
    assert_eq!(refused.code, ErrorCode::AccessDenied);
    assert_eq!(refused.detail.as_deref(), Some("mic_refused"));
}
