//! Power readings from hwmon: the amdgpu package power (PPT) and the amdxdna NPU power.
//!
//! `/sys/class/hwmon/hwmonN/name` says which driver a hwmon belongs to. Power files hold
//! microwatts: `power1_input` (instant) or `power1_average`. On an APU the amdgpu `power1_label`
//! is `PPT`, the whole package; amdxdna labels its power `NPU_power`.

use crate::fsroot::{FsRoot, ReadError};
use serde::Serialize;

/// One hwmon power file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HwmonPower {
    /// The hwmon directory, as a system path (`/sys/class/hwmon/hwmon3`).
    pub dir: String,
    /// The driver name from `name` (`amdgpu`, `amdxdna`).
    pub driver: String,
    /// `power1_input` or `power1_average`.
    pub file: String,
    /// `power1_label`, when the driver writes one (`PPT`, `NPU_power`).
    pub label: Option<String>,
}

impl HwmonPower {
    /// Reads the current power in watts.
    pub fn read_watts(&self, root: &FsRoot) -> Result<f64, ReadError> {
        let micro = root.read_u64(format!("{}/{}", self.dir, self.file))?;
        Ok(micro as f64 / 1e6)
    }

    /// A short source description: "amdgpu hwmon3 power1_average (PPT)".
    pub fn source(&self) -> String {
        let short = self.dir.rsplit('/').next().unwrap_or(&self.dir);
        match &self.label {
            Some(l) => format!("{} {short} {} ({l})", self.driver, self.file),
            None => format!("{} {short} {}", self.driver, self.file),
        }
    }
}

/// Finds the first power file of hwmon devices whose `name` is `driver`.
/// Returns `Err(reason)` in plain words when there is none.
pub fn find_power(root: &FsRoot, driver: &str) -> Result<HwmonPower, String> {
    let mut seen_driver = false;
    for entry in root.list_dir("/sys/class/hwmon") {
        let dir = format!("/sys/class/hwmon/{entry}");
        match root.read_trimmed(format!("{dir}/name")) {
            Ok(name) if name == driver => seen_driver = true,
            _ => continue,
        }
        for file in ["power1_input", "power1_average"] {
            if root.exists(format!("{dir}/{file}")) {
                let label = root.read_trimmed(format!("{dir}/power1_label")).ok();
                return Ok(HwmonPower {
                    dir,
                    driver: driver.to_string(),
                    file: file.to_string(),
                    label,
                });
            }
        }
    }
    Err(if seen_driver {
        format!("the {driver} hwmon has no power1_input or power1_average file")
    } else {
        format!("no {driver} hwmon in /sys/class/hwmon")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn hwmon(root: &std::path::Path, n: u32, files: &[(&str, &str)]) {
        let d = root.join(format!("sys/class/hwmon/hwmon{n}"));
        fs::create_dir_all(&d).unwrap();
        for (f, v) in files {
            fs::write(d.join(f), v).unwrap();
        }
    }

    #[test]
    fn finds_amdgpu_ppt_among_other_hwmons() {
        let dir = tempfile::tempdir().unwrap();
        hwmon(
            dir.path(),
            0,
            &[("name", "acpitz\n"), ("temp1_input", "45000\n")],
        );
        hwmon(dir.path(), 1, &[("name", "nvme\n")]);
        hwmon(
            dir.path(),
            4,
            &[
                ("name", "amdgpu\n"),
                ("power1_average", "17250000\n"),
                ("power1_label", "PPT\n"),
            ],
        );
        let root = FsRoot::new(dir.path());
        let p = find_power(&root, "amdgpu").unwrap();
        assert_eq!(p.dir, "/sys/class/hwmon/hwmon4");
        assert_eq!(p.source(), "amdgpu hwmon4 power1_average (PPT)");
        assert_eq!(p.read_watts(&root).unwrap(), 17.25);
    }

    #[test]
    fn amdxdna_power_input_in_microwatts() {
        let dir = tempfile::tempdir().unwrap();
        hwmon(
            dir.path(),
            7,
            &[
                ("name", "amdxdna\n"),
                ("power1_input", "1630000\n"),
                ("power1_label", "NPU_power\n"),
            ],
        );
        let root = FsRoot::new(dir.path());
        let p = find_power(&root, "amdxdna").unwrap();
        assert_eq!(p.read_watts(&root).unwrap(), 1.63);
    }

    #[test]
    fn missing_and_garbage_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let root = FsRoot::new(dir.path());
        assert_eq!(
            find_power(&root, "amdgpu").unwrap_err(),
            "no amdgpu hwmon in /sys/class/hwmon"
        );
        hwmon(dir.path(), 2, &[("name", "amdgpu\n")]);
        assert!(find_power(&root, "amdgpu")
            .unwrap_err()
            .contains("no power1_input"));
        hwmon(dir.path(), 2, &[("power1_input", "N/A\n")]);
        let p = find_power(&root, "amdgpu").unwrap();
        assert!(matches!(
            p.read_watts(&root),
            Err(ReadError::Garbage { .. })
        ));
    }
}
