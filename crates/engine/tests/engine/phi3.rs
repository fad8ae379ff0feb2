//! Phi-3 (Phi-3.5-mini, Phi-4-mini) on the tiny random Phi3ForCausalLM of
//! `tests/fixtures/engine/generate_phi3.py`: both chat templates against transformers' renders
//! (text and ids), the stop tokens, bad configs refused in words, and llama.cpp's phi3 GGUF of
//! the same model imported. Its logits and greedy continuations (long and short LongRoPE
//! factors) are checked in `reference.rs`, its Q4NX conversion in `q4nx_weights.rs`.

use crate::common;

use std::path::Path;

use common::logits::spread_relative_distance;
use common::{copy_fixture, fixture};
use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role};
use serde_json::Value;

const NAME: &str = "tiny-phi3";

fn reference_json() -> Value {
    let text = std::fs::read_to_string(fixture(NAME).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every render of `cases` with the generation prompt (the engine always opens the
/// assistant's turn) equals transformers' text and ids.
fn check_renders(model: &Model, cases: &Value) {
    let options = ChatOptions::default();
    let mut checked = 0;
    for case in cases.as_array().unwrap() {
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
        assert_eq!(
            model.tokenize_chat(&messages, &options).unwrap(),
            ids,
            "{messages:?}"
        );
        checked += 1;
    }
    assert_eq!(checked, 3);
}

/// The ids of Phi-3's three stop tokens in `model`'s vocabulary.
fn phi3_stops(model: &Model) -> Vec<u32> {
    let tokenizer = model.tokenizer().expect("a tokenizer");
    let mut ids: Vec<u32> = ["<|end|>", "<|assistant|>", "<|endoftext|>"]
        .iter()
        .map(|t| tokenizer.token_to_id(t).expect("a Phi special token"))
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn phi4_mini_chat_template_renders_as_transformers_and_stops_on_phi_tokens() {
    let model = Model::load(&fixture(NAME), &LoadOptions::default()).expect("model loads");
    check_renders(&model, &reference_json()["chat"]);
    let stops = phi3_stops(&model);
    assert_eq!(
        model.stop_ids(),
        stops,
        "<|end|>, <|assistant|>, <|endoftext|>"
    );
}

#[test]
fn phi35_chat_template_renders_as_transformers() {
    let reference = reference_json();
    let dir = copy_fixture(NAME);
    let path = dir.path().join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = reference["phi35_template"].clone();
    std::fs::write(&path, config.to_string()).unwrap();
    let model = Model::load(dir.path(), &LoadOptions::default()).expect("model loads");
    check_renders(&model, &reference["chat_phi35"]);
    assert_eq!(model.stop_ids(), phi3_stops(&model));
}

/// Loads the fixture with `edit` applied to its config.json; the error's text.
fn load_with_config(edit: impl Fn(&mut Value)) -> String {
    let dir = copy_fixture(NAME);
    let path = dir.path().join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
    match Model::load(dir.path(), &LoadOptions::default()) {
        Ok(_) => panic!("a bad config loaded: {config}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_phi3_configs_are_refused_in_words() {
    let e = load_with_config(|c| c["rope_parameters"]["partial_rotary_factor"] = 1.5.into());
    assert!(
        e.contains("partial_rotary_factor") && e.contains("at most 1"),
        "{e}"
    );
    let e = load_with_config(|c| c["rope_parameters"]["long_factor"] = serde_json::json!([2.0]));
    assert!(
        e.contains("long_factor has 1 factors") && e.contains("6"),
        "{e}"
    );
    let e = load_with_config(|c| c["rope_parameters"]["short_factor"] = serde_json::json!("x"));
    assert!(e.contains("short_factor"), "{e}");
    let e = load_with_config(|c| c["rope_parameters"]["rope_type"] = "dynamic".into());
    assert!(e.contains("dynamic"), "{e}");
    let e = load_with_config(|c| c["sliding_window"] = 0.into());
    assert!(e.contains("sliding_window"), "{e}");
    let e = load_with_config(|c| c["hidden_act"] = "gelu".into());
    assert!(e.contains("silu"), "{e}");
    // The fused weights are the config's shape: a wider intermediate_size does not fit them.
    let e = load_with_config(|c| c["intermediate_size"] = 128.into());
    assert!(e.contains("gate_up_proj"), "{e}");
}

fn tiny_phi3_gguf() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/tiny-phi3-q8_0.gguf")
}

/// The same GGUF linked where it lies (its fused Q8_0 blocks run in place, one matrix product
/// each) computes what its import computes: the same codes and scales for every fused matrix;
/// the tied head is the file's f32 embedding where the link reads it and 8-bit tiles in the
/// import (measured 0.039 logit std apart, as the other linked fixtures are, 0.04-0.05).
#[test]
fn the_linked_phi3_gguf_computes_what_its_import_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let (linked, imported) = (tmp.path().join("linked"), tmp.path().join("imported"));
    q4nx::gguf::link_gguf(&tiny_phi3_gguf(), &linked, &mut |_| {}).expect("links");
    q4nx::gguf::import_gguf(&tiny_phi3_gguf(), &imported, Some(1), &mut |_| {}).expect("imports");
    let tokens = common::reference(NAME).tokens;
    let logits = |dir: &Path| {
        let mut model = Model::load(dir, &LoadOptions::default()).expect("loads");
        assert_eq!(model.config().family, q4nx::Family::Phi3);
        model.logits(&tokens).expect("logits")
    };
    let (a, b) = (logits(&linked), logits(&imported));
    let distance = spread_relative_distance(&a, &b);
    eprintln!("tiny-phi3: linked vs imported GGUF {distance:.2e} logit std");
    assert!(distance < 0.06, "{distance}");
}

/// llama.cpp's phi3 GGUF of the same model (fused attn_qkv and ffn_up in Q8_0, the factors as
/// rope_factors_short/long.weight, 12 rotated elements, a window of 10, no output.weight):
/// imported, it reads as the original config and computes its logits up to the 8-bit weights.
#[test]
fn the_phi3_gguf_imports_as_the_original() {
    let gguf = tiny_phi3_gguf();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    q4nx::gguf::import_gguf(&gguf, &dir, Some(1), &mut |_| {}).expect("imports");
    let original = q4nx::ModelConfig::from_path(&fixture(NAME).join("config.json")).unwrap();
    let mut model = Model::load(&dir, &LoadOptions::default()).expect("the import loads");
    let c = model.config().clone();
    assert_eq!(c.family, q4nx::Family::Phi3);
    assert_eq!(c.phi3, original.phi3);
    assert_eq!(c.rotary_dim(), 12);
    assert!(c.tie_word_embeddings);
    let (
        q4nx::RopeScaling::LongRope {
            short_factor,
            long_factor,
            original_max_position_embeddings,
            attention_factor,
        },
        q4nx::RopeScaling::LongRope {
            short_factor: short0,
            long_factor: long0,
            attention_factor: attention0,
            ..
        },
    ) = (&c.rope_scaling, &original.rope_scaling)
    else {
        panic!("longrope: {:?}", c.rope_scaling)
    };
    assert_eq!((short_factor, long_factor), (short0, long0));
    assert_eq!(*original_max_position_embeddings, 16);
    assert!((attention_factor - attention0).abs() < 1e-6);
    assert_eq!(model.stop_ids(), phi3_stops(&model), "no generation_config");

    let reference = common::reference(NAME);
    let ours = model.logits(&reference.tokens).unwrap();
    let distance = spread_relative_distance(&ours, &reference.logits);
    eprintln!("tiny-phi3: imported GGUF {distance:.2e} logit std from transformers");
    assert!(distance < 0.25, "{distance}");
}

/// `hearth convert` keeps Phi-3 as it is (fused matrices stored fused, checked in
/// `q4nx_weights.rs`) and refuses, in words, to make FastFlowLM's Qwen3 variant of it.
#[test]
fn the_flm_qwen3_variant_of_a_phi3_is_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let options = q4nx::ConvertOptions {
        variant: q4nx::Variant::FlmQwen3,
        threads: Some(1),
    };
    let e = q4nx::convert(
        &fixture(NAME),
        &tmp.path().join("out"),
        &options,
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("Phi-3") && e.contains("no place in Qwen3"),
        "{e}"
    );
}
