//! One measured quantity with where it came from, or why it is missing.

use serde::Serialize;

/// A reading with its source, or the reason it is unavailable: never a silent zero.
///
/// JSON: `{"value": 4.2, "source": "amdgpu gpu_metrics (card1) average_ipu_power"}` or
/// `{"unavailable": "no amdgpu gpu_metrics file"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Metric<T> {
    /// A value read from `source`.
    Available {
        /// The value, in the unit the field's name or doc states.
        value: T,
        /// Where the value was read: file or interface and field.
        source: String,
    },
    /// No value; `unavailable` says why in plain words.
    Unavailable {
        /// Why there is no value.
        unavailable: String,
    },
}

impl<T> Metric<T> {
    /// A value read from `source`.
    pub fn available(value: T, source: impl Into<String>) -> Self {
        Metric::Available {
            value,
            source: source.into(),
        }
    }

    /// No value, because of `reason`.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Metric::Unavailable {
            unavailable: reason.into(),
        }
    }

    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Metric::Available { value, .. } => Some(value),
            Metric::Unavailable { .. } => None,
        }
    }

    /// Where the value came from, if there is one.
    pub fn source(&self) -> Option<&str> {
        match self {
            Metric::Available { source, .. } => Some(source),
            Metric::Unavailable { .. } => None,
        }
    }

    /// Keeps `self` when available, else tries `other` (lazily); when both are unavailable the
    /// reasons are joined so none is lost.
    pub fn or_else(self, other: impl FnOnce() -> Metric<T>) -> Metric<T> {
        match self {
            Metric::Available { .. } => self,
            Metric::Unavailable { unavailable: first } => match other() {
                Metric::Unavailable {
                    unavailable: second,
                } => Metric::unavailable(format!("{first}; {second}")),
                found => found,
            },
        }
    }
}

impl Metric<f64> {
    /// `"4.20 W (source)"` or `"unavailable: reason"`, for plain-text reports.
    pub fn describe(&self, unit: &str, decimals: usize) -> String {
        match self {
            Metric::Available { value, source } => {
                format!("{value:.decimals$} {unit} ({source})")
            }
            Metric::Unavailable { unavailable } => format!("unavailable: {unavailable}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_value_with_source_or_reason() {
        let a = Metric::available(4.5, "hwmon3 power1_input");
        let u: Metric<f64> = Metric::unavailable("no battery");
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            r#"{"value":4.5,"source":"hwmon3 power1_input"}"#
        );
        assert_eq!(
            serde_json::to_string(&u).unwrap(),
            r#"{"unavailable":"no battery"}"#
        );
    }

    #[test]
    fn or_else_keeps_every_reason() {
        let m: Metric<f64> = Metric::unavailable("a").or_else(|| Metric::unavailable("b"));
        assert_eq!(m.describe("W", 1), "unavailable: a; b");
        let m = Metric::unavailable("a").or_else(|| Metric::available(2.0, "s"));
        assert_eq!(m.describe("W", 1), "2.0 W (s)");
    }
}
