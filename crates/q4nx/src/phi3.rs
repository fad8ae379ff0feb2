//! What Phi-3's `config.json` (Phi-3.5-mini, Phi-4-mini: `Phi3ForCausalLM`) adds to the Llama
//! shape, read as transformers reads it: RoPE on the leading `partial_rotary_factor` share of
//! each head only (Phi-4-mini: 0.75), LongRoPE's short and long factors
//! ([`RopeScaling::LongRope`], read by the one reader of RoPE scalings), and an optional sliding
//! window. Its fused `qkv_proj` and `gate_up_proj` weights are a matter of the layout
//! ([`crate::layout`]).
//!
//! Both spellings are read: the one on the Hub (top-level `partial_rotary_factor`,
//! `original_max_position_embeddings`, `rope_theta`, `rope_scaling` with `type` `longrope` or
//! its old name `su`) and the one transformers 5 saves (`rope_parameters` holding the same,
//! keyed `rope_type`).

use serde_json::{Map, Value};

use crate::RopeScaling;

/// Phi-3's parameters beyond the Llama shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Phi3Params {
    /// Leading elements of each head that RoPE rotates (`head_dim · partial_rotary_factor`,
    /// even); the rest pass through unrotated.
    pub rotary_dim: usize,
    /// Positions every layer attends to, the query's own and the `sliding_window - 1` before
    /// it (`sliding_window`; none when null).
    pub sliding_window: Option<usize>,
}

/// Phi-3's pretrained context when the config gives none (transformers' default).
const DEFAULT_ORIGINAL_CONTEXT: usize = 4096;

/// Reads Phi-3's parameters and its RoPE scaling from a config object.
pub(crate) fn parse(
    obj: &Map<String, Value>,
    head_dim: usize,
    max_position_embeddings: usize,
) -> Result<(Phi3Params, RopeScaling), String> {
    let get = |key: &str| obj.get(key).filter(|v| !v.is_null());
    let rope_parameters = get("rope_parameters").and_then(Value::as_object);
    if let Some(v) = get("hidden_act") {
        if v.as_str() != Some("silu") {
            return Err(format!(
                "hidden_act is {v}; Hearth runs Phi-3 with \"silu\" only"
            ));
        }
    }
    let factor = match get("partial_rotary_factor")
        .or_else(|| rope_parameters.and_then(|p| p.get("partial_rotary_factor")))
    {
        None => 1.0,
        Some(v) => v
            .as_f64()
            .filter(|f| f.is_finite() && *f > 0.0 && *f <= 1.0)
            .ok_or_else(|| {
                format!("partial_rotary_factor is {v}; it must be a number above 0, at most 1")
            })?,
    };
    // transformers: int(head_dim * partial_rotary_factor).
    let rotary_dim = (head_dim as f64 * factor) as usize;
    if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) {
        return Err(format!(
            "partial_rotary_factor {factor} of head_dim {head_dim} rotates {rotary_dim} elements; \
             RoPE needs a positive even number"
        ));
    }
    let sliding_window = match get("sliding_window") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("sliding_window is not a positive integer: {v}"))?,
        ),
    };
    // The scaling's factors are per rotated frequency: rotary_dim / 2 of them. Phi-3's
    // pretrained context is 4096 when the config does not say (transformers' default).
    let says_original = get("original_max_position_embeddings").is_some()
        || rope_parameters.is_some_and(|p| p.contains_key("original_max_position_embeddings"))
        || get("rope_scaling")
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key("original_max_position_embeddings"));
    let scaling = if says_original {
        RopeScaling::from_config(obj, max_position_embeddings, rotary_dim)?
    } else {
        let mut with_default = obj.clone();
        with_default.insert(
            "original_max_position_embeddings".into(),
            Value::from(DEFAULT_ORIGINAL_CONTEXT),
        );
        RopeScaling::from_config(&with_default, max_position_embeddings, rotary_dim)?
    };
    Ok((
        Phi3Params {
            rotary_dim,
            sliding_window,
        },
        scaling,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Result<(Phi3Params, RopeScaling), String> {
        let v: Value = serde_json::from_str(json).unwrap();
        parse(v.as_object().unwrap(), 128, 131072)
    }

    fn factors(n: usize, x: f32) -> String {
        serde_json::to_string(&vec![x; n]).unwrap()
    }

    #[test]
    fn phi_4_mini_on_the_hub() {
        let json = format!(
            r#"{{"partial_rotary_factor": 0.75, "original_max_position_embeddings": 4096,
                "rope_scaling": {{"type": "longrope", "long_factor": {}, "short_factor": {}}},
                "sliding_window": 262144, "hidden_act": "silu"}}"#,
            factors(48, 2.0),
            factors(48, 1.0)
        );
        let (p, scaling) = params(&json).unwrap();
        assert_eq!(p.rotary_dim, 96);
        assert_eq!(p.sliding_window, Some(262144));
        let RopeScaling::LongRope {
            short_factor,
            long_factor,
            original_max_position_embeddings,
            attention_factor,
        } = scaling
        else {
            panic!("longrope")
        };
        assert_eq!((short_factor.len(), long_factor[0]), (48, 2.0));
        assert_eq!(original_max_position_embeddings, 4096);
        // transformers: sqrt(1 + ln(131072 / 4096) / ln(4096)).
        let want = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt();
        assert!((attention_factor - want).abs() < 1e-15);
    }

    #[test]
    fn transformers_5_spelling_and_the_old_su_name() {
        let json = format!(
            r#"{{"rope_parameters": {{"rope_type": "longrope", "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5, "original_max_position_embeddings": 4096,
                "long_factor": {}, "short_factor": {}}}}}"#,
            factors(32, 3.0),
            factors(32, 1.5)
        );
        let (p, scaling) = params(&json).unwrap();
        assert_eq!((p.rotary_dim, p.sliding_window), (64, None));
        assert!(matches!(scaling, RopeScaling::LongRope { .. }));
        let json = format!(
            r#"{{"rope_scaling": {{"type": "su", "long_factor": {}, "short_factor": {}}}}}"#,
            factors(64, 3.0),
            factors(64, 1.5)
        );
        assert!(matches!(
            params(&json).unwrap().1,
            RopeScaling::LongRope { .. }
        ));
    }

    #[test]
    fn bad_phi3_configs_are_refused_in_words() {
        let e = params(r#"{"partial_rotary_factor": 1.5}"#).unwrap_err();
        assert!(e.contains("at most 1"), "{e}");
        let e = params(r#"{"partial_rotary_factor": 0.01}"#).unwrap_err();
        assert!(e.contains("even"), "{e}");
        let e = params(r#"{"sliding_window": -3}"#).unwrap_err();
        assert!(e.contains("sliding_window"), "{e}");
        let e = params(r#"{"hidden_act": "gelu"}"#).unwrap_err();
        assert!(e.contains("silu"), "{e}");
        let json = format!(
            r#"{{"partial_rotary_factor": 0.75, "rope_scaling": {{"type": "longrope",
                "long_factor": {}, "short_factor": {}}}}}"#,
            factors(64, 1.0),
            factors(64, 1.0)
        );
        let e = params(&json).unwrap_err();
        assert!(e.contains("48"), "{e}");
        let json = format!(
            r#"{{"rope_scaling": {{"type": "longrope", "short_factor": {}}}}}"#,
            factors(64, 1.0)
        );
        let e = params(&json).unwrap_err();
        assert!(e.contains("long_factor"), "{e}");
    }
}

/// llama.cpp's `phi3` GGUF headers: what the import reads, and what it refuses in words.
#[cfg(test)]
mod gguf_tests {
    use crate::gguf::write::{tiny_model, GgufWriter};
    use crate::gguf::{GgmlType, Value};
    use crate::{Family, ModelConfig, RopeScaling};

    /// The tiny phi3 model (head_dim 32) with `rotated` of 32 elements rotated, a pretrained
    /// context of 64 in 256, and `n` short and long factors in `kind`.
    fn tiny_phi3(rotated: u32, n: u64, kind: GgmlType) -> GgufWriter {
        let mut w = tiny_model("phi3");
        w.kv("phi3.rope.dimension_count", Value::U32(rotated));
        w.kv("phi3.rope.scaling.original_context_length", Value::U32(64));
        w.kv("phi3.attention.sliding_window", Value::U32(0));
        w.kv("phi3.rope.scaling.attn_factor", Value::F32(1.25));
        let list = |x: f32| -> Vec<u8> {
            match kind {
                GgmlType::F16 => (0..n)
                    .flat_map(|_| half::f16::from_f32(x).to_le_bytes())
                    .collect(),
                _ => (0..n).flat_map(|_| x.to_le_bytes()).collect(),
            }
        };
        w.tensor("rope_factors_short.weight", &[n], kind, &list(1.5));
        w.tensor("rope_factors_long.weight", &[n], kind, &list(4.0));
        w
    }

    fn import(w: &GgufWriter) -> Result<ModelConfig, String> {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("tiny.gguf");
        std::fs::write(&src, w.finish()).unwrap();
        let dst = tmp.path().join("model");
        crate::gguf::import_gguf(&src, &dst, Some(1), &mut |_| {}).map_err(|e| e.to_string())?;
        ModelConfig::from_path(&dst.join("config.json")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_phi3_gguf_imports_with_its_fused_weights_and_longrope() {
        let c = import(&tiny_phi3(24, 12, GgmlType::F32)).unwrap();
        assert_eq!(c.family, Family::Phi3);
        assert_eq!(c.rotary_dim(), 24);
        assert_eq!(c.phi3.as_ref().unwrap().sliding_window, None, "0 is none");
        assert_eq!(
            c.rope_scaling,
            RopeScaling::LongRope {
                short_factor: vec![1.5; 12],
                long_factor: vec![4.0; 12],
                original_max_position_embeddings: 64,
                attention_factor: 1.25,
            }
        );
        let names = crate::layout::expected_tensors(&c);
        assert!(names
            .iter()
            .any(|t| t.name == "model.layers.0.self_attn.qkv_proj.weight"));
    }

    #[test]
    fn bad_phi3_gguf_headers_are_refused_in_words() {
        let e = import(&tiny_phi3(24, 8, GgmlType::F32)).unwrap_err();
        assert!(
            e.contains("short_factor has 8 factors") && e.contains("12"),
            "{e}"
        );
        let e = import(&tiny_phi3(24, 12, GgmlType::F16)).unwrap_err();
        assert!(e.contains("not a list of f32 LongRoPE factors"), "{e}");
        let mut w = tiny_model("phi3");
        w.tensor(
            "rope_factors_short.weight",
            &[16],
            GgmlType::F32,
            &[0u8; 64],
        );
        let e = import(&w).unwrap_err();
        assert!(e.contains("rope_factors_long.weight"), "{e}");
        let w = tiny_phi3(40, 20, GgmlType::F32);
        let e = import(&w).unwrap_err();
        assert!(e.contains("partial_rotary_factor"), "{e}");
        let e = import(&tiny_phi3(23, 11, GgmlType::F32)).unwrap_err();
        assert!(e.contains("even"), "{e}");
    }
}
