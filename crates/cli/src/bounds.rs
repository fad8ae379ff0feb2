//! The ranges of the command line's numbers, checked as they are parsed, so that an absurd value
//! is refused with a plain message (and exit code 2) instead of aborting on a huge allocation or
//! a thread pool of millions: `--context 100000000` says "100000000 is not in 1..=1048576".

use std::ops::RangeInclusive;

use clap::builder::TypedValueParser;

/// The longest context any model Hearth runs has (2^20 tokens); the engine also refuses more
/// than the model's own maximum or than memory allows.
pub const MAX_CONTEXT: u64 = 1 << 20;
/// The most CPU threads a model's pool may have.
pub const MAX_THREADS: u64 = 1024;
/// The most tokens one answer may be asked for (the context bounds it further).
pub const MAX_TOKENS: u64 = 1 << 20;
/// The most candidates `--top-k` may keep (larger than any vocabulary).
pub const MAX_TOP_K: u64 = 1 << 24;
/// The highest temperature or repetition penalty.
pub const MAX_FACTOR: f32 = 100.0;

/// A whole number in `range`, as a `usize`.
pub fn count(range: RangeInclusive<u64>) -> impl TypedValueParser<Value = usize> {
    clap::value_parser!(u64)
        .range(range)
        .map(|v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// `--context`: 1 to [`MAX_CONTEXT`] tokens.
pub fn context() -> impl TypedValueParser<Value = usize> {
    count(1..=MAX_CONTEXT)
}

/// `--threads`: 1 to [`MAX_THREADS`].
pub fn threads() -> impl TypedValueParser<Value = usize> {
    count(1..=MAX_THREADS)
}

/// A finite number from `min` to `max` (`min` itself excluded when `open_min`).
fn real(text: &str, min: f32, max: f32, open_min: bool) -> Result<f32, String> {
    let value: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    let above_min = if open_min { value > min } else { value >= min };
    if value.is_finite() && above_min && value <= max {
        Ok(value)
    } else {
        let low = if open_min { "more than" } else { "from" };
        Err(format!("{value} is not {low} {min} to {max}"))
    }
}

/// `--temperature`: 0 to [`MAX_FACTOR`].
pub fn temperature(text: &str) -> Result<f32, String> {
    real(text, 0.0, MAX_FACTOR, false)
}

/// `--top-p`: more than 0, at most 1.
pub fn top_p(text: &str) -> Result<f32, String> {
    real(text, 0.0, 1.0, true)
}

/// `--min-p`: 0 to 1.
pub fn min_p(text: &str) -> Result<f32, String> {
    real(text, 0.0, 1.0, false)
}

/// `--repetition-penalty`: more than 0, at most [`MAX_FACTOR`].
pub fn penalty(text: &str) -> Result<f32, String> {
    real(text, 0.0, MAX_FACTOR, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_outside_their_range_or_not_finite_are_refused() {
        assert_eq!(temperature("0.7"), Ok(0.7));
        assert_eq!(temperature("0"), Ok(0.0));
        for bad in ["-1", "nan", "inf", "1e39", "101", "x"] {
            assert!(temperature(bad).is_err(), "{bad}");
        }
        assert!(top_p("0").is_err(), "top-p 0 would keep no token");
        assert_eq!(top_p("1"), Ok(1.0));
        assert!(min_p("1.5").is_err());
        assert!(penalty("0").is_err());
    }
}
