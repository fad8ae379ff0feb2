//! Downloads against a local imitation of the Hub: clean, cut, resumed after a "restart",
//! paused, corrupted, disk full, incomplete repository, 404, offline.

use crate::common;

use std::time::Duration;

use crate::common::{repo_files, MockHub, TempDir};
use hearth_hub::{
    pull, DownloadControl, DownloadOptions, Error, HubClient, Phase, Progress, PullOutcome,
    PullRequest, Store,
};

const REPO: &str = "hearth-test/Tiny-Q4NX";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn options() -> DownloadOptions {
    DownloadOptions {
        attempt_window: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(20),
        max_attempts: 4,
        retry_delay: Duration::from_millis(10),
        disk_reserve: 0,
    }
}

fn hub_with_tiny() -> MockHub {
    let hub = MockHub::start();
    hub.add_repo(REPO, COMMIT, repo_files("tiny-q4nx"));
    hub
}

fn request() -> PullRequest {
    PullRequest {
        query: REPO.into(),
        ..Default::default()
    }
}

fn run(
    store: &Store,
    hub: &MockHub,
    control: &DownloadControl,
    opts: &DownloadOptions,
) -> (hearth_hub::Result<PullOutcome>, Vec<Progress>) {
    let client = HubClient::new(&hub.endpoint, None, false);
    let mut events = Vec::new();
    let outcome = pull(store, &client, &request(), opts, control, &mut |p| {
        events.push(p.clone())
    });
    (outcome, events)
}

/// Pulls `query` with the default options and no progress handler.
fn pull_query(store: &Store, hub: &MockHub, query: &str) -> hearth_hub::Result<PullOutcome> {
    let client = HubClient::new(&hub.endpoint, None, false);
    let request = PullRequest {
        query: query.into(),
        ..Default::default()
    };
    pull(
        store,
        &client,
        &request,
        &options(),
        &DownloadControl::new(),
        &mut |_| {},
    )
}

fn model_q4nx_size() -> u64 {
    std::fs::metadata(common::fixture("tiny-q4nx").join("model.q4nx"))
        .unwrap()
        .len()
}

fn registry_json(store: &Store) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(store.root().join("model_list.json")).unwrap()).unwrap()
}

fn assert_nothing_registered(store: &Store) {
    assert!(
        store.list().unwrap().is_empty(),
        "no model may be registered"
    );
    assert!(
        !store.models_dir().join("Tiny-Q4NX").exists(),
        "no model folder may be left"
    );
}

#[test]
fn clean_download_is_verified_validated_and_registered_for_fastflowlm() {
    let tmp = TempDir::new("clean");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    let (outcome, events) = run(&store, &hub, &DownloadControl::new(), &options());
    let PullOutcome::Installed(model) = outcome.unwrap() else {
        panic!("expected Installed")
    };
    assert_eq!(model.name, "Tiny-Q4NX");
    assert_eq!(model.tag, "tiny-q4nx:latest");
    assert!(model.folder.join("model.q4nx").is_file());
    assert!(
        !model.folder.join("README.md").exists(),
        "docs are not downloaded"
    );
    assert!(
        !store.downloads_dir().join("Tiny-Q4NX").exists(),
        "staging is cleaned up"
    );
    assert_eq!(events.last().unwrap().phase, Phase::Done);
    assert_eq!(
        events.last().unwrap().done_bytes,
        events.last().unwrap().total_bytes
    );

    let json = registry_json(&store);
    let entry = &json["models"]["tiny-q4nx"]["latest"];
    assert_eq!(entry["name"], "Tiny-Q4NX");
    assert_eq!(json["model_path"], store.models_dir().display().to_string());
    assert_eq!(
        entry["files"],
        serde_json::json!([
            "config.json",
            "model.q4nx",
            "tokenizer.json",
            "tokenizer_config.json"
        ])
    );
    assert_eq!(
        entry["details"]["family"], "llama3",
        "FastFlowLM's engine for Llama models"
    );
    assert_eq!(
        entry["url"],
        format!("{}/{REPO}/resolve/{COMMIT}", hub.endpoint)
    );
    let sha = common::repo_files("tiny-q4nx")
        .into_iter()
        .find(|f| f.name == "model.q4nx")
        .unwrap()
        .sha256();
    assert_eq!(entry["hearth"]["files"]["model.q4nx"]["sha256"], sha);
    assert_eq!(entry["hearth"]["revision"], COMMIT);
    assert_eq!(entry["hearth"]["backends"], serde_json::json!(["cpu"]));

    // Pulling again touches no network and says it is there.
    let offline = HubClient::new(&hub.endpoint, None, true);
    let again = pull(
        &store,
        &offline,
        &request(),
        &options(),
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap();
    assert!(matches!(again, PullOutcome::AlreadyInstalled(_)));
}

#[test]
fn connection_cut_mid_file_resumes_at_the_byte_where_it_stopped() {
    let tmp = TempDir::new("cut");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    hub.cut_after("model.q4nx", 40_000);
    let (outcome, events) = run(&store, &hub, &DownloadControl::new(), &options());
    assert!(matches!(outcome.unwrap(), PullOutcome::Installed(_)));
    let ranges: Vec<_> = hub
        .log()
        .into_iter()
        .filter(|l| l.path.starts_with("/cdn/"))
        .map(|l| l.range)
        .collect();
    assert_eq!(ranges, [None, Some("bytes=40000-".to_string())]);
    assert_eq!(
        hub.served("model.q4nx"),
        model_q4nx_size(),
        "no byte is fetched twice"
    );
    assert!(
        events.iter().any(|p| p.phase == Phase::Retrying),
        "the retry is reported"
    );
}

#[test]
fn download_interrupted_by_a_crash_resumes_from_the_partial_file_in_a_new_run() {
    let tmp = TempDir::new("restart");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    // First run: the connection goes silent after 30 000 bytes, the retry brings nothing and
    // the run gives up, leaving what a killed process leaves: a .part file on disk.
    hub.stall_after("model.q4nx", 30_000, Duration::from_secs(2));
    hub.stall_after("model.q4nx", 0, Duration::from_secs(2));
    let quick = DownloadOptions {
        attempt_window: Duration::from_millis(300),
        max_attempts: 1,
        ..options()
    };
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &quick);
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::Stalled { .. }), "{err}");
    assert!(err.to_string().contains("resumes"), "{err}");
    assert_nothing_registered(&store);
    let partial = store.partial_downloads().unwrap();
    assert_eq!(partial.len(), 1);
    assert!(partial[0].done_bytes >= 30_000);

    // Second run, from scratch in memory: only the rest is fetched.
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    assert!(matches!(outcome.unwrap(), PullOutcome::Installed(_)));
    let last = hub
        .log()
        .into_iter()
        .rfind(|l| l.path.starts_with("/cdn/"))
        .unwrap();
    assert_eq!(last.range.as_deref(), Some("bytes=30000-"));
    assert_eq!(hub.served("model.q4nx"), model_q4nx_size());
    assert!(store.partial_downloads().unwrap().is_empty());
}

#[test]
fn pause_keeps_the_bytes_and_cancel_deletes_them() {
    let tmp = TempDir::new("pause");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    let control = DownloadControl::new();
    let pauser = control.clone();
    hub.hook_after("model.q4nx", 20_000, move || pauser.pause());
    let (outcome, events) = run(&store, &hub, &control, &options());
    let PullOutcome::Paused {
        done_bytes,
        total_bytes,
    } = outcome.unwrap()
    else {
        panic!("expected Paused")
    };
    assert!(done_bytes < total_bytes, "{done_bytes} of {total_bytes}");
    assert_eq!(events.last().unwrap().phase, Phase::Paused);
    assert_nothing_registered(&store);
    assert_eq!(store.partial_downloads().unwrap().len(), 1);

    // Cancel: a new run told to cancel at once deletes the partial files.
    let control = DownloadControl::new();
    control.cancel();
    let (outcome, _) = run(&store, &hub, &control, &options());
    assert_eq!(outcome.unwrap(), PullOutcome::Cancelled);
    assert!(!store.downloads_dir().join("Tiny-Q4NX").exists());
    assert_nothing_registered(&store);
}

#[test]
fn corrupted_byte_is_refused_with_a_plain_message_and_nothing_is_registered() {
    let tmp = TempDir::new("corrupt");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    hub.corrupt("model.q4nx", 5_000);
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    let err = outcome.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::ChecksumMismatch { .. }), "{text}");
    assert!(text.contains("model.q4nx is corrupted"), "{text}");
    assert!(text.contains("sha256"), "{text}");
    assert!(text.contains("nothing was registered"), "{text}");
    assert_nothing_registered(&store);
    let part = store
        .downloads_dir()
        .join("Tiny-Q4NX/files/model.q4nx.part");
    assert!(!part.exists(), "the broken bytes are not kept for a resume");
}

#[test]
fn corrupted_small_file_is_caught_by_its_git_blob_id() {
    let tmp = TempDir::new("corrupt-small");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    hub.corrupt("config.json", 3);
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    let err = outcome.unwrap_err();
    assert!(
        err.to_string()
            .contains("config.json is corrupted: its git sha1"),
        "{err}"
    );
    assert_nothing_registered(&store);
}

#[test]
fn repository_without_model_files_says_what_is_missing() {
    let tmp = TempDir::new("missing");
    let store = Store::at(tmp.0.clone());
    let hub = MockHub::start();
    hub.add_repo(
        "hearth-test/Only-GGUF",
        COMMIT,
        vec![
            common::MockFile {
                name: "README.md".into(),
                bytes: b"hi".to_vec(),
                lfs: false,
            },
            common::MockFile {
                name: "model.gguf".into(),
                bytes: vec![0; 64],
                lfs: true,
            },
        ],
    );
    let err = pull_query(&store, &hub, "hearth-test/Only-GGUF").unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::MissingFiles { .. }), "{text}");
    for needle in [
        "config.json",
        "tokenizer.json",
        "model.q4nx or model.safetensors",
        "model.gguf",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    assert!(
        !store.downloads_dir().join("Only-GGUF").exists(),
        "no trace is left"
    );
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn unknown_repository_is_a_404_with_a_plain_message() {
    let tmp = TempDir::new("404");
    let store = Store::at(tmp.0.clone());
    let hub = MockHub::start();
    let err = pull_query(&store, &hub, "nobody/Nothing-Here").unwrap_err();
    assert!(matches!(err, Error::RepoNotFound { .. }), "{err}");
    assert!(err.to_string().contains("nobody/Nothing-Here"), "{err}");
    assert!(err.to_string().contains("not found"), "{err}");
}

#[test]
fn offline_mode_never_touches_the_network() {
    let tmp = TempDir::new("offline");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_tiny();
    let client = HubClient::new(&hub.endpoint, None, true);
    let err = pull(
        &store,
        &client,
        &request(),
        &options(),
        &DownloadControl::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, Error::Offline { .. }), "{err}");
    assert!(
        hub.log().is_empty(),
        "no request may reach the server: {:?}",
        hub.log()
    );
}

/// Mounts a small tmpfs for the disk-full tests; `None` (with the reason printed) where this
/// is not allowed (not root, no mount namespace rights).
struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    fn mount(bytes: u64) -> Option<SmallDisk> {
        let dir = TempDir::new("tmpfs");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&dir.0)
            .stderr(std::process::Stdio::piped())
            .output();
        match status {
            Ok(out) if out.status.success() => Some(SmallDisk { dir }),
            Ok(out) => {
                eprintln!(
                    "SKIPPED: cannot mount a small tmpfs to fill up ({}); the disk-full path was not exercised",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount ({e}); the disk-full path was not exercised");
                None
            }
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.dir.0)
            .status();
    }
}

#[test]
fn full_disk_is_refused_before_any_byte_is_written() {
    let Some(disk) = SmallDisk::mount(64 * 1024) else {
        return;
    };
    let store = Store::at(disk.dir.0.join("hearth"));
    let hub = hub_with_tiny();
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    let err = outcome.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::NotEnoughDisk { .. }), "{text}");
    assert!(text.contains("not enough free disk space"), "{text}");
    assert!(
        !hub.log()
            .iter()
            .any(|l| l.path.contains("/resolve/") || l.path.starts_with("/cdn/")),
        "no file was requested"
    );
    assert_nothing_registered(&store);
}

#[test]
fn disk_filling_up_mid_download_stops_cleanly_and_resumes_after_space_is_freed() {
    let Some(disk) = SmallDisk::mount(256 * 1024) else {
        return;
    };
    let store = Store::at(disk.dir.0.join("hearth"));
    let hub = hub_with_tiny();
    let filler = disk.dir.0.join("filler");
    let filler_in_hook = filler.clone();
    hub.hook_after("model.q4nx", 20_000, move || {
        // Something else fills the disk while the download runs.
        let mut f = std::fs::File::create(&filler_in_hook).unwrap();
        let chunk = vec![1u8; 4096];
        while std::io::Write::write_all(&mut f, &chunk).is_ok() {}
    });
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    let err = outcome.unwrap_err();
    assert!(matches!(err, Error::DiskFull { .. }), "{err}");
    assert!(err.to_string().contains("disk is full"), "{err}");
    assert_nothing_registered(&store);

    std::fs::remove_file(&filler).unwrap();
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    assert!(matches!(outcome.unwrap(), PullOutcome::Installed(_)));
    let last = hub
        .log()
        .into_iter()
        .rfind(|l| l.path.starts_with("/cdn/"))
        .unwrap();
    assert!(last.range.is_some(), "resumed, not restarted: {last:?}");
}

#[test]
fn declared_sizes_that_overflow_or_are_absurd_are_refused_before_any_byte_is_written() {
    for sizes in [[1u64 << 63, 1u64 << 63], [u64::MAX, 1], [1u64 << 62, 10]] {
        let tmp = TempDir::new("overflow");
        let store = Store::at(tmp.0.join("hearth"));
        let hub = hub_with_tiny();
        hub.declare_size("model.q4nx", sizes[0]);
        hub.declare_size("tokenizer.json", sizes[1]);
        let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
        let err = outcome.unwrap_err();
        assert!(
            matches!(err, Error::BadResponse { .. } | Error::NotEnoughDisk { .. }),
            "{err}"
        );
        assert!(
            !hub.log()
                .iter()
                .any(|l| l.path.contains("/resolve/") || l.path.starts_with("/cdn/")),
            "no file was requested: {err}"
        );
        assert_nothing_registered(&store);
    }
}

#[test]
fn a_download_that_fails_the_model_check_is_refused_and_deleted() {
    let tmp = TempDir::new("check");
    let store = Store::at(tmp.0.clone())
        .with_model_check(|_, name| Err(format!("the chat template of {name} was stopped")));
    let hub = hub_with_tiny();
    let (outcome, _) = run(&store, &hub, &DownloadControl::new(), &options());
    let err = outcome.unwrap_err();
    assert!(
        matches!(&err, Error::RefusedModel { name, .. } if name == "Tiny-Q4NX"),
        "{err}"
    );
    assert_nothing_registered(&store);
    assert!(
        !store.downloads_dir().join("Tiny-Q4NX").exists(),
        "the refused files are not kept for a resume"
    );
}

/// The tiny model with two kernels and a kernel list naming them (`kernel_sha` overrides the
/// listed sha256 of `attn.xclbin`).
fn hub_with_kernels(kernel_sha: Option<&str>) -> MockHub {
    let mut files = repo_files("tiny-q4nx");
    let kernel = |name: &str, bytes: &[u8]| common::MockFile {
        name: name.into(),
        bytes: bytes.to_vec(),
        lfs: true,
    };
    let attn = kernel("attn.xclbin", b"an attention kernel");
    let mm = kernel("mm.xclbin", b"a matmul kernel");
    let list = serde_json::json!([
        {"type": "file", "path": "attn.xclbin", "size": attn.bytes.len(),
         "lfs": {"oid": kernel_sha.map_or(attn.sha256(), str::to_string), "size": attn.bytes.len()}},
        {"type": "file", "path": "mm.xclbin", "size": mm.bytes.len(),
         "lfs": {"oid": mm.sha256(), "size": mm.bytes.len()}},
        {"type": "file", "path": "config.json", "size": 3}
    ]);
    files.push(attn);
    files.push(mm);
    files.push(common::MockFile {
        name: "model_info.json".into(),
        bytes: list.to_string().into_bytes(),
        lfs: false,
    });
    let hub = MockHub::start();
    hub.add_repo(REPO, COMMIT, files);
    hub
}

#[test]
fn listed_kernels_are_verified_and_listed_as_such() {
    let tmp = TempDir::new("kernels");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_kernels(None);
    let PullOutcome::Installed(model) = pull_query(&store, &hub, REPO).unwrap() else {
        panic!("expected Installed")
    };
    assert!(model.folder.join("model_info.json").is_file());
    assert!(model.folder.join("attn.xclbin").is_file());
    let status = hearth_hub::kernel_status(&model.folder, &model.files);
    assert_eq!(status.words(), "kernels verified (2)");

    let plain = TempDir::new("no-kernel-list");
    let store = Store::at(plain.0.clone());
    let PullOutcome::Installed(model) = pull_query(&store, &hub_with_tiny(), REPO).unwrap() else {
        panic!("expected Installed")
    };
    let status = hearth_hub::kernel_status(&model.folder, &model.files);
    assert_eq!(status.words(), "no kernel list");
}

#[test]
fn a_kernel_unlike_its_list_registers_nothing() {
    let tmp = TempDir::new("kernel-mismatch");
    let store = Store::at(tmp.0.clone());
    let hub = hub_with_kernels(Some(&"ab".repeat(32)));
    let e = pull_query(&store, &hub, REPO).unwrap_err();
    assert!(matches!(e, Error::KernelMismatch { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("attn.xclbin") && text.contains("the list says abab"),
        "{text}"
    );
    assert_nothing_registered(&store);
}

/// FastFlowLM's packing of Gemma 3 4B sees pictures: a pull of it from the catalog writes
/// FastFlowLM's own `vlm: true` beside `details` in its registry entry (where FastFlowLM and
/// Hearth's NPU backend look before a picture is sent) and keeps `vision_weight.q4nx`; a model
/// the catalog does not mark gets no mark, so FastFlowLM's schema stays as it writes it.
#[test]
fn a_vision_model_is_registered_with_fastflowlms_vlm_mark() {
    let tmp = TempDir::new("vision");
    let store = Store::at(tmp.0.clone());
    let hub = MockHub::start();
    let mut files = repo_files("tiny-q4nx");
    files.push(common::MockFile {
        name: "vision_weight.q4nx".into(),
        bytes: b"the vision tower's weights".to_vec(),
        lfs: true,
    });
    hub.add_repo("FastFlowLM/Gemma3-4B-NPU2", COMMIT, files);
    hub.add_repo(
        "FastFlowLM/Qwen3-1.7B-NPU2",
        COMMIT,
        repo_files("tiny-q4nx"),
    );
    // The catalog pins a revision of each.
    for id in ["gemma3-4b-npu2", "qwen3-1.7b-npu2"] {
        let entry = hearth_hub::catalog::find(id).unwrap().unwrap();
        hub.add_tag(&entry.repo, &entry.revision);
    }

    let PullOutcome::Installed(model) = pull_query(&store, &hub, "gemma3-4b-npu2").unwrap() else {
        panic!("expected Installed")
    };
    assert_eq!(
        (model.name.as_str(), model.tag.as_str()),
        ("Gemma3-4B-NPU2", "gemma3:4b")
    );
    assert!(model.sees_pictures, "the catalog's vlm");
    assert!(model.folder.join("vision_weight.q4nx").is_file());
    let PullOutcome::Installed(text_only) = pull_query(&store, &hub, "qwen3:1.7b").unwrap() else {
        panic!("expected Installed")
    };
    assert!(!text_only.sees_pictures);

    let json = registry_json(&store);
    let entry = &json["models"]["gemma3"]["4b"];
    assert_eq!(entry["vlm"], serde_json::json!(true), "{entry:#}");
    assert_eq!(entry["details"]["family"], "gemma3");
    assert!(
        entry["details"].get("vlm").is_none(),
        "beside details, not in it"
    );
    assert!(entry["files"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("vision_weight.q4nx")));
    assert!(
        json["models"]["qwen3"]["1.7b"].get("vlm").is_none(),
        "no mark on a model that reads text only"
    );

    // Read back from the file, as the app lists models whether or not FastFlowLM is installed.
    let listed: Vec<(String, bool)> = store
        .list()
        .unwrap()
        .into_iter()
        .map(|m| (m.name, m.sees_pictures))
        .collect();
    assert_eq!(
        listed,
        [
            ("Gemma3-4B-NPU2".to_string(), true),
            ("Qwen3-1.7B-NPU2".to_string(), false)
        ]
    );
}
