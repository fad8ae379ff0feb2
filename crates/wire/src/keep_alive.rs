//! How long a model stays loaded after a request, as Ollama's `keep_alive` says it: a number of
//! seconds or a duration string (`"5m"`, `"1h30m"`, `"300ms"`); 0 unloads at once, anything
//! negative keeps the model loaded until another replaces it.

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;

/// How long a model stays loaded once a request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// Until another model is loaded in its place (a negative `keep_alive`).
    Forever,
    /// This long; zero unloads the model as soon as the request ends.
    For(Duration),
}

/// Ollama's default: five minutes.
pub const DEFAULT_KEEP_ALIVE: KeepAlive = KeepAlive::For(Duration::from_secs(5 * 60));

impl KeepAlive {
    /// Reads a duration string as Go's `time.ParseDuration` does (what Ollama uses): a sequence of
    /// decimal numbers with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, optionally signed; a bare
    /// `0` is allowed. A negative value means [`KeepAlive::Forever`].
    pub fn parse(text: &str) -> Result<KeepAlive, String> {
        let bad = || {
            format!(
                "keep_alive {text:?} is not a duration: give seconds (300), a duration such as \
                 \"5m\" or \"1h30m\", 0 to unload at once, or -1 to keep the model loaded"
            )
        };
        let trimmed = text.trim();
        let (negative, rest) = match trimmed.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
        };
        if rest == "0" {
            return Ok(KeepAlive::For(Duration::ZERO));
        }
        if rest.is_empty() {
            return Err(bad());
        }
        let mut total = 0f64;
        let mut rest = rest;
        while !rest.is_empty() {
            let number_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(bad)?;
            let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
            rest = &rest[number_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let seconds_per = match &rest[..unit_len] {
                "ns" => 1e-9,
                "us" | "µs" | "μs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
            total += number * seconds_per;
            rest = &rest[unit_len..];
        }
        if negative && total > 0.0 {
            return Ok(KeepAlive::Forever);
        }
        Ok(KeepAlive::For(
            Duration::try_from_secs_f64(total).map_err(|_| bad())?,
        ))
    }

    /// A number of seconds; negative means [`KeepAlive::Forever`].
    pub fn from_seconds(seconds: f64) -> Result<KeepAlive, String> {
        if seconds.is_nan() {
            return Err("keep_alive is not a number".to_owned());
        }
        if seconds < 0.0 {
            return Ok(KeepAlive::Forever);
        }
        Duration::try_from_secs_f64(seconds)
            .map(KeepAlive::For)
            .map_err(|_| {
                format!("keep_alive {seconds} seconds is too long; use -1 to keep the model loaded")
            })
    }

    /// Whether the model is unloaded as soon as the request ends.
    pub fn is_zero(self) -> bool {
        self == KeepAlive::For(Duration::ZERO)
    }
}

impl<'de> Deserialize<'de> for KeepAlive {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Number(n) => {
                KeepAlive::from_seconds(n.as_f64().unwrap_or(f64::NAN)).map_err(de::Error::custom)
            }
            serde_json::Value::String(s) => KeepAlive::parse(&s).map_err(de::Error::custom),
            other => Err(de::Error::custom(format!(
                "keep_alive must be a number of seconds or a duration string such as \"5m\", \
                 not {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> KeepAlive {
        KeepAlive::For(Duration::from_secs(s))
    }

    #[test]
    fn go_duration_strings_parse() {
        assert_eq!(KeepAlive::parse("5m"), Ok(secs(300)));
        assert_eq!(KeepAlive::parse("1h30m"), Ok(secs(5400)));
        assert_eq!(KeepAlive::parse("1.5h"), Ok(secs(5400)));
        assert_eq!(
            KeepAlive::parse("300ms"),
            Ok(KeepAlive::For(Duration::from_millis(300)))
        );
        assert_eq!(KeepAlive::parse("0"), Ok(secs(0)));
        assert_eq!(KeepAlive::parse("0s"), Ok(secs(0)));
        assert_eq!(KeepAlive::parse("-1m"), Ok(KeepAlive::Forever));
    }

    #[test]
    fn malformed_durations_are_refused_with_what_to_send() {
        for bad in ["", "5", "5 minutes", "m", "1x", "-", "1.2.3s"] {
            let err = KeepAlive::parse(bad).unwrap_err();
            assert!(err.contains("not a duration"), "{bad}: {err}");
        }
    }

    #[test]
    fn json_numbers_are_seconds_and_negative_is_forever() {
        let parse = |json: &str| serde_json::from_str::<KeepAlive>(json);
        assert_eq!(parse("0").unwrap(), secs(0));
        assert_eq!(parse("60").unwrap(), secs(60));
        assert_eq!(parse("-1").unwrap(), KeepAlive::Forever);
        assert_eq!(parse("\"10m\"").unwrap(), secs(600));
        assert!(parse("true").is_err());
        assert!(parse("1e300").is_err());
    }
}
