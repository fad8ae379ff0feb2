//! Which tensors a Llama/Qwen2/Qwen3/Qwen3-MoE/Gemma 3/Phi-3/LFM2 model has, in which role and
//! with which logical (Hugging Face) shape, as implied by its config.
//!
//! A Qwen3-MoE sparse layer has, in place of the dense MLP, a router `mlp.gate.weight`
//! `[experts, hidden]`, kept dense (BF16) as the norms are: it is small, and a rounded router
//! could send a token to other experts; and each expert's `mlp.experts.{e}.gate_proj`, `up_proj`
//! and `down_proj`, quantized as the other linears are.
//!
//! gpt-oss has Hearth's canonical names (what `convert` splits transformers' 3-D expert tensors
//! into, and a GGUF's are mapped onto): beside Qwen2's q/k/v biases, `self_attn.o_proj.bias`
//! and `self_attn.sinks` `[heads]`; its router is `mlp.router.weight` `[experts, hidden]` with
//! `mlp.router.bias` `[experts]`, and each expert's `gate_proj`, `up_proj` (`[width, hidden]`)
//! and `down_proj` (`[hidden, width]`) carry a bias each (`mlp.experts.{e}.{proj}.bias`).

use crate::lfm2::Lfm2Params;
use crate::{Family, ModelConfig};

/// How a tensor is stored in Q4NX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `model.embed_tokens.weight`: BF16 `[vocab, hidden]`.
    Embedding,
    /// A 1-D weight, an RMSNorm's or a projection's bias: BF16.
    Norm,
    /// A linear weight `W[N, K]`: Q4_1 (or Q8) tiles.
    Linear,
}

/// One tensor a model needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedTensor {
    /// Hugging Face name.
    pub name: String,
    /// How Q4NX stores it.
    pub role: Role,
    /// Logical shape (`[N, K]` for linears, unpadded).
    pub shape: Vec<usize>,
}

/// The linear weights of layer `layer`, by suffix, with their `[N, K]`. Phi-3 stores q, k and v
/// as one `qkv_proj` (rows q, then k, then v) and gate and up as one `gate_up_proj` (gate's
/// rows, then up's), as the engine runs them. A Qwen3-MoE sparse layer lists its experts'.
fn layer_linears(c: &ModelConfig, layer: usize) -> Vec<(String, [usize; 2])> {
    let (h, q, kv, i) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
    let owned = |list: &[(&str, [usize; 2])]| {
        list.iter()
            .map(|(name, shape)| (name.to_string(), *shape))
            .collect::<Vec<_>>()
    };
    if c.family == Family::Phi3 {
        return owned(&[
            ("self_attn.qkv_proj.weight", [q + 2 * kv, h]),
            ("self_attn.o_proj.weight", [h, q]),
            ("mlp.gate_up_proj.weight", [2 * i, h]),
            ("mlp.down_proj.weight", [h, i]),
        ]);
    }
    let mut out = owned(&[
        ("self_attn.q_proj.weight", [q, h]),
        ("self_attn.k_proj.weight", [kv, h]),
        ("self_attn.v_proj.weight", [kv, h]),
        ("self_attn.o_proj.weight", [h, q]),
    ]);
    match &c.moe {
        Some(p) if p.sparse_layers[layer] => {
            let e = p.expert_intermediate_size;
            for expert in 0..p.experts {
                out.extend([
                    (format!("mlp.experts.{expert}.gate_proj.weight"), [e, h]),
                    (format!("mlp.experts.{expert}.up_proj.weight"), [e, h]),
                    (format!("mlp.experts.{expert}.down_proj.weight"), [h, e]),
                ]);
            }
        }
        _ => out.extend(owned(&[
            ("mlp.gate_proj.weight", [i, h]),
            ("mlp.up_proj.weight", [i, h]),
            ("mlp.down_proj.weight", [h, i]),
        ])),
    }
    out
}

/// The dense weights of layer `layer` (norms, Qwen2's q/k/v biases, a Qwen3-MoE router), by
/// suffix, with their shape.
fn layer_norms(c: &ModelConfig, layer: usize) -> Vec<(&'static str, Vec<usize>)> {
    let mut norms = vec![
        ("input_layernorm.weight", c.hidden_size),
        ("post_attention_layernorm.weight", c.hidden_size),
    ];
    if c.family == Family::Gemma3 {
        norms.push(("pre_feedforward_layernorm.weight", c.hidden_size));
        norms.push(("post_feedforward_layernorm.weight", c.hidden_size));
    }
    if c.family.qk_norm() {
        norms.push(("self_attn.q_norm.weight", c.head_dim));
        norms.push(("self_attn.k_norm.weight", c.head_dim));
    }
    if c.qkv_bias() {
        norms.push(("self_attn.q_proj.bias", c.q_dim()));
        norms.push(("self_attn.k_proj.bias", c.kv_dim()));
        norms.push(("self_attn.v_proj.bias", c.kv_dim()));
    }
    let mut out: Vec<_> = norms
        .into_iter()
        .map(|(name, len)| (name, vec![len]))
        .collect();
    if c.family == Family::GptOss {
        out.push(("self_attn.o_proj.bias", vec![c.hidden_size]));
        out.push(("self_attn.sinks", vec![c.num_attention_heads]));
    }
    if let Some(p) = c.moe.as_ref().filter(|p| p.sparse_layers[layer]) {
        if c.family == Family::GptOss {
            out.push(("mlp.router.weight", vec![p.experts, c.hidden_size]));
            out.push(("mlp.router.bias", vec![p.experts]));
        } else {
            out.push(("mlp.gate.weight", vec![p.experts, c.hidden_size]));
        }
    }
    out
}

/// gpt-oss's experts' biases of layer `layer`, by full suffix, with their length.
fn expert_biases(c: &ModelConfig, layer: usize) -> Vec<(String, usize)> {
    match c.moe.as_ref() {
        Some(p) if c.family == Family::GptOss && p.sparse_layers[layer] => (0..p.experts)
            .flat_map(|e| {
                let w = p.expert_intermediate_size;
                [
                    (format!("mlp.experts.{e}.gate_proj.bias"), w),
                    (format!("mlp.experts.{e}.up_proj.bias"), w),
                    (format!("mlp.experts.{e}.down_proj.bias"), c.hidden_size),
                ]
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Every tensor of the model in file order: embedding, layers, final norm, `lm_head`.
/// `lm_head.weight` is always listed (Q4NX stores it even for tied models).
pub fn expected_tensors(c: &ModelConfig) -> Vec<ExpectedTensor> {
    if let Some(p) = &c.lfm2 {
        return lfm2_expected_tensors(c, p);
    }
    let mut out = vec![ExpectedTensor {
        name: "model.embed_tokens.weight".into(),
        role: Role::Embedding,
        shape: vec![c.vocab_size, c.hidden_size],
    }];
    for layer in 0..c.num_hidden_layers {
        for (suffix, shape) in layer_norms(c, layer) {
            out.push(ExpectedTensor {
                name: format!("model.layers.{layer}.{suffix}"),
                role: Role::Norm,
                shape,
            });
        }
        for (suffix, len) in expert_biases(c, layer) {
            out.push(ExpectedTensor {
                name: format!("model.layers.{layer}.{suffix}"),
                role: Role::Norm,
                shape: vec![len],
            });
        }
        for (suffix, shape) in layer_linears(c, layer) {
            out.push(ExpectedTensor {
                name: format!("model.layers.{layer}.{suffix}"),
                role: Role::Linear,
                shape: shape.to_vec(),
            });
        }
    }
    out.push(ExpectedTensor {
        name: "model.norm.weight".into(),
        role: Role::Norm,
        shape: vec![c.hidden_size],
    });
    out.push(ExpectedTensor {
        name: "lm_head.weight".into(),
        role: Role::Linear,
        shape: vec![c.vocab_size, c.hidden_size],
    });
    out
}

/// `[N, K]` of a linear weight, from its name alone (None for other tensors).
pub fn linear_shape(c: &ModelConfig, name: &str) -> Option<[usize; 2]> {
    if name == "lm_head.weight" {
        return Some([c.vocab_size, c.hidden_size]);
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    if layer >= c.num_hidden_layers {
        return None;
    }
    if let Some(p) = &c.lfm2 {
        let linears = lfm2_layer_linears(c, p, layer);
        return linears
            .into_iter()
            .find(|(s, _)| *s == suffix)
            .map(|(_, shape)| shape);
    }
    layer_linears(c, layer)
        .into_iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, shape)| shape)
}

/// Rounds `k` up to a multiple of 256 (the tile width).
pub fn padded_cols(k: usize) -> usize {
    k.div_ceil(crate::tile::TILE_COLS) * crate::tile::TILE_COLS
}

// LFM2 (its parameters: `crate::lfm2`).

/// The linear weights of layer `layer`, by suffix, with their `[N, K]`.
fn lfm2_layer_linears(
    c: &ModelConfig,
    p: &Lfm2Params,
    layer: usize,
) -> Vec<(&'static str, [usize; 2])> {
    let (h, q, kv, i) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
    let mut out = if p.conv_layers[layer] {
        vec![
            ("conv.in_proj.weight", [3 * h, h]),
            ("conv.out_proj.weight", [h, h]),
        ]
    } else {
        vec![
            ("self_attn.q_proj.weight", [q, h]),
            ("self_attn.k_proj.weight", [kv, h]),
            ("self_attn.v_proj.weight", [kv, h]),
            ("self_attn.out_proj.weight", [h, q]),
        ]
    };
    out.extend([
        ("feed_forward.w1.weight", [i, h]),
        ("feed_forward.w3.weight", [i, h]),
        ("feed_forward.w2.weight", [h, i]),
    ]);
    out
}

/// The dense weights of layer `layer` (norms, the convolution's `[hidden, 1, width]` kernel
/// and biases), by suffix, with their shape.
fn lfm2_layer_dense(
    c: &ModelConfig,
    p: &Lfm2Params,
    layer: usize,
) -> Vec<(&'static str, Vec<usize>)> {
    let h = c.hidden_size;
    let mut out = vec![
        ("operator_norm.weight", vec![h]),
        ("ffn_norm.weight", vec![h]),
    ];
    if p.conv_layers[layer] {
        out.push(("conv.conv.weight", vec![h, 1, p.conv_width]));
        if p.conv_bias {
            out.push(("conv.in_proj.bias", vec![3 * h]));
            out.push(("conv.conv.bias", vec![h]));
            out.push(("conv.out_proj.bias", vec![h]));
        }
    } else {
        out.push(("self_attn.q_layernorm.weight", vec![c.head_dim]));
        out.push(("self_attn.k_layernorm.weight", vec![c.head_dim]));
    }
    out
}

/// Every tensor of an LFM2 model in file order: embedding, layers, final norm
/// (`model.embedding_norm`), `lm_head`. The convolution kernels are stored dense, as the norms
/// are: a few values per channel.
fn lfm2_expected_tensors(c: &ModelConfig, p: &Lfm2Params) -> Vec<ExpectedTensor> {
    let mut out = vec![ExpectedTensor {
        name: "model.embed_tokens.weight".into(),
        role: Role::Embedding,
        shape: vec![c.vocab_size, c.hidden_size],
    }];
    for layer in 0..c.num_hidden_layers {
        for (suffix, shape) in lfm2_layer_dense(c, p, layer) {
            out.push(ExpectedTensor {
                name: format!("model.layers.{layer}.{suffix}"),
                role: Role::Norm,
                shape,
            });
        }
        for (suffix, shape) in lfm2_layer_linears(c, p, layer) {
            out.push(ExpectedTensor {
                name: format!("model.layers.{layer}.{suffix}"),
                role: Role::Linear,
                shape: shape.to_vec(),
            });
        }
    }
    out.push(ExpectedTensor {
        name: "model.embedding_norm.weight".into(),
        role: Role::Norm,
        shape: vec![c.hidden_size],
    });
    out.push(ExpectedTensor {
        name: "lm_head.weight".into(),
        role: Role::Linear,
        shape: vec![c.vocab_size, c.hidden_size],
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(family: &str) -> ModelConfig {
        ModelConfig::from_json(&format!(
            r#"{{"model_type": "{family}", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
                "vocab_size": 100}}"#
        ))
        .unwrap()
    }

    #[test]
    fn llama_tensor_list() {
        let t = expected_tensors(&tiny("llama"));
        assert_eq!(t.len(), 1 + 2 * 9 + 2);
        assert_eq!(t[0].shape, vec![100, 64]);
        assert!(
            t.iter().all(|t| !t.name.contains("q_norm")),
            "no QK-norm in Llama"
        );
        let k = t
            .iter()
            .find(|t| t.name == "model.layers.1.self_attn.k_proj.weight")
            .unwrap();
        assert_eq!(k.shape, vec![32, 64]);
    }

    #[test]
    fn qwen2_has_qkv_biases() {
        let t = expected_tensors(&tiny("qwen2"));
        assert_eq!(t.len(), 1 + 2 * 12 + 2);
        let k = t
            .iter()
            .find(|t| t.name == "model.layers.1.self_attn.k_proj.bias")
            .unwrap();
        assert_eq!((k.role, &k.shape), (Role::Norm, &vec![32]));
    }

    #[test]
    fn qwen3_has_qk_norms() {
        let t = expected_tensors(&tiny("qwen3"));
        assert_eq!(t.len(), 1 + 2 * 11 + 2);
        assert!(t
            .iter()
            .any(|t| t.name == "model.layers.0.self_attn.q_norm.weight"));
    }

    #[test]
    fn phi3_has_fused_qkv_and_gate_up() {
        let c = tiny("phi3");
        let t = expected_tensors(&c);
        assert_eq!(t.len(), 1 + 2 * 6 + 2);
        assert_eq!(
            linear_shape(&c, "model.layers.1.self_attn.qkv_proj.weight"),
            Some([64 + 2 * 32, 64])
        );
        assert_eq!(
            linear_shape(&c, "model.layers.0.mlp.gate_up_proj.weight"),
            Some([192, 64])
        );
        assert_eq!(
            linear_shape(&c, "model.layers.0.self_attn.q_proj.weight"),
            None
        );
    }

    #[test]
    fn qwen3moe_lists_router_and_experts_of_its_sparse_layers() {
        let c = ModelConfig::from_json(
            r#"{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
                "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 2,
                "moe_intermediate_size": 32, "mlp_only_layers": [1]}"#,
        )
        .unwrap();
        let t = expected_tensors(&c);
        // Sparse layers: 4 norms, the router, 4 attention linears, 4 experts x 3.
        // The dense layer: 4 norms, 4 + 3 linears.
        assert_eq!(t.len(), 1 + 2 * (4 + 1 + 4 + 12) + (4 + 7) + 2);
        let router = t
            .iter()
            .find(|t| t.name == "model.layers.2.mlp.gate.weight")
            .unwrap();
        assert_eq!((router.role, &router.shape), (Role::Norm, &vec![4, 64]));
        assert_eq!(
            linear_shape(&c, "model.layers.0.mlp.experts.3.down_proj.weight"),
            Some([64, 32])
        );
        assert_eq!(
            linear_shape(&c, "model.layers.0.mlp.experts.4.down_proj.weight"),
            None
        );
        assert_eq!(
            linear_shape(&c, "model.layers.1.mlp.gate_proj.weight"),
            Some([96, 64])
        );
        assert_eq!(
            linear_shape(&c, "model.layers.0.mlp.gate_proj.weight"),
            None
        );
        assert!(!t.iter().any(|t| t.name == "model.layers.1.mlp.gate.weight"));
    }

    #[test]
    fn gpt_oss_lists_sinks_router_bias_and_expert_biases() {
        let c = ModelConfig::from_json(
            r#"{"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                "intermediate_size": 32, "vocab_size": 100, "num_local_experts": 4,
                "num_experts_per_tok": 2}"#,
        )
        .unwrap();
        let t = expected_tensors(&c);
        // Per layer: 2 norms, 3 q/k/v biases, o bias, sinks, router weight and bias,
        // 4 experts x 3 biases; 4 attention linears, 4 experts x 3.
        assert_eq!(t.len(), 1 + 2 * (2 + 3 + 1 + 1 + 2 + 12 + 4 + 12) + 2);
        let find = |name: &str| t.iter().find(|t| t.name == name).unwrap();
        assert_eq!(find("model.layers.1.self_attn.sinks").shape, [4]);
        assert_eq!(find("model.layers.1.mlp.router.bias").shape, [4]);
        assert_eq!(
            find("model.layers.0.mlp.experts.3.down_proj.bias").shape,
            [64]
        );
        assert_eq!(
            find("model.layers.0.mlp.experts.3.up_proj.bias").role,
            Role::Norm
        );
        assert_eq!(
            linear_shape(&c, "model.layers.1.mlp.experts.2.gate_proj.weight"),
            Some([32, 64])
        );
        assert!(!t.iter().any(|t| t.name.ends_with("mlp.gate.weight")));
    }

    #[test]
    fn shapes_from_names() {
        let c = tiny("llama");
        assert_eq!(
            linear_shape(&c, "model.layers.1.mlp.down_proj.weight"),
            Some([64, 96])
        );
        assert_eq!(
            linear_shape(&c, "model.layers.2.mlp.down_proj.weight"),
            None
        );
        assert_eq!(linear_shape(&c, "model.norm.weight"), None);
        assert_eq!(padded_cols(96), 256);
        assert_eq!(padded_cols(512), 512);
    }
}
