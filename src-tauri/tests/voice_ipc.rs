//! The microphone's commands through the real IPC layer, with the capture's test hook
//! (HEARTH_TEST_MIC_WAV: a WAV played as the microphone, 50 times faster than real time) and
//! the committed tiny Whisper (random weights: it writes something, not words).
//!
//! Its private home has the test microphone's variables for the whole process, so it is a test
//! binary of its own, not a module of `tests/desktop/`.

mod common;

use std::path::Path;

use common::{build_app, fixture, invoke, private_home};
use serde_json::json;

/// A 16 kHz mono 16-bit WAV: half a second of a 300 Hz tone at a third of full scale.
fn tone_wav(path: &Path) {
    let data: Vec<u8> = (0..8_000)
        .map(|i| 0.3 * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 16_000.0).sin())
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

#[test]
fn listening_hears_the_test_recording_and_says_who_heard_it() {
    let sounds = tempfile::tempdir().unwrap();
    let wav = sounds.path().join("spoken.wav");
    tone_wav(&wav);
    private_home(&[
        ("HEARTH_TEST_MIC_WAV", wav.clone().into()),
        ("HEARTH_TEST_MIC_SPEED", "50".into()),
    ]);
    let data = tempfile::tempdir().unwrap();
    let speech = data.path().join("models/speech/whisper-tiny");
    std::fs::create_dir_all(&speech).unwrap();
    for entry in std::fs::read_dir(fixture("whisper/tiny")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), speech.join(entry.file_name())).unwrap();
    }
    let app = build_app(data, None);

    let status = invoke(&app, "voice_status", json!({})).unwrap();
    assert_eq!(status["speech_models"], json!(["whisper-tiny"]));
    assert_eq!(status["listening"], json!(false));

    // Stopping before starting says so.
    let e = invoke(&app, "stop_listening", json!({"language": "en"})).unwrap_err();
    assert_eq!(e["detail"], "mic_not_listening", "{e}");

    let listening = invoke(&app, "start_listening", json!({"onLevel": "__CHANNEL__:7"})).unwrap();
    assert_eq!(
        listening,
        json!({"device": "spoken.wav", "max_seconds": 300.0})
    );
    let e = invoke(&app, "start_listening", json!({"onLevel": "__CHANNEL__:8"})).unwrap_err();
    assert_eq!(
        (e["code"].as_str(), e["detail"].as_str()),
        (Some("busy"), Some("mic_listening"))
    );
    // Let some of the recording play (at 50 times real time, 0.2 s is 10 s of sound).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let heard = invoke(&app, "stop_listening", json!({"language": "en"})).unwrap();
    assert_eq!(heard["backend"], "cpu", "{heard}");
    assert!(heard["duration_s"].as_f64().unwrap() > 0.0, "{heard}");
    assert!(heard["text"].is_string(), "{heard}");
    assert_eq!(heard["npu_failure"], json!(null));

    // Cancel drops a recording.
    invoke(&app, "start_listening", json!({"onLevel": "__CHANNEL__:9"})).unwrap();
    invoke(&app, "cancel_listening", json!({})).unwrap();
    let status = invoke(&app, "voice_status", json!({})).unwrap();
    assert_eq!(status["listening"], json!(false));
}
