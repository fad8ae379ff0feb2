//! Speech models pulled from the catalog against the local imitation of the Hub: installed into
//! `models/speech/<name>/` and not registered, paused and resumed, cancelled, offline, too little
//! disk, a model.bin that is not Whisper's, and removal (only of what Hearth downloaded).

use std::path::Path;
use std::time::Duration;

use crate::common::{MockFile, MockHub, TempDir};
use hearth_hub::{
    pull, speech, DownloadControl, DownloadOptions, Error, HubClient, Phase, PullOutcome,
    PullRequest, Store, WeightFormat,
};

/// The repository and commit the catalog pins for whisper-base.
const REPO: &str = "Systran/faster-whisper-base";

fn pinned_commit() -> String {
    hearth_hub::catalog::find("whisper-base")
        .unwrap()
        .unwrap()
        .revision
        .clone()
}

fn options() -> DownloadOptions {
    DownloadOptions {
        attempt_window: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(20),
        max_attempts: 4,
        retry_delay: Duration::from_millis(10),
        disk_reserve: 0,
    }
}

/// The tiny Whisper fixture (CTranslate2's form) as the repository's files, with a README that
/// a pull must not fetch.
fn whisper_files() -> Vec<MockFile> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper/tiny-ct2");
    let mut files: Vec<MockFile> = ["config.json", "model.bin", "vocabulary.json"]
        .iter()
        .map(|name| MockFile {
            name: name.to_string(),
            bytes: std::fs::read(dir.join(name)).unwrap(),
            lfs: *name == "model.bin",
        })
        .collect();
    files.push(MockFile {
        name: "README.md".into(),
        bytes: b"# faster-whisper\n".to_vec(),
        lfs: false,
    });
    files
}

fn hub_with(files: Vec<MockFile>) -> MockHub {
    let hub = MockHub::start();
    hub.add_repo(REPO, &pinned_commit(), files);
    hub
}

fn pull_with(
    store: &Store,
    hub: &MockHub,
    offline: bool,
    opts: &DownloadOptions,
    control: &DownloadControl,
) -> (hearth_hub::Result<PullOutcome>, Vec<Phase>) {
    let client = HubClient::new(&hub.endpoint, None, offline);
    let request = PullRequest {
        query: "whisper-base".into(),
        ..Default::default()
    };
    let mut phases = Vec::new();
    let outcome = pull(store, &client, &request, opts, control, &mut |p| {
        phases.push(p.phase)
    });
    (outcome, phases)
}

fn pull_base(store: &Store, hub: &MockHub) -> hearth_hub::Result<PullOutcome> {
    pull_with(store, hub, false, &options(), &DownloadControl::new()).0
}

fn target(store: &Store) -> std::path::PathBuf {
    store.models_dir().join("speech").join("whisper-base")
}

fn registry_is_empty(store: &Store) -> bool {
    store.list().unwrap().is_empty()
}

#[test]
fn whisper_base_installs_into_models_speech_unregistered_and_a_second_pull_fetches_nothing() {
    let tmp = TempDir::new("speech-install");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with(whisper_files());
    let (outcome, phases) = pull_with(&store, &hub, false, &options(), &DownloadControl::new());
    let PullOutcome::Installed(model) = outcome.unwrap() else {
        panic!("expected Installed")
    };
    assert_eq!(model.folder, target(&store));
    assert_eq!(model.format, WeightFormat::Ct2);
    assert_eq!(model.catalog_id.as_deref(), Some("whisper-base"));
    assert_eq!(model.kind(), hearth_hub::ModelKind::Speech);
    assert_eq!(phases.last(), Some(&Phase::Done));
    for file in [
        "config.json",
        "model.bin",
        "vocabulary.json",
        speech::DOWNLOAD_MARK,
    ] {
        assert!(target(&store).join(file).is_file(), "{file}");
    }
    assert!(!target(&store).join("README.md").exists());
    assert!(registry_is_empty(&store), "not in FastFlowLM's registry");
    assert!(!store.downloads_dir().join("whisper-base").exists());
    assert!(
        hub.log().iter().all(|l| !l.path.contains("README")),
        "the README was not fetched"
    );

    let before = hub.log().len();
    let PullOutcome::AlreadyInstalled(again) = pull_base(&store, &hub).unwrap() else {
        panic!("expected AlreadyInstalled")
    };
    assert_eq!(again.folder, target(&store));
    assert_eq!(
        hub.log().len(),
        before,
        "the second pull asked the Hub nothing"
    );
}

#[test]
fn a_paused_download_resumes_where_it_stopped_and_cancel_deletes_it() {
    let tmp = TempDir::new("speech-pause");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with(whisper_files());
    let control = DownloadControl::new();
    let pauser = control.clone();
    hub.hook_after("model.bin", 100_000, move || pauser.pause());
    let (outcome, phases) = pull_with(&store, &hub, false, &options(), &control);
    let PullOutcome::Paused {
        done_bytes,
        total_bytes,
    } = outcome.unwrap()
    else {
        panic!("expected Paused")
    };
    assert!(done_bytes >= 100_000 && done_bytes < total_bytes);
    assert_eq!(phases.last(), Some(&Phase::Paused));
    assert!(!target(&store).exists());
    let partial = store.partial_downloads().unwrap();
    assert_eq!(partial.len(), 1);
    assert_eq!(partial[0].query, "whisper-base");

    // Resumed: the model.bin request starts at the bytes already on disk.
    let served_before = hub.served("model.bin");
    let PullOutcome::Installed(_) = pull_base(&store, &hub).unwrap() else {
        panic!("expected Installed")
    };
    let total = std::fs::metadata(target(&store).join("model.bin"))
        .unwrap()
        .len();
    assert!(
        hub.served("model.bin") - served_before < total,
        "only the rest was fetched"
    );
    assert!(store.partial_downloads().unwrap().is_empty());

    // Cancel: a second model paused, then cancelled, leaves nothing.
    let tmp = TempDir::new("speech-cancel");
    let store = Store::at(tmp.0.clone());
    let control = DownloadControl::new();
    control.cancel();
    let (outcome, _) = pull_with(&store, &hub, false, &options(), &control);
    assert_eq!(outcome.unwrap(), PullOutcome::Cancelled);
    assert!(!store.downloads_dir().join("whisper-base").exists());
    assert!(!target(&store).exists());
}

#[test]
fn offline_and_too_little_disk_say_so_and_write_nothing() {
    let tmp = TempDir::new("speech-offline");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with(whisper_files());
    let (outcome, _) = pull_with(&store, &hub, true, &options(), &DownloadControl::new());
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::Offline { .. }), "{err}");
    assert!(err.to_string().contains("whisper-base"), "{err}");
    assert!(hub.log().is_empty(), "offline touches no network");

    let greedy = DownloadOptions {
        disk_reserve: u64::MAX / 4,
        ..options()
    };
    let (outcome, _) = pull_with(&store, &hub, false, &greedy, &DownloadControl::new());
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::NotEnoughDisk { .. }), "{err}");
    assert!(
        err.to_string().contains("not enough free disk space"),
        "{err}"
    );
    assert!(!hub.log().iter().any(|l| l.path.contains("/resolve/")));
    assert!(!target(&store).exists());
}

#[test]
fn a_model_bin_that_is_not_whisper_is_refused_and_deleted() {
    let tmp = TempDir::new("speech-bad");
    let store = Store::at(tmp.0.clone());
    let mut files = whisper_files();
    let bin = files.iter_mut().find(|f| f.name == "model.bin").unwrap();
    // A CTranslate2 header of a translation model.
    let mut bytes = 6u32.to_le_bytes().to_vec();
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"TransformerSpec\0");
    bytes.extend_from_slice(&[0; 64]);
    bin.bytes = bytes;
    let hub = hub_with(files);
    let err = pull_base(&store, &hub).unwrap_err();
    assert!(matches!(err, Error::InvalidModel { .. }), "{err}");
    assert!(err.to_string().contains("not Whisper"), "{err}");
    assert!(!target(&store).exists());
    assert!(!store.downloads_dir().join("whisper-base").exists());
}

#[test]
fn rm_deletes_what_hearth_downloaded_and_refuses_a_folder_the_person_put_there() {
    let tmp = TempDir::new("speech-rm");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with(whisper_files());
    pull_base(&store, &hub).unwrap();
    let removed = speech::remove(&store, "whisper-base").unwrap();
    assert!(removed.freed_bytes > 2_000_000, "{removed:?}");
    assert!(!target(&store).exists());
    let err = speech::remove(&store, "whisper-base").unwrap_err();
    assert!(matches!(err, Error::NotInstalled { .. }), "{err}");

    // A Whisper folder put there by hand: used, never deleted.
    let mine = store.models_dir().join("speech").join("my-whisper");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("config.json"), "{}").unwrap();
    std::fs::write(mine.join("model.bin"), "x").unwrap();
    let err = speech::remove(&store, "my-whisper").unwrap_err();
    assert!(
        err.to_string().contains("not downloaded by Hearth"),
        "{err}"
    );
    assert!(mine.join("model.bin").is_file());
    assert!(speech::installed(&store, "my-whisper").unwrap().is_some());

    // Nor may a chat model take the speech folder's name.
    let err = store.remove("speech").unwrap_err();
    assert!(matches!(err, Error::InvalidName { .. }), "{err}");
}
