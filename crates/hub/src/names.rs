//! Model names and FastFlowLM tags, the one place their rules live.
//!
//! - [`check_name`]: what a model's name may be. A name is both its folder under `models/` and
//!   FastFlowLM's `name`, so it is never a path, nor `speech` (the speech models' folder).
//! - [`split_tag`]: a FastFlowLM tag `family:size`, or `None` when the text is not one.
//! - [`derive_tag`]: the tag a model without one gets from its name.
//!
//! The catalog checks its entries here; the store every name it lists, imports, removes or
//! discards a download of (a registry entry naming another folder is refused, never deleted);
//! pulls and GGUF imports the name they write to; the registry splits a query's tag here.

use crate::error::{Error, Result};

/// The folder under `models/` that holds the speech models (so no chat model may be named so).
pub const SPEECH_FOLDER: &str = "speech";

/// Checks that `name` can be a model folder and a FastFlowLM `name`: 1 to 100 characters out
/// of letters, digits, `.`, `-` and `_`, not starting with `.` or `-`.
pub fn check_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > 100 {
        Some("it is longer than 100 characters")
    } else if name.starts_with(['.', '-']) {
        Some("it starts with '.' or '-'")
    } else if name.eq_ignore_ascii_case(SPEECH_FOLDER) {
        Some("models/speech is where speech models live; choose another name")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        Some("use only letters, digits, '.', '-' and '_'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidName {
            name: name.to_string(),
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

/// A FastFlowLM tag for a model that has none, from its name: `Qwen3-1.7B-Instruct` gives
/// `qwen3:1.7b-instruct`, `MiniCPM5-2B-NPU2` gives `minicpm5:2b`, `tiny` gives `tiny:latest`.
pub fn derive_tag(name: &str) -> (String, String) {
    let lower: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let lower = lower
        .trim_end_matches("-npu2")
        .trim_matches('-')
        .to_string();
    let parts: Vec<&str> = lower.split('-').filter(|p| !p.is_empty()).collect();
    let is_size = |p: &str| {
        let digits = p.trim_end_matches(['b', 'm']);
        digits.len() < p.len()
            && !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
            && digits.starts_with(|c: char| c.is_ascii_digit())
    };
    match parts.iter().position(|p| is_size(p)) {
        Some(i) if i > 0 => (parts[..i].join("-"), parts[i..].join("-")),
        _ if parts.is_empty() => ("model".into(), "latest".into()),
        _ => (parts.join("-"), "latest".into()),
    }
}

/// Splits a FastFlowLM tag `family:size`; `None` if it is not one.
pub fn split_tag(tag: &str) -> Option<(&str, &str)> {
    let (family, size) = tag.split_once(':')?;
    let ok = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')
            })
    };
    (ok(family) && ok(size)).then_some((family, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["MiniCPM5-2B-NPU2", "demo", "a_b.c"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".x", "-x", "a/b", "a b", "ü", "speech", "Speech"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags_are_derived_from_names() {
        assert_eq!(
            derive_tag("Qwen3-1.7B-Instruct"),
            ("qwen3".into(), "1.7b-instruct".into())
        );
        assert_eq!(
            derive_tag("MiniCPM5-2B-NPU2"),
            ("minicpm5".into(), "2b".into())
        );
        assert_eq!(
            derive_tag("SmolLM2-135M"),
            ("smollm2".into(), "135m".into())
        );
        assert_eq!(derive_tag("tiny"), ("tiny".into(), "latest".into()));
        assert_eq!(derive_tag("3b"), ("3b".into(), "latest".into()));
        assert_eq!(derive_tag("--"), ("model".into(), "latest".into()));
        for name in ["Qwen3-1.7B-Instruct", "tiny", "x_y"] {
            let (f, s) = derive_tag(name);
            assert!(split_tag(&format!("{f}:{s}")).is_some(), "{name}");
        }
    }

    #[test]
    fn split_tag_accepts_family_size_only() {
        assert_eq!(split_tag("llama3.2:1b"), Some(("llama3.2", "1b")));
        for bad in ["llama", ":1b", "x:", "Llama:1b", "a:b:c", "a b:1"] {
            assert_eq!(split_tag(bad), None, "{bad}");
        }
    }
}
