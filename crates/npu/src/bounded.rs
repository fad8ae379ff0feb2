//! FastFlowLM's processes, run with bounds, so a misbehaving `flm` cannot make Hearth grow,
//! wait without end, or outlive it. The doctor's version check ([`crate::software`]) and the
//! chat crate's NPU backend (`version`, `validate`, `flm serve`) both run it through here:
//!
//! - [`spawn_tied`]: a child in its own process group that the kernel kills when Hearth dies;
//! - [`LineSplitter`]: the lines of `flm serve`'s output (a line ends at `\n` or `\r`), each
//!   at most [`MAX_LINE_BYTES`]; the rest of a longer line is dropped;
//! - [`run_bounded`] and [`run_flm`]: a short command (`version`, `validate`) whose output is
//!   capped ([`MAX_QUICK_OUTPUT`]) and which must end in time ([`QUICK_COMMAND_LIMIT`]).
//!   Hearth stops waiting when it exits even if something it left behind still holds its
//!   output open, and stops whatever it left in its process group.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Longest line of FastFlowLM's output kept; the rest of a longer one is dropped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Most bytes of output a short command may print.
pub const MAX_QUICK_OUTPUT: usize = 64 * 1024;

/// How long a short command may take.
pub const QUICK_COMMAND_LIMIT: Duration = Duration::from_secs(10);

/// Why a short command run by [`run_bounded`] gave no answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// It could not be started.
    #[error("could not run {what}: {source}")]
    Spawn {
        /// The command line.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// It printed more than [`QuickLimits::max_output`], and was stopped.
    #[error(
        "could not run {what}: it printed more than {}, which is not what FastFlowLM prints",
        size_in_words(*.max_output)
    )]
    TooMuchOutput {
        /// The command line.
        what: String,
        /// The limit it passed, in bytes.
        max_output: usize,
    },
    /// It did not end within [`QuickLimits::time`], and was stopped.
    #[error("could not run {what}: it did not finish within {}", time_in_words(*.limit))]
    TimedOut {
        /// The command line.
        what: String,
        /// The time it had.
        limit: Duration,
    },
    /// Its output could not be read.
    #[error("could not run {what}: could not read its output: {source}")]
    Output {
        /// The command line.
        what: String,
        /// Why.
        source: io::Error,
    },
}

/// "64 KiB", or "1000 bytes" for a size that is not whole KiB.
fn size_in_words(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// "10 s", or "200 ms" for a time that is not whole seconds.
fn time_in_words(time: Duration) -> String {
    if time.subsec_nanos() == 0 {
        format!("{} s", time.as_secs())
    } else {
        format!("{} ms", time.as_millis())
    }
}

// ---------------------------------------------------------------- spawning, tied to Hearth

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` in its own process group, with SIGKILL on the death of this process.
///
/// The kernel sends that signal (`PR_SET_PDEATHSIG`) when the *thread* that forked ends, so
/// every child is forked by one launcher thread that lives as long as the process. The child
/// checks right after asking that its parent is still Hearth (it may have died between `fork`
/// and `prctl`). A file being written a moment ago (`ETXTBSY`: an update, or a test's build)
/// is retried for half a second.
pub fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec and only makes
    // async-signal-safe calls (setpgid, prctl, getppid) without allocating.
    unsafe {
        cmd.pre_exec(move || {
            // Its own group: a Ctrl+C in Hearth's terminal is Hearth's to handle.
            libc::setpgid(0, 0);
            let (signal, unused): (libc::c_ulong, libc::c_ulong) = (libc::SIGKILL as _, 0);
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal, unused, unused, unused) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Hearth may have died before prctl: then no signal will come.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    static LAUNCHER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("hearth-flm-launcher".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_retrying(&mut cmd));
                }
            })
            .expect("the launcher thread starts");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    launcher
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| io::Error::other("the launcher thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the launcher thread did not answer"))?
}

/// `ETXTBSY` means the file was being written a moment ago (an update, or a test's build).
fn spawn_retrying(cmd: &mut Command) -> io::Result<Child> {
    let mut attempt = cmd.spawn();
    for _ in 0..10 {
        match &attempt {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(50));
                attempt = cmd.spawn();
            }
            _ => break,
        }
    }
    attempt
}

/// The exit status of the child `pid` once it ended, without reaping it (so its id stays
/// taken while its group is signalled).
pub fn exited_unreaped(pid: libc::pid_t) -> Option<ExitStatus> {
    // SAFETY: siginfo_t is plain data, zeroed is a valid value; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with WNOWAIT leaves it unreaped; `info` is valid.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid and si_status are valid for a SIGCHLD siginfo, which waitid filled.
    let (child, status) = unsafe { (info.si_pid(), info.si_status()) };
    if rc != 0 || child == 0 {
        return None;
    }
    Some(match info.si_code {
        libc::CLD_EXITED => ExitStatus::from_raw((status & 0xff) << 8),
        _ => ExitStatus::from_raw(status & 0x7f),
    })
}

// ---------------------------------------------------------------- lines of a long-running output

/// Splits a byte stream into lines at `\n` and `\r` (progress bars redraw with `\r`), each
/// at most `max_line` bytes: a longer line is cut there and the rest of it dropped up to its
/// end. Empty lines are skipped. Bytes that are not UTF-8 become U+FFFD.
#[derive(Debug)]
pub struct LineSplitter {
    max_line: usize,
    line: Vec<u8>,
    /// The current line was cut: drop bytes until its end.
    dropping: bool,
}

impl LineSplitter {
    /// A splitter keeping at most `max_line` bytes of each line.
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            max_line: max_line.max(1),
            line: Vec::new(),
            dropping: false,
        }
    }

    /// Takes in `bytes`, calling `on_line` for each line they complete, with whether it was
    /// cut.
    pub fn push(&mut self, bytes: &[u8], on_line: &mut dyn FnMut(&str, bool)) {
        for &b in bytes {
            if b == b'\n' || b == b'\r' {
                self.dropping = false;
                self.emit(false, on_line);
            } else if self.dropping {
                continue;
            } else if self.line.len() == self.max_line {
                // One byte past the bound: the line is cut here.
                self.emit(true, on_line);
                self.dropping = true;
            } else {
                self.line.push(b);
            }
        }
    }

    /// The end of the stream: the last line, if it had no line end.
    pub fn finish(&mut self, on_line: &mut dyn FnMut(&str, bool)) {
        self.emit(false, on_line);
        self.dropping = false;
    }

    fn emit(&mut self, cut: bool, on_line: &mut dyn FnMut(&str, bool)) {
        if !self.line.is_empty() {
            on_line(&String::from_utf8_lossy(&self.line), cut);
            self.line.clear();
        }
    }
}

// ---------------------------------------------------------------- short commands

/// How a short command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuickOutput {
    /// It exited with status 0.
    pub success: bool,
    /// What it printed on stdout (invalid UTF-8 as U+FFFD).
    pub stdout: String,
    /// The start of what it printed on stderr (at most [`MAX_QUICK_STDERR`] bytes; the rest is
    /// drained and dropped): where FastFlowLM writes its `[ERROR]` lines.
    pub stderr: String,
}

/// Most bytes of a short command's stderr kept ([`QuickOutput::stderr`]).
pub const MAX_QUICK_STDERR: usize = 4096;

/// Limits of [`run_bounded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuickLimits {
    /// Most bytes of stdout. By default, [`MAX_QUICK_OUTPUT`].
    pub max_output: usize,
    /// Longest run. By default, [`QUICK_COMMAND_LIMIT`].
    pub time: Duration,
}

impl Default for QuickLimits {
    fn default() -> Self {
        QuickLimits {
            max_output: MAX_QUICK_OUTPUT,
            time: QUICK_COMMAND_LIMIT,
        }
    }
}

/// Runs `cmd` (stdin closed, the start of stderr kept, in its own process group, tied to Hearth:
/// [`spawn_tied`]) within `limits`; `what` names it in errors. A command that prints more than
/// the limit or does not end in time is killed with its group and is an error. When it ends,
/// what it left in its group is killed, and output still held open by something it left
/// elsewhere is not waited for.
pub fn run_bounded(
    mut cmd: Command,
    what: &str,
    limits: QuickLimits,
) -> Result<QuickOutput, RunError> {
    let what = what.to_string();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match spawn_tied(cmd) {
        Ok(child) => child,
        Err(source) => return Err(RunError::Spawn { what, source }),
    };
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut err = Vec::new();
    let deadline = Instant::now() + limits.time;
    let mut out = Vec::new();
    let mut open = true;
    let ended = loop {
        if let Some(status) = exited_unreaped(pid) {
            // What it wrote before it ended is in the pipe: take that, wait for nothing more.
            if open {
                let _ = read_available(&stdout, &mut out, limits.max_output, false);
            }
            let _ = read_available(&stderr, &mut err, MAX_QUICK_STDERR, false);
            if out.len() <= limits.max_output {
                break Ok(status);
            }
        }
        if out.len() > limits.max_output {
            break Err(RunError::TooMuchOutput {
                what,
                max_output: limits.max_output,
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(RunError::TimedOut {
                what,
                limit: limits.time,
            });
        }
        // stderr is drained as it comes (so a chatty one cannot block the command), its start
        // kept.
        let _ = read_available(&stderr, &mut err, MAX_QUICK_STDERR, false);
        err.truncate(MAX_QUICK_STDERR);
        if open {
            match read_available(&stdout, &mut out, limits.max_output, true) {
                Ok(still_open) => open = still_open,
                Err(source) => break Err(RunError::Output { what, source }),
            }
        } else {
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
    };
    // Whatever it left in its group goes with it. The child is not reaped yet, so its id
    // cannot name another process group.
    // SAFETY: kill has no memory effects.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
    let status = ended?;
    Ok(QuickOutput {
        success: status.success(),
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err[..err.len().min(MAX_QUICK_STDERR)]).into_owned(),
    })
}

/// Reads what `pipe` holds into `out`, up to one byte past `max`; waits up to 20 ms for
/// data when `wait`. Ok(false) at the end of the stream.
fn read_available(
    pipe: &impl AsRawFd,
    out: &mut Vec<u8>,
    max: usize,
    wait: bool,
) -> io::Result<bool> {
    let fd = pipe.as_raw_fd();
    let mut buf = [0u8; 8192];
    let mut timeout = if wait { 20 } else { 0 };
    while out.len() <= max {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if ready == 0 {
            return Ok(true);
        }
        // SAFETY: reads into a buffer of its stated length from our own pipe, which poll
        // says is readable (or closed), so this does not block.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(false);
        }
        let room = (max + 1).saturating_sub(out.len());
        out.extend_from_slice(&buf[..(n as usize).min(room)]);
        timeout = 0;
    }
    Ok(true)
}

/// Runs `exe args...` as [`run_bounded`] does within `limits`, with FastFlowLM's update check
/// off and `FLM_CONFIG_PATH` set to `config` when given.
pub fn run_flm(
    exe: &Path,
    args: &[&str],
    config: Option<&Path>,
    limits: QuickLimits,
) -> Result<QuickOutput, RunError> {
    let mut cmd = Command::new(exe);
    if let Some(config) = config {
        cmd.env("FLM_CONFIG_PATH", config);
    }
    cmd.args(args).env("FLM_DISABLE_UPDATE_CHECK", "1");
    let what = format!("{} {}", exe.display(), args.join(" "));
    run_bounded(cmd, &what, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[&[u8]], max: usize) -> Vec<(String, bool)> {
        let mut splitter = LineSplitter::new(max);
        let mut out = Vec::new();
        for chunk in input {
            splitter.push(chunk, &mut |l, cut| out.push((l.to_string(), cut)));
        }
        splitter.finish(&mut |l, cut| out.push((l.to_string(), cut)));
        out
    }

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    #[test]
    fn lines_end_at_newline_and_carriage_return() {
        let got = lines(
            &[b"[FLM]  a\r\n\rDown", b"loading: 1%\rDownloading: 2%\nlast"],
            64,
        );
        let texts: Vec<&str> = got.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            texts,
            ["[FLM]  a", "Downloading: 1%", "Downloading: 2%", "last"]
        );
        assert!(got.iter().all(|(_, cut)| !cut));
    }

    #[test]
    fn a_long_line_is_cut_and_its_rest_dropped() {
        let got = lines(&[b"0123456789", b"abcdef\nnext"], 8);
        assert_eq!(
            got,
            [("01234567".to_string(), true), ("next".to_string(), false)]
        );
    }

    #[test]
    fn a_command_that_prints_too_much_is_stopped() {
        let limits = QuickLimits {
            max_output: 1024,
            time: Duration::from_secs(30),
        };
        let e = run_bounded(sh("yes garbage"), "yes", limits).unwrap_err();
        assert!(
            matches!(
                e,
                RunError::TooMuchOutput {
                    max_output: 1024,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("more than 1 KiB"), "{e}");
    }

    #[test]
    fn a_command_that_prints_exactly_the_limit_is_read_whole() {
        let limits = QuickLimits {
            max_output: 1024,
            time: Duration::from_secs(30),
        };
        let out = run_bounded(sh("head -c 1024 /dev/zero | tr '\\000' x"), "head", limits);
        let out = out.unwrap();
        assert!(out.success);
        assert_eq!(out.stdout, "x".repeat(1024));
    }

    #[test]
    fn a_command_that_does_not_end_is_stopped_at_the_limit() {
        let limits = QuickLimits {
            max_output: 1024,
            time: Duration::from_millis(100),
        };
        let e = run_bounded(sh("exec sleep 300"), "sleep", limits).unwrap_err();
        assert!(matches!(e, RunError::TimedOut { .. }), "{e}");
        assert!(e.to_string().contains("within 100 ms"), "{e}");
    }

    #[test]
    fn a_missing_program_is_named_in_the_error() {
        let cmd = Command::new("/nonexistent/flm");
        let e = run_bounded(cmd, "/nonexistent/flm version", QuickLimits::default()).unwrap_err();
        assert!(matches!(e, RunError::Spawn { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("could not run /nonexistent/flm version:"),
            "{e}"
        );
    }

    #[test]
    fn the_start_of_stderr_is_kept() {
        let out = run_bounded(
            sh("echo '[ERROR]  No NPU device found.' >&2; head -c 200000 /dev/zero >&2; exit 1"),
            "sh",
            QuickLimits::default(),
        )
        .unwrap();
        assert!(!out.success);
        assert!(out.stderr.starts_with("[ERROR]  No NPU device found.\n"));
        assert_eq!(out.stderr.len(), MAX_QUICK_STDERR);
    }

    #[test]
    fn the_exit_status_is_reported() {
        let out = run_bounded(sh("echo no; exit 3"), "sh", QuickLimits::default()).unwrap();
        assert_eq!(
            out,
            QuickOutput {
                success: false,
                stdout: "no\n".into(),
                stderr: String::new(),
            }
        );
    }
}
