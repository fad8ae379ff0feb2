//! How a model scales RoPE's frequencies, read from `config.json`: `rope_scaling` (transformers
//! v4) or the flat `rope_parameters` (v5), keyed by `rope_type` (or the older `type`). The
//! formulas that turn these parameters into frequencies live in the engine's `rope` module.
//!
//! A Q4NX folder imported from a GGUF file whose converter wrote the scaling as per-frequency
//! divisors (llama.cpp's `rope_freqs.weight`, Llama 3.1 and later) carries them in config.json
//! as `{"rope_type": "rope_freqs", "factors": [...]}`, a form only Hearth reads.
//! A `rope_parameters` nested by layer type (Gemma 3's local and global layers) is not read here.

use serde_json::{Map, Value};

/// The scaling of RoPE's inverse frequencies.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "rope_type", rename_all = "snake_case")]
pub enum RopeScaling {
    /// Plain RoPE (`rope_type` `default`, or no scaling given).
    None,
    /// Every inverse frequency divided by `factor`.
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Llama 3.1's: low frequencies divided by `factor`, high ones kept, a smooth ramp between.
    Llama3 {
        /// The divisor of the low frequencies (8 in Llama 3.1).
        factor: f64,
        /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are scaled.
        low_freq_factor: f64,
        /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept.
        high_freq_factor: f64,
        /// The context the model was pretrained with.
        original_max_position_embeddings: usize,
    },
    /// YaRN: a ramp between interpolated and extrapolated frequencies, and cos/sin scaled by
    /// `attention_factor`.
    Yarn {
        /// The interpolation divisor.
        factor: f64,
        /// The context the model was pretrained with.
        original_max_position_embeddings: usize,
        /// Rotations at which the ramp starts extrapolating (default 32).
        beta_fast: f64,
        /// Rotations at which the ramp ends (default 1).
        beta_slow: f64,
        /// Multiplier of cos and sin, resolved as transformers resolves it.
        attention_factor: f64,
        /// Whether the ramp's ends are rounded to whole dimensions (default true).
        truncate: bool,
    },
    /// LongRoPE (Phi-3.5, Phi-4-mini): per-frequency divisors for contexts up to
    /// `original_max_position_embeddings` (short) and beyond (long), one per rotated frequency;
    /// cos and sin scaled by `attention_factor`. Which list applies is the engine's choice, made
    /// once from the context a model is opened with (the engine's `rope` module).
    LongRope {
        /// Divisors within the pretrained context.
        short_factor: Vec<f32>,
        /// Divisors beyond it.
        long_factor: Vec<f32>,
        /// The context the model was pretrained with.
        original_max_position_embeddings: usize,
        /// Multiplier of cos and sin, resolved as transformers resolves it.
        attention_factor: f64,
    },
    /// Per-frequency divisors (head_dim / 2 of them), from a GGUF's `rope_freqs.weight`.
    RopeFreqs {
        /// Inverse frequency `i` is divided by `factors[i]`.
        factors: Vec<f32>,
    },
}

impl RopeScaling {
    /// The scaling a config object asks for; `max_position_embeddings` is the default of
    /// `original_max_position_embeddings`. Errors name the field and what Hearth applies.
    pub(crate) fn from_config(
        obj: &Map<String, Value>,
        max_position_embeddings: usize,
        head_dim: usize,
    ) -> Result<Self, String> {
        let params = match (obj.get("rope_scaling"), obj.get("rope_parameters")) {
            (Some(Value::Object(p)), _) => p,
            (_, Some(Value::Object(p))) if !is_nested(p) => p,
            _ => return Ok(RopeScaling::None),
        };
        let kind = params
            .get("rope_type")
            .or_else(|| params.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let number = |key: &str| -> Result<Option<f64>, String> {
            match params.get(key).filter(|v| !v.is_null()) {
                None => Ok(None),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite())
                    .map(Some)
                    .ok_or_else(|| format!("rope scaling's {key} is not a number: {v}")),
            }
        };
        let need =
            |key: &str| number(key)?.ok_or_else(|| format!("{kind} RoPE scaling needs {key}"));
        let positive = |key: &str, x: f64| {
            if x > 0.0 {
                Ok(x)
            } else {
                Err(format!("rope scaling's {key} {x} is not positive"))
            }
        };
        // As transformers: a top-level original_max_position_embeddings wins, then the
        // scaling's own, then max_position_embeddings.
        let original = || -> Result<usize, String> {
            let v = obj
                .get("original_max_position_embeddings")
                .filter(|v| !v.is_null())
                .or_else(|| params.get("original_max_position_embeddings"))
                .filter(|v| !v.is_null());
            match v {
                None => Ok(max_position_embeddings),
                Some(v) => v
                    .as_u64()
                    .filter(|&n| n > 0)
                    .map(|n| n as usize)
                    .ok_or_else(|| {
                        format!("original_max_position_embeddings is not a positive integer: {v}")
                    }),
            }
        };
        match kind {
            "default" => Ok(RopeScaling::None),
            "linear" => Ok(RopeScaling::Linear {
                factor: positive("factor", need("factor")?)?,
            }),
            "llama3" => {
                let (low, high) = (need("low_freq_factor")?, need("high_freq_factor")?);
                if low == high {
                    return Err(format!(
                        "llama3 RoPE scaling has low_freq_factor equal to high_freq_factor ({low})"
                    ));
                }
                Ok(RopeScaling::Llama3 {
                    factor: positive("factor", need("factor")?)?,
                    low_freq_factor: positive("low_freq_factor", low)?,
                    high_freq_factor: positive("high_freq_factor", high)?,
                    original_max_position_embeddings: original()?,
                })
            }
            "yarn" => {
                let original = original()?;
                let factor = match number("factor")? {
                    Some(f) => f,
                    None => max_position_embeddings as f64 / original as f64,
                };
                let factor = positive("factor", factor)?;
                let mscale = |scale: f64, m: f64| {
                    if scale <= 1.0 {
                        1.0
                    } else {
                        0.1 * m * scale.ln() + 1.0
                    }
                };
                let attention_factor = match number("attention_factor")? {
                    Some(a) => a,
                    None => match (number("mscale")?, number("mscale_all_dim")?) {
                        (Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                            mscale(factor, m) / mscale(factor, all)
                        }
                        _ => mscale(factor, 1.0),
                    },
                };
                // `or 32` / `or 1` in transformers: a 0 takes the default too.
                let beta_fast = number("beta_fast")?.filter(|&b| b != 0.0).unwrap_or(32.0);
                let beta_slow = number("beta_slow")?.filter(|&b| b != 0.0).unwrap_or(1.0);
                let truncate = match params.get("truncate").filter(|v| !v.is_null()) {
                    None => true,
                    Some(v) => v
                        .as_bool()
                        .ok_or_else(|| format!("rope scaling's truncate is not a boolean: {v}"))?,
                };
                Ok(RopeScaling::Yarn {
                    factor,
                    original_max_position_embeddings: original,
                    beta_fast: positive("beta_fast", beta_fast)?,
                    beta_slow: positive("beta_slow", beta_slow)?,
                    attention_factor,
                    truncate,
                })
            }
            "longrope" | "su" => {
                let list = |key: &str| -> Result<Vec<f32>, String> {
                    let factors: Vec<f32> = params
                        .get(key)
                        .and_then(Value::as_array)
                        .ok_or_else(|| format!("longrope RoPE scaling needs a list {key}"))?
                        .iter()
                        .map(|v| {
                            v.as_f64()
                                .filter(|x| x.is_finite() && *x > 0.0)
                                .map(|x| x as f32)
                                .ok_or_else(|| format!("a longrope {key} is not positive: {v}"))
                        })
                        .collect::<Result<_, _>>()?;
                    if factors.len() != head_dim / 2 {
                        return Err(format!(
                            "longrope's {key} has {} factors; {head_dim} rotated elements \
                             need {}",
                            factors.len(),
                            head_dim / 2
                        ));
                    }
                    Ok(factors)
                };
                let (short_factor, long_factor) = (list("short_factor")?, list("long_factor")?);
                // transformers: the factor behind the attention factor is the config's, or
                // else max / original (Phi-3 keeps both lengths).
                let original = original()?;
                let factor = match number("factor")? {
                    Some(f) => f,
                    None => max_position_embeddings as f64 / original as f64,
                };
                let attention_factor = match number("attention_factor")? {
                    Some(a) => positive("attention_factor", a)?,
                    None if factor <= 1.0 => 1.0,
                    None => (1.0 + factor.ln() / (original as f64).ln()).sqrt(),
                };
                Ok(RopeScaling::LongRope {
                    short_factor,
                    long_factor,
                    original_max_position_embeddings: original,
                    attention_factor,
                })
            }
            "rope_freqs" => {
                let factors: Vec<f32> = params
                    .get("factors")
                    .and_then(Value::as_array)
                    .ok_or("rope_freqs RoPE scaling needs a list of factors")?
                    .iter()
                    .map(|v| {
                        v.as_f64()
                            .filter(|x| x.is_finite() && *x > 0.0)
                            .map(|x| x as f32)
                            .ok_or_else(|| format!("a rope_freqs factor is not positive: {v}"))
                    })
                    .collect::<Result<_, _>>()?;
                if factors.len() != head_dim / 2 {
                    return Err(format!(
                        "rope_freqs has {} factors; head_dim {head_dim} needs {}",
                        factors.len(),
                        head_dim / 2
                    ));
                }
                Ok(RopeScaling::RopeFreqs { factors })
            }
            other => Err(format!(
                "config.json asks for {other} RoPE scaling, which Hearth's engine does not apply \
                 (it applies linear, llama3, yarn and longrope)"
            )),
        }
    }
}

/// Whether `rope_parameters` holds one dict per layer type rather than one flat dict.
fn is_nested(params: &Map<String, Value>) -> bool {
    !params.is_empty() && params.values().all(|v| v.is_object() || v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<RopeScaling, String> {
        let v: Value = serde_json::from_str(json).unwrap();
        RopeScaling::from_config(v.as_object().unwrap(), 131072, 64)
    }

    #[test]
    fn llama_3_1_scaling_from_rope_scaling() {
        let s = parse(
            r#"{"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192, "rope_type": "llama3"}}"#,
        );
        assert_eq!(
            s,
            Ok(RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 8192
            })
        );
    }

    #[test]
    fn default_and_absent_are_plain_and_old_type_key_is_read() {
        assert_eq!(parse("{}"), Ok(RopeScaling::None));
        assert_eq!(parse(r#"{"rope_scaling": null}"#), Ok(RopeScaling::None));
        assert_eq!(
            parse(r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}"#),
            Ok(RopeScaling::None)
        );
        assert_eq!(
            parse(r#"{"rope_scaling": {"type": "linear", "factor": 2}}"#),
            Ok(RopeScaling::Linear { factor: 2.0 })
        );
    }

    #[test]
    fn yarn_attention_factor_as_transformers_resolves_it() {
        let Ok(RopeScaling::Yarn {
            attention_factor,
            original_max_position_embeddings,
            beta_fast,
            ..
        }) = parse(
            r#"{"rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                "original_max_position_embeddings": 32768}}"#,
        )
        else {
            panic!("yarn parses")
        };
        assert!((attention_factor - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);
        assert_eq!((original_max_position_embeddings, beta_fast), (32768, 32.0));
        let Ok(RopeScaling::Yarn {
            attention_factor, ..
        }) = parse(
            r#"{"rope_scaling": {"rope_type": "yarn", "factor": 40, "mscale": 1.0,
                "mscale_all_dim": 1.0}}"#,
        )
        else {
            panic!("yarn parses")
        };
        assert_eq!(attention_factor, 1.0, "equal mscales cancel");
    }

    #[test]
    fn unsupported_and_malformed_scalings_are_named() {
        let e = parse(r#"{"rope_scaling": {"rope_type": "dynamic"}}"#).unwrap_err();
        assert!(e.contains("dynamic"), "{e}");
        let e = parse(r#"{"rope_scaling": {"rope_type": "longrope"}}"#).unwrap_err();
        assert!(e.contains("short_factor"), "{e}");
        let e = parse(r#"{"rope_scaling": {"rope_type": "llama3", "factor": 8}}"#).unwrap_err();
        assert!(e.contains("low_freq_factor"), "{e}");
        let e = parse(r#"{"rope_scaling": {"rope_type": "rope_freqs", "factors": [1.0]}}"#)
            .unwrap_err();
        assert!(e.contains("32"), "{e}");
    }
}
