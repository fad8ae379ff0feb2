//! Who holds the NPU, against the imitation as each FastFlowLM release that differs in it
//! (notes, "FastFlowLM 1.0.8 to 1.0.14"): 0.9.45 and 1.0.7 open the device only to serve (and
//! `validate` skips a held one as absent), 1.0.8 opens it in every process at start (a second
//! `flm` prints "No NPU device found"), 1.0.9 and 1.0.14 say `"busy": true` in `validate`.
//!
//! Hearth must call a held NPU busy, never missing, and name who holds it; and it must never
//! start a second `flm` beside its own server. The imitated device is a lock on a file
//! (`FLM_IMITATION_DEVICE`); the system Hearth reads (`/proc`) is a fixture tree, given to the
//! lookup as its root, so the holder is a process of that tree.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use hearth_backends::npu::discover::{self, Lookup};
use hearth_backends::npu::{own_server, NpuBackend, NpuError, NpuOptions};

const VERSIONS: [&str; 5] = ["0.9.45", "1.0.7", "1.0.8", "1.0.9", "1.0.14"];
const NAME: &str = "Demo-NPU2";
const TAG: &str = "demo:5m";

/// One test at a time: each writes and runs scripts (a script open for writing while another
/// thread forks cannot be run), and one starts Hearth's FastFlowLM, at most one per process.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

struct System {
    root: tempfile::TempDir,
    /// The imitated device (a file whose lock is the one open amdxdna allows).
    device: PathBuf,
    /// Hearth's registry, with the demo model.
    registry: PathBuf,
}

impl System {
    /// A system under a fresh root with FastFlowLM `version` at /opt/flm/flm (a wrapper that
    /// runs the imitation), its kernels beside it, and Hearth's registry.
    fn new(version: &str) -> System {
        let root = tempfile::tempdir().unwrap();
        let device = root.path().join("imitated-accel0");
        let models = root.path().join("home/ana/.local/share/hearth/models");
        std::fs::create_dir_all(&models).unwrap();
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
        std::os::unix::fs::symlink(demo.canonicalize().unwrap(), models.join(NAME)).unwrap();
        let registry = models.parent().unwrap().join("model_list.json");
        let catalog = serde_json::json!({
            "model_path": models,
            "models": { "demo": { "5m": {
                "name": NAME, "url": "", "size": 5050000, "flm_min_version": "0.9.0",
                "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
                "default_context_length": 2048,
                "details": { "family": "llama3", "think": false, "parameter_size": "5M",
                             "quantization_level": "Q4_1" },
                "footprint": 0.01
            } } }
        })
        .to_string();
        std::fs::write(&registry, &catalog).unwrap();
        let install = root.path().join("opt/flm");
        std::fs::create_dir_all(install.join("xclbins").join(NAME)).unwrap();
        std::fs::write(install.join("model_list.json"), &catalog).unwrap();
        let script = format!(
            "#!/bin/sh\nexport FLM_IMITATION_VERSION='{version}'\nexport FLM_IMITATION_DEVICE='{}'\n: \"${{FLM_CONFIG_PATH:={}}}\"\nexport FLM_CONFIG_PATH\nexec '{}' \"$@\"\n",
            device.display(),
            install.join("model_list.json").display(),
            env!("CARGO_BIN_EXE_flm")
        );
        let flm = install.join("flm");
        std::fs::write(&flm, script).unwrap();
        std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
        System {
            root,
            device,
            registry,
        }
    }

    /// The lookup Hearth makes on this system, for the program at `path` (a system path).
    fn lookup(&self, path: &str) -> Lookup {
        Lookup {
            hearth_flm: Some(PathBuf::from(path)),
            root: self.root.path().to_path_buf(),
            ..Lookup::default()
        }
    }

    /// Another program takes the NPU: this test holds the imitated device, and the fixture's
    /// `/proc` shows `flm` (process 4242) with the device node open.
    fn held_by_flm_4242(&self) -> File {
        let proc = self.root.path().join("proc/4242");
        std::fs::create_dir_all(proc.join("fd")).unwrap();
        std::fs::write(proc.join("comm"), "flm\n").unwrap();
        std::fs::write(proc.join("cmdline"), b"flm\0serve\0qwen3:1.7b\0").unwrap();
        std::os::unix::fs::symlink("/dev/accel/accel0", proc.join("fd/3")).unwrap();
        self.held_unseen()
    }

    /// The imitated device held by a process the fixture's `/proc` does not show.
    fn held_unseen(&self) -> File {
        let file = File::create(&self.device).unwrap();
        file.lock().unwrap();
        file
    }
}

#[test]
fn a_free_npu_is_found_and_ready_in_each_version() {
    let _one = serial();
    for version in VERSIONS {
        let system = System::new(version);
        let program = discover::find(&system.lookup("/opt/flm/flm")).unwrap();
        assert_eq!(program.version, version);
        let report = discover::validate_with(&program, None).unwrap();
        assert!(report.ready, "{version}: {:?}", report.checks);
    }
}

#[test]
fn a_held_npu_is_busy_never_missing_and_its_holder_is_named() {
    let _one = serial();
    for version in VERSIONS {
        let system = System::new(version);
        let holder = system.held_by_flm_4242();
        let found = discover::find(&system.lookup("/opt/flm/flm"));
        let refuses_at_start = version != "0.9.45" && version != "1.0.7";
        if refuses_at_start {
            // 1.0.8 and later refuse every verb but (1.0.9+) validate beside another flm.
            let e = found.unwrap_err();
            assert!(matches!(e, NpuError::DeviceBusy { .. }), "{version}: {e:?}");
            let words = e.to_string();
            assert!(
                words.starts_with("the NPU is busy: flm (process 4242) is using it"),
                "{version}: {words}"
            );
            // Learnt once while the NPU is free, the program is not asked again.
            drop(holder);
            discover::find(&system.lookup("/opt/flm/flm")).unwrap();
            let _again = system.held_unseen();
            let program = discover::find(&system.lookup("/opt/flm/flm")).unwrap();
            assert_eq!(program.version, version, "from what was learnt");
            let report = discover::validate_with(&program, None).unwrap();
            assert_busy(version, &report, "flm (process 4242)");
        } else {
            let program = found.unwrap();
            let report = discover::validate_with(&program, None).unwrap();
            // Up to 1.0.7 FastFlowLM skips a held device as absent: Hearth says busy.
            assert_busy(version, &report, "flm (process 4242)");
            assert_eq!(
                report.raw.as_ref().unwrap()["amd_device_found"],
                false,
                "{version}: the imitation skips the held device"
            );
        }
    }
}

#[test]
fn a_holder_nobody_can_see_is_another_users_program() {
    let _one = serial();
    for version in ["1.0.9", "1.0.14"] {
        let system = System::new(version);
        let program = discover::find(&system.lookup("/opt/flm/flm")).unwrap();
        let _held = system.held_unseen();
        let report = discover::validate_with(&program, None).unwrap();
        assert_eq!(report.raw.as_ref().unwrap()["busy"], true);
        assert_busy(version, &report, "another user's program");
    }
}

fn assert_busy(version: &str, report: &discover::ValidateReport, holder: &str) {
    assert!(!report.ready, "{version}");
    let codes: Vec<&str> = report.checks.iter().map(|c| c.code.as_str()).collect();
    assert_eq!(codes, ["validate_busy"], "{version}: busy, not missing");
    let busy = &report.checks[0];
    assert_eq!(
        busy.summary,
        format!("The NPU is busy: {holder} is using it"),
        "{version}"
    );
    assert_eq!(busy.params["holders"], holder);
    assert!(busy
        .fix
        .as_deref()
        .unwrap()
        .contains("wait until it finishes"));
}

#[test]
fn beside_hearths_own_server_no_second_flm_is_started() {
    let _one = serial();
    let system = System::new("1.0.8");
    let program = discover::find(&system.lookup("/opt/flm/flm")).unwrap();
    let state = system.root.path().join("state");
    let options = NpuOptions {
        start_timeout: Duration::from_secs(60),
        idle_stop: None,
        ..NpuOptions::new(&state)
    };
    let mut backend = NpuBackend::open(program.clone(), &system.registry, TAG, options).unwrap();
    backend.start().unwrap();
    let own = own_server().expect("Hearth's server runs");
    assert_eq!(Some(own.pid), backend.server_pid());

    // The imitated 1.0.8 refuses a second flm, as the real one does.
    let second = std::process::Command::new(&program.path)
        .args(["version", "--json"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("No NPU device found"));

    // Hearth answers from what it learnt, and asks its running server what it does not know.
    assert_eq!(
        discover::find(&system.lookup("/opt/flm/flm")).unwrap(),
        program
    );
    std::os::unix::fs::symlink(&program.path, system.root.path().join("opt/flm/flm-link")).unwrap();
    let linked = discover::find(&system.lookup("/opt/flm/flm-link")).unwrap();
    assert_eq!(linked.version, "1.0.8", "from the server's /api/version");
    // FastFlowLM's own check is not run beside it; the report says why.
    let report = discover::validate(&program).unwrap();
    assert_eq!(report.checks[0].code, "validate_own_server");
    assert!(report.checks[0]
        .summary
        .contains(&format!("Hearth's own FastFlowLM (process {})", own.pid)));

    backend.stop_server();
    assert_eq!(own_server(), None);
    let report = discover::validate(&program).unwrap();
    assert!(report.ready, "{:?}", report.checks);
}
