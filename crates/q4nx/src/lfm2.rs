//! What LFM2's `config.json` adds to the Llama shape, read as transformers reads it: which
//! layers are gated short convolutions and which attend (`layer_types`, or the older
//! `full_attn_idxs`), the convolution's width (`conv_L_cache`) and biases (`conv_bias`), the
//! feed-forward width derived from `block_ff_dim` (`block_auto_adjust_ff_dim`,
//! `block_ffn_dim_multiplier`, `block_multiple_of`), and `norm_eps`.

use serde_json::{Map, Value};

use crate::json_field;

/// LFM2's parameters beyond the Llama shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Lfm2Params {
    /// Per layer, whether it is a short-convolution layer; the others are attention layers.
    pub conv_layers: Vec<bool>,
    /// Positions a convolution reads: the token's own and the `conv_width - 1` before it.
    pub conv_width: usize,
    /// Whether `in_proj`, the convolution and `out_proj` carry biases.
    pub conv_bias: bool,
}

impl Lfm2Params {
    /// How many layers attend (and so have keys and values).
    pub fn attention_layers(&self) -> usize {
        self.conv_layers.iter().filter(|c| !**c).count()
    }

    /// How many layers are short convolutions (and keep one vector per position).
    pub fn convolution_layers(&self) -> usize {
        self.conv_layers.iter().filter(|c| **c).count()
    }
}

/// The widest convolution accepted (LFM2 uses 3).
pub(crate) const MAX_CONV_WIDTH: usize = 64;

/// LFM2's context length when the config gives none (transformers' default).
pub(crate) const DEFAULT_CONTEXT: usize = 128_000;

/// Reads LFM2's parameters from a config of `layers` layers.
pub(crate) fn parse(obj: &Map<String, Value>, layers: usize) -> Result<Lfm2Params, String> {
    let get = |key: &str| json_field::get(obj, key);
    let conv_layers = match (get("layer_types"), get("full_attn_idxs")) {
        (Some(Value::Array(types)), _) => {
            if types.len() != layers {
                return Err(format!(
                    "layer_types lists {} layers but num_hidden_layers is {layers}",
                    types.len()
                ));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    Some("conv" | "short_conv") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(format!(
                        "layer_types has {t}; LFM2's layers are \"conv\" or \"full_attention\""
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        (Some(v), _) => return Err(format!("layer_types is not a list: {v}")),
        (None, Some(Value::Array(idxs))) => {
            let mut conv = vec![true; layers];
            for v in idxs {
                match v.as_u64().and_then(|i| usize::try_from(i).ok()) {
                    Some(i) if i < layers => conv[i] = false,
                    _ => {
                        return Err(format!(
                            "full_attn_idxs has {v}, which is not a layer of the \
                             {layers}-layer model"
                        ))
                    }
                }
            }
            conv
        }
        (None, Some(v)) => return Err(format!("full_attn_idxs is not a list: {v}")),
        // transformers' default: every layer attends.
        (None, None) => vec![false; layers],
    };
    if conv_layers.iter().all(|c| *c) {
        return Err("LFM2's config has no attention layer (layer_types)".into());
    }
    let conv_width = match get("conv_L_cache") {
        None => 3,
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| (1..=MAX_CONV_WIDTH).contains(n))
            .ok_or_else(|| {
                format!("conv_L_cache is {v}; it should be a width from 1 to {MAX_CONV_WIDTH}")
            })?,
    };
    let conv_bias = json_field::flag(obj, "conv_bias")?.unwrap_or(false);
    Ok(Lfm2Params {
        conv_layers,
        conv_width,
        conv_bias,
    })
}

/// The feed-forward width transformers builds from `block_ff_dim` (or `intermediate_size`):
/// two thirds of it when `block_auto_adjust_ff_dim` (default true), then times
/// `block_ffn_dim_multiplier` (default 1.0) rounded up to `block_multiple_of` (default 256)
/// unless the multiplier is null.
pub(crate) fn intermediate_size(obj: &Map<String, Value>) -> Result<usize, String> {
    let count = |key: &str| json_field::count(obj, key);
    let mut size = match (count("block_ff_dim")?, count("intermediate_size")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => return Err("config.json has no block_ff_dim or intermediate_size".into()),
    };
    let adjust = json_field::flag(obj, "block_auto_adjust_ff_dim")?.unwrap_or(true);
    if adjust {
        size = 2 * size / 3;
        // Absent: transformers' default 1.0; null: no multiplier and no rounding.
        let multiplier = match obj.get("block_ffn_dim_multiplier") {
            None => Some(Value::from(1.0)),
            Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        };
        if let Some(v) = multiplier {
            let multiplier = v
                .as_f64()
                .filter(|m| m.is_finite() && *m > 0.0 && *m < 64.0)
                .ok_or_else(|| {
                    format!("block_ffn_dim_multiplier is {v}; it should be a positive number")
                })?;
            let multiple = count("block_multiple_of")?.unwrap_or(256);
            if multiple == 0 {
                return Err("block_multiple_of is 0".into());
            }
            size = ((multiplier * size as f64) as usize).next_multiple_of(multiple);
        }
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn lfm2_1_2b_layers_and_feed_forward_width() {
        let c = obj(
            r#"{"layer_types": ["conv", "conv", "full_attention", "conv"],
                        "conv_L_cache": 3, "block_ff_dim": 12288, "intermediate_size": 12288,
                        "block_auto_adjust_ff_dim": true, "block_ffn_dim_multiplier": 1.0,
                        "block_multiple_of": 256}"#,
        );
        let p = parse(&c, 4).unwrap();
        assert_eq!(p.conv_layers, [true, true, false, true]);
        assert_eq!((p.attention_layers(), p.convolution_layers()), (1, 3));
        assert_eq!((p.conv_width, p.conv_bias), (3, false));
        assert_eq!(intermediate_size(&c).unwrap(), 8192);
    }

    #[test]
    fn full_attn_idxs_names_the_attention_layers() {
        let p = parse(&obj(r#"{"full_attn_idxs": [1, 3]}"#), 4).unwrap();
        assert_eq!(p.conv_layers, [true, false, true, false]);
        let p = parse(&obj("{}"), 2).unwrap();
        assert_eq!(p.conv_layers, [false, false], "transformers' default");
        // With a null multiplier transformers takes two thirds and does not round.
        let c = obj(r#"{"block_ff_dim": 100, "block_ffn_dim_multiplier": null}"#);
        assert_eq!(intermediate_size(&c).unwrap(), 66);
        let c = obj(r#"{"block_ff_dim": 100}"#);
        assert_eq!(
            intermediate_size(&c).unwrap(),
            256,
            "defaults: x 1.0, to 256"
        );
        let c = obj(r#"{"block_ff_dim": 100, "block_auto_adjust_ff_dim": false}"#);
        assert_eq!(intermediate_size(&c).unwrap(), 100);
    }

    #[test]
    fn bad_configs_are_refused_in_words() {
        for (text, words) in [
            (r#"{"layer_types": ["conv", "conv"]}"#, "no attention layer"),
            (r#"{"layer_types": ["conv"]}"#, "lists 1 layers"),
            (r#"{"layer_types": ["conv", "mamba"]}"#, "\"mamba\""),
            (r#"{"layer_types": "conv"}"#, "not a list"),
            (r#"{"full_attn_idxs": [7]}"#, "full_attn_idxs has 7"),
            (
                r#"{"full_attn_idxs": [0], "conv_L_cache": 0}"#,
                "conv_L_cache is 0",
            ),
            (
                r#"{"full_attn_idxs": [0], "conv_L_cache": 1000}"#,
                "conv_L_cache is 1000",
            ),
            (
                r#"{"full_attn_idxs": [0], "conv_bias": "no"}"#,
                "conv_bias is not",
            ),
        ] {
            let e = parse(&obj(text), 2).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
        for (text, words) in [
            (r#"{}"#, "no block_ff_dim"),
            (r#"{"block_ff_dim": -1}"#, "block_ff_dim is not"),
            (
                r#"{"block_ff_dim": 96, "block_auto_adjust_ff_dim": true,
                    "block_ffn_dim_multiplier": -2}"#,
                "block_ffn_dim_multiplier is -2",
            ),
            (
                r#"{"block_ff_dim": 96, "block_auto_adjust_ff_dim": true,
                    "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 0}"#,
                "block_multiple_of is 0",
            ),
        ] {
            let e = intermediate_size(&obj(text)).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
    }
}
