//! What Gemma 3's `config.json` adds to the Llama shape, read as transformers reads it: local
//! sliding-window layers between global ones, each kind with its own RoPE (the global layers'
//! base and scaling, linear in 4B/12B/27B, are [`crate::ModelConfig::rope_theta`] and
//! [`crate::ModelConfig::rope_scaling`]; the local layers' RoPE is plain), attention scaled by
//! `query_pre_attn_scalar`, the embedding multiplied by √hidden, and an optional final logit
//! soft cap.
//!
//! Both spellings of a config are read: the one on the Hub (`rope_theta`,
//! `rope_local_base_freq`, `rope_scaling`, `sliding_window_pattern`) and the one transformers 5
//! saves (`rope_parameters.{full_attention,sliding_attention}`, `layer_types`).

use serde_json::{Map, Value};

use crate::RopeScaling;

/// Gemma 3's parameters beyond the Llama shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Gemma3Params {
    /// Positions a local layer attends to: the query's own and the `sliding_window - 1`
    /// before it.
    pub sliding_window: usize,
    /// Per layer, whether it is a local (sliding-window) layer; the others are global.
    pub sliding_layers: Vec<bool>,
    /// RoPE base of the local layers (default 10 000); they never scale RoPE.
    pub local_rope_theta: f64,
    /// Attention scores are multiplied by `query_pre_attn_scalar^(-1/2)` (default 256).
    pub query_pre_attn_scalar: f64,
    /// `logits = cap · tanh(logits / cap)` when set (`final_logit_softcapping`).
    pub final_logit_softcapping: Option<f64>,
    /// The embedding's multiplier: √hidden_size rounded to the checkpoint's dtype
    /// (`torch_dtype`/`dtype`), as transformers casts it to the embedding's dtype.
    pub embed_scale: f32,
}

/// The global layers' RoPE base when the config gives none (transformers' default).
pub(crate) const DEFAULT_GLOBAL_THETA: f64 = 1_000_000.0;

/// Gemma 3's context length when the config gives none (transformers' default).
pub(crate) const DEFAULT_CONTEXT: usize = 131_072;

/// The global layers' RoPE: base and scaling.
pub(crate) struct GlobalRope {
    pub(crate) theta: f64,
    pub(crate) scaling: RopeScaling,
}

/// Reads Gemma 3's parameters from the text part of a config (`text_config` for
/// `Gemma3ForConditionalGeneration`), with the global layers' RoPE.
pub(crate) fn parse(
    text: &Map<String, Value>,
    layers: usize,
    hidden_size: usize,
    max_position_embeddings: usize,
    head_dim: usize,
) -> Result<(Gemma3Params, GlobalRope), String> {
    let get = |key: &str| text.get(key).filter(|v| !v.is_null());
    let number = |v: &Value, what: &str| -> Result<f64, String> {
        v.as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("{what} is not a positive number: {v}"))
    };
    let count = |v: &Value, what: &str| -> Result<usize, String> {
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{what} is not a positive integer: {v}"))
    };
    for (key, allowed) in [
        ("hidden_activation", "gelu_pytorch_tanh"),
        ("hidden_act", "gelu_pytorch_tanh"),
    ] {
        if let Some(v) = get(key) {
            if v.as_str() != Some(allowed) {
                return Err(format!(
                    "{key} is {v}; Hearth runs Gemma 3 with {allowed:?} only"
                ));
            }
        }
    }
    if let Some(v) = get("attn_logit_softcapping") {
        return Err(format!(
            "attn_logit_softcapping is {v}; Gemma 3 has none and Hearth does not apply it"
        ));
    }
    if get("use_bidirectional_attention").and_then(Value::as_bool) == Some(true) {
        return Err(
            "use_bidirectional_attention is true (an embedding model such as EmbeddingGemma); \
             Hearth runs Gemma 3 as a causal language model only"
                .into(),
        );
    }

    let sliding_window = match get("sliding_window") {
        Some(v) => count(v, "sliding_window")?,
        None => 4096,
    };
    let sliding_layers = match get("layer_types") {
        Some(Value::Array(types)) => {
            if types.len() != layers {
                return Err(format!(
                    "layer_types lists {} layers but num_hidden_layers is {layers}",
                    types.len()
                ));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(format!(
                        "layer_types holds {t}; Gemma 3 layers are \"sliding_attention\" or \
                         \"full_attention\""
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?
        }
        Some(v) => return Err(format!("layer_types is not a list: {v}")),
        None => {
            let pattern = match get("sliding_window_pattern").or(get("_sliding_window_pattern")) {
                Some(v) => count(v, "sliding_window_pattern")?,
                None => 6,
            };
            (0..layers).map(|i| (i + 1) % pattern != 0).collect()
        }
    };

    // transformers 5: rope_parameters = {full_attention: {...}, sliding_attention: {...}}.
    let per_type = get("rope_parameters").and_then(Value::as_object);
    let global = per_type.and_then(|p| p.get("full_attention"));
    let local = per_type.and_then(|p| p.get("sliding_attention"));
    fn theta_in(params: Option<&Value>) -> Option<&Value> {
        params.and_then(|p| p.get("rope_theta"))
    }
    let global_theta = match get("rope_theta").or(theta_in(global)) {
        Some(v) => number(v, "rope_theta")?,
        None => DEFAULT_GLOBAL_THETA,
    };
    let local_rope_theta = match get("rope_local_base_freq").or(theta_in(local)) {
        Some(v) => number(v, "rope_local_base_freq")?,
        None => 10_000.0,
    };
    if let Some(kind) = local
        .and_then(|p| p.get("rope_type"))
        .and_then(Value::as_str)
    {
        if kind != "default" {
            return Err(format!(
                "the sliding-window layers ask for {kind} RoPE; Gemma 3's are plain"
            ));
        }
    }
    // The global layers' scaling, read by the one reader of RoPE scalings.
    let scaling_of = |params: &Value| {
        let mut only = Map::new();
        only.insert("rope_scaling".into(), params.clone());
        RopeScaling::from_config(&only, max_position_embeddings, head_dim)
    };
    let scaling = match (get("rope_scaling"), global) {
        (Some(s), _) | (None, Some(s)) => scaling_of(s)?,
        (None, None) => RopeScaling::None,
    };
    let query_pre_attn_scalar = match get("query_pre_attn_scalar") {
        Some(v) => number(v, "query_pre_attn_scalar")?,
        None => 256.0,
    };
    let final_logit_softcapping = get("final_logit_softcapping")
        .map(|v| number(v, "final_logit_softcapping"))
        .transpose()?;
    let dtype = get("torch_dtype")
        .or(get("dtype"))
        .and_then(Value::as_str)
        .unwrap_or("float32");
    let embed_scale = embed_scale(hidden_size, dtype);
    Ok((
        Gemma3Params {
            sliding_window,
            sliding_layers,
            local_rope_theta,
            query_pre_attn_scalar,
            final_logit_softcapping,
            embed_scale,
        },
        GlobalRope {
            theta: global_theta,
            scaling,
        },
    ))
}

/// √hidden rounded to `dtype` (transformers: `embed_scale.to(weight.dtype)`; a bf16 Gemma
/// 3 1B multiplies by 34.0, not 33.94).
fn embed_scale(hidden_size: usize, dtype: &str) -> f32 {
    let exact = (hidden_size as f32).sqrt();
    match dtype {
        "bfloat16" => half::bf16::from_f32(exact).to_f32(),
        "float16" => half::f16::from_f32(exact).to_f32(),
        _ => exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str, layers: usize) -> Result<(Gemma3Params, f64, RopeScaling), String> {
        let v: Value = serde_json::from_str(json).unwrap();
        let (p, global) = parse(v.as_object().unwrap(), layers, 640, 32768, 256)?;
        Ok((p, global.theta, global.scaling))
    }

    #[test]
    fn hub_spelling_with_a_pattern_and_linear_scaling() {
        let (p, theta, scaling) = params(
            r#"{"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                "sliding_window": 1024, "sliding_window_pattern": 6,
                "query_pre_attn_scalar": 168, "torch_dtype": "bfloat16"}"#,
            12,
        )
        .unwrap();
        assert_eq!(theta, 1e6);
        assert_eq!(scaling, RopeScaling::Linear { factor: 8.0 });
        assert_eq!(p.local_rope_theta, 1e4);
        assert_eq!(p.sliding_window, 1024);
        let globals: Vec<usize> = (0..12).filter(|&i| !p.sliding_layers[i]).collect();
        assert_eq!(globals, [5, 11]);
        assert_eq!(p.query_pre_attn_scalar, 168.0);
        // √640 = 25.298 rounds to 25.25 in bf16.
        assert_eq!(p.embed_scale, 25.25);
    }

    #[test]
    fn transformers_5_spelling() {
        let (p, theta, scaling) = params(
            r#"{"rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500000.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}},
                "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                "sliding_window": 4, "final_logit_softcapping": 30.0, "dtype": "float32"}"#,
            3,
        )
        .unwrap();
        assert_eq!(theta, 5e5);
        assert_eq!(scaling, RopeScaling::Linear { factor: 4.0 });
        assert_eq!(p.local_rope_theta, 2e4);
        assert_eq!(p.sliding_layers, [true, false, true]);
        assert_eq!(p.final_logit_softcapping, Some(30.0));
        assert_eq!(p.embed_scale, 640f32.sqrt());
    }

    #[test]
    fn what_gemma_3_does_not_have_is_refused() {
        let e = params(r#"{"layer_types": ["full_attention"]}"#, 2).unwrap_err();
        assert!(e.contains("2"), "{e}");
        let e = params(r#"{"hidden_activation": "silu"}"#, 2).unwrap_err();
        assert!(e.contains("gelu_pytorch_tanh"), "{e}");
        let e = params(
            r#"{"rope_scaling": {"rope_type": "dynamic", "factor": 2}}"#,
            2,
        )
        .unwrap_err();
        assert!(e.contains("dynamic"), "{e}");
        let e = params(r#"{"use_bidirectional_attention": true}"#, 2).unwrap_err();
        assert!(e.contains("embedding"), "{e}");
    }
}
