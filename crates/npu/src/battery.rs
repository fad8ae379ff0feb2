//! The laptop battery from `/sys/class/power_supply`: discharge power and capacity.
//!
//! While discharging, the battery's draw is the whole laptop's power. Drivers report either
//! `power_now` (µW) or `current_now` (µA) with `voltage_now` (µV); capacity either as
//! `energy_full` (µWh) or `charge_full` (µAh) with `voltage_min_design` (µV).

use crate::fsroot::FsRoot;
use serde::Serialize;

/// A battery found under `/sys/class/power_supply`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Battery {
    /// System path of the supply, `/sys/class/power_supply/BAT0`.
    pub dir: String,
}

/// One reading of a battery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryState {
    /// `status`: "Discharging", "Charging", "Full", "Not charging".
    pub status: String,
    /// Draw in watts, when the driver reports it (positive while discharging).
    pub power_watts: Option<f64>,
    /// Full capacity in watt-hours, when known.
    pub full_wh: Option<f64>,
}

impl BatteryState {
    /// True when running on battery.
    pub fn discharging(&self) -> bool {
        self.status.eq_ignore_ascii_case("discharging")
    }
}

/// Finds the first supply whose `type` is `Battery`; `Err(reason)` when there is none.
pub fn find(root: &FsRoot) -> Result<Battery, String> {
    for entry in root.list_dir("/sys/class/power_supply") {
        let dir = format!("/sys/class/power_supply/{entry}");
        if root.read_trimmed(format!("{dir}/type")).as_deref() == Ok("Battery") {
            return Ok(Battery { dir });
        }
    }
    Err(
        "no battery in /sys/class/power_supply (a desktop, or the battery driver is not loaded)"
            .into(),
    )
}

impl Battery {
    /// `BAT0`.
    pub fn name(&self) -> &str {
        self.dir.rsplit('/').next().unwrap_or(&self.dir)
    }

    /// Reads status, draw and capacity; `Err(reason)` if even `status` is unreadable.
    pub fn read(&self, root: &FsRoot) -> Result<BatteryState, String> {
        let get = |f: &str| root.read_u64(format!("{}/{f}", self.dir)).ok();
        let status = root
            .read_trimmed(format!("{}/status", self.dir))
            .map_err(|e| e.to_string())?;
        let power_watts = match get("power_now") {
            Some(uw) => Some(uw as f64 / 1e6),
            None => match (get("current_now"), get("voltage_now")) {
                (Some(ua), Some(uv)) => Some(ua as f64 * uv as f64 / 1e12),
                _ => None,
            },
        };
        let full_wh = match get("energy_full") {
            Some(uwh) => Some(uwh as f64 / 1e6),
            None => match (get("charge_full"), get("voltage_min_design")) {
                (Some(uah), Some(uv)) => Some(uah as f64 * uv as f64 / 1e12),
                _ => None,
            },
        };
        Ok(BatteryState {
            status,
            power_watts,
            full_wh: full_wh.filter(|&w| w > 0.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn supply(root: &std::path::Path, name: &str, files: &[(&str, &str)]) {
        let d = root.join("sys/class/power_supply").join(name);
        fs::create_dir_all(&d).unwrap();
        for (f, v) in files {
            fs::write(d.join(f), v).unwrap();
        }
    }

    #[test]
    fn power_now_and_energy_full() {
        let dir = tempfile::tempdir().unwrap();
        supply(dir.path(), "AC", &[("type", "Mains\n"), ("online", "0\n")]);
        supply(
            dir.path(),
            "BAT0",
            &[
                ("type", "Battery\n"),
                ("status", "Discharging\n"),
                ("power_now", "12500000\n"),
                ("energy_full", "70000000\n"),
            ],
        );
        let root = FsRoot::new(dir.path());
        let b = find(&root).unwrap();
        assert_eq!(b.name(), "BAT0");
        let s = b.read(&root).unwrap();
        assert!(s.discharging());
        assert_eq!(s.power_watts, Some(12.5));
        assert_eq!(s.full_wh, Some(70.0));
    }

    #[test]
    fn current_times_voltage_and_charge_full() {
        let dir = tempfile::tempdir().unwrap();
        supply(
            dir.path(),
            "BAT1",
            &[
                ("type", "Battery\n"),
                ("status", "Discharging\n"),
                ("current_now", "1000000\n"),
                ("voltage_now", "15000000\n"),
                ("charge_full", "4000000\n"),
                ("voltage_min_design", "15400000\n"),
            ],
        );
        let root = FsRoot::new(dir.path());
        let s = find(&root).unwrap().read(&root).unwrap();
        assert_eq!(s.power_watts, Some(15.0));
        assert!((s.full_wh.unwrap() - 61.6).abs() < 1e-9);
    }

    #[test]
    fn no_battery_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let root = FsRoot::new(dir.path());
        assert!(find(&root).unwrap_err().contains("no battery"));
        supply(
            dir.path(),
            "BAT0",
            &[
                ("type", "Battery\n"),
                ("status", "Charging\n"),
                ("power_now", "lots\n"),
            ],
        );
        let s = find(&root).unwrap().read(&root).unwrap();
        assert!(!s.discharging());
        assert_eq!(s.power_watts, None);
    }
}
