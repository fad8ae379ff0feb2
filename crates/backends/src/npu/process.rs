//! One `flm serve` child process: started on a free loopback port with the context length the
//! conversation needs, ready when its start-up log says so and it answers, its output drained
//! into a private log, and stopped (SIGTERM, then SIGKILL after 5 s) when dropped.
//!
//! It is never left behind: the child asks the kernel for SIGKILL when its parent dies
//! (`PR_SET_PDEATHSIG`), and checks right after that its parent is still Hearth (the parent
//! may have died between `fork` and `prctl`). The kernel sends that signal when the *thread*
//! that forked ends, so every child is forked by one launcher thread that lives as long as the
//! process ([`spawn_tied`], in the npu crate, which also runs `version` and `validate`). An
//! `flm` that is a wrapper script, or that forks the server and exits, leaves processes that
//! signal does not reach: stopping signals the child's whole process group
//! (even when the child itself has exited) and every process carrying the server's mark
//! ([`marker`]), and a start first stops what a Hearth killed uncleanly left behind.
//!
//! Its output is read in lines of at most [`MAX_LINE_BYTES`] ([`LineSplitter`]).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hearth_npu::bounded::{exited_unreaped, spawn_tied, LineSplitter, MAX_LINE_BYTES};

use crate::npu::marker::{self, ServerMark, MARK_VARIABLE};
use crate::npu::NpuError;
use crate::remote::openai::{ClientOptions, OpenAiClient};

/// FastFlowLM's own default port, which a system-wide `flm` service may hold: never used.
pub const FLM_DEFAULT_PORT: u16 = 52625;

/// The log is moved to `<name>.1` when it grows past this.
pub const LOG_ROTATE_BYTES: u64 = 5 * 1024 * 1024;

/// The log file's name inside the state folder.
pub const LOG_FILE_NAME: &str = "fastflowlm.log";

/// Last log lines kept in memory for error messages.
const TAIL_KEEP: usize = 40;
/// Last log lines shown in an error.
const TAIL_SHOWN: usize = 12;
/// How long a stopped server gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How to start a server.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The FastFlowLM program.
    pub program: PathBuf,
    /// Its version ("1.0.8"), for the record of the servers this process runs ([`own_server`]).
    pub version: String,
    /// The model's tag (`family:size`); empty for a server of speech only (`--asr 1` and no
    /// chat model).
    pub tag: String,
    /// `--ctx-len`: positions reserved for prompt and answer.
    pub ctx_len: usize,
    /// `FLM_CONFIG_PATH`: Hearth's `model_list.json`.
    pub registry: PathBuf,
    /// `FLM_MODEL_PATH`: the folder that the registry's `model_path` is relative to.
    pub models_root: PathBuf,
    /// Where the log goes (created, 0700).
    pub state_dir: PathBuf,
    /// How long loading may take before Hearth gives up.
    pub start_timeout: Duration,
    /// `--asr 1`: also load FastFlowLM's Whisper (`whisper-v3:turbo`), for
    /// `/v1/audio/transcriptions` ([`crate::npu::transcribe`]). FastFlowLM raises its locked
    /// memory by 1 GB more for it.
    pub asr: bool,
}

/// The servers this process has started and not stopped yet (at most one, in practice).
static RUNNING: Mutex<Vec<OwnServer>> = Mutex::new(Vec::new());

/// A FastFlowLM server this process runs (from its start until it is stopped), which holds the
/// NPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnServer {
    /// Its process.
    pub pid: u32,
    /// Its loopback port (it may not answer yet while it loads its model).
    pub port: u16,
    /// Its program's version.
    pub version: String,
}

impl OwnServer {
    /// "Hearth's own FastFlowLM (process 4242)".
    pub fn words(&self) -> String {
        format!("Hearth's own FastFlowLM (process {})", self.pid)
    }

    /// Whether every `flm` process of this release opens the NPU at start (1.0.8 and later),
    /// so that a second one beside this server would be refused it.
    pub fn refuses_a_second_flm(&self) -> bool {
        hearth_npu::software::version_at_least(&self.version, "1.0.8")
    }
}

/// The FastFlowLM server this process runs, if one is starting or running and its process
/// has not ended: it holds the NPU.
pub fn own_server() -> Option<OwnServer> {
    RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|s| exited_unreaped(s.pid as libc::pid_t).is_none())
        .cloned()
}

/// A running, ready `flm serve`.
#[derive(Debug)]
pub struct FlmServer {
    child: Child,
    port: u16,
    tag: String,
    ctx_len: usize,
    asr: bool,
    log: Arc<LogShared>,
    /// The mark every process of this server carries.
    mark: ServerMark,
    stopped: bool,
}

impl FlmServer {
    /// Starts `flm serve` and waits until it is ready (or failed, or out of time).
    pub fn start(config: &ServeConfig) -> Result<FlmServer, NpuError> {
        marker::clean_up_leftovers();
        // A port found free can be taken before FastFlowLM binds it; try another then.
        let mut last = None;
        for _ in 0..3 {
            let port = free_port().map_err(|e| NpuError::Spawn {
                path: config.program.clone(),
                detail: format!("no free port on 127.0.0.1: {e}"),
            })?;
            match start_on(config, port) {
                Err(Start::PortTaken(e)) => last = Some(e),
                Err(Start::Failed(e)) => return Err(e),
                Ok(server) => return Ok(server),
            }
        }
        Err(last.expect("three attempts were made"))
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The model it was started with.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Its `--ctx-len`.
    pub fn ctx_len(&self) -> usize {
        self.ctx_len
    }

    /// Whether it was started with `--asr 1` (FastFlowLM's Whisper loaded).
    pub fn asr(&self) -> bool {
        self.asr
    }

    /// Whether the process is still running; if not, how it ended.
    pub fn exit_status(&mut self) -> Option<String> {
        if self.stopped {
            return Some(match self.child.try_wait() {
                Ok(Some(status)) => describe_status(status),
                Ok(None) => "stopping".into(),
                Err(e) => format!("unknown ({e})"),
            });
        }
        // Not reaped here: until `terminate`, its id names its process group.
        exited_unreaped(self.child.id() as libc::pid_t).map(describe_status)
    }

    /// Its last log lines (ANSI colours removed), oldest first.
    pub fn log_tail(&self) -> Vec<String> {
        self.log.tail(TAIL_SHOWN)
    }

    /// Waits up to `limit` for it to exit (it may close its sockets a moment before it can be
    /// reaped); then how it ended, with its last log lines once its pipes are read to the end.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<(String, Vec<String>)> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exit_status() {
                self.log.wait_closed(Duration::from_millis(500));
                return Some((status, self.log.tail(TAIL_SHOWN)));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The log file.
    pub fn log_path(&self) -> PathBuf {
        self.log.path.clone()
    }

    /// Stops it: SIGTERM to its process group, then SIGKILL after 5 s.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        terminate(&mut self.child, &self.mark);
        let pid = self.child.id();
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| s.pid != pid);
        tracing::info!(pid = self.child.id(), "FastFlowLM stopped");
    }
}

impl Drop for FlmServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// SIGTERM to the child's process group, up to [`STOP_GRACE`] for the child to exit, then
/// SIGKILL to the group; then the same for every process with the server's mark (those that
/// left the group); the child is reaped last. The group is signalled even when the child has
/// already exited: what it started may still run.
fn terminate(child: &mut Child, mark: &ServerMark) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill has no memory effects; the child was made leader of its own group at spawn
    // and is not reaped before the end of this function (nothing else reaps it), so neither
    // id can name another process.
    unsafe {
        libc::kill(-pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + STOP_GRACE;
    while exited_unreaped(pid).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if exited_unreaped(pid).is_none() {
        tracing::warn!(pid, "FastFlowLM ignored SIGTERM for 5 s: killing it");
    }
    // SAFETY: as above; the child is still not reaped.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let escaped = mark.stop_all(STOP_GRACE);
    if escaped > 0 {
        tracing::info!(
            pid,
            escaped,
            "stopped FastFlowLM processes that had left its process group"
        );
    }
    let _ = child.wait();
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// A free loopback port other than FastFlowLM's default.
fn free_port() -> io::Result<u16> {
    for _ in 0..10 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        if port != FLM_DEFAULT_PORT {
            return Ok(port);
        }
    }
    Err(io::Error::other("only the default port was offered"))
}

enum Start {
    PortTaken(NpuError),
    Failed(NpuError),
}

fn start_on(config: &ServeConfig, port: u16) -> Result<FlmServer, Start> {
    let log = LogShared::open(&config.state_dir).map_err(Start::Failed)?;
    log.note(&format!(
        "---- hearth: starting {} serve {} --ctx-len {} --port {port}{}",
        config.program.display(),
        config.tag,
        config.ctx_len,
        if config.asr { " --asr 1" } else { "" }
    ));
    let mark = ServerMark::new();
    let mut cmd = Command::new(&config.program);
    cmd.arg("serve");
    // No tag: FastFlowLM serves with no chat model (its `model-faker`), only its Whisper.
    if !config.tag.is_empty() {
        cmd.arg(&config.tag);
    }
    cmd.arg("--ctx-len")
        .arg(config.ctx_len.to_string())
        .arg("--port")
        .arg(port.to_string())
        .arg("--host")
        .arg("127.0.0.1")
        .args(if config.asr {
            &["--asr", "1"][..]
        } else {
            &[][..]
        })
        .env("FLM_CONFIG_PATH", &config.registry)
        .env("FLM_MODEL_PATH", &config.models_root)
        .env("FLM_SERVE_PORT", port.to_string())
        .env("FLM_DISABLE_UPDATE_CHECK", "1")
        .env(MARK_VARIABLE, mark.value())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_tied(cmd).map_err(|e| {
        Start::Failed(NpuError::Spawn {
            path: config.program.clone(),
            detail: e.to_string(),
        })
    })?;
    tracing::info!(pid = child.id(), port, tag = %config.tag, "FastFlowLM starting");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    drain(stdout, Arc::clone(&log), "stdout");
    drain(stderr, Arc::clone(&log), "stderr");
    let mut server = FlmServer {
        child,
        port,
        tag: config.tag.clone(),
        ctx_len: config.ctx_len,
        asr: config.asr,
        log,
        mark,
        stopped: false,
    };
    RUNNING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(OwnServer {
            pid: server.pid(),
            port,
            version: config.version.clone(),
        });
    match wait_ready(&mut server, config.start_timeout) {
        Ok(()) => {
            tracing::info!(pid = server.pid(), port, "FastFlowLM ready");
            Ok(server)
        }
        Err(e) => {
            server.stop_now();
            Err(e)
        }
    }
}

fn wait_ready(server: &mut FlmServer, limit: Duration) -> Result<(), Start> {
    let deadline = Instant::now() + limit;
    let mut announced_at: Option<Instant> = None;
    loop {
        if let Some(status) = server.exit_status() {
            // Let the drains take in its last words.
            server.log.wait_closed(Duration::from_millis(500));
            let facts = server.log.facts();
            let tail = server.log.tail(TAIL_SHOWN);
            return Err(if facts.bind_failed {
                Start::PortTaken(NpuError::Exited {
                    status,
                    log_tail: tail,
                })
            } else {
                Start::Failed(NpuError::Exited {
                    status,
                    log_tail: tail,
                })
            });
        }
        let facts = server.log.facts();
        if let Some(detail) = facts.load_error {
            // The failure line and the start-up lines come on different pipes; either order.
            return Err(Start::Failed(NpuError::LoadFailed {
                model: server.tag.clone(),
                detail,
                log_tail: server.log.tail(TAIL_SHOWN),
            }));
        }
        if let Some(port) = facts.started_port {
            if port != server.port {
                tracing::warn!(
                    port,
                    expected = server.port,
                    "FastFlowLM announced another port"
                );
            }
            let at = *announced_at.get_or_insert_with(Instant::now);
            // Give the other pipe a moment to deliver a load failure printed before.
            if at.elapsed() >= Duration::from_millis(150) && answers(server.port) {
                if let Some(detail) = server.log.facts().load_error {
                    return Err(Start::Failed(NpuError::LoadFailed {
                        model: server.tag.clone(),
                        detail,
                        log_tail: server.log.tail(TAIL_SHOWN),
                    }));
                }
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(Start::Failed(NpuError::StartTimeout {
                secs: limit.as_secs(),
                log_tail: server.log.tail(TAIL_SHOWN),
            }));
        }
        server.log.wait_change(Duration::from_millis(100));
    }
}

/// Whether FastFlowLM on `port` answers a request (its model list), within 2 s.
fn answers(port: u16) -> bool {
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
        reuse_connections: false,
    };
    OpenAiClient::new(&format!("http://127.0.0.1:{port}"), None, options)
        .and_then(|client| client.models())
        .is_ok()
}

// ---------------------------------------------------------------- the log

/// What the log has said so far.
#[derive(Debug, Clone, Default)]
struct LogFacts {
    /// `[FLM]  WebServer started on port N`.
    started_port: Option<u16>,
    /// `[ERROR]  Failed to load model: ...`.
    load_error: Option<String>,
    /// `Error: bind: Address already in use`.
    bind_failed: bool,
}

#[derive(Debug)]
struct LogState {
    file: Option<File>,
    written: u64,
    tail: VecDeque<String>,
    facts: LogFacts,
    open_streams: u8,
}

/// The log shared by the two drain threads and the server handle.
#[derive(Debug)]
struct LogShared {
    path: PathBuf,
    state: Mutex<LogState>,
    changed: Condvar,
}

impl LogShared {
    fn open(state_dir: &Path) -> Result<Arc<LogShared>, NpuError> {
        let path = state_dir.join(LOG_FILE_NAME);
        let fail = |e: io::Error| NpuError::Log {
            path: path.clone(),
            detail: e.to_string(),
        };
        std::fs::create_dir_all(state_dir).map_err(fail)?;
        let _ = std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700));
        let file = open_private(&path).map_err(fail)?;
        let written = file.metadata().map_or(0, |m| m.len());
        Ok(Arc::new(LogShared {
            path,
            state: Mutex::new(LogState {
                file: Some(file),
                written,
                tail: VecDeque::new(),
                facts: LogFacts::default(),
                open_streams: 2,
            }),
            changed: Condvar::new(),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A line of Hearth's own in the log (not in the tail shown to users).
    fn note(&self, line: &str) {
        let mut state = self.lock();
        self.write_line(&mut state, line);
    }

    fn write_line(&self, state: &mut LogState, line: &str) {
        if state.written >= LOG_ROTATE_BYTES {
            state.file = None;
            let _ = std::fs::rename(&self.path, rotated(&self.path));
            state.file = open_private(&self.path).ok();
            state.written = 0;
        }
        if let Some(f) = state.file.as_mut() {
            if f.write_all(line.as_bytes())
                .and_then(|_| f.write_all(b"\n"))
                .is_ok()
            {
                state.written += line.len() as u64 + 1;
            }
        }
    }

    fn line(&self, line: &str) {
        let mut state = self.lock();
        self.write_line(&mut state, line);
        if let Some(rest) = line.split("WebServer started on port ").nth(1) {
            state.facts.started_port = rest
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|p| p.parse().ok());
        }
        if state.facts.load_error.is_none()
            && (line.starts_with("[ERROR]  Failed to load model")
                || line.starts_with("[Error]  Failed to load default model"))
        {
            let detail = line
                .split_once(": ")
                .map_or(line, |(_, d)| d)
                .trim()
                .to_string();
            state.facts.load_error = Some(detail);
        }
        if line.contains("Address already in use") {
            state.facts.bind_failed = true;
        }
        if !line.trim().is_empty() {
            if state.tail.len() == TAIL_KEEP {
                state.tail.pop_front();
            }
            state.tail.push_back(line.to_string());
        }
        self.changed.notify_all();
    }

    fn closed(&self) {
        let mut state = self.lock();
        state.open_streams = state.open_streams.saturating_sub(1);
        if let Some(f) = state.file.as_mut() {
            let _ = f.flush();
        }
        self.changed.notify_all();
    }

    fn facts(&self) -> LogFacts {
        self.lock().facts.clone()
    }

    fn tail(&self, n: usize) -> Vec<String> {
        let state = self.lock();
        state.tail.iter().rev().take(n).rev().cloned().collect()
    }

    fn wait_change(&self, limit: Duration) {
        let state = self.lock();
        let _ = self.changed.wait_timeout(state, limit);
    }

    fn wait_closed(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut state = self.lock();
        while state.open_streams > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// `<log>.1`.
fn rotated(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".1");
    path.with_file_name(name)
}

/// Opens `path` for appending, readable by this user only (it holds what users typed).
fn open_private(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// Reads `pipe` to its end on a thread, in lines of at most [`MAX_LINE_BYTES`] (`\r` ends a
/// line too: progress bars), into the log. A full pipe would block FastFlowLM, so this never
/// stops early; the rest of a longer line is read and dropped.
fn drain(mut pipe: impl Read + Send + 'static, log: Arc<LogShared>, name: &str) {
    let spawned = std::thread::Builder::new()
        .name(format!("hearth-flm-{name}"))
        .spawn({
            let log = Arc::clone(&log);
            move || {
                let mut splitter = LineSplitter::new(MAX_LINE_BYTES);
                let mut on_line = |line: &str, cut: bool| {
                    log.line(&strip_ansi(line));
                    if cut {
                        log.note(&format!(
                            "---- hearth: the line above was longer than {} KiB; the rest of \
                             it was dropped",
                            MAX_LINE_BYTES / 1024
                        ));
                    }
                };
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => splitter.push(&buf[..n], &mut on_line),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                splitter.finish(&mut on_line);
                log.closed();
            }
        });
    if spawned.is_err() {
        tracing::error!("could not start a thread to read FastFlowLM's {name}");
        log.closed();
    }
}

/// Removes ANSI escape sequences (FastFlowLM colours its errors and successes).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters, then one final byte in '@'..='~'.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_colours_are_removed() {
        assert_eq!(
            strip_ansi("\x1b[31m[ERROR]  Failed to load model: x\x1b[0m"),
            "[ERROR]  Failed to load model: x"
        );
        assert_eq!(strip_ansi("\x1b[?25lplain"), "plain");
    }

    #[test]
    fn log_is_private_rotates_once_and_reads_its_facts() {
        let dir = tempfile::tempdir().unwrap();
        let log = LogShared::open(dir.path()).unwrap();
        let mode = std::fs::metadata(&log.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the log holds what users typed");
        log.line("[FLM]  WebServer started on port 40123 with 10 I/O threads");
        log.line("[ERROR]  Failed to load model: runlist failed");
        let facts = log.facts();
        assert_eq!(facts.started_port, Some(40123));
        assert_eq!(facts.load_error.as_deref(), Some("runlist failed"));
        let big = "x".repeat(1024 * 1024);
        for _ in 0..12 {
            log.line(&big);
        }
        let first = std::fs::metadata(&log.path).unwrap().len();
        let second = std::fs::metadata(rotated(&log.path)).unwrap().len();
        assert!(first < LOG_ROTATE_BYTES + 2 * 1024 * 1024, "{first}");
        assert!(second >= LOG_ROTATE_BYTES, "{second}");
        let mode = std::fs::metadata(rotated(&log.path))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!rotated(&rotated(&log.path)).exists(), "one old file only");
    }

    #[test]
    fn free_port_is_never_the_default() {
        for _ in 0..5 {
            assert_ne!(free_port().unwrap(), FLM_DEFAULT_PORT);
        }
    }
}
