//! The locked-memory limit (`ulimit -l`), which the NPU runtime needs unlimited because it pins
//! model-sized buffers.
//!
//! The limit in force comes from `/proc/self/limits`; drop-ins in `/etc/security/limits.d/`
//! show whether a fix is already written but not yet in effect (it applies from the next login).

use crate::fsroot::FsRoot;
use serde::Serialize;

/// A memlock limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Memlock {
    /// No limit.
    Unlimited,
    /// A limit in bytes.
    Bytes(u64),
}

impl std::fmt::Display for Memlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Memlock::Unlimited => write!(f, "unlimited"),
            Memlock::Bytes(b) if b % (1 << 20) == 0 => write!(f, "{} MiB", b >> 20),
            Memlock::Bytes(b) if b % 1024 == 0 => write!(f, "{} KiB", b >> 10),
            Memlock::Bytes(b) => write!(f, "{b} bytes"),
        }
    }
}

/// The soft and hard memlock limits of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MemlockLimits {
    /// The limit in force.
    pub soft: Memlock,
    /// The most the process may raise it to without privileges.
    pub hard: Memlock,
}

fn parse_limit(field: &str) -> Option<Memlock> {
    if field == "unlimited" {
        Some(Memlock::Unlimited)
    } else {
        field.parse().ok().map(Memlock::Bytes)
    }
}

impl MemlockLimits {
    /// Parses the `Max locked memory` row of `/proc/<pid>/limits`.
    pub fn parse(limits: &str) -> Option<MemlockLimits> {
        let row = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max locked memory"))?;
        let mut f = row.split_whitespace();
        Some(MemlockLimits {
            soft: parse_limit(f.next()?)?,
            hard: parse_limit(f.next()?)?,
        })
    }

    /// Reads this process's limits under `root`.
    pub fn read(root: &FsRoot) -> Result<MemlockLimits, String> {
        let text = root
            .read_trimmed("/proc/self/limits")
            .map_err(|e| e.to_string())?;
        MemlockLimits::parse(&text)
            .ok_or_else(|| "/proc/self/limits has no readable 'Max locked memory' row".into())
    }

    /// True when the soft limit is unlimited.
    pub fn is_unlimited(&self) -> bool {
        self.soft == Memlock::Unlimited
    }
}

/// The drop-in Hearth suggests, with its path.
pub const DROP_IN_PATH: &str = "/etc/security/limits.d/99-hearth-memlock.conf";
/// Its content.
pub const DROP_IN_CONTENT: &str = "* soft memlock unlimited\n* hard memlock unlimited\n";

/// Files in `/etc/security/limits.d/` (and `limits.conf`) that set memlock to unlimited.
pub fn drop_ins_setting_unlimited(root: &FsRoot) -> Vec<String> {
    let mut files: Vec<String> = root
        .list_dir("/etc/security/limits.d")
        .into_iter()
        .filter(|f| f.ends_with(".conf"))
        .map(|f| format!("/etc/security/limits.d/{f}"))
        .collect();
    files.push("/etc/security/limits.conf".into());
    files
        .into_iter()
        .filter(|f| {
            root.read_trimmed(f).is_ok_and(|text| {
                text.lines().any(|l| {
                    let w: Vec<&str> = l
                        .split('#')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect();
                    w.len() == 4
                        && w[2] == "memlock"
                        && matches!(w[3], "unlimited" | "infinity" | "-1")
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const LIMITS: &str =
        "Limit                     Soft Limit           Hard Limit           Units     \n\
Max cpu time              unlimited            unlimited            seconds   \n\
Max locked memory         8388608              8388608              bytes     \n\
Max address space         unlimited            unlimited            bytes     \n";

    #[test]
    fn parses_finite_and_unlimited() {
        let l = MemlockLimits::parse(LIMITS).unwrap();
        assert_eq!(l.soft, Memlock::Bytes(8 << 20));
        assert_eq!(l.soft.to_string(), "8 MiB");
        assert!(!l.is_unlimited());
        let u = MemlockLimits::parse(
            "Max locked memory         unlimited            unlimited            bytes\n",
        )
        .unwrap();
        assert!(u.is_unlimited());
        assert_eq!(
            MemlockLimits::parse("Max locked memory   lots   more"),
            None
        );
        assert_eq!(MemlockLimits::parse(""), None);
    }

    #[test]
    fn finds_drop_ins_already_written() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("etc/security/limits.d");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("10-other.conf"), "@audio - rtprio 95\n").unwrap();
        fs::write(d.join("99-hearth-memlock.conf"), DROP_IN_CONTENT).unwrap();
        fs::write(d.join("50-commented.conf"), "# * hard memlock unlimited\n").unwrap();
        assert_eq!(
            drop_ins_setting_unlimited(&FsRoot::new(dir.path())),
            [DROP_IN_PATH]
        );
    }
}
