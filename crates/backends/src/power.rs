//! This computer's power sensors as the answer loop's [`PowerMeter`]: readings about once a
//! second through `hearth_npu`'s telemetry, integrated into joules for prefill and decode apart.

use std::path::PathBuf;

use hearth_chat::energy::{BatteryUse, EnergyReport, Measurement, Meter, MeterEnergy, PowerMeter};
use hearth_chat::BackendKind;

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
    fn start(&self, kind: BackendKind) -> Box<dyn Measurement> {
        Box::new(Telemetry(hearth_npu::Telemetry::start_with(
            &self.root,
            hearth_npu::TelemetryOptions {
                // The NPU's sensors ioctl wakes it, so it is asked only when the NPU answers.
                sensors_ioctl: kind == BackendKind::Npu,
                ..Default::default()
            },
        )))
    }
}

struct Telemetry(hearth_npu::TelemetryHandle);

impl Measurement for Telemetry {
    fn decode_began(&self) {
        self.0.mark_phase(hearth_npu::Phase::Decode);
    }

    fn finish(self: Box<Self>, prompt_tokens: usize, generated_tokens: usize) -> EnergyReport {
        receipt_energy(self.0.finish(prompt_tokens, generated_tokens))
    }
}

/// The telemetry's report in the receipt's terms (the same fields).
fn receipt_energy(report: hearth_npu::EnergyReport) -> EnergyReport {
    EnergyReport {
        prefill_secs: report.prefill_secs,
        decode_secs: report.decode_secs,
        prompt_tokens: report.prompt_tokens,
        generated_tokens: report.generated_tokens,
        meter: report.meter.map(receipt_meter),
        source: report.source,
        prefill_joules: report.prefill_joules,
        decode_joules: report.decode_joules,
        total_joules: report.total_joules,
        joules_per_1000_tokens: report.joules_per_1000_tokens,
        meters: report
            .meters
            .into_iter()
            .map(|m| MeterEnergy {
                meter: receipt_meter(m.meter),
                source: m.source,
                prefill_joules: m.prefill_joules,
                decode_joules: m.decode_joules,
                total_joules: m.total_joules,
                average_watts: m.average_watts,
                readings: m.readings,
            })
            .collect(),
        battery: report.battery.map(|b| BatteryUse {
            average_watts: b.average_watts,
            capacity_wh: b.capacity_wh,
            percent_per_hour: b.percent_per_hour,
        }),
        samples: report.samples,
    }
}

fn receipt_meter(meter: hearth_npu::Meter) -> Meter {
    match meter {
        hearth_npu::Meter::Package => Meter::Package,
        hearth_npu::Meter::Battery => Meter::Battery,
        hearth_npu::Meter::Npu => Meter::Npu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receipt's report is the telemetry's, field for field: stored receipts and the UI's
    /// bindings read the same JSON whichever side wrote it.
    #[test]
    fn the_receipt_energy_serializes_as_the_telemetry_report() {
        let meter = |meter, joules| hearth_npu::MeterEnergy {
            meter,
            source: "amdgpu hwmon4 power1_average".into(),
            prefill_joules: joules,
            decode_joules: 2.0 * joules,
            total_joules: 3.0 * joules,
            average_watts: 9.5,
            readings: 4,
        };
        let report = hearth_npu::EnergyReport {
            prefill_secs: 0.5,
            decode_secs: 2.0,
            prompt_tokens: 12,
            generated_tokens: 30,
            meter: Some(hearth_npu::Meter::Package),
            source: "package power: amdgpu hwmon4 power1_average (PPT)".into(),
            prefill_joules: Some(1.0),
            decode_joules: Some(2.0),
            total_joules: Some(3.0),
            joules_per_1000_tokens: Some(100.0),
            meters: vec![
                meter(hearth_npu::Meter::Package, 1.0),
                meter(hearth_npu::Meter::Battery, 1.5),
                meter(hearth_npu::Meter::Npu, 0.25),
            ],
            battery: Some(hearth_npu::BatteryUse {
                average_watts: 9.5,
                capacity_wh: 60.0,
                percent_per_hour: 15.8,
            }),
            samples: 4,
        };
        let telemetry = serde_json::to_value(&report).unwrap();
        let receipt = serde_json::to_value(receipt_energy(report)).unwrap();
        assert_eq!(receipt, telemetry);
    }
}
