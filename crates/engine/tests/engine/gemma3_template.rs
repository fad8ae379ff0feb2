//! Gemma 3's chat template against Hugging Face transformers on the tiny random
//! Gemma3ForCausalLM (`tests/fixtures/engine/generate_gemma3.py`): the rendered text and its ids
//! (a system message joins the first user turn). Its logits and greedy continuation are checked
//! with the other tiny models in `reference.rs`.

use crate::common;

use common::fixture;
use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role};
use serde_json::Value;

const NAME: &str = "tiny-gemma3";

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
