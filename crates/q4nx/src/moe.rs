//! What Qwen3-MoE's `config.json` adds to Qwen3, read as transformers reads it: how many
//! experts each sparse layer has (`num_experts`, or `num_local_experts` as transformers 5
//! writes it), how many each token uses (`num_experts_per_tok`), whether the chosen experts'
//! weights are renormalized to sum to 1 (`norm_topk_prob`), an expert's width
//! (`moe_intermediate_size`), and which layers keep a dense MLP of `intermediate_size`: those
//! in `mlp_only_layers`, and those whose number plus one is not a multiple of
//! `decoder_sparse_step`.

use serde_json::{Map, Value};

use crate::json_field;

/// Qwen3-MoE's parameters beyond Qwen3's.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MoeParams {
    /// Experts in each sparse layer (Qwen3-30B-A3B: 128).
    pub experts: usize,
    /// Experts each token is sent to (Qwen3-30B-A3B: 8).
    pub experts_per_token: usize,
    /// Whether the chosen experts' router probabilities are divided by their sum.
    pub norm_topk_prob: bool,
    /// Width of one expert's gated MLP.
    pub expert_intermediate_size: usize,
    /// Per layer, whether its MLP is a mixture of experts (else a dense MLP).
    pub sparse_layers: Vec<bool>,
}

impl MoeParams {
    /// How many layers route to experts.
    pub fn sparse_layer_count(&self) -> usize {
        self.sparse_layers.iter().filter(|s| **s).count()
    }
}

/// The most experts a layer may have (released models use up to 384).
pub(crate) const MAX_EXPERTS: usize = 4096;

/// How many experts a layer has (`num_experts`, or `num_local_experts` as transformers 5
/// writes it) and how many each token uses (`num_experts_per_tok`), checked; Qwen3-MoE's and
/// gpt-oss's configs name them alike.
pub(crate) fn expert_counts(obj: &Map<String, Value>) -> Result<(usize, usize), String> {
    let count = |key: &str| json_field::count(obj, key);
    let experts = match (count("num_experts")?, count("num_local_experts")?) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => return Err("a mixture-of-experts config.json has no num_experts".into()),
    };
    if experts == 0 {
        return Err("num_experts is 0: a mixture-of-experts model needs experts".into());
    }
    if experts > MAX_EXPERTS {
        return Err(format!(
            "num_experts {experts} is more than Hearth's engine runs (at most {MAX_EXPERTS})"
        ));
    }
    let experts_per_token = count("num_experts_per_tok")?
        .ok_or_else(|| "a mixture-of-experts config.json has no num_experts_per_tok".to_string())?;
    if experts_per_token == 0 || experts_per_token > experts {
        return Err(format!(
            "num_experts_per_tok is {experts_per_token}; it should be from 1 to num_experts \
             ({experts})"
        ));
    }
    Ok((experts, experts_per_token))
}

/// Reads Qwen3-MoE's parameters from a config of `layers` layers.
pub(crate) fn parse(obj: &Map<String, Value>, layers: usize) -> Result<MoeParams, String> {
    let count = |key: &str| json_field::count(obj, key);
    let (experts, experts_per_token) = expert_counts(obj)?;
    let expert_intermediate_size = count("moe_intermediate_size")?.ok_or_else(|| {
        "a mixture-of-experts config.json has no moe_intermediate_size".to_string()
    })?;
    // Its largest width is checked with the config's other widths (`ModelConfig::check`).
    if expert_intermediate_size == 0 {
        return Err("moe_intermediate_size 0 is not a width: an expert needs at least 1".into());
    }
    let norm_topk_prob = json_field::flag(obj, "norm_topk_prob")?.unwrap_or(false);
    let step = count("decoder_sparse_step")?.unwrap_or(1);
    if step == 0 {
        return Err("decoder_sparse_step is 0; it should be 1 or more".into());
    }
    let mut sparse_layers: Vec<bool> = (0..layers).map(|l| (l + 1) % step == 0).collect();
    match json_field::get(obj, "mlp_only_layers") {
        None => {}
        Some(Value::Array(items)) => {
            for v in items {
                match v.as_u64().and_then(|i| usize::try_from(i).ok()) {
                    Some(i) if i < layers => sparse_layers[i] = false,
                    _ => {
                        return Err(format!(
                            "mlp_only_layers has {v}, which is not a layer of the \
                             {layers}-layer model"
                        ))
                    }
                }
            }
        }
        Some(v) => return Err(format!("mlp_only_layers is not a list: {v}")),
    }
    Ok(MoeParams {
        experts,
        experts_per_token,
        norm_topk_prob,
        expert_intermediate_size,
        sparse_layers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn qwen3_30b_a3b_routes_every_layer() {
        let p = parse(
            &obj(
                r#"{"num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": true,
                    "moe_intermediate_size": 768, "decoder_sparse_step": 1,
                    "mlp_only_layers": []}"#,
            ),
            48,
        )
        .unwrap();
        assert_eq!((p.experts, p.experts_per_token), (128, 8));
        assert!(p.norm_topk_prob);
        assert_eq!(p.expert_intermediate_size, 768);
        assert_eq!(p.sparse_layer_count(), 48);
    }

    #[test]
    fn dense_layers_from_the_step_and_the_list() {
        let p = parse(
            &obj(r#"{"num_local_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32, "decoder_sparse_step": 2,
                    "mlp_only_layers": [3]}"#),
            4,
        )
        .unwrap();
        assert_eq!(p.experts, 4, "transformers 5 writes num_local_experts");
        assert!(!p.norm_topk_prob, "transformers' default");
        assert_eq!(p.sparse_layers, [false, true, false, false]);
    }

    #[test]
    fn bad_configs_are_refused_in_words() {
        let base = r#""num_experts_per_tok": 2, "moe_intermediate_size": 32"#;
        for (text, words) in [
            (format!("{{{base}}}"), "no num_experts"),
            (
                format!(r#"{{"num_experts": 0, {base}}}"#),
                "num_experts is 0",
            ),
            (
                format!(r#"{{"num_experts": 100000, {base}}}"#),
                "num_experts 100000 is more",
            ),
            (
                r#"{"num_experts": 4, "moe_intermediate_size": 32}"#.into(),
                "no num_experts_per_tok",
            ),
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 5, "moe_intermediate_size": 32}"#
                    .into(),
                "num_experts_per_tok is 5",
            ),
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 0, "moe_intermediate_size": 32}"#
                    .into(),
                "num_experts_per_tok is 0",
            ),
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 2}"#.into(),
                "no moe_intermediate_size",
            ),
            (
                r#"{"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 0}"#
                    .into(),
                "moe_intermediate_size 0",
            ),
            (
                format!(r#"{{"num_experts": 4, {base}, "num_experts": -1}}"#),
                "num_experts is not",
            ),
            (
                format!(r#"{{"num_experts": 4, {base}, "norm_topk_prob": 1}}"#),
                "norm_topk_prob is not",
            ),
            (
                format!(r#"{{"num_experts": 4, {base}, "decoder_sparse_step": 0}}"#),
                "decoder_sparse_step is 0",
            ),
            (
                format!(r#"{{"num_experts": 4, {base}, "mlp_only_layers": [9]}}"#),
                "mlp_only_layers has 9",
            ),
            (
                format!(r#"{{"num_experts": 4, {base}, "mlp_only_layers": 1}}"#),
                "not a list",
            ),
        ] {
            let e = parse(&obj(&text), 2).unwrap_err();
            assert!(e.contains(words), "{text}: {e}");
        }
    }
}
