//! Piper voice downloads against the local imitation of the Hub: files in nested folders,
//! a cut connection resumed, a partial file from an earlier run resumed, a corrupted byte
//! refused, a cancel, and a listed path that would leave the voices folder.

use std::path::Path;
use std::time::Duration;

use crate::common::{MockFile, MockHub, TempDir};
use hearth_hub::voices::{
    download_voice, voice_for_language, PiperVoiceEntry, VoiceOutcome, VOICES_REPO, VOICES_REVISION,
};
use hearth_hub::{DownloadControl, DownloadOptions, Error, HubClient, Phase, Progress};

const COMMIT: &str = "89abcdef0123456789abcdef0123456789abcdef";

fn options() -> DownloadOptions {
    DownloadOptions {
        attempt_window: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(20),
        max_attempts: 4,
        retry_delay: Duration::from_millis(10),
        disk_reserve: 0,
    }
}

fn english() -> &'static PiperVoiceEntry {
    voice_for_language("en").unwrap()
}

/// The model's bytes: not a real network, only something whose every byte counts.
fn model_bytes() -> Vec<u8> {
    (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect()
}

const DESCRIPTION: &[u8] = br#"{"language":{"code":"en_US"},"audio":{"sample_rate":22050}}"#;

/// A Hub holding the English voice in its nested folder (and a German one beside it), with
/// the tag voices are fetched at.
fn hub_with_voices() -> MockHub {
    let [json, onnx] = english().remote_paths();
    let hub = MockHub::start();
    hub.add_repo(
        VOICES_REPO,
        COMMIT,
        vec![
            MockFile {
                name: json,
                bytes: DESCRIPTION.to_vec(),
                lfs: false,
            },
            MockFile {
                name: onnx,
                bytes: model_bytes(),
                lfs: true,
            },
            MockFile {
                name: "de/de_DE/thorsten/medium/de_DE-thorsten-medium.onnx".into(),
                bytes: vec![1; 10],
                lfs: true,
            },
            MockFile {
                name: "README.md".into(),
                bytes: b"voices".to_vec(),
                lfs: false,
            },
        ],
    );
    hub.add_tag(VOICES_REPO, VOICES_REVISION);
    hub
}

fn download(
    hub: &MockHub,
    folder: &Path,
    control: &DownloadControl,
) -> (hearth_hub::Result<VoiceOutcome>, Vec<Progress>) {
    let client = HubClient::new(&hub.endpoint, None, false);
    let mut events = Vec::new();
    let outcome = download_voice(&client, english(), folder, &options(), control, &mut |p| {
        events.push(p.clone())
    });
    (outcome, events)
}

/// The files in `folder`, sorted.
fn listing(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_voice_in_nested_folders_lands_beside_its_description_verified() {
    let tmp = TempDir::new("voice-clean");
    let folder = tmp.0.join("voices");
    let hub = hub_with_voices();
    let (outcome, events) = download(&hub, &folder, &DownloadControl::new());
    assert_eq!(outcome.unwrap(), VoiceOutcome::Installed);
    assert_eq!(
        listing(&folder),
        ["en_US-lessac-medium.onnx", "en_US-lessac-medium.onnx.json"]
    );
    assert_eq!(
        std::fs::read(folder.join("en_US-lessac-medium.onnx")).unwrap(),
        model_bytes()
    );
    assert!(english().is_installed(&folder));
    // Fetched by their nested paths, at the commit the tag points to.
    let paths: Vec<String> = hub.log().into_iter().map(|l| l.path).collect();
    assert!(
        paths.contains(&format!(
            "/api/models/{VOICES_REPO}/revision/{VOICES_REVISION}"
        )),
        "{paths:?}"
    );
    assert!(
        paths.contains(&format!(
            "/api/models/{VOICES_REPO}/tree/{COMMIT}/en/en_US/lessac/medium"
        )),
        "{paths:?}"
    );
    assert!(
        paths.contains(&format!(
            "/{VOICES_REPO}/resolve/{COMMIT}/en/en_US/lessac/medium/en_US-lessac-medium.onnx"
        )),
        "{paths:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(last.phase, Phase::Done);
    assert_eq!(
        last.total_bytes,
        (model_bytes().len() + DESCRIPTION.len()) as u64
    );
    assert_eq!(last.done_bytes, last.total_bytes);

    // A second download fetches nothing.
    let before = hub.log().len();
    let (outcome, _) = download(&hub, &folder, &DownloadControl::new());
    assert_eq!(outcome.unwrap(), VoiceOutcome::AlreadyInstalled);
    assert_eq!(hub.log().len(), before);
}

#[test]
fn a_cut_connection_resumes_at_the_byte_it_reached() {
    let tmp = TempDir::new("voice-cut");
    let hub = hub_with_voices();
    let [_, onnx] = english().remote_paths();
    hub.cut_after(&onnx, 100_000);
    let (outcome, events) = download(&hub, &tmp.0, &DownloadControl::new());
    assert_eq!(outcome.unwrap(), VoiceOutcome::Installed);
    assert_eq!(
        hub.served(&onnx),
        model_bytes().len() as u64,
        "no byte is fetched twice"
    );
    assert!(hub
        .log()
        .iter()
        .any(|l| l.range.as_deref() == Some("bytes=100000-")));
    assert!(events.iter().any(|p| p.phase == Phase::Retrying));
}

#[test]
fn a_partial_file_from_an_earlier_run_is_resumed() {
    let tmp = TempDir::new("voice-resume");
    let hub = hub_with_voices();
    let [_, onnx] = english().remote_paths();
    std::fs::write(
        tmp.0.join("en_US-lessac-medium.onnx.part"),
        &model_bytes()[..120_000],
    )
    .unwrap();
    let (outcome, _) = download(&hub, &tmp.0, &DownloadControl::new());
    assert_eq!(outcome.unwrap(), VoiceOutcome::Installed);
    assert_eq!(hub.served(&onnx), (model_bytes().len() - 120_000) as u64);
    assert_eq!(
        std::fs::read(tmp.0.join("en_US-lessac-medium.onnx")).unwrap(),
        model_bytes()
    );
}

#[test]
fn a_corrupted_byte_is_refused_and_no_voice_is_left() {
    let tmp = TempDir::new("voice-corrupt");
    let hub = hub_with_voices();
    let [_, onnx] = english().remote_paths();
    hub.corrupt(&onnx, 777);
    let (outcome, _) = download(&hub, &tmp.0, &DownloadControl::new());
    let e = outcome.unwrap_err();
    assert!(
        matches!(
            e,
            Error::ChecksumMismatch {
                algorithm: "sha256",
                ..
            }
        ),
        "{e}"
    );
    assert!(!english().is_installed(&tmp.0));
    assert!(!tmp.0.join("en_US-lessac-medium.onnx").exists());
    assert!(!tmp.0.join("en_US-lessac-medium.onnx.part").exists());
}

#[test]
fn a_cancel_deletes_the_partial_files() {
    let tmp = TempDir::new("voice-cancel");
    let hub = hub_with_voices();
    let [_, onnx] = english().remote_paths();
    let control = DownloadControl::new();
    let canceller = control.clone();
    hub.hook_after(&onnx, 50_000, move || canceller.cancel());
    let (outcome, events) = download(&hub, &tmp.0, &control);
    assert_eq!(outcome.unwrap(), VoiceOutcome::Cancelled);
    assert_eq!(events.last().unwrap().phase, Phase::Cancelled);
    assert!(!tmp.0.join("en_US-lessac-medium.onnx.part").exists());
    assert!(!english().is_installed(&tmp.0));
}

#[test]
fn a_voice_missing_from_the_hub_says_so() {
    let tmp = TempDir::new("voice-missing");
    let hub = MockHub::start();
    hub.add_repo(VOICES_REPO, COMMIT, vec![]);
    hub.add_tag(VOICES_REPO, VOICES_REVISION);
    let (outcome, _) = download(&hub, &tmp.0, &DownloadControl::new());
    let e = outcome.unwrap_err();
    assert!(matches!(e, Error::RepoNotFound { .. }), "{e}");
    assert!(
        e.to_string().contains("en_US-lessac-medium.onnx.json"),
        "{e}"
    );
}

#[test]
fn a_listed_path_that_would_leave_the_folder_is_refused_before_any_download() {
    let hub = hub_with_voices();
    let client = HubClient::new(&hub.endpoint, None, false);
    for path in ["../../etc/x.onnx", "/abs/x.onnx", "en\\..\\x.onnx"] {
        let e = client
            .file_info(VOICES_REPO, COMMIT, path, &DownloadControl::new())
            .unwrap_err();
        assert!(matches!(e, Error::BadResponse { .. }), "{path}: {e}");
    }
    assert!(hub.log().is_empty(), "nothing was asked of the Hub");
}

#[test]
fn offline_mode_never_touches_the_network() {
    let tmp = TempDir::new("voice-offline");
    let hub = hub_with_voices();
    let client = HubClient::new(&hub.endpoint, None, true);
    let e = download_voice(
        &client,
        english(),
        &tmp.0,
        &options(),
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, Error::Offline { .. }), "{e}");
    assert!(hub.log().is_empty());
}
