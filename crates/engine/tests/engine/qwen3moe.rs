//! Qwen3-MoE on the tiny random Qwen3MoeForCausalLM of
//! `tests/fixtures/engine/generate_qwen3moe.py` (4 experts, 2 per token, renormalized; layer 1
//! dense), beyond `reference.rs`'s logits and greedy continuation against transformers: the Q4NX conversion against the same weights dequantized (the bound
//! `q4nx_weights.rs` holds every family to); a prefill (tokens grouped by expert) against one
//! token at a time (each token's experts alone); its parameters counted as transformers counts
//! them; a missing expert and malformed expert counts refused in words.

use crate::common;

use std::path::Path;

use common::dequantized::write_dequantized;
use common::moe::{decode_speed, decoded_logits};
use common::{copy_fixture, fixture, max_relative_error, reference};
use hearth_engine::{LoadOptions, Model};
use q4nx::{ConvertOptions, Tensor, Weights};

const NAME: &str = "tiny-qwen3moe";

/// Relative logit error allowed against transformers on unquantized weights (`reference.rs`).
const TOLERANCE: f32 = 1e-4;

/// Q4NX against its own weights dequantized, relative to each row's largest logit: the int8
/// activations' rounding (`q4nx_weights.rs`).
const Q4NX_TOLERANCE: f32 = 0.1;

fn load(dir: &Path) -> Model {
    Model::load(dir, &LoadOptions::default()).expect("model loads")
}

// Its logits and greedy continuation against transformers are checked with every family's, in
// `reference.rs` (`qwen3moe_*`).

#[test]
fn decode_and_prefill_give_the_same_logits() {
    let reference = reference(NAME);
    let tmp = tempfile::tempdir().unwrap();
    let q4 = tmp.path().join("q4nx");
    q4nx::convert(&fixture(NAME), &q4, &ConvertOptions::default(), &mut |_| {}).expect("converts");
    // Dense weights: the same sums in the same order, so the same logits up to f32 rounding;
    // Q4NX: a group's matmul runs the batch kernels, one token the single-token ones.
    for (dir, bound) in [(fixture(NAME), 1e-5), (q4, 1e-3)] {
        let mut model = load(&dir);
        let prefill = model.logits(&reference.tokens).expect("logits");
        let mut model = load(&dir);
        let decode = decoded_logits(&mut model, &reference.tokens);
        let error = max_relative_error(&decode, &prefill);
        eprintln!(
            "{}: decode vs prefill {error:.3e}",
            model.info().weight_format
        );
        assert!(
            error <= bound,
            "{dir:?}: decode differs from prefill by {error}"
        );
    }
}

/// An expert no token of a pass chose is never computed: with expert 1 of the last layer
/// poisoned (every weight NaN), the tokens routed elsewhere keep transformers' logits and
/// only those routed to it turn NaN (the last layer's MLP reaches no other position). A pass
/// that ran every expert and weighted the others by 0 would turn every row NaN (0 x NaN).
#[test]
fn only_the_chosen_experts_run() {
    let reference = reference(NAME);
    let dir = copy_fixture(NAME);
    let path = dir.path().join("model.safetensors");
    let mut file = std::fs::read(&path).unwrap();
    let header_len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&file[8..8 + header_len]).unwrap();
    for part in ["gate_proj", "up_proj", "down_proj"] {
        let entry = &header[format!("model.layers.2.mlp.experts.1.{part}.weight")];
        assert_eq!(entry["dtype"], "F32");
        let [start, end] = [0, 1].map(|i| entry["data_offsets"][i].as_u64().unwrap() as usize);
        for value in file[8 + header_len + start..8 + header_len + end].chunks_exact_mut(4) {
            value.copy_from_slice(&f32::NAN.to_le_bytes());
        }
    }
    std::fs::write(&path, file).unwrap();
    let logits = load(dir.path()).logits(&reference.tokens).unwrap();
    let (poisoned, kept): (Vec<usize>, Vec<usize>) =
        (0..logits.len()).partition(|&t| logits[t].iter().any(|v| v.is_nan()));
    assert!(
        !poisoned.is_empty() && !kept.is_empty(),
        "some tokens use expert 1, some do not: {poisoned:?}"
    );
    for t in kept {
        let error = max_relative_error(&logits[t..=t], &reference.logits[t..=t]);
        assert!(error < TOLERANCE, "position {t}: {error}");
    }
}

/// The experts are quantized as the other linears, the router kept BF16; the Q4NX model is
/// held to its dequantized weights as every family is, and its distance to transformers on the
/// original weights (the 4-bit rounding itself) is printed and bounded loosely, as there.
#[test]
fn q4nx_matches_its_dequantized_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let (q4, dense) = (tmp.path().join("q4nx"), tmp.path().join("dequantized"));
    q4nx::convert(&fixture(NAME), &q4, &ConvertOptions::default(), &mut |_| {}).expect("converts");
    let weights = Weights::open(&q4).unwrap();
    assert!(matches!(
        weights.get("model.layers.0.mlp.experts.3.up_proj.weight"),
        Ok(Tensor::Q4_1(_))
    ));
    assert!(matches!(
        weights.get("model.layers.2.mlp.gate.weight"),
        Ok(Tensor::Dense(t)) if t.dtype == q4nx::Dtype::Bf16 && t.shape == [4, 64]
    ));
    write_dequantized(&q4, &fixture(NAME), &dense, None);

    let reference = reference(NAME);
    let mut quantized = load(&q4);
    assert_eq!(quantized.info().weight_format, "q4nx");
    let q_logits = quantized.logits(&reference.tokens).unwrap();
    let d_logits = load(&dense).logits(&reference.tokens).unwrap();
    let error = max_relative_error(&q_logits, &d_logits);
    let quantization = max_relative_error(&q_logits, &reference.logits);
    eprintln!(
        "{NAME}: q4nx vs its dequantized weights {error:.3e}; vs transformers on the original \
         weights (quantization error) {quantization:.3e}"
    );
    assert!(error <= Q4NX_TOLERANCE, "q4nx path differs by {error}");
    // Measured 0.70 (the dense tiny models: 0.3-0.54): rounded weights also move the router's
    // input, and a token sent to another expert moves its logits far more than rounding does.
    assert!(
        quantization < 1.0,
        "Q4_1 weights changed the logits by {quantization}"
    );
}

/// transformers' `num_parameters()`: embedding and head 320x64 each; per layer q 64x64, k and
/// v 32x64, o 64x64, q/k norms 16, two norms 64; layers 0 and 2 a router 4x64 and 4 experts of
/// 3x32x64, layer 1 a dense MLP of 3x96x64; the final norm.
#[test]
fn parameters_are_counted_as_transformers_counts_them() {
    let model = load(&fixture(NAME));
    assert_eq!(model.info().family, "qwen3moe");
    let attention = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 16 + 2 * 64;
    let sparse = 4 * 64 + 4 * 3 * 32 * 64;
    let dense = 3 * 96 * 64;
    let expected = 2 * 320 * 64 + 3 * attention + 2 * sparse + dense + 64;
    assert_eq!(model.info().parameter_count, expected);
}

#[test]
fn a_missing_expert_or_a_bad_expert_count_is_refused_in_words() {
    // A file without one expert's matrix: named at load.
    let tmp = tempfile::tempdir().unwrap();
    let q4 = tmp.path().join("q4nx");
    q4nx::convert(&fixture(NAME), &q4, &ConvertOptions::default(), &mut |_| {}).expect("converts");
    let broken = tmp.path().join("broken");
    let missing = "model.layers.2.mlp.experts.1.down_proj.weight";
    write_dequantized(&q4, &fixture(NAME), &broken, Some(missing));
    let e = Model::load(&broken, &LoadOptions::default())
        .expect_err("refused")
        .to_string();
    assert!(e.contains(missing), "{e}");

    // Configs whose experts cannot route a token.
    for (key, value, words) in [
        (
            "num_experts_per_tok",
            serde_json::json!(5),
            "num_experts_per_tok is 5",
        ),
        (
            "num_local_experts",
            serde_json::json!(0),
            "num_experts is 0",
        ),
        (
            "moe_intermediate_size",
            serde_json::json!(null),
            "no moe_intermediate_size",
        ),
        (
            "mlp_only_layers",
            serde_json::json!([3]),
            "mlp_only_layers has 3",
        ),
    ] {
        let dir = copy_fixture(NAME);
        let path = dir.path().join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config[key] = value;
        std::fs::write(&path, config.to_string()).unwrap();
        let e = Model::load(dir.path(), &LoadOptions::default())
            .expect_err("refused")
            .to_string();
        assert!(e.contains(words), "{key}: {e}");
    }
}

/// Decode and prefill speed on 4 layers of Qwen3-30B-A3B's real shape with random weights
/// (about 2.3 GB: every layer's 128 experts, the 151 936-token head), printed with the bytes a
/// decoded token reads (attention, the router and 8 experts per layer, the head), beside a
/// dense Qwen3 of the same shape whose MLP is as wide as the 8 experts together (the same
/// bytes a token, read as 3 large matrices rather than 24 small ones). Opt-in, as it writes
/// those files: `cargo test -p hearth-engine --release --test engine qwen3moe:: -- --ignored
/// --nocapture`; `HEARTH_THREADS` sets the threads.
#[test]
#[ignore = "writes 3 GB of models and times them"]
fn speed_on_four_layers_of_qwen3_30b_a3b() {
    let (hidden, heads, kv_heads, head_dim, width, experts, used, vocab, layers) =
        (2048, 32, 4, 128, 768, 128, 8, 151_936, 4);
    let moe = serde_json::json!({
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": head_dim, "intermediate_size": 6144,
        "moe_intermediate_size": width, "num_experts": experts, "num_experts_per_tok": used,
        "norm_topk_prob": true, "vocab_size": vocab, "rope_theta": 1e6,
        "max_position_embeddings": 40960, "tie_word_embeddings": false
    });
    let mut dense = moe.clone();
    dense["architectures"] = serde_json::json!(["Qwen3ForCausalLM"]);
    dense["model_type"] = "qwen3".into();
    dense["intermediate_size"] = (used * width).into();
    // Q4_1 tiles: 5120 bytes per 32 x 256 weights.
    let q4 = |rows: usize, cols: usize| (rows * cols) as f64 * 5120.0 / 8192.0;
    let attention = q4((heads + 2 * kv_heads) * head_dim, hidden) + q4(hidden, heads * head_dim);
    let chosen = used as f64 * 3.0 * q4(width, hidden);
    let head = q4(vocab, hidden) + (hidden * 2) as f64;
    let router = (experts * hidden * 2) as f64;
    for (name, config, per_token) in [
        (
            "qwen3moe",
            moe,
            layers as f64 * (attention + chosen + router) + head,
        ),
        ("dense", dense, layers as f64 * (attention + chosen) + head),
    ] {
        decode_speed(name, &config.to_string(), per_token);
    }
}
