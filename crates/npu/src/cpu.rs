//! CPU utilization from `/proc/stat`, between two readings.
//!
//! Read through the root directory (not a system-information crate) so the fixture trees that
//! test the rest of the telemetry test this too.

use crate::fsroot::FsRoot;

/// Cumulative CPU time counters from the `cpu` line of `/proc/stat` (in clock ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks spent doing anything but idle and iowait.
    pub busy: u64,
    /// All ticks.
    pub total: u64,
}

impl CpuTimes {
    /// Parses the aggregate `cpu  user nice system idle iowait irq softirq steal ...` line.
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let fields: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        if fields.len() < 4 {
            return None;
        }
        // guest and guest_nice (fields 8, 9) are already counted in user and nice.
        let total: u64 = fields.iter().take(8).sum();
        let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
        Some(CpuTimes {
            busy: total.saturating_sub(idle),
            total,
        })
    }

    /// Reads `/proc/stat` under `root`.
    pub fn read(root: &FsRoot) -> Result<CpuTimes, String> {
        let text = root.read_trimmed("/proc/stat").map_err(|e| e.to_string())?;
        CpuTimes::parse(&text).ok_or_else(|| "/proc/stat has no readable cpu line".to_string())
    }

    /// Busy % from `earlier` to `self`; `None` when no ticks passed (or the counters went back).
    pub fn percent_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let busy = self.busy.checked_sub(earlier.busy)?;
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_A: &str = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1\n";
    const STAT_B: &str = "cpu  160 0 70 900 70 0 0 0 0 0\ncpu0 80 0 35 450 35 0 0 0 0 0\n";

    #[test]
    fn utilization_between_two_readings() {
        let a = CpuTimes::parse(STAT_A).unwrap();
        let b = CpuTimes::parse(STAT_B).unwrap();
        assert_eq!(a.total, 1000);
        assert_eq!(a.busy, 150);
        // 80 busy ticks of 200
        assert_eq!(b.percent_since(&a), Some(40.0));
        assert_eq!(a.percent_since(&a), None);
        assert_eq!(
            a.percent_since(&b),
            None,
            "counters going back give no value"
        );
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(CpuTimes::parse("cpu  a b c d"), None);
        assert_eq!(CpuTimes::parse("cpu  1 2"), None);
        assert_eq!(CpuTimes::parse(""), None);
    }
}
