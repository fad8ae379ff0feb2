//! A misbehaving `flm` cannot make Hearth grow, hang or leave processes behind: the security
//! review's reproductions (N5) as small shell scripts, plus property tests of the line
//! splitter that reads FastFlowLM's output.
//!
//! - an `flm` that forks the server and exits, or starts it in a session of its own
//!   (`setsid`), has the server stopped with it;
//! - a wrapper script's server left behind by a Hearth killed with `kill -9` is stopped by the
//!   next start's clean-up;
//! - output with no newline is kept in lines of at most 64 KiB;
//! - `version` that floods, or leaves a process holding its output open, is bounded.
//!
//! Processes that must stay are `sleep`s that write their id to a file; each test waits (with
//! a bound) until they are gone. Nothing asserts on time.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hearth_backends::npu::discover::read_version;
use hearth_backends::npu::marker::clean_up_leftovers;
use hearth_backends::npu::process::{FlmServer, ServeConfig};
use hearth_backends::npu::NpuError;
use hearth_npu::bounded::{LineSplitter, MAX_LINE_BYTES};
use proptest::prelude::*;

/// Writes an executable `flm` script into `dir`: `serve` and `version` run the given shell.
fn flm(dir: &Path, serve: &str, version: &str) -> PathBuf {
    let path = dir.join("flm");
    let script = format!(
        "#!/bin/sh\nD='{}'\ncase \"$1\" in\n  serve) {serve} ;;\n  version) {version} ;;\nesac\n",
        dir.display()
    );
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn config(dir: &Path, program: PathBuf, start_timeout: Duration) -> ServeConfig {
    ServeConfig {
        program,
        version: "1.0.6".into(),
        tag: "m:1b".into(),
        ctx_len: 2048,
        registry: dir.join("model_list.json"),
        models_root: dir.join("models"),
        state_dir: dir.join("state"),
        start_timeout,
        asr: false,
    }
}

/// The id a script wrote to `file`, waiting for it (with a bound).
fn pid_in(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never written",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
fn an_flm_that_forks_the_server_and_exits_has_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let program = flm(
        dir.path(),
        "( exec sleep 300 ) & echo $! > \"$D/server.pid\"; exit 0",
        "exit 1",
    );
    let e = FlmServer::start(&config(dir.path(), program, Duration::from_secs(20))).unwrap_err();
    assert!(matches!(e, NpuError::Exited { .. }), "{e}");
    let server = pid_in(&dir.path().join("server.pid"));
    assert!(
        ends(server),
        "the forked server {server} outlived the failed start"
    );
}

#[test]
fn an_flm_that_starts_the_server_in_its_own_session_has_it_stopped() {
    if Command::new("setsid").arg("true").status().is_err() {
        eprintln!("skipped: no setsid program here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = flm(
        dir.path(),
        "setsid sleep 300 & echo $! > \"$D/server.pid\"; exit 0",
        "exit 1",
    );
    let e = FlmServer::start(&config(dir.path(), program, Duration::from_secs(20))).unwrap_err();
    assert!(matches!(e, NpuError::Exited { .. }), "{e}");
    let server = pid_in(&dir.path().join("server.pid"));
    assert!(
        ends(server),
        "the server {server} left the process group and was not found"
    );
}

/// Set to a folder by [`a_wrapper_scripts_server_left_by_kill_9_is_cleaned_up`]: this test
/// binary then plays Hearth, starting the wrapper `flm` in that folder, and is killed.
const HEARTH_ROLE: &str = "HEARTH_TEST_PLAY_HEARTH";

#[test]
fn play_hearth_starting_a_wrapper() {
    let Some(dir) = std::env::var_os(HEARTH_ROLE) else {
        return; // only as the child of the test below
    };
    let dir = PathBuf::from(dir);
    let program = dir.join("flm");
    // Never ready: it is killed while it waits.
    let _ = FlmServer::start(&config(&dir, program, Duration::from_secs(120)));
}

#[test]
fn a_wrapper_scripts_server_left_by_kill_9_is_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    // The wrapper runs the real server as its child and waits: when Hearth dies, the
    // kernel kills the wrapper (PR_SET_PDEATHSIG), not the server.
    flm(
        dir.path(),
        "sleep 300 & echo $! > \"$D/server.pid\"; wait $!",
        "exit 1",
    );
    // The player's name in this test binary: its module's path without the binary's name.
    let player = format!(
        "{}::play_hearth_starting_a_wrapper",
        module_path!().split_once("::").unwrap().1
    );
    let mut hearth = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", player.as_str(), "--nocapture"])
        .env(HEARTH_ROLE, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = pid_in(&dir.path().join("server.pid"));
    hearth.kill().unwrap(); // SIGKILL: no clean-up runs in it
    hearth.wait().unwrap();
    // The server survives its Hearth (what the review saw); the next start's clean-up (here,
    // or that of another test starting a server meanwhile) stops it.
    clean_up_leftovers();
    assert!(
        ends(server),
        "the left-behind server {server} was not stopped"
    );
}

#[test]
fn output_without_newlines_is_kept_in_bounded_lines() {
    let dir = tempfile::tempdir().unwrap();
    // 1 MiB without a newline (16 times the bound), then a line, then an exit: the start
    // fails, and the log is read.
    let program = flm(
        dir.path(),
        "head -c 1048576 /dev/zero | tr '\\000' x; echo; echo '[FLM]  after'; exit 3",
        "exit 1",
    );
    let cfg = config(dir.path(), program, Duration::from_secs(20));
    let e = FlmServer::start(&cfg).unwrap_err();
    let NpuError::Exited { log_tail, .. } = &e else {
        panic!("{e}");
    };
    let lengths: Vec<usize> = log_tail.iter().map(String::len).collect();
    assert!(lengths.iter().all(|&n| n <= MAX_LINE_BYTES), "{lengths:?}");
    assert!(log_tail.iter().any(|l| l == "[FLM]  after"), "{lengths:?}");
    let log = fs::read_to_string(cfg.state_dir.join("fastflowlm.log")).unwrap();
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest <= MAX_LINE_BYTES, "a log line of {longest} bytes");
    assert!(log.contains("longer than 64 KiB"), "the cut is noted");
}

#[test]
fn a_version_flood_is_refused_at_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    let program = flm(dir.path(), "exit 1", "exec yes garbage");
    let e = read_version(&program).unwrap_err();
    assert!(e.to_string().contains("more than 64 KiB"), "{e}");
}

#[test]
fn a_version_that_leaves_its_output_held_open_is_read_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // A process left behind holds stdout open; Hearth must not wait for it to close.
    let program = flm(
        dir.path(),
        "exit 1",
        "(sleep 300; echo) & echo $! > \"$D/holder.pid\"; echo '{ \"version\": \"1.0.6\" }'; exit 0",
    );
    assert_eq!(read_version(&program).unwrap(), "1.0.6");
    let holder = pid_in(&dir.path().join("holder.pid"));
    assert!(ends(holder), "the holder {holder} was left running");
}

// ---------------------------------------------------------------- the line splitter

fn split(chunks: &[Vec<u8>], max: usize) -> Vec<(String, bool)> {
    let mut splitter = LineSplitter::new(max);
    let mut lines = Vec::new();
    for chunk in chunks {
        splitter.push(chunk, &mut |line, cut| lines.push((line.to_string(), cut)));
    }
    splitter.finish(&mut |line, cut| lines.push((line.to_string(), cut)));
    lines
}

/// `bytes` cut at the given sizes (cycled).
fn chunks_of(bytes: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut turn = 0;
    while at < bytes.len() {
        let n = sizes[turn % sizes.len()].max(1).min(bytes.len() - at);
        out.push(bytes[at..at + n].to_vec());
        at += n;
        turn += 1;
    }
    out
}

fn byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(b'\n'),
        Just(b'\r'),
        Just(b'x'),
        Just(b' '),
        Just(0xE2),
        any::<u8>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0xf1_4a),
        ..ProptestConfig::default()
    })]

    /// Any output in any chunking: lines are bounded, hold no line end, are never empty, and
    /// do not depend on how the output was cut into reads.
    #[test]
    fn lines_are_bounded_and_independent_of_chunking(
        bytes in prop::collection::vec(byte(), 0..400),
        sizes in prop::collection::vec(1usize..40, 1..4),
        max in 1usize..50,
    ) {
        let whole = split(std::slice::from_ref(&bytes), max);
        let chunked = split(&chunks_of(&bytes, &sizes), max);
        prop_assert_eq!(&whole, &chunked);
        for (line, _) in &whole {
            prop_assert!(!line.is_empty());
            prop_assert!(!line.contains(['\n', '\r']), "{line:?}");
            // Each byte that is not UTF-8 may become a 3-byte U+FFFD.
            prop_assert!(line.len() <= 3 * max, "{} > {max}", line.len());
        }
    }

    /// Lines shorter than the bound come out exactly as written, none cut.
    #[test]
    fn short_lines_come_out_whole(
        lines in prop::collection::vec("[ -~]{1,20}", 0..10),
        crlf in any::<bool>(),
        sizes in prop::collection::vec(1usize..30, 1..4),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let text: String = lines.iter().map(|l| format!("{l}{end}")).collect();
        let got = split(&chunks_of(text.as_bytes(), &sizes), 20);
        let want: Vec<(String, bool)> = lines.iter().map(|l| (l.clone(), false)).collect();
        prop_assert_eq!(got, want);
    }
}
