//! Finding every process of an `flm serve`, wherever it went: each server Hearth starts gets a
//! mark in its environment (`HEARTH_FLM_OWNER=<hearth pid>.<hearth start>.<serial>`), which
//! every process it starts inherits, even one that leaves its process group (`setsid`) or is
//! left behind when its parent exits (a wrapper script, an `flm` that forks and exits).
//!
//! - [`ServerMark::stop_all`] stops every process carrying one server's mark (used when Hearth
//!   stops that server);
//! - [`clean_up_leftovers`] stops the processes whose mark names a Hearth that is no longer
//!   running: what a Hearth killed with `kill -9` left behind (its direct child dies with it,
//!   through `PR_SET_PDEATHSIG`, but not what that child started).
//!
//! Only this user's processes can be read, and only processes with the mark are touched.
//! Why not `PR_SET_CHILD_SUBREAPER`: it would bring the orphans back as Hearth's children, but
//! Hearth would then have to reap every orphan of every child it ever starts, and it does not
//! help against `kill -9` of Hearth; the mark finds the processes either way.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The environment variable carrying the mark.
pub const MARK_VARIABLE: &str = "HEARTH_FLM_OWNER";

/// The mark of one server: who started it, and which of its servers it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerMark {
    owner_pid: u32,
    owner_start: u64,
    serial: u64,
}

impl ServerMark {
    /// A new mark for a server started by this process.
    pub fn new() -> ServerMark {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let owner_pid = std::process::id();
        ServerMark {
            owner_pid,
            owner_start: start_time(owner_pid).unwrap_or(0),
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The variable's value: `<pid>.<start>.<serial>`.
    pub fn value(&self) -> String {
        format!("{}.{}.{}", self.owner_pid, self.owner_start, self.serial)
    }

    fn parse(value: &str) -> Option<ServerMark> {
        let mut parts = value.split('.');
        let mark = ServerMark {
            owner_pid: parts.next()?.parse().ok()?,
            owner_start: parts.next()?.parse().ok()?,
            serial: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(mark)
    }

    /// Whether the Hearth that made the mark is still running.
    fn owner_alive(&self) -> bool {
        start_time(self.owner_pid) == Some(self.owner_start)
    }

    /// Stops every process carrying this mark: SIGTERM, up to `grace` to end, then SIGKILL.
    /// Returns how many there were.
    pub fn stop_all(&self, grace: Duration) -> usize {
        let value = self.value();
        stop(|mark| mark.value() == value, grace)
    }
}

impl Default for ServerMark {
    fn default() -> Self {
        ServerMark::new()
    }
}

/// Stops (SIGKILL) the processes marked by a Hearth that is no longer running: what an
/// unclean end (`kill -9`, a crash) left behind. Returns how many there were.
pub fn clean_up_leftovers() -> usize {
    let stopped = stop(|mark| !mark.owner_alive(), Duration::ZERO);
    if stopped > 0 {
        tracing::warn!(
            stopped,
            "stopped FastFlowLM processes left behind by a Hearth that ended uncleanly"
        );
    }
    stopped
}

/// SIGTERM to every marked process `which` picks, then SIGKILL to those still there after
/// `grace` (at once when `grace` is zero).
fn stop(which: impl Fn(&ServerMark) -> bool, grace: Duration) -> usize {
    let pids = marked(&which);
    if pids.is_empty() {
        return 0;
    }
    let first = if grace.is_zero() {
        libc::SIGKILL
    } else {
        libc::SIGTERM
    };
    for &pid in &pids {
        signal(pid, first);
    }
    if !grace.is_zero() {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && !marked(&which).is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
        for pid in marked(&which) {
            tracing::warn!(pid, "a FastFlowLM process ignored SIGTERM: killing it");
            signal(pid, libc::SIGKILL);
        }
    }
    pids.len()
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory effects; the id was just read with our mark in its
    // environment, and only this user's processes can be read or signalled.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Ids of the running processes whose mark `which` picks (never this process). A zombie has
/// no environment left, so ended processes are not listed.
fn marked(which: &impl Fn(&ServerMark) -> bool) -> Vec<u32> {
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|&pid| mark_of(pid).is_some_and(|m| which(&m)))
        .collect()
}

/// The mark in the environment of process `pid`, if it has one and it can be read.
fn mark_of(pid: u32) -> Option<ServerMark> {
    let environ = std::fs::read(Path::new("/proc").join(pid.to_string()).join("environ")).ok()?;
    let prefix = format!("{MARK_VARIABLE}=");
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .and_then(|v| ServerMark::parse(std::str::from_utf8(v).ok()?))
}

/// When process `pid` started (clock ticks since boot, `/proc/<pid>/stat` field 22): with the
/// id, it names one process even after ids are reused.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_read_back_and_name_this_process() {
        let mark = ServerMark::new();
        assert_eq!(ServerMark::parse(&mark.value()), Some(mark.clone()));
        assert!(mark.owner_alive(), "this process is running");
        assert_ne!(ServerMark::new(), mark, "each server has its own");
        for bad in ["", "1.2", "1.2.3.4", "a.b.c"] {
            assert_eq!(ServerMark::parse(bad), None, "{bad:?}");
        }
        let gone = ServerMark {
            owner_start: mark.owner_start + 1,
            ..mark
        };
        assert!(
            !gone.owner_alive(),
            "same id, another start: not this Hearth"
        );
    }
}
