//! One reading of every power and utilization source, each with its source or its reason.
//!
//! [`PowerSources::discover`] finds, once, which files exist; [`PowerSources::sample`] reads them.
//! Best source first (see the crate docs): NPU power from `gpu_metrics`, then the amdxdna hwmon,
//! then the sensors ioctl (only when enabled, because it wakes the NPU); package power from the
//! amdgpu hwmon (PPT), then `gpu_metrics`; battery discharge from `power_supply`; CPU from
//! `/proc/stat`; iGPU and NPU column activity from `gpu_metrics`.

use crate::access;
use crate::battery::{self, Battery};
use crate::cpu::CpuTimes;
use crate::device::{self, Detection};
use crate::fsroot::FsRoot;
use crate::gpu_metrics::GpuMetrics;
use crate::hwmon::{self, HwmonPower};
use crate::ioctl::{self, SensorKind};
use crate::metric::Metric;
use serde::Serialize;
use std::fs::File;
use std::path::Path;

/// Power and utilization at one moment. Every field is a value with its source, or the reason
/// it is missing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PowerSample {
    /// Seconds since telemetry started (0 for a one-off reading).
    pub t_secs: f64,
    /// NPU power, W.
    pub npu_watts: Metric<f64>,
    /// NPU busy, % (mean over its columns).
    pub npu_percent: Metric<f64>,
    /// Whole-package power (CPU + iGPU + NPU + SoC), W.
    pub package_watts: Metric<f64>,
    /// The laptop's draw from its battery, W, while discharging.
    pub battery_watts: Metric<f64>,
    /// CPU busy since the previous reading, %.
    pub cpu_percent: Metric<f64>,
    /// iGPU busy, %.
    pub igpu_percent: Metric<f64>,
}

/// The sources found on this system, and the state needed between readings.
#[derive(Debug)]
pub struct PowerSources {
    root: FsRoot,
    gpu_metrics: Result<String, String>,
    amdgpu: Result<HwmonPower, String>,
    amdxdna: Result<HwmonPower, String>,
    battery: Result<Battery, String>,
    sensors: Result<File, String>,
    cpu_before: Result<CpuTimes, String>,
}

/// The first `gpu_metrics` of a card that parses as 3.0 (the APU), or why there is none.
fn find_gpu_metrics(root: &FsRoot) -> Result<String, String> {
    let mut reasons = Vec::new();
    for card in root.list_dir("/sys/class/drm") {
        // card0-eDP-1 and renderD128 are connectors and render nodes, not cards.
        if !card.starts_with("card") || card.contains('-') {
            continue;
        }
        let path = format!("/sys/class/drm/{card}/device/gpu_metrics");
        match root.read_bytes(&path) {
            Ok(bytes) => match GpuMetrics::parse(&bytes) {
                Ok(_) => return Ok(path),
                Err(e) => reasons.push(format!("{card}: {e}")),
            },
            Err(crate::fsroot::ReadError::Missing(_)) => {}
            Err(e) => reasons.push(e.to_string()),
        }
    }
    if reasons.is_empty() {
        Err("no amdgpu gpu_metrics file".into())
    } else {
        Err(reasons.join("; "))
    }
}

impl PowerSources {
    /// Finds the sources under `root` (`/` for this machine). Never touches the NPU itself.
    pub fn discover(root: &Path) -> PowerSources {
        let root = FsRoot::new(root);
        PowerSources {
            gpu_metrics: find_gpu_metrics(&root),
            amdgpu: hwmon::find_power(&root, "amdgpu"),
            amdxdna: hwmon::find_power(&root, "amdxdna"),
            battery: battery::find(&root),
            sensors: Err("the sensors ioctl is used only while generating".into()),
            cpu_before: CpuTimes::read(&root),
            root,
        }
    }

    /// Also reads the driver's sensors through the ioctl, opening the device once now. Call it
    /// only for a generation: every query wakes the NPU.
    pub fn with_sensors_ioctl(mut self) -> PowerSources {
        self.sensors = match device::detect(&self.root) {
            Detection::Found(dev) => {
                let node = self.root.path(&dev.node);
                match std::fs::metadata(&node) {
                    Ok(m) if std::os::unix::fs::FileTypeExt::is_char_device(&m.file_type()) => {
                        access::open_node(&node).map_err(|e| {
                            format!("{} could not be opened for sensors: {e}", dev.node)
                        })
                    }
                    Ok(_) => Err(format!("{} is not a character device", dev.node)),
                    Err(e) => Err(format!("{}: {e}", dev.node)),
                }
            }
            _ => Err("no NPU device for the sensors ioctl".into()),
        };
        self
    }

    /// Full capacity of the battery in Wh, when there is one that says.
    pub fn battery_capacity_wh(&self) -> Option<f64> {
        let b = self.battery.as_ref().ok()?;
        b.read(&self.root).ok()?.full_wh
    }

    /// Reads everything once; `t_secs` is stamped on the sample as given.
    pub fn sample(&mut self, t_secs: f64) -> PowerSample {
        let metrics: Result<(GpuMetrics, String), String> =
            self.gpu_metrics.clone().and_then(|path| {
                let bytes = self.root.read_bytes(&path).map_err(|e| e.to_string())?;
                let m = GpuMetrics::parse(&bytes).map_err(|e| format!("{path}: {e}"))?;
                let card = path.split('/').nth(4).unwrap_or("card").to_string();
                Ok((m, card))
            });
        let sensors = match &self.sensors {
            Ok(f) => ioctl::read_sensors(f).map_err(|e| ioctl::describe_error(&e)),
            Err(reason) => Err(reason.clone()),
        };
        let gm = |field: &str| -> Result<(&GpuMetrics, String), String> {
            match &metrics {
                Ok((m, card)) => Ok((m, format!("amdgpu gpu_metrics ({card}) {field}"))),
                Err(e) => Err(e.clone()),
            }
        };

        let npu_watts = from_gpu_metrics(gm("average_ipu_power"), |m| {
            m.ipu_power_mw.map(|mw| f64::from(mw) / 1e3)
        })
        .or_else(|| from_hwmon(&self.root, &self.amdxdna))
        .or_else(|| from_sensors(&sensors, SensorKind::Power, |v| v.iter().sum()));
        let npu_percent =
            from_gpu_metrics(gm("average_ipu_activity"), GpuMetrics::ipu_activity_mean).or_else(
                || {
                    from_sensors(&sensors, SensorKind::ColumnUtilization, |v| {
                        v.iter().sum::<f64>() / v.len() as f64
                    })
                },
            );
        let package_watts = from_hwmon(&self.root, &self.amdgpu).or_else(|| {
            from_gpu_metrics(gm("average_socket_power"), |m| {
                m.socket_power_mw.map(|mw| f64::from(mw) / 1e3)
            })
        });
        let igpu_percent = from_gpu_metrics(gm("average_gfx_activity"), |m| {
            m.gfx_activity_percent.map(f64::from)
        });
        PowerSample {
            t_secs,
            npu_watts,
            npu_percent,
            package_watts,
            battery_watts: self.battery_watts(),
            cpu_percent: self.cpu_percent(),
            igpu_percent,
        }
    }

    fn battery_watts(&self) -> Metric<f64> {
        let b = match &self.battery {
            Ok(b) => b,
            Err(reason) => return Metric::unavailable(reason.clone()),
        };
        match b.read(&self.root) {
            Ok(s) if !s.discharging() => Metric::unavailable(format!(
                "on mains power ({} is {})",
                b.name(),
                s.status.to_lowercase()
            )),
            Ok(s) => match s.power_watts {
                Some(w) => Metric::available(w, format!("{} discharge (power_supply)", b.name())),
                None => Metric::unavailable(format!("{} reports no power or current", b.name())),
            },
            Err(e) => Metric::unavailable(e),
        }
    }

    fn cpu_percent(&mut self) -> Metric<f64> {
        let now = match CpuTimes::read(&self.root) {
            Ok(t) => t,
            Err(e) => return Metric::unavailable(e),
        };
        let result = match &self.cpu_before {
            Ok(before) => match now.percent_since(before) {
                Some(p) => Metric::available(p, "/proc/stat"),
                None => Metric::unavailable("no CPU time has passed since the previous reading"),
            },
            Err(e) => Metric::unavailable(e.clone()),
        };
        self.cpu_before = Ok(now);
        result
    }
}

fn from_gpu_metrics(
    found: Result<(&GpuMetrics, String), String>,
    field: impl FnOnce(&GpuMetrics) -> Option<f64>,
) -> Metric<f64> {
    match found {
        Ok((m, source)) => match field(m) {
            Some(v) => Metric::available(v, source),
            None => Metric::unavailable(format!("{source} is not filled in (0xFFFF)")),
        },
        Err(reason) => Metric::unavailable(reason),
    }
}

fn from_hwmon(root: &FsRoot, found: &Result<HwmonPower, String>) -> Metric<f64> {
    match found {
        Ok(h) => match h.read_watts(root) {
            Ok(w) => Metric::available(w, h.source()),
            Err(e) => Metric::unavailable(e.to_string()),
        },
        Err(reason) => Metric::unavailable(reason.clone()),
    }
}

fn from_sensors(
    sensors: &Result<Vec<ioctl::Sensor>, String>,
    kind: SensorKind,
    combine: impl FnOnce(&[f64]) -> f64,
) -> Metric<f64> {
    match sensors {
        Ok(list) => {
            let values: Vec<f64> = list
                .iter()
                .filter(|s| s.kind == kind)
                .map(|s| s.value)
                .collect();
            if values.is_empty() {
                Metric::unavailable("the amdxdna sensors have no such reading")
            } else {
                Metric::available(combine(&values), "amdxdna sensors ioctl")
            }
        }
        Err(reason) => Metric::unavailable(reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_system_gives_reasons_not_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = PowerSources::discover(dir.path()).with_sensors_ioctl();
        let p = s.sample(0.0);
        for m in [
            &p.npu_watts,
            &p.npu_percent,
            &p.package_watts,
            &p.battery_watts,
            &p.cpu_percent,
            &p.igpu_percent,
        ] {
            assert!(m.value().is_none(), "no source may give a value: {m:?}");
        }
        assert_eq!(
            p.npu_watts.describe("W", 2),
            "unavailable: no amdgpu gpu_metrics file; no amdxdna hwmon in /sys/class/hwmon; no NPU device for the sensors ioctl"
        );
    }
}
