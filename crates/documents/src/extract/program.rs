//! Running another program (Tesseract, Poppler's `pdftoppm`) on a file, confined as the
//! extraction child is (`child::confine`): it dies with the thread that started it
//! (`PR_SET_PDEATHSIG`), is limited in address space and processor time, writes no core file,
//! is killed after twice its processor time in wall-clock time, and is killed when the caller
//! cancels. Its standard output is kept up to a bound; its standard error (the first 16 KiB)
//! tells its failures apart. It runs in `PrivateDir`, a folder only Hearth's user can enter,
//! removed with everything in it when dropped.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::child::confine;

/// The bounds of one run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    /// Address space, bytes.
    pub memory: u64,
    /// Processor time, seconds (wall-clock: twice as long).
    pub seconds: u64,
    /// The most standard output kept; more is an error.
    pub max_output: u64,
}

/// How a run ended, when it did not end with its output.
#[derive(Debug)]
pub(super) enum RunError {
    /// The program is not installed (not found on `PATH`).
    NotFound,
    Cancelled,
    /// Killed after its wall-clock time.
    Timeout,
    /// It wrote more than `max_output`.
    TooMuchOutput,
    /// It failed: its exit, and what it said on stderr.
    Failed {
        status: ExitStatus,
        stderr: String,
    },
    /// It could not be started or waited for.
    System(std::io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::NotFound => f.write_str("the program is not installed"),
            RunError::Cancelled => f.write_str("cancelled"),
            RunError::Timeout => f.write_str("it took too long"),
            RunError::TooMuchOutput => f.write_str("it wrote more than expected"),
            RunError::Failed { status, stderr } => {
                let stderr = stderr.trim();
                match (status.code(), status.signal()) {
                    (_, Some(libc::SIGXCPU)) | (_, Some(libc::SIGKILL)) => {
                        f.write_str("it ran out of time")
                    }
                    (_, Some(signal)) => write!(f, "it stopped on signal {signal}"),
                    (Some(code), None) if stderr.is_empty() => write!(f, "exit code {code}"),
                    (Some(code), None) => write!(f, "exit code {code}: {}", last_line(stderr)),
                    (None, None) => f.write_str("it stopped"),
                }
            }
            RunError::System(error) => write!(f, "{error}"),
        }
    }
}

/// The last non-empty line of a program's error output (its actual complaint, after banners).
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

/// The most of a program's stderr that is kept.
const STDERR_KEPT: u64 = 16 << 10;

/// Runs `program` with `args` in `dir`, confined by `bounds`, with `env` added (and nothing of
/// Hearth's stdin). Returns its standard output.
pub(super) fn run(
    program: &str,
    args: &[&OsStr],
    dir: &Path,
    env: &[(&str, &str)],
    bounds: Bounds,
    cancel: &AtomicBool,
) -> Result<Vec<u8>, RunError> {
    if cancel.load(Ordering::Relaxed) {
        return Err(RunError::Cancelled);
    }
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let parent = std::process::id();
    let (memory, seconds) = (bounds.memory, bounds.seconds);
    // SAFETY: between fork and exec only async-signal-safe system calls are made (prctl,
    // getppid, setrlimit), on values computed before the fork.
    unsafe {
        command.pre_exec(move || confine(parent, memory, seconds));
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(RunError::NotFound)
        }
        Err(error) => return Err(RunError::System(error)),
    };
    let limit = bounds.max_output;
    let stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut stdout = stdout;
        let _ = (&mut stdout).take(limit + 1).read_to_end(&mut out);
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        out
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    let errors = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut stderr = stderr;
        let _ = (&mut stderr).take(STDERR_KEPT).read_to_end(&mut kept);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    });
    let deadline = Instant::now() + Duration::from_secs(seconds.saturating_mul(2).max(1));
    let mut killed = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                killed = Some(RunError::System(error));
                break ExitStatus::from_raw(0);
            }
        }
        let why = if cancel.load(Ordering::Relaxed) {
            Some(RunError::Cancelled)
        } else if Instant::now() >= deadline {
            Some(RunError::Timeout)
        } else {
            None
        };
        if let Some(why) = why {
            let _ = child.kill();
            let status = child.wait().unwrap_or_else(|_| ExitStatus::from_raw(0));
            killed = Some(why);
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = reader.join().unwrap_or_default();
    let stderr = errors.join().unwrap_or_default();
    if let Some(why) = killed {
        return Err(why);
    }
    if !status.success() {
        return Err(RunError::Failed { status, stderr });
    }
    if out.len() as u64 > limit {
        return Err(RunError::TooMuchOutput);
    }
    Ok(out)
}

/// A folder only this user can enter (0700) under the system's temporary folder, removed with
/// its content when dropped (also after a panic or a cancel).
pub(super) struct PrivateDir(PathBuf);

impl PrivateDir {
    pub fn new(purpose: &str) -> std::io::Result<PrivateDir> {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let name = format!(
                "hearth-{purpose}-{}-{}-{nanos:x}",
                std::process::id(),
                COUNT.fetch_add(1, Ordering::Relaxed)
            );
            let path = base.join(name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateDir(path)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        }
        Err(std::io::Error::other("no free name for a temporary folder"))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        memory: 1 << 30,
        seconds: 5,
        max_output: 1 << 20,
    };

    #[test]
    fn a_missing_program_and_a_failing_one_are_told_apart() {
        let dir = PrivateDir::new("test").unwrap();
        let never = AtomicBool::new(false);
        let missing = run(
            "hearth-no-such-program",
            &[],
            dir.path(),
            &[],
            BOUNDS,
            &never,
        );
        assert!(matches!(missing, Err(RunError::NotFound)), "{missing:?}");
        let out = run(
            "sh",
            &["-c".as_ref(), "echo hi".as_ref()],
            dir.path(),
            &[],
            BOUNDS,
            &never,
        );
        assert_eq!(out.unwrap(), b"hi\n");
        let failed = run(
            "sh",
            &["-c".as_ref(), "echo nope >&2; exit 3".as_ref()],
            dir.path(),
            &[],
            BOUNDS,
            &never,
        )
        .unwrap_err();
        assert_eq!(failed.to_string(), "exit code 3: nope");
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists(), "the private folder is removed");
    }

    #[test]
    fn cancel_kills_the_program() {
        let dir = PrivateDir::new("test").unwrap();
        let cancel = AtomicBool::new(true);
        let started = Instant::now();
        let out = run("sleep", &["30".as_ref()], dir.path(), &[], BOUNDS, &cancel);
        assert!(matches!(out, Err(RunError::Cancelled)));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
