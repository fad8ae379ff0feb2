//! This computer's power sensors as the answer loop's [`PowerMeter`]: `hearth_npu`'s telemetry
//! reads them about once a second, and each reading is handed to the loop, which integrates
//! the joules (`hearth_chat::energy`).

use std::path::PathBuf;

use hearth_chat::energy::{PowerMeter, PowerReading, PowerReadings, PowerTrace};
use hearth_chat::BackendKind;
use hearth_npu::{Metric, PowerSample, TelemetryHandle, TelemetryOptions};

/// The power sensors under a system root (`/` on a real machine, a fixture tree in tests).
#[derive(Debug, Clone)]
pub struct Sensors {
    root: PathBuf,
}

impl Sensors {
    /// The sensors under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sensors { root: root.into() }
    }
}

impl PowerMeter for Sensors {
    fn start(&self, kind: BackendKind) -> Box<dyn PowerReadings> {
        Box::new(Telemetry(hearth_npu::Telemetry::start_with(
            &self.root,
            TelemetryOptions {
                // The NPU's sensors ioctl wakes it, so it is asked only when the NPU answers.
                sensors_ioctl: kind == BackendKind::Npu,
                ..Default::default()
            },
        )))
    }
}

struct Telemetry(TelemetryHandle);

impl PowerReadings for Telemetry {
    fn read_now(&self) -> f64 {
        self.0.sample_now()
    }

    fn stop(self: Box<Self>) -> PowerTrace {
        let recording = self.0.finish();
        PowerTrace {
            readings: recording.samples.iter().map(reading).collect(),
            end_secs: recording.end_secs,
            battery_capacity_wh: recording.battery_capacity_wh,
        }
    }
}

/// The meters the loop integrates, from one telemetry sample.
fn reading(sample: &PowerSample) -> PowerReading {
    let watts = |metric: &Metric<f64>| match metric {
        Metric::Available { value, source } => Ok((*value, source.clone())),
        Metric::Unavailable { unavailable } => Err(unavailable.clone()),
    };
    PowerReading {
        t_secs: sample.t_secs,
        package: watts(&sample.package_watts),
        battery: watts(&sample.battery_watts),
        npu: watts(&sample.npu_watts),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use hearth_chat::energy::{Measurement, Meter};

    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/npu")
            .join(name)
    }

    /// A laptop on battery (the `strix-ready` tree): the receipt's headline is package power,
    /// every meter keeps the source it was read from, and battery draw becomes % per hour.
    #[test]
    fn an_answer_measured_on_a_fixture_laptop() {
        let sensors = Sensors::new(fixture("strix-ready"));
        let measurement = Measurement::start(&sensors, BackendKind::Cpu);
        measurement.decode_began();
        let r = measurement.finish(100, 50);
        assert_eq!(r.meter, Some(Meter::Package));
        assert_eq!(r.source, "package power: amdgpu hwmon4 power1_input (PPT)");
        assert_eq!(r.samples, 3, "start, decode, finish");
        assert_eq!((r.prompt_tokens, r.generated_tokens), (100, 50));
        let bat = r.battery.expect("on battery with energy_full");
        assert!((bat.percent_per_hour - 100.0 * 18.4 / 73.0).abs() < 1e-9);
        let npu = r.meters.iter().find(|m| m.meter == Meter::Npu).unwrap();
        assert_eq!(npu.source, "amdgpu gpu_metrics (card1) average_ipu_power");
    }

    /// A machine with no sensor at all: no joules, and the receipt says why for each meter.
    #[test]
    fn no_sensors_give_no_joules_and_say_why() {
        let empty = tempfile::tempdir().unwrap();
        let measurement = Measurement::start(&Sensors::new(empty.path()), BackendKind::Cpu);
        let r = measurement.finish(10, 0);
        assert_eq!((r.meter, r.total_joules), (None, None));
        assert!(
            r.source.starts_with("unavailable: package power: "),
            "{}",
            r.source
        );
    }
}
