//! What an answer cost in energy: the meter the caller hands the answer loop, the one
//! integration of its readings into joules, and the report the receipt records.
//!
//! The loop knows no sensors. Its caller passes a [`PowerMeter`] that takes readings of this
//! computer's power (`hearth_backends::Sensors`, over `hearth_npu`'s telemetry), the server and
//! the tests none. A [`Measurement`] marks where decode begins and, at the end, integrates the
//! readings here: power between two readings is taken to change linearly, and to stay at the
//! first (last) reading before (after) them, so the integral is exact for a piecewise-linear
//! trace and an answer shorter than one reading still gets `watts x seconds`. The report is
//! this crate's own type because it is stored with each answer and sent to the UI.

use std::cell::Cell;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;

/// Takes power readings through answers; handed to the answer loop by its caller.
pub trait PowerMeter: std::fmt::Debug {
    /// Starts taking readings through one answer on a backend of `kind`.
    fn start(&self, kind: BackendKind) -> Box<dyn PowerReadings>;
}

/// The readings of one answer, taken from its start.
pub trait PowerReadings {
    /// Takes a reading now, at a phase boundary; returns the time in seconds since the start.
    fn read_now(&self) -> f64;
    /// Stops with a last reading and hands over what was read.
    fn stop(self: Box<Self>) -> PowerTrace;
}

/// What a meter read through one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerTrace {
    /// Every reading, in the order taken.
    pub readings: Vec<PowerReading>,
    /// When the readings stopped, in seconds since the start.
    pub end_secs: f64,
    /// The battery's full capacity, Wh, when known (turns battery draw into % per hour).
    pub battery_capacity_wh: Option<f64>,
}

/// One reading of the three meters. Each is its watts and where they were read, or why there
/// is no value.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerReading {
    /// Seconds since the readings started.
    pub t_secs: f64,
    /// Whole-package power (CPU + iGPU + NPU + SoC).
    pub package: Result<(f64, String), String>,
    /// The laptop's draw from its battery, while discharging.
    pub battery: Result<(f64, String), String>,
    /// NPU power.
    pub npu: Result<(f64, String), String>,
}

/// The measurement of one answer: prefill from its start, decode from the first piece.
pub struct Measurement {
    readings: Box<dyn PowerReadings>,
    decode_from: Cell<Option<f64>>,
}

impl Measurement {
    /// Starts measuring one answer on a backend of `kind` with `meter`: what follows is its
    /// prefill.
    pub fn start(meter: &dyn PowerMeter, kind: BackendKind) -> Measurement {
        Measurement {
            readings: meter.start(kind),
            decode_from: Cell::new(None),
        }
    }

    /// The first piece of the answer came: what follows is decode. Later calls change nothing.
    pub fn decode_began(&self) {
        if self.decode_from.get().is_none() {
            self.decode_from.set(Some(self.readings.read_now()));
        }
    }

    /// Ends the measurement: the energy of an answer that read `prompt_tokens` and wrote
    /// `generated_tokens`.
    pub fn finish(self, prompt_tokens: usize, generated_tokens: usize) -> EnergyReport {
        let trace = self.readings.stop();
        report(
            &trace,
            self.decode_from.get(),
            prompt_tokens,
            generated_tokens,
        )
    }
}

/// Which power the joules integrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Meter {
    /// The whole processor package (CPU + iGPU + NPU + SoC): what an answer costs the chip.
    Package,
    /// The laptop's draw from its battery: what an answer costs the battery.
    Battery,
    /// The NPU alone.
    Npu,
}

impl Meter {
    fn read(self, r: &PowerReading) -> &Result<(f64, String), String> {
        match self {
            Meter::Package => &r.package,
            Meter::Battery => &r.battery,
            Meter::Npu => &r.npu,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Meter::Package => "package power",
            Meter::Battery => "battery discharge",
            Meter::Npu => "NPU power",
        }
    }
}

/// Energy by one meter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct MeterEnergy {
    /// The meter.
    pub meter: Meter,
    /// Where its readings came from (all distinct sources seen, joined).
    pub source: String,
    /// Joules while reading the prompt.
    pub prefill_joules: f64,
    /// Joules while generating.
    pub decode_joules: f64,
    /// Prefill + decode.
    pub total_joules: f64,
    /// Mean power over the generation, W.
    pub average_watts: f64,
    /// Readings that had a value.
    pub readings: usize,
}

/// Estimated battery use if generating went on for an hour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BatteryUse {
    /// Mean discharge power while generating, W.
    pub average_watts: f64,
    /// Full battery capacity, Wh.
    pub capacity_wh: f64,
    /// Percent of a full battery per hour of continuous generation.
    pub percent_per_hour: f64,
}

/// What one answer cost. The headline fields come from the best meter available (package, then
/// battery, then NPU); `meters` has each meter apart. Deserializes too, so it can be stored with
/// an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EnergyReport {
    /// Seconds of prefill.
    pub prefill_secs: f64,
    /// Seconds of decode.
    pub decode_secs: f64,
    /// Tokens of prompt read.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// The headline meter, `None` when no power reading was available.
    pub meter: Option<Meter>,
    /// "package power: amdgpu hwmon4 power1_average (PPT)", or "unavailable: <reasons>".
    pub source: String,
    /// Headline joules while reading the prompt.
    pub prefill_joules: Option<f64>,
    /// Headline joules while generating.
    pub decode_joules: Option<f64>,
    /// Headline joules for the whole answer.
    pub total_joules: Option<f64>,
    /// Headline joules per 1000 generated tokens (the whole answer's energy, prompt included,
    /// divided by the tokens it produced).
    pub joules_per_1000_tokens: Option<f64>,
    /// Every meter that had readings.
    pub meters: Vec<MeterEnergy>,
    /// Battery use per hour of generating, when on battery and the capacity is known.
    pub battery: Option<BatteryUse>,
    /// Number of power samples taken.
    pub samples: usize,
}

/// Integral over `[a, b]` of the piecewise-linear function through `points` (time, value),
/// held constant outside them. `points` must be sorted by time; empty gives 0.
fn integrate(points: &[(f64, f64)], a: f64, b: f64) -> f64 {
    if points.is_empty() || b <= a {
        return 0.0;
    }
    let value_at = |t: f64| -> f64 {
        let i = points.partition_point(|&(pt, _)| pt <= t);
        if i == 0 {
            return points[0].1;
        }
        if i == points.len() {
            return points[i - 1].1;
        }
        let (t0, v0) = points[i - 1];
        let (t1, v1) = points[i];
        if t1 == t0 {
            v1
        } else {
            v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        }
    };
    let mut knots = vec![a];
    knots.extend(points.iter().map(|p| p.0).filter(|&t| t > a && t < b));
    knots.push(b);
    knots
        .windows(2)
        .map(|w| 0.5 * (value_at(w[0]) + value_at(w[1])) * (w[1] - w[0]))
        .sum()
}

/// One meter's joules over prefill `[0, decode_from)` and decode `[decode_from, end)`, or why
/// it has no reading.
fn meter_energy(trace: &PowerTrace, decode_from: f64, meter: Meter) -> Result<MeterEnergy, String> {
    let mut points = Vec::new();
    let mut sources: Vec<&str> = Vec::new();
    let mut reasons: Vec<&str> = Vec::new();
    for r in &trace.readings {
        match meter.read(r) {
            Ok((watts, source)) => {
                points.push((r.t_secs, *watts));
                if !sources.contains(&source.as_str()) {
                    sources.push(source);
                }
            }
            Err(reason) => {
                if !reasons.contains(&reason.as_str()) {
                    reasons.push(reason);
                }
            }
        }
    }
    if points.is_empty() {
        return Err(if reasons.is_empty() {
            "no power samples were taken".into()
        } else {
            reasons.join("; ")
        });
    }
    points.sort_by(|x, y| x.0.total_cmp(&y.0));
    let end = trace.end_secs;
    let prefill = integrate(&points, 0.0, decode_from);
    let decode = integrate(&points, decode_from, end);
    Ok(MeterEnergy {
        meter,
        source: sources.join(", "),
        prefill_joules: prefill,
        decode_joules: decode,
        total_joules: prefill + decode,
        average_watts: if end > 0.0 {
            (prefill + decode) / end
        } else {
            points[0].1
        },
        readings: points.len(),
    })
}

/// The energy report of one answer from its trace, decode having begun at `decode_from`
/// (seconds since the start; `None` when no piece came, so all of it was prefill).
fn report(
    trace: &PowerTrace,
    decode_from: Option<f64>,
    prompt_tokens: usize,
    generated_tokens: usize,
) -> EnergyReport {
    let end = trace.end_secs.max(0.0);
    let decode_from = decode_from.unwrap_or(end).clamp(0.0, end);
    let mut meters = Vec::new();
    let mut reasons = Vec::new();
    for meter in [Meter::Package, Meter::Battery, Meter::Npu] {
        match meter_energy(trace, decode_from, meter) {
            Ok(m) => meters.push(m),
            Err(r) => reasons.push(format!("{}: {r}", meter.label())),
        }
    }
    let head = meters.first();
    let battery = meters
        .iter()
        .find(|m| m.meter == Meter::Battery)
        .zip(trace.battery_capacity_wh)
        .map(|(m, cap)| BatteryUse {
            average_watts: m.average_watts,
            capacity_wh: cap,
            percent_per_hour: 100.0 * m.average_watts / cap,
        });
    EnergyReport {
        prefill_secs: decode_from,
        decode_secs: end - decode_from,
        prompt_tokens,
        generated_tokens,
        meter: head.map(|m| m.meter),
        source: match head {
            Some(m) => format!("{}: {}", m.meter.label(), m.source),
            None => format!("unavailable: {}", reasons.join("; ")),
        },
        prefill_joules: head.map(|m| m.prefill_joules),
        decode_joules: head.map(|m| m.decode_joules),
        total_joules: head.map(|m| m.total_joules),
        joules_per_1000_tokens: head
            .filter(|_| generated_tokens > 0)
            .map(|m| m.total_joules * 1000.0 / generated_tokens as f64),
        meters,
        battery,
        samples: trace.readings.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(
        t: f64,
        package: Option<f64>,
        battery: Option<f64>,
        npu: Option<f64>,
    ) -> PowerReading {
        let m = |v: Option<f64>, src: &str| match v {
            Some(v) => Ok((v, src.to_string())),
            None => Err(format!("{src} absent")),
        };
        PowerReading {
            t_secs: t,
            package: m(package, "ppt"),
            battery: m(battery, "bat"),
            npu: m(npu, "npu"),
        }
    }

    fn trace(readings: Vec<PowerReading>, end_secs: f64, capacity: Option<f64>) -> PowerTrace {
        PowerTrace {
            readings,
            end_secs,
            battery_capacity_wh: capacity,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn integral_of_a_known_trace() {
        // P(t) = 2 + 3t sampled at integer seconds: exact for a linear trace.
        let pts: Vec<(f64, f64)> = (0..=10).map(|t| (t as f64, 2.0 + 3.0 * t as f64)).collect();
        // ∫0^10 = 20 + 150
        assert!(close(integrate(&pts, 0.0, 10.0), 170.0));
        // ∫2.5^7.25 (2 + 3t) dt = 2*4.75 + 1.5*(7.25² - 2.5²)
        let want = 2.0 * 4.75 + 1.5 * (7.25f64.powi(2) - 2.5f64.powi(2));
        assert!(close(integrate(&pts, 2.5, 7.25), want));
    }

    #[test]
    fn held_constant_outside_the_readings() {
        let pts = [(1.0, 4.0), (2.0, 6.0)];
        // [0,1] at 4 W, [1,2] mean 5 W, [2,3] at 6 W
        assert!(close(integrate(&pts, 0.0, 3.0), 4.0 + 5.0 + 6.0));
        assert!(
            close(integrate(&[(0.0, 5.0)], 0.0, 0.4), 2.0),
            "one reading: W x s"
        );
        assert_eq!(integrate(&[], 0.0, 1.0), 0.0);
        assert_eq!(integrate(&pts, 2.0, 1.0), 0.0);
    }

    #[test]
    fn report_on_a_synthetic_trace() {
        // Package power: 10 W flat during prefill (0..2 s), ramps to 20 W by 4 s, flat to 6 s.
        let points = [
            (0.0, 10.0),
            (1.0, 10.0),
            (2.0, 10.0),
            (3.0, 15.0),
            (4.0, 20.0),
            (5.0, 20.0),
            (6.0, 20.0),
        ];
        let readings = points
            .iter()
            .map(|&(t, w)| reading(t, Some(w), Some(w + 5.0), (t >= 2.0).then_some(2.0)))
            .collect();
        let r = report(&trace(readings, 6.0, Some(60.0)), Some(2.0), 300, 100);
        assert_eq!(r.meter, Some(Meter::Package));
        assert_eq!(r.source, "package power: ppt");
        assert!(close(r.prefill_joules.unwrap(), 20.0));
        // 2..4: mean 15 W x 2 s = 30 J; 4..6: 40 J
        assert!(close(r.decode_joules.unwrap(), 70.0));
        assert!(close(r.total_joules.unwrap(), 90.0));
        assert!(close(r.joules_per_1000_tokens.unwrap(), 900.0));
        assert!(close(r.prefill_secs, 2.0) && close(r.decode_secs, 4.0));
        assert_eq!(r.samples, 7);
        let npu = r.meters.iter().find(|m| m.meter == Meter::Npu).unwrap();
        // NPU held at its first reading (2 W) before 2 s: honest extrapolation, 12 J overall
        assert!(close(npu.total_joules, 12.0));
        let bat = r.battery.unwrap();
        assert!(close(bat.average_watts, 20.0), "battery: (90 + 30) J / 6 s");
        assert!(close(bat.percent_per_hour, 100.0 * 20.0 / 60.0));
    }

    #[test]
    fn an_answer_with_no_piece_is_all_prefill() {
        let readings = vec![reading(0.0, Some(8.0), None, None)];
        let r = report(&trace(readings, 1.5, None), None, 40, 0);
        assert!(close(r.prefill_secs, 1.5) && r.decode_secs == 0.0);
        assert!(close(r.prefill_joules.unwrap(), 12.0));
        assert_eq!(r.decode_joules, Some(0.0));
        assert_eq!(r.joules_per_1000_tokens, None, "no tokens to divide by");
    }

    #[test]
    fn report_round_trips_through_json() {
        let readings = vec![
            reading(0.0, Some(10.0), None, Some(1.0)),
            reading(2.0, Some(12.0), None, Some(1.5)),
        ];
        let r = report(&trace(readings, 2.0, None), Some(0.5), 5, 7);
        let back: EnergyReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn no_power_at_all_says_why() {
        let readings = vec![
            reading(0.0, None, None, None),
            reading(1.0, None, None, None),
        ];
        let r = report(&trace(readings, 1.0, None), None, 10, 5);
        assert_eq!(r.meter, None);
        assert_eq!(r.total_joules, None);
        assert_eq!(
            r.source,
            "unavailable: package power: ppt absent; battery discharge: bat absent; NPU power: npu absent"
        );
        let empty = report(&trace(Vec::new(), 1.0, None), None, 10, 0);
        assert!(empty.source.contains("no power samples"));
        assert_eq!(empty.joules_per_1000_tokens, None);
    }
}
