//! Extraction in a child process, so that a parser's abort (an allocation failure, a stack
//! overflow), or its run-away use of memory or time, ends only that file's reading: the file
//! gets its plain error (`ExtractError::ReaderStopped`) and Hearth goes on.
//!
//! The child is the running program itself, started again with `ARGUMENT`. A program opts in by
//! calling `run_if_asked()` first thing in `main`: in the child it reads the request, extracts,
//! answers and exits; in Hearth it returns at once and records that the program can be its own
//! extraction child. A program that never calls it (a test binary, an example) extracts in its
//! own process, as `extract` did before.
//!
//! The child is limited in address space (`ExtractLimits::max_reader_memory`) and processor
//! time (`max_reader_seconds`), writes no core file, is killed after twice its processor time
//! in wall-clock time or when the caller cancels, and dies with the thread that started it
//! (`PR_SET_PDEATHSIG`), so it never outlives Hearth. It reads the bytes Hearth already read
//! and checked (`wire`), never the file itself.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{parse, wire, ExtractError, ExtractLimits, Extracted, Format};

/// The hidden first argument that makes the program an extraction child.
pub const ARGUMENT: &str = "--hearth-extract-child";

/// Whether `run_if_asked` was called in this process (and returned): then the program can be
/// started as its own extraction child.
static AVAILABLE: AtomicBool = AtomicBool::new(false);

/// The most a child may write to its stderr that is kept, to tell its failures apart.
const STDERR_KEPT: u64 = 16 << 10;

/// Call first in `main`. Started as an extraction child (`ARGUMENT`), this reads one request on
/// stdin, answers on stdout and exits; otherwise it returns, and binary formats are then read
/// in a child process.
pub fn run_if_asked() {
    if std::env::args_os().nth(1).as_deref() != Some(std::ffi::OsStr::new(ARGUMENT)) {
        AVAILABLE.store(true, Ordering::Relaxed);
        return;
    }
    std::process::exit(serve());
}

/// Whether extraction runs in a child process in this program.
pub fn available() -> bool {
    AVAILABLE.load(Ordering::Relaxed)
}

/// The child's work: the exit code.
fn serve() -> i32 {
    let mut message = Vec::new();
    if std::io::stdin().read_to_end(&mut message).is_err() {
        return 2;
    }
    let Some(request) = wire::decode_request(&message) else {
        return 2;
    };
    drop(message);
    let answer = parse(
        &request.path,
        request.format,
        &request.bytes,
        &request.limits,
    );
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(&wire::encode_answer(&answer))
        .and_then(|()| stdout.flush())
    {
        Ok(()) => 0,
        Err(_) => 2,
    }
}

/// Extracts `bytes`, the content of the file at `path`, in a child process (see the module's
/// notes). `cancel` is checked every few milliseconds; when set, the child is killed and the
/// answer is `ExtractError::Cancelled`.
pub(super) fn extract(
    path: &Path,
    format: Format,
    bytes: &[u8],
    limits: &ExtractLimits,
    cancel: &AtomicBool,
) -> Result<Extracted, ExtractError> {
    let stopped = |reason: String| ExtractError::ReaderStopped {
        path: path.to_owned(),
        reason,
    };
    if cancel.load(Ordering::Relaxed) {
        return Err(ExtractError::Cancelled {
            path: path.to_owned(),
        });
    }
    let program = std::env::current_exe().map_err(|e| {
        stopped(format!(
            "Hearth could not find its own program to start: {e}"
        ))
    })?;
    let mut command = Command::new(program);
    command
        .arg(ARGUMENT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let parent = std::process::id();
    let memory = limits.max_reader_memory;
    let seconds = limits.max_reader_seconds;
    // SAFETY: between fork and exec only async-signal-safe system calls are made (prctl,
    // getppid, setrlimit), on values computed before the fork.
    unsafe {
        command.pre_exec(move || confine(parent, memory, seconds));
    }
    let mut child = command
        .spawn()
        .map_err(|e| stopped(format!("Hearth could not start its file reader: {e}")))?;

    let request = wire::encode_request(path, format, limits, bytes);
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A child that dies early closes its end: the write then fails and the status tells why.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&request);
    });
    let answer_limit = 2 * limits.max_text_bytes as u64 + (1 << 20);
    let stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut answer = Vec::new();
        let _ = stdout.take(answer_limit + 1).read_to_end(&mut answer);
        answer
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    let errors = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut stderr = stderr;
        let _ = (&mut stderr).take(STDERR_KEPT).read_to_end(&mut kept);
        // The rest is read and dropped, so the child never blocks on a full pipe.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    });

    let deadline = Instant::now() + Duration::from_secs(seconds.saturating_mul(2).max(1));
    let mut killed = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                killed = Some(Killed::Lost(e.to_string()));
                let _ = child.kill();
                break child.wait().unwrap_or_else(|_| ExitStatus::from_raw(0));
            }
        }
        let why = if cancel.load(Ordering::Relaxed) {
            Some(Killed::Cancelled)
        } else if Instant::now() >= deadline {
            Some(Killed::Timeout)
        } else {
            None
        };
        if let Some(why) = why {
            killed = Some(why);
            let _ = child.kill();
            break child.wait().unwrap_or_else(|_| ExitStatus::from_raw(0));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = writer.join();
    let answer = reader.join().unwrap_or_default();
    let errors = errors.join().unwrap_or_default();

    match killed {
        Some(Killed::Cancelled) => {
            return Err(ExtractError::Cancelled {
                path: path.to_owned(),
            })
        }
        Some(Killed::Timeout) => {
            return Err(stopped(format!(
                "reading it took more than {} seconds",
                seconds.saturating_mul(2)
            )))
        }
        Some(Killed::Lost(error)) => {
            return Err(stopped(format!("Hearth lost its file reader: {error}")))
        }
        None => {}
    }
    if answer.len() as u64 > answer_limit {
        return Err(ExtractError::TooMuchText {
            path: path.to_owned(),
            limit: limits.max_text_bytes,
        });
    }
    if status.success() {
        if let Some(answer) = wire::decode_answer(path, &answer) {
            return answer;
        }
    }
    Err(stopped(why_it_stopped(status, &errors, limits)))
}

/// Why the caller killed a child.
enum Killed {
    Cancelled,
    Timeout,
    Lost(String),
}

/// What a child's end says about the file, for a person.
fn why_it_stopped(status: ExitStatus, errors: &str, limits: &ExtractLimits) -> String {
    if errors.contains("memory allocation of") || errors.contains("capacity overflow") {
        return format!(
            "it made the reader run out of memory (more than {} MiB)",
            limits.max_reader_memory >> 20
        );
    }
    if errors.contains("overflowed its stack") {
        return "it is nested too deeply for the reader".to_owned();
    }
    match status.signal() {
        Some(libc::SIGXCPU) | Some(libc::SIGKILL) => format!(
            "it kept the reader busy for more than {} seconds",
            limits.max_reader_seconds
        ),
        Some(signal) => format!("the reader crashed on it (signal {signal})"),
        None => match status.code() {
            Some(0) => "the reader's answer was damaged".to_owned(),
            Some(code) => format!("the reader failed on it (exit code {code})"),
            None => "the reader stopped".to_owned(),
        },
    }
}

/// Runs in the child between fork and exec: dies with the thread that started it, and is
/// limited in memory, processor time and core files.
pub(super) fn confine(parent: u32, memory: u64, seconds: u64) -> std::io::Result<()> {
    let fail = || Err(std::io::Error::last_os_error());
    // SAFETY: plain system calls on integer arguments.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return fail();
        }
        // The parent may have died before the line above: then nothing would kill us.
        if libc::getppid() as u32 != parent {
            libc::_exit(3);
        }
        let limits = [
            (libc::RLIMIT_AS, memory, memory),
            (libc::RLIMIT_CPU, seconds, seconds + 2),
            (libc::RLIMIT_CORE, 0, 0),
        ];
        for (resource, soft, hard) in limits {
            // Never above a limit Hearth itself runs under (raising one is not allowed).
            let mut current = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(resource, &mut current) != 0 {
                return fail();
            }
            let limit = libc::rlimit {
                rlim_cur: (soft as libc::rlim_t).min(current.rlim_max),
                rlim_max: (hard as libc::rlim_t).min(current.rlim_max),
            };
            if libc::setrlimit(resource, &limit) != 0 {
                return fail();
            }
        }
    }
    Ok(())
}
