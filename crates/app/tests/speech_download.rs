//! The microphone's first press with no speech model: the offer (name, size, languages), an
//! offline failure said in words, the one-click download from the hub's imitation of Hugging
//! Face, the microphone hearing through the test hook (`HEARTH_TEST_MIC_WAV`) with the model
//! it fetched, and a second click that fetches nothing. One test: the Hub's address and the
//! test microphone are read from the environment, which the steps change in turn. Last, the
//! Models page removes the model Hearth downloaded, and refuses a folder the person put there.
//!
//! It sets and removes `HF_ENDPOINT`, `HEARTH_OFFLINE` and the test microphone's variables for the
//! whole process, so it is a test binary of its own, not a module of `tests/app/`.

#[path = "../../hub/tests/common/mod.rs"]
mod mockhub;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hearth_app::error::ErrorCode;
use hearth_app::model_store::PullEnd;
use hearth_app::voice::{download_speech_model, spoken_language, Voice};
use hearth_app::{App, Home};
use mockhub::{MockFile, MockHub};

fn home(dir: &Path) -> Home {
    std::fs::create_dir_all(dir.join("no-npu")).unwrap();
    Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: dir.join("no-npu"),
    }
}

fn whisper_files() -> Vec<MockFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper/tiny-ct2");
    ["config.json", "model.bin", "vocabulary.json"]
        .iter()
        .map(|name| MockFile {
            name: name.to_string(),
            bytes: std::fs::read(dir.join(name)).unwrap(),
            lfs: *name == "model.bin",
        })
        .collect()
}

/// A 16 kHz mono 16-bit WAV: a 300 Hz tone for `seconds`.
fn wav(path: &Path, seconds: f32) {
    let n = (seconds * 16_000.0) as usize;
    let data: Vec<u8> = (0..n)
        .map(|i| 0.5 * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 16_000.0).sin())
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
fn the_first_press_offers_whisper_base_which_downloads_once_and_then_hears() {
    let tmp = tempfile::tempdir().unwrap();
    let app = App::open(home(tmp.path())).unwrap();
    let voice = Voice::default();
    std::env::remove_var("HEARTH_OFFLINE");
    std::env::remove_var("HF_HUB_OFFLINE");
    std::env::remove_var("HF_TOKEN");

    // The offer: nothing hears here, so Whisper base is offered with its size and languages.
    let status = voice.status(&app);
    assert!(status.speech_models.is_empty() && !status.npu_hears);
    let offer = status.offer.expect("an offer when nothing can hear");
    assert_eq!(offer.name, "whisper-base");
    assert_eq!(offer.size_bytes, 147_882_941);
    assert_eq!(offer.languages.len(), 99);
    for code in ["en", "zh", "es", "de", "fr"] {
        assert!(offer.languages.iter().any(|l| l == code), "{code}");
    }
    assert_eq!((offer.paused_bytes, offer.downloading), (0, false));

    // Offline: said as such, nothing written.
    std::env::set_var("HEARTH_OFFLINE", "1");
    let error = download_speech_model(&app, &mut |_| {}).unwrap_err();
    assert_eq!(error.code, ErrorCode::Offline, "{}", error.message);
    std::env::remove_var("HEARTH_OFFLINE");
    // No network: the Hub cannot be reached, said with the address tried.
    std::env::set_var("HF_ENDPOINT", "http://127.0.0.1:9");
    let error = download_speech_model(&app, &mut |_| {}).unwrap_err();
    assert_eq!(error.code, ErrorCode::Network, "{}", error.message);
    assert_eq!(error.detail.as_deref(), Some("reach"), "{}", error.message);
    assert!(voice.status(&app).offer.is_some());

    // The download, with progress.
    let hub = MockHub::start();
    let entry = hearth_hub::catalog::find("whisper-base").unwrap().unwrap();
    hub.add_repo(&entry.repo, &entry.revision, whisper_files());
    std::env::set_var("HF_ENDPOINT", &hub.endpoint);
    let mut seen = 0;
    let result = download_speech_model(&app, &mut |_| seen += 1).unwrap();
    assert_eq!(result.outcome, PullEnd::Installed);
    assert!(seen > 2, "progress was reported");
    let status = voice.status(&app);
    assert_eq!(status.speech_models, ["whisper-base"]);
    assert!(
        status.offer.is_none(),
        "nothing is offered once one is installed"
    );
    let folder = PathBuf::from(&status.speech_models_dir).join("whisper-base");
    assert!(folder.join("model.bin").is_file());
    assert!(
        app.home().store().list().unwrap().is_empty(),
        "not a chat model"
    );

    // The microphone hears with it (the fixture's random weights write no real words).
    let sound = tmp.path().join("spoken.wav");
    wav(&sound, 1.0);
    std::env::set_var("HEARTH_TEST_MIC_WAV", &sound);
    std::env::set_var("HEARTH_TEST_MIC_SPEED", "100");
    let (tx, levels) = mpsc::channel();
    voice
        .start(move |l| {
            let _ = tx.send(l.elapsed_s);
        })
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while levels.recv_timeout(Duration::from_secs(60)).unwrap() < 1.0 {
        assert!(Instant::now() < deadline, "the test microphone played");
    }
    let heard = voice.stop(&app, Some("en")).unwrap();
    assert_eq!(heard.backend, "cpu");
    assert!(heard.duration_s >= 1.0, "{heard:?}");

    // A second click fetches nothing.
    let asked = hub.log().len();
    let again = download_speech_model(&app, &mut |_| {}).unwrap();
    assert_eq!(again.outcome, PullEnd::AlreadyInstalled);
    assert_eq!(hub.log().len(), asked, "the Hub was not asked again");

    // The spoken language: the app's when the conversation says nothing, "system" resolved.
    assert_eq!(spoken_language(&app, None, "fr"), "fr");
    assert_eq!(
        spoken_language(&app, Some("no-such-conversation"), "de"),
        "de"
    );

    // The Models page removes it as it removes a chat model; then it is offered again.
    let removed = app.remove_model("whisper-base").unwrap();
    assert_eq!(removed.name, "whisper-base");
    assert!(removed.freed_bytes > 0);
    assert!(!folder.exists());
    assert!(voice.status(&app).offer.is_some());
    // A Whisper folder the person put there is theirs: refused in words, left alone.
    let theirs = PathBuf::from(&status.speech_models_dir).join("my-whisper");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("model.bin"), b"mine").unwrap();
    let error = app.remove_model("my-whisper").unwrap_err();
    assert!(
        error.message.contains("not downloaded by Hearth"),
        "{}",
        error.message
    );
    assert!(theirs.join("model.bin").is_file());
}
