//! What an answer cost in energy, as its receipt records it, and the meter the caller hands the
//! answer loop to measure it.
//!
//! The loop knows no sensors: the app and the CLI pass a [`PowerMeter`] over this computer's
//! power readings (`hearth_backends::power`), the server and the tests none. The report is this
//! crate's own type because it is stored with each answer and sent to the UI: its shape is the
//! receipt's, whatever the sensors crate measures with.

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;

/// Measures the energy of answers; handed to the answer loop by its caller.
pub trait PowerMeter: std::fmt::Debug {
    /// Starts measuring one answer on a backend of `kind`: what follows is its prefill.
    fn start(&self, kind: BackendKind) -> Box<dyn Measurement>;
}

/// The measurement of one answer, from its start.
pub trait Measurement {
    /// The first piece of the answer came: what follows is decode.
    fn decode_began(&self);
    /// Ends the measurement: the energy of an answer that read `prompt_tokens` and wrote
    /// `generated_tokens`.
    fn finish(self: Box<Self>, prompt_tokens: usize, generated_tokens: usize) -> EnergyReport;
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
