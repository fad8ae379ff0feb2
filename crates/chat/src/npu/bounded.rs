//! FastFlowLM's output, read with bounds, so a misbehaving `flm` cannot make Hearth grow or
//! wait without end:
//!
//! - [`LineSplitter`]: the lines of `flm serve`'s output (a line ends at `\n` or `\r`), each
//!   at most [`MAX_LINE_BYTES`]; the rest of a longer line is dropped;
//! - [`run_bounded`]: a short command (`version`, `validate`) whose output is capped
//!   ([`MAX_QUICK_OUTPUT`]) and which must end in time. Hearth stops waiting at the deadline
//!   even if something the command left behind still holds its output open, and stops
//!   whatever the command left in its process group.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::npu::process::spawn_tied;
use crate::npu::NpuError;

/// Longest line of FastFlowLM's output kept; the rest of a longer one is dropped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Most bytes of output a short command may print.
pub const MAX_QUICK_OUTPUT: usize = 64 * 1024;

/// How long a short command may take.
pub const QUICK_COMMAND_LIMIT: Duration = Duration::from_secs(10);

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

/// How a short command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuickOutput {
    /// It exited with status 0.
    pub success: bool,
    /// What it printed on stdout (invalid UTF-8 as U+FFFD).
    pub stdout: String,
}

/// Limits of [`run_bounded`].
#[derive(Debug, Clone, Copy)]
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

/// Runs `cmd` (stdin closed, stderr discarded, in its own process group, tied to Hearth)
/// within `limits`; `what` names it in errors. A command that prints more than the limit or
/// does not end in time is killed with its group and is an error. When it ends, what it left
/// in its group is killed, and output still held open by something it left elsewhere is not
/// waited for.
pub fn run_bounded(
    mut cmd: Command,
    what: &str,
    limits: QuickLimits,
) -> Result<QuickOutput, NpuError> {
    let fail = |detail: String| NpuError::Run {
        what: what.to_string(),
        detail,
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = spawn_tied(cmd).map_err(|e| fail(e.to_string()))?;
    let pid = child.id() as libc::pid_t;
    let stdout = child.stdout.take().expect("stdout is piped");
    let deadline = Instant::now() + limits.time;
    let mut out = Vec::new();
    let mut open = true;
    let result = loop {
        if let Some(status) = exited_unreaped(pid) {
            // What it wrote before it ended is in the pipe: take that, wait for nothing more.
            if open {
                let _ = read_available(&stdout, &mut out, limits.max_output, false);
            }
            break Ok(status);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(fail(format!(
                "it did not finish within {} s",
                limits.time.as_secs_f64().round()
            )));
        }
        if open {
            match read_available(&stdout, &mut out, limits.max_output, true) {
                Ok(true) => {}
                Ok(false) => open = false,
                Err(e) => break Err(fail(e)),
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
    let status = result?;
    if out.len() > limits.max_output {
        return Err(fail(format!(
            "it printed more than {} KiB, which is not what FastFlowLM prints",
            limits.max_output / 1024
        )));
    }
    Ok(QuickOutput {
        success: status.success(),
        stdout: String::from_utf8_lossy(&out).into_owned(),
    })
}

/// The exit status of the child `pid` once it ended, without reaping it (so its id stays
/// taken while its group is signalled).
pub(crate) fn exited_unreaped(pid: libc::pid_t) -> Option<ExitStatus> {
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

/// Reads what `pipe` holds into `out`, up to one byte past `max`; waits up to 20 ms for
/// data when `wait`. Ok(false) at the end of the stream.
fn read_available(
    pipe: &std::process::ChildStdout,
    out: &mut Vec<u8>,
    max: usize,
    wait: bool,
) -> Result<bool, String> {
    let fd = pipe.as_raw_fd();
    let mut buf = [0u8; 8192];
    let mut timeout = if wait { 20 } else { 0 };
    loop {
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
            return Err(format!("could not wait for its output: {e}"));
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
            return Err(format!("could not read its output: {e}"));
        }
        if n == 0 {
            return Ok(false);
        }
        let room = (max + 1).saturating_sub(out.len());
        out.extend_from_slice(&buf[..(n as usize).min(room)]);
        if out.len() > max {
            return Err(format!(
                "it printed more than {} KiB, which is not what FastFlowLM prints",
                max / 1024
            ));
        }
        timeout = 0;
    }
}

/// Runs `exe args...` as [`run_bounded`] does, with the update check off and
/// `FLM_CONFIG_PATH` set to `config` when given; the ETXTBSY retry is [`spawn_tied`]'s.
pub(crate) fn run_flm(
    exe: &Path,
    args: &[&str],
    config: Option<&Path>,
) -> Result<QuickOutput, NpuError> {
    let mut cmd = Command::new(exe);
    if let Some(config) = config {
        cmd.env("FLM_CONFIG_PATH", config);
    }
    cmd.args(args).env("FLM_DISABLE_UPDATE_CHECK", "1");
    let what = format!("{} {}", exe.display(), args.join(" "));
    run_bounded(cmd, &what, QuickLimits::default())
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
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "yes garbage"]);
        let limits = QuickLimits {
            max_output: 1024,
            time: Duration::from_secs(30),
        };
        let e = run_bounded(cmd, "yes", limits).unwrap_err();
        assert!(e.to_string().contains("more than 1 KiB"), "{e}");
    }
}
