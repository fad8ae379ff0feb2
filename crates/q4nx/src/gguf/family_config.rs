//! The family-specific parts of a GGUF header's config.json, as llama.cpp reads them: a
//! mixture of experts' counts (qwen3moe, gpt-oss), LFM2's convolution layers, gpt-oss's
//! sliding layers, SwiGLU clamp and YaRN, and Gemma 3's fields. [`super::model::model_config`]
//! reads the keys every family shares and calls these for the rest.

use serde_json::json;

/// A mixture-of-experts header's experts: how many, how many a token uses, their width.
pub(super) struct ExpertCounts {
    pub(super) count: usize,
    pub(super) used: usize,
    pub(super) width: usize,
}

/// The experts of a `qwen3moe` or `gpt-oss` header, as llama.cpp reads them: `expert_count`,
/// `expert_used_count`, and `expert_feed_forward_length` (else `feed_forward_length` divided
/// by the experts used); an `expert_weights_scale` other than 1 is refused (neither has one).
pub(super) fn moe_experts(
    uint: &dyn Fn(&str) -> Result<Option<usize>, String>,
    float: &dyn Fn(&str) -> Result<Option<f64>, String>,
    key: &dyn Fn(&str) -> String,
) -> Result<ExpertCounts, String> {
    let need = |k: &str| uint(k)?.ok_or_else(|| format!("the file has no {}", key(k)));
    let count = need("expert_count")?;
    let used = need("expert_used_count")?;
    if count == 0 {
        return Err(format!(
            "{} is 0: a mixture-of-experts model needs experts",
            key("expert_count")
        ));
    }
    if used == 0 || used > count {
        return Err(format!(
            "{} is {used}; it should be from 1 to {} ({count})",
            key("expert_used_count"),
            key("expert_count")
        ));
    }
    let width = match uint("expert_feed_forward_length")? {
        Some(w) => w,
        None => {
            uint("feed_forward_length")?
                .ok_or_else(|| format!("the file has no {}", key("expert_feed_forward_length")))?
                / used
        }
    };
    if width == 0 {
        return Err(format!(
            "{} is 0: an expert needs a width",
            key("expert_feed_forward_length")
        ));
    }
    if let Some(scale) = float("expert_weights_scale")?.filter(|&s| s != 0.0 && s != 1.0) {
        return Err(format!(
            "{} is {scale}; Hearth runs Qwen3-MoE's experts unscaled",
            key("expert_weights_scale")
        ));
    }
    Ok(ExpertCounts { count, used, width })
}

/// LFM2's layer kinds and KV head count from llama.cpp's per-layer `attention.head_count_kv`
/// (0 for a short-convolution layer, the model's KV head count for an attention layer).
pub(super) fn lfm2_conv_layers(
    counts: &crate::gguf::Array,
    layers: usize,
    key: &dyn Fn(&str) -> String,
) -> Result<(Vec<bool>, usize), String> {
    let name = key("attention.head_count_kv");
    let counts = counts
        .to_i64s()
        .filter(|c| c.iter().all(|&n| (0..=1 << 16).contains(&n)))
        .ok_or_else(|| format!("{name} is not a list of head counts"))?;
    if counts.len() != layers {
        return Err(format!(
            "{name} lists {} layers but the model has {layers}",
            counts.len()
        ));
    }
    let mut attention = counts.iter().filter(|&&n| n > 0);
    let kv = *attention
        .next()
        .ok_or_else(|| format!("{name} gives no layer any KV head: LFM2 needs attention layers"))?;
    if let Some(other) = attention.find(|&&n| n != kv) {
        return Err(format!(
            "{name} gives attention layers {kv} and {other} KV heads; Hearth runs one count \
             for every layer"
        ));
    }
    Ok((counts.iter().map(|&n| n == 0).collect(), kv as usize))
}

/// LFM2's fields of config.json as transformers reads them: `layer_types`, the convolution's
/// width, `norm_eps`, and the feed-forward width llama.cpp's converter already derived from
/// `block_ff_dim` (so no further adjustment).
pub(super) fn lfm2_config(v: &mut serde_json::Value, conv: &[bool], width: usize) {
    let o = v.as_object_mut().expect("we wrote an object");
    let types: Vec<&str> = conv
        .iter()
        .map(|&c| if c { "conv" } else { "full_attention" })
        .collect();
    o.insert("layer_types".into(), json!(types));
    o.insert("conv_L_cache".into(), json!(width));
    o.insert("conv_bias".into(), json!(false));
    o.insert("block_auto_adjust_ff_dim".into(), json!(false));
    let eps = o.remove("rms_norm_eps").unwrap_or(json!(1e-5));
    o.insert("norm_eps".into(), eps);
}

/// gpt-oss's fields of config.json as llama.cpp runs a `gpt-oss` file: its experts (every layer
/// routed, the chosen logits softmaxed among themselves), the even layers sliding over `window`
/// positions and the odd ones full (llama.cpp's pattern of 2), biases on the attention, and the
/// clamped SwiGLU's limit 7.0 and alpha 1.702, which llama.cpp fixes rather than reads.
pub(super) fn gpt_oss_config(
    v: &mut serde_json::Value,
    layers: usize,
    e: &ExpertCounts,
    window: usize,
) {
    let o = v.as_object_mut().expect("we wrote an object");
    let types: Vec<&str> = (0..layers)
        .map(|l| {
            if l % 2 == 0 {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    o.insert("num_local_experts".into(), json!(e.count));
    o.insert("num_experts_per_tok".into(), json!(e.used));
    o.insert("layer_types".into(), json!(types));
    o.insert("sliding_window".into(), json!(window));
    o.insert("attention_bias".into(), json!(true));
    o.insert("swiglu_limit".into(), json!(7.0));
    o.insert("swiglu_alpha".into(), json!(1.702));
}

/// YaRN's parameters beyond the factor, as llama.cpp reads them: `rope.scaling.yarn_beta_fast`
/// and `yarn_beta_slow` (32 and 1 when absent, as in transformers); the correction range is
/// rounded outwards (llama.cpp's floor and ceil, transformers' `truncate`). An
/// `yarn_ext_factor`, `yarn_attn_factor` or `yarn_log_multiplier` is refused: Hearth applies
/// YaRN's own ramp and attention factor only.
pub(super) fn yarn_parameters(
    scaling: &mut serde_json::Value,
    float: &dyn Fn(&str) -> Result<Option<f64>, String>,
    key: &dyn Fn(&str) -> String,
) -> Result<(), String> {
    let o = scaling.as_object_mut().expect("we wrote an object");
    for (k, field) in [
        ("rope.scaling.yarn_beta_fast", "beta_fast"),
        ("rope.scaling.yarn_beta_slow", "beta_slow"),
    ] {
        if let Some(b) = float(k)? {
            if !(b.is_finite() && b > 0.0) {
                return Err(format!("{} is {b}, not a positive number", key(k)));
            }
            o.insert(field.into(), json!(b));
        }
    }
    o.insert("truncate".into(), json!(true));
    for k in [
        "rope.scaling.yarn_ext_factor",
        "rope.scaling.yarn_attn_factor",
        "rope.scaling.yarn_log_multiplier",
    ] {
        if let Some(x) = float(k)? {
            return Err(format!(
                "{} is {x}; Hearth's engine applies YaRN as its paper does and cannot apply \
                 this adjustment",
                key(k)
            ));
        }
    }
    Ok(())
}

/// Gemma 3's fields of config.json, as llama.cpp reads its `gemma3.*` metadata: the window
/// from `attention.sliding_window`, every sixth layer global, the local layers' RoPE base
/// 10 000, attention scaled by `query_pre_attn_scalar` (hidden / heads in the 62-layer 27B,
/// head_dim in the others), `final_logit_softcapping` if written. The checkpoint's dtype stays
/// bfloat16, in which Gemma 3 was released (its embedding multiplier is √hidden in bf16).
pub(super) fn gemma3_config(
    v: &mut serde_json::Value,
    layers: usize,
    hidden_per_head: usize,
    head_dim: usize,
    window: usize,
    softcap: Option<f64>,
) {
    let scalar = if layers == 62 {
        hidden_per_head
    } else {
        head_dim
    };
    let o = v.as_object_mut().expect("we wrote an object");
    o.remove("hidden_act");
    o.insert("hidden_activation".into(), json!("gelu_pytorch_tanh"));
    o.insert("sliding_window".into(), json!(window));
    o.insert("sliding_window_pattern".into(), json!(6));
    o.insert("rope_local_base_freq".into(), json!(10_000.0));
    o.insert("query_pre_attn_scalar".into(), json!(scalar));
    o.insert("final_logit_softcapping".into(), json!(softcap));
}
