//! What gpt-oss's `config.json` (transformers' `GptOssConfig`, model_type `gpt_oss`) adds to a
//! Llama-shaped model, read as transformers reads it:
//!
//! - which layers attend to a sliding window (`layer_types`: `"sliding_attention"` or
//!   `"full_attention"` per layer; absent, the even layers slide and the odd ones are full) and
//!   how wide it is (`sliding_window`, default 128);
//! - its experts ([`MoeParams`]): `num_local_experts`, `num_experts_per_tok`, and an expert's
//!   width in `intermediate_size`; every layer routes, and the chosen experts' weights are a
//!   softmax over the chosen logits alone (so they sum to 1, `norm_topk_prob`);
//! - the experts' clamped SwiGLU: `swiglu_alpha` (default 1.702) and `swiglu_limit` (7.0).
//!
//! Every projection of its attention carries a bias (`attention_bias`, which gpt-oss always
//! sets: a config that turns it off is refused), each attention head a learned sink logit, and
//! its RoPE is YaRN's (read by [`crate::RopeScaling`]; transformers' default when the config
//! gives none is written out here).

use serde_json::{Map, Value};

use crate::json_field;
use crate::moe::{self, MoeParams};

/// gpt-oss's parameters beyond a Llama's (its experts are in [`MoeParams`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GptOssParams {
    /// Positions a sliding layer's token attends to, its own included.
    pub sliding_window: usize,
    /// Per layer, whether it attends to the sliding window (else to every position).
    pub sliding_layers: Vec<bool>,
    /// Gain of the sigmoid in the experts' SwiGLU (1.702).
    pub swiglu_alpha: f32,
    /// Clamp of the gate (above) and of the up projection (both sides), 7.0.
    pub swiglu_limit: f32,
}

/// gpt-oss's context when the config gives none (transformers' default).
pub(crate) const DEFAULT_CONTEXT: usize = 131072;

/// transformers' RoPE parameters for a gpt-oss config that gives none.
pub(crate) fn default_rope_parameters() -> Value {
    serde_json::json!({
        "rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": false, "original_max_position_embeddings": 4096
    })
}

/// Reads gpt-oss's parameters and its experts from a config of `layers` layers.
pub(crate) fn parse(
    obj: &Map<String, Value>,
    layers: usize,
) -> Result<(GptOssParams, MoeParams), String> {
    let (experts, experts_per_token) = moe::expert_counts(obj)?;
    let width = json_field::count(obj, "intermediate_size")?
        .ok_or_else(|| "a gpt-oss config.json has no intermediate_size".to_string())?;
    if json_field::flag(obj, "attention_bias")? == Some(false) {
        return Err(
            "attention_bias is false, but gpt-oss's attention always carries biases; this \
             config is not a gpt-oss Hearth can run"
                .into(),
        );
    }
    let sliding_window = json_field::count(obj, "sliding_window")?.unwrap_or(128);
    if sliding_window == 0 {
        return Err("sliding_window is 0; a sliding layer needs at least its own token".into());
    }
    let sliding_layers = match json_field::get(obj, "layer_types") {
        None => (0..layers).map(|l| l % 2 == 0).collect(),
        Some(Value::Array(kinds)) => {
            if kinds.len() != layers {
                return Err(format!(
                    "layer_types lists {} layers but num_hidden_layers is {layers}",
                    kinds.len()
                ));
            }
            kinds
                .iter()
                .map(|k| match k.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(format!(
                        "layer_types has {k}; gpt-oss layers are \"sliding_attention\" or \
                         \"full_attention\""
                    )),
                })
                .collect::<Result<_, _>>()?
        }
        Some(v) => return Err(format!("layer_types is not a list: {v}")),
    };
    let number = |key: &str, default: f64| -> Result<f32, String> {
        match json_field::get(obj, key) {
            None => Ok(default as f32),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite() && *x > 0.0)
                .map(|x| x as f32)
                .ok_or_else(|| format!("{key} is not a positive number: {v}")),
        }
    };
    let params = GptOssParams {
        sliding_window,
        sliding_layers,
        swiglu_alpha: number("swiglu_alpha", 1.702)?,
        swiglu_limit: number("swiglu_limit", 7.0)?,
    };
    let experts = MoeParams {
        experts,
        experts_per_token,
        norm_topk_prob: true,
        expert_intermediate_size: width,
        sparse_layers: vec![true; layers],
    };
    Ok((params, experts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn gpt_oss_20b_alternates_and_routes_every_layer() {
        let (p, m) = parse(
            &obj(r#"{"num_local_experts": 32, "num_experts_per_tok": 4,
                    "intermediate_size": 2880, "sliding_window": 128, "swiglu_limit": 7.0,
                    "layer_types": ["sliding_attention", "full_attention",
                                    "sliding_attention", "full_attention"]}"#),
            4,
        )
        .unwrap();
        assert_eq!(p.sliding_layers, [true, false, true, false]);
        assert_eq!(
            (p.sliding_window, p.swiglu_alpha, p.swiglu_limit),
            (128, 1.702, 7.0)
        );
        assert_eq!((m.experts, m.experts_per_token), (32, 4));
        assert_eq!(m.expert_intermediate_size, 2880);
        assert!(m.norm_topk_prob && m.sparse_layers == [true; 4]);
        let (p, _) = parse(
            &obj(r#"{"num_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 8}"#),
            3,
        )
        .unwrap();
        assert_eq!(
            p.sliding_layers,
            [true, false, true],
            "transformers' default"
        );
        assert_eq!(p.sliding_window, 128);
    }

    #[test]
    fn bad_configs_are_refused_in_words() {
        let base = r#""num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 8"#;
        for (extra, words) in [
            (r#""layer_types": ["sliding_attention"]"#, "lists 1 layers"),
            (
                r#""layer_types": ["sliding_attention", "mamba"]"#,
                "layer_types has \"mamba\"",
            ),
            (
                r#""layer_types": "full_attention""#,
                "layer_types is not a list",
            ),
            (r#""sliding_window": 0"#, "sliding_window is 0"),
            (r#""sliding_window": -4"#, "sliding_window is not"),
            (
                r#""swiglu_limit": -1"#,
                "swiglu_limit is not a positive number",
            ),
            (r#""swiglu_alpha": "fast""#, "swiglu_alpha is not"),
            (r#""attention_bias": false"#, "attention_bias is false"),
            (r#""num_experts_per_tok": 5"#, "num_experts_per_tok is 5"),
        ] {
            let text = format!("{{{base}, {extra}}}");
            let e = parse(&obj(&text), 2).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
        let e = parse(
            &obj(r#"{"num_local_experts": 4, "num_experts_per_tok": 2}"#),
            2,
        )
        .unwrap_err();
        assert!(e.contains("no intermediate_size"), "{e}");
    }
}
