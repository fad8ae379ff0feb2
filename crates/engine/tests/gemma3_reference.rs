//! Gemma 3 against Hugging Face transformers on a tiny random Gemma3ForCausalLM
//! (`tests/fixtures/engine/generate_gemma3.py`): local sliding-window layers shorter than the
//! sequence between global ones with linearly scaled RoPE, head_dim unlike hidden / heads,
//! query_pre_attn_scalar unlike head_dim, norms perturbed around 0 (Gemma multiplies by 1 + w),
//! a final logit soft cap; logits at every position, a greedy continuation, and the chat
//! template (a system message joins the first user turn).

mod common;

use std::ops::ControlFlow;

use common::{fixture, max_relative_error, reference};
use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role, SamplingParams};
use serde_json::Value;

const NAME: &str = "tiny-gemma3";

/// Relative logit error allowed against transformers on unquantized weights (as the other
/// tiny models').
const TOLERANCE: f32 = 1e-4;

#[test]
fn gemma3_logits_match_transformers() {
    let reference = reference(NAME);
    let mut model = Model::load(&fixture(NAME), &LoadOptions::default()).expect("model loads");
    assert_eq!(model.info().family, "gemma3");
    let logits = model.logits(&reference.tokens).expect("logits");
    let error = max_relative_error(&logits, &reference.logits);
    eprintln!("{NAME}: max relative logit error vs transformers = {error:.3e}");
    assert!(
        error < TOLERANCE,
        "relative error {error} exceeds {TOLERANCE}"
    );
}

#[test]
fn gemma3_greedy_continuation_matches_transformers() {
    let reference = reference(NAME);
    let mut model = Model::load(&fixture(NAME), &LoadOptions::default()).expect("model loads");
    let options = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: reference.greedy_tokens.len(),
        enable_thinking: None,
        speculative: None,
        format: Default::default(),
    };
    // One token at a time past the window: decode steps read the local layers' window from
    // the cache.
    let (tokens, _) = model
        .generate(&reference.greedy_prompt, &options, &mut |_| {
            ControlFlow::Continue(())
        })
        .expect("generate");
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
        "greedy continuation differs from transformers"
    );
}

#[test]
fn gemma3_chat_template_renders_as_transformers() {
    let model = Model::load(&fixture(NAME), &LoadOptions::default()).expect("model loads");
    let text = std::fs::read_to_string(fixture(NAME).join("reference.json")).unwrap();
    let reference: Value = serde_json::from_str(&text).unwrap();
    let options = ChatOptions::default();
    let mut checked = 0;
    for case in reference["chat"].as_array().unwrap() {
        // The engine always opens the assistant's turn.
        if case["add_generation_prompt"] != Value::Bool(true) {
            continue;
        }
        let messages: Vec<ChatMessage> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let role = match m["role"].as_str().unwrap() {
                    "system" => Role::System,
                    "user" => Role::User,
                    _ => Role::Assistant,
                };
                ChatMessage::new(role, m["content"].as_str().unwrap())
            })
            .collect();
        let rendered = model.render_chat(&messages, &options).expect("renders");
        assert_eq!(rendered, case["text"].as_str().unwrap(), "{messages:?}");
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(model.tokenize_chat(&messages, &options).unwrap(), ids);
        checked += 1;
    }
    assert_eq!(checked, 3);
    assert!(
        model.stop_ids().len() >= 2,
        "stops on <eos> and <end_of_turn>: {:?}",
        model.stop_ids()
    );
}
