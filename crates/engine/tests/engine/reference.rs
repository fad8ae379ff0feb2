//! The engine against Hugging Face transformers on tiny random models with perturbed norms:
//! logits at every position, and greedy continuations.

use crate::common;

use std::ops::ControlFlow;

use common::{fixture, max_relative_error, reference, Reference};
use hearth_engine::{ChatOptions, LoadOptions, Model, SamplingParams, StopReason};

/// Relative logit error allowed against transformers on unquantized weights (the bar).
const TOLERANCE: f32 = 1e-4;

fn check_logits(name: &str) {
    check_logits_with(name, &reference(name), &LoadOptions::default(), TOLERANCE);
}

fn check_logits_with(name: &str, reference: &Reference, options: &LoadOptions, tolerance: f32) {
    let mut model = Model::load(&fixture(name), options).expect("model loads");
    let logits = model.logits(&reference.tokens).expect("logits");
    let error = max_relative_error(&logits, &reference.logits);
    eprintln!("{name}: max relative logit error vs transformers = {error:.3e}");
    assert!(
        error < tolerance,
        "{name}: relative error {error} exceeds {tolerance}"
    );
}

fn check_greedy(name: &str) {
    check_greedy_with(name, &reference(name), &LoadOptions::default());
}

fn check_greedy_with(name: &str, reference: &Reference, options: &LoadOptions) {
    let mut model = Model::load(&fixture(name), options).expect("model loads");
    let options = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: reference.greedy_tokens.len(),
        enable_thinking: None,
        speculative: None,
        format: Default::default(),
    };
    let (tokens, stats) = model
        .generate(&reference.greedy_prompt, &options, &mut |_| {
            ControlFlow::Continue(())
        })
        .expect("generate");
    // The engine stops at a stop id; transformers' reference (repeated argmax) does not.
    let stop = reference
        .greedy_tokens
        .iter()
        .position(|t| model.stop_ids().contains(t));
    let expected = match stop {
        Some(i) => &reference.greedy_tokens[..=i],
        None => &reference.greedy_tokens[..],
    };
    assert_eq!(
        tokens, expected,
        "{name}: greedy continuation differs from transformers"
    );
    let reason = if stop.is_some() {
        StopReason::EndOfTurn
    } else {
        StopReason::MaxTokens
    };
    assert_eq!(stats.stop_reason, reason);
    assert_eq!(stats.prompt_tokens, reference.greedy_prompt.len());
    assert_eq!(stats.generated_tokens, tokens.len());
}

#[test]
fn llama_8_to_1_gqa_bf16_logits_match_transformers() {
    check_logits("tiny-llama");
}

#[test]
fn qwen3_tied_f32_logits_match_transformers() {
    check_logits("tiny-qwen3");
}

#[test]
fn qwen3_untied_f16_logits_match_transformers() {
    check_logits("tiny-qwen3-untied");
}

#[test]
fn llama_greedy_continuation_matches_transformers() {
    check_greedy("tiny-llama");
}

#[test]
fn qwen3_greedy_continuation_matches_transformers() {
    check_greedy("tiny-qwen3");
}

#[test]
fn qwen3_untied_greedy_continuation_matches_transformers() {
    check_greedy("tiny-qwen3-untied");
}

#[test]
fn llama3_rope_scaling_bf16_logits_match_transformers() {
    check_logits("tiny-llama3");
}

#[test]
fn llama3_rope_scaling_greedy_continuation_matches_transformers() {
    check_greedy("tiny-llama3");
}

#[test]
fn qwen2_qkv_biases_bf16_logits_match_transformers() {
    check_logits("tiny-qwen2");
}

#[test]
fn qwen2_greedy_continuation_matches_transformers() {
    check_greedy("tiny-qwen2");
}

/// Gemma 3 (`generate_gemma3.py`): local sliding-window layers shorter than the sequence
/// between global ones with linearly scaled RoPE, head_dim unlike hidden / heads,
/// query_pre_attn_scalar unlike head_dim, norms perturbed around 0 (Gemma multiplies by 1 + w)
/// and a final logit soft cap. Its chat template is checked in `gemma3_template.rs`.
#[test]
fn gemma3_logits_match_transformers() {
    check_logits("tiny-gemma3");
}

/// One token at a time past the window: decode steps read the local layers' window from the
/// cache.
#[test]
fn gemma3_greedy_continuation_matches_transformers() {
    check_greedy("tiny-gemma3");
}

/// Phi-3 (`generate_phi3.py`): fused qkv_proj and gate_up_proj, RoPE on 12 of 16 elements per
/// head, LongRoPE with distinct short and long factors around a pretrained context of 16, and a
/// sliding window of 10. Opened with a context of 128 the engine uses the long factors from
/// position 0, as transformers does on sequences longer than 16 (the reference's default
/// fields); opened with 16, the short ones, as transformers on the `short` sequences.
fn phi3(short: bool) -> (Reference, LoadOptions) {
    let text = std::fs::read_to_string(fixture("tiny-phi3").join("reference.json")).unwrap();
    let mut all: serde_json::Value = serde_json::from_str(&text).unwrap();
    let case = if short { all["short"].take() } else { all };
    let options = LoadOptions {
        context_length: Some(if short { 16 } else { 128 }),
        ..LoadOptions::default()
    };
    (serde_json::from_value(case).unwrap(), options)
}

/// Phi-3's f32 forward pass is exact up to summation order: a tighter bar than the others'.
const PHI3_TOLERANCE: f32 = 1e-5;

#[test]
fn phi3_long_factors_logits_match_transformers() {
    let (reference, options) = phi3(false);
    check_logits_with("tiny-phi3", &reference, &options, PHI3_TOLERANCE);
}

#[test]
fn phi3_short_factors_logits_match_transformers() {
    let (reference, options) = phi3(true);
    check_logits_with("tiny-phi3", &reference, &options, PHI3_TOLERANCE);
}

#[test]
fn phi3_long_factors_greedy_continuation_matches_transformers() {
    let (reference, options) = phi3(false);
    check_greedy_with("tiny-phi3", &reference, &options);
}

#[test]
fn phi3_short_factors_greedy_continuation_matches_transformers() {
    let (reference, options) = phi3(true);
    check_greedy_with("tiny-phi3", &reference, &options);
}

/// LFM2 (`generate_lfm2.py`): gated short-convolution layers (3 positions wide) alternating
/// with attention layers that norm q and k per head; its chat template, conversations and a
/// Q4NX conversion are checked in `lfm2.rs`.
/// Its f32 forward pass is exact up to summation order, as Phi-3's.
#[test]
fn lfm2_logits_match_transformers() {
    let reference = reference("tiny-lfm2");
    check_logits_with("tiny-lfm2", &reference, &LoadOptions::default(), 1e-5);
}

#[test]
fn lfm2_greedy_continuation_matches_transformers() {
    check_greedy("tiny-lfm2");
}

#[test]
fn qwen3moe_logits_match_transformers() {
    check_logits("tiny-qwen3moe");
}

#[test]
fn qwen3moe_greedy_continuation_matches_transformers() {
    check_greedy("tiny-qwen3moe");
}

/// gpt-oss (`generate_gpt_oss.py`): q/k/v/o biases, a sink logit per head, sliding layers of 4
/// positions around a full one, YaRN over an original context of 16, and experts with biases,
/// a biased router and a clamped SwiGLU whose clamps bite. The rest is in `gpt_oss.rs`.
#[test]
fn gpt_oss_logits_match_transformers() {
    check_logits("tiny-gpt-oss");
}

#[test]
fn gpt_oss_greedy_continuation_matches_transformers() {
    check_greedy("tiny-gpt-oss");
}
