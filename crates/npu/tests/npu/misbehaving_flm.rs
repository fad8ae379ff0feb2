//! The doctor's FastFlowLM check against an `flm` that misbehaves when asked for its version
//! (the security review's N5, as shell scripts on a fixture root): a `version` that floods is
//! refused at the output cap, and one that leaves a process holding its output open is read
//! at once, its holder stopped. Either way the check says plainly what happened. Nothing
//! asserts on time: waiting for the held output would end in the time limit's error instead.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use hearth_npu::{diagnose, Check, CheckId, Diagnosis, Status};

/// Writes an executable `/usr/bin/flm` under `root`: `version` runs `version`, any other verb
/// (`--version`) runs `other`; `$D` is `root`.
fn flm(root: &Path, version: &str, other: &str) {
    let bin = root.join("usr/bin");
    fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nD='{}'\ncase \"$1\" in\n  version) {version} ;;\n  *) {other} ;;\nesac\n",
        root.display()
    );
    let path = bin.join("flm");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn flm_check(d: &Diagnosis) -> &Check {
    d.checks
        .iter()
        .find(|c| c.id == CheckId::Fastflowlm)
        .unwrap_or_else(|| panic!("no FastFlowLM check in {:#?}", d.checks))
}

/// Whether `pid` runs (a zombie waiting for its parent to reap it has ended).
fn running(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Waits (with a bound) until `pid` has ended; false if it never does.
fn ends(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while running(pid) {
        if Instant::now() >= deadline {
            // Leave nothing behind, whatever the test says.
            // SAFETY: kill has no memory effects; the id is the test's own sleep.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn the_doctor_refuses_a_version_flood_at_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    flm(dir.path(), "exec yes 1.0.6", "exec yes 1.0.6");
    let d = diagnose(dir.path());
    assert_eq!(
        d.fastflowlm.version, None,
        "a flood is not read for a version"
    );
    let check = flm_check(&d);
    assert_eq!(check.status, Status::Warning, "{check:?}");
    assert!(
        check
            .summary
            .starts_with("FastFlowLM is installed (/usr/bin/flm) but its version is unknown"),
        "{check:?}"
    );
    assert!(
        check.summary.contains("it printed more than 64 KiB"),
        "the check says why: {check:?}"
    );
}

#[test]
fn the_doctor_reads_a_version_whose_output_is_held_open_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A process left behind holds stdout open; the doctor must not wait for it to close.
    flm(
        dir.path(),
        "(sleep 300; echo) & echo $! > \"$D/holder.pid\"; echo '{ \"version\": \"1.0.6\" }'; exit 0",
        "exit 1",
    );
    let d = diagnose(dir.path());
    let check = flm_check(&d);
    assert_eq!(check.status, Status::Ok, "{check:?}");
    assert_eq!(
        check.summary,
        "FastFlowLM 1.0.6 is installed (/usr/bin/flm)"
    );
    let holder: u32 = fs::read_to_string(dir.path().join("holder.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(ends(holder), "the holder {holder} was left running");
}
