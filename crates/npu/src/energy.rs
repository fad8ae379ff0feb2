//! Joules from a power trace: prefill and decode integrated apart.
//!
//! Power between two readings is taken to change linearly, and to stay at the first (last)
//! reading before (after) them, so the integral is exact for a piecewise-linear trace and a
//! generation shorter than one reading still gets `watts x seconds`. Phase boundaries fall
//! anywhere, not only on readings.

use crate::metric::Metric;
use crate::sample::PowerSample;
use serde::{Deserialize, Serialize};

/// A part of a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Reading the prompt, up to the first generated token.
    Prefill,
    /// Generating tokens.
    Decode,
}

/// The moment a phase began, in seconds since telemetry started.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseMark {
    /// The phase that begins.
    pub phase: Phase,
    /// When, in seconds since start.
    pub t_secs: f64,
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
    fn read(self, s: &PowerSample) -> &Metric<f64> {
        match self {
            Meter::Package => &s.package_watts,
            Meter::Battery => &s.battery_watts,
            Meter::Npu => &s.npu_watts,
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
pub fn integrate(points: &[(f64, f64)], a: f64, b: f64) -> f64 {
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

/// The `[start, end)` intervals of `phase`, given the marks (generation starts in prefill at 0).
pub fn intervals(marks: &[PhaseMark], end: f64, phase: Phase) -> Vec<(f64, f64)> {
    let mut bounds = vec![PhaseMark {
        phase: Phase::Prefill,
        t_secs: 0.0,
    }];
    bounds.extend(marks.iter().copied());
    bounds.sort_by(|x, y| x.t_secs.total_cmp(&y.t_secs));
    let mut out = Vec::new();
    for (i, m) in bounds.iter().enumerate() {
        let stop = bounds.get(i + 1).map_or(end, |n| n.t_secs).min(end);
        if m.phase == phase && stop > m.t_secs {
            out.push((m.t_secs, stop));
        }
    }
    out
}

fn meter_energy(
    samples: &[PowerSample],
    marks: &[PhaseMark],
    end: f64,
    meter: Meter,
) -> Result<MeterEnergy, String> {
    let mut points = Vec::new();
    let mut sources: Vec<&str> = Vec::new();
    let mut reasons: Vec<&str> = Vec::new();
    for s in samples {
        match meter.read(s) {
            Metric::Available { value, source } => {
                points.push((s.t_secs, *value));
                if !sources.contains(&source.as_str()) {
                    sources.push(source);
                }
            }
            Metric::Unavailable { unavailable } => {
                if !reasons.contains(&unavailable.as_str()) {
                    reasons.push(unavailable);
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
    let over = |phase| -> f64 {
        intervals(marks, end, phase)
            .into_iter()
            .map(|(a, b)| integrate(&points, a, b))
            .sum()
    };
    let (prefill, decode) = (over(Phase::Prefill), over(Phase::Decode));
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

/// Builds the energy report of one generation from its samples and phase marks, ending at
/// `end_secs`. `battery_capacity_wh` turns battery draw into % per hour.
pub fn report(
    samples: &[PowerSample],
    marks: &[PhaseMark],
    end_secs: f64,
    prompt_tokens: usize,
    generated_tokens: usize,
    battery_capacity_wh: Option<f64>,
) -> EnergyReport {
    let seconds = |phase| -> f64 {
        intervals(marks, end_secs, phase)
            .iter()
            .map(|(a, b)| b - a)
            .sum()
    };
    let mut meters = Vec::new();
    let mut reasons = Vec::new();
    for meter in [Meter::Package, Meter::Battery, Meter::Npu] {
        match meter_energy(samples, marks, end_secs, meter) {
            Ok(m) => meters.push(m),
            Err(r) => reasons.push(format!("{}: {r}", meter.label())),
        }
    }
    let head = meters.first();
    let battery = meters
        .iter()
        .find(|m| m.meter == Meter::Battery)
        .zip(battery_capacity_wh)
        .map(|(m, cap)| BatteryUse {
            average_watts: m.average_watts,
            capacity_wh: cap,
            percent_per_hour: 100.0 * m.average_watts / cap,
        });
    EnergyReport {
        prefill_secs: seconds(Phase::Prefill),
        decode_secs: seconds(Phase::Decode),
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
        samples: samples.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, package: Option<f64>, battery: Option<f64>, npu: Option<f64>) -> PowerSample {
        let m = |v: Option<f64>, src: &str| match v {
            Some(v) => Metric::available(v, src),
            None => Metric::unavailable(format!("{src} absent")),
        };
        PowerSample {
            t_secs: t,
            npu_watts: m(npu, "npu"),
            npu_percent: Metric::unavailable("n/a"),
            package_watts: m(package, "ppt"),
            battery_watts: m(battery, "bat"),
            cpu_percent: Metric::unavailable("n/a"),
            igpu_percent: Metric::unavailable("n/a"),
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
    fn phases_split_at_the_marks() {
        let marks = [PhaseMark {
            phase: Phase::Decode,
            t_secs: 1.5,
        }];
        assert_eq!(intervals(&marks, 4.0, Phase::Prefill), [(0.0, 1.5)]);
        assert_eq!(intervals(&marks, 4.0, Phase::Decode), [(1.5, 4.0)]);
        assert!(intervals(&[], 4.0, Phase::Decode).is_empty());
    }

    #[test]
    fn report_on_a_synthetic_trace() {
        // Package power: 10 W flat during prefill (0..2 s), ramps to 20 W by 4 s, flat to 6 s.
        let trace = [
            (0.0, 10.0),
            (1.0, 10.0),
            (2.0, 10.0),
            (3.0, 15.0),
            (4.0, 20.0),
            (5.0, 20.0),
            (6.0, 20.0),
        ];
        let samples: Vec<PowerSample> = trace
            .iter()
            .map(|&(t, w)| {
                sample(
                    t,
                    Some(w),
                    Some(w + 5.0),
                    if t >= 2.0 { Some(2.0) } else { None },
                )
            })
            .collect();
        let marks = [PhaseMark {
            phase: Phase::Decode,
            t_secs: 2.0,
        }];
        let r = report(&samples, &marks, 6.0, 300, 100, Some(60.0));
        assert_eq!(r.meter, Some(Meter::Package));
        assert_eq!(r.source, "package power: ppt");
        assert!(close(r.prefill_joules.unwrap(), 20.0));
        // 2..4: mean 15 W x 2 s = 30 J; 4..6: 40 J
        assert!(close(r.decode_joules.unwrap(), 70.0));
        assert!(close(r.total_joules.unwrap(), 90.0));
        assert!(close(r.joules_per_1000_tokens.unwrap(), 900.0));
        assert!(close(r.prefill_secs, 2.0) && close(r.decode_secs, 4.0));
        let npu = r.meters.iter().find(|m| m.meter == Meter::Npu).unwrap();
        // NPU held at its first reading (2 W) before 2 s: honest extrapolation, 12 J overall
        assert!(close(npu.total_joules, 12.0));
        let bat = r.battery.unwrap();
        assert!(close(bat.average_watts, 20.0), "battery: (90 + 30) J / 6 s");
        assert!(close(bat.percent_per_hour, 100.0 * 20.0 / 60.0));
    }

    #[test]
    fn report_round_trips_through_json() {
        let samples = [
            sample(0.0, Some(10.0), None, Some(1.0)),
            sample(2.0, Some(12.0), None, Some(1.5)),
        ];
        let r = report(&samples, &[], 2.0, 5, 7, None);
        let back: EnergyReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn no_power_at_all_says_why() {
        let samples = [sample(0.0, None, None, None), sample(1.0, None, None, None)];
        let r = report(&samples, &[], 1.0, 10, 5, None);
        assert_eq!(r.meter, None);
        assert_eq!(r.total_joules, None);
        assert_eq!(
            r.source,
            "unavailable: package power: ppt absent; battery discharge: bat absent; NPU power: npu absent"
        );
        let empty = report(&[], &[], 1.0, 10, 0, None);
        assert!(empty.source.contains("no power samples"));
        assert_eq!(empty.joules_per_1000_tokens, None);
    }
}
