//! gpt-oss's harmony chat format (`tests/fixtures/engine/harmony/`, written by its generate.py):
//! llama.cpp's copy of the gpt-oss chat template renders through Hearth's template engine as
//! transformers' Jinja environment (jinja2) renders it, with Hearth's `<think>…</think>` answers
//! given back as the template's `thinking`, and the rendered text tokenizes to the same ids; a
//! model folder with harmony's tokens stops on `<|return|>` and `<|call|>`, not on `<|end|>`,
//! and shows what it generates through the harmony reader.

use crate::common;

use std::ops::ControlFlow;
use std::path::PathBuf;

use common::fixture;
use hearth_engine::{
    ChatMessage, ChatOptions, ChatTemplate, HarmonyStream, HarmonyTokens, LoadOptions, Model, Role,
    SamplingParams, TextTokenizer,
};
use serde_json::Value;

fn harmony_dir() -> PathBuf {
    fixture("harmony")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(harmony_dir().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn template(unix_time: i64) -> ChatTemplate {
    let config = std::fs::read_to_string(harmony_dir().join("tokenizer_config.json")).unwrap();
    let config: Value = serde_json::from_str(&config).unwrap();
    ChatTemplate::from_dir(&harmony_dir(), Some(&config))
        .unwrap()
        .expect("the fixture has a template")
        .at_time(unix_time)
}

/// A reference conversation's messages as Hearth holds them: an assistant turn's `thinking`
/// kept in its text as `<think>…</think>`, as the app sends earlier answers back.
fn hearth_messages(case: &Value) -> Vec<ChatMessage> {
    case["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap();
            match (m["role"].as_str().unwrap(), m["thinking"].as_str()) {
                ("system", _) => ChatMessage::new(Role::System, content),
                ("user", _) => ChatMessage::new(Role::User, content),
                (_, Some(thinking)) => ChatMessage::new(
                    Role::Assistant,
                    format!("<think>{thinking}</think>{content}"),
                ),
                (_, None) => ChatMessage::new(Role::Assistant, content),
            }
        })
        .collect()
}

/// Thinking off asks gpt-oss for its least reasoning ("low"); otherwise the template's default.
fn enable_thinking(case: &Value) -> Option<bool> {
    match case["reasoning_effort"].as_str() {
        Some("low") => Some(false),
        None => None,
        Some(other) => panic!("Hearth asks for no reasoning effort {other}"),
    }
}

#[test]
fn the_gpt_oss_template_renders_as_jinja2_renders_it() {
    let reference = reference();
    let template = template(reference["unix_time"].as_i64().unwrap());
    let tokenizer = TextTokenizer::from_file(&harmony_dir().join("tokenizer.json")).unwrap();
    let cases = reference["chat"].as_array().unwrap();
    for case in cases {
        let messages = hearth_messages(case);
        let thinking = enable_thinking(case);
        let text = template.render(&messages, true, thinking).unwrap();
        assert_eq!(text, case["text"].as_str().unwrap(), "{messages:?}");
        // As `Model::tokenize_chat` tokenizes it: messages quoted, the template's tokens special.
        let quoted: Vec<ChatMessage> = messages
            .iter()
            .map(|m| ChatMessage::new(m.role, tokenizer.quote(&m.content)))
            .collect();
        let prompt = template.render(&quoted, true, thinking).unwrap();
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        assert_eq!(
            tokenizer.encode_prompt(&prompt).unwrap(),
            ids,
            "{messages:?}"
        );
    }
    assert_eq!(cases.len(), 5);
}

#[test]
fn earlier_reasoning_is_dropped_and_the_answer_kept() {
    let template = template(0);
    let render = |answer: &str| {
        let messages = [
            ChatMessage::new(Role::User, "Hi"),
            ChatMessage::new(Role::Assistant, answer),
            ChatMessage::new(Role::User, "Bye"),
        ];
        template.render(&messages, true, None).unwrap()
    };
    let plain = render("Hello.");
    assert!(plain.contains("<|start|>assistant<|channel|>final<|message|>Hello.<|end|>"));
    // Qwen-style new lines around the reasoning, and an answer cut short while it reasoned.
    assert_eq!(render("<think>\nA greeting.\n</think>\n\nHello."), plain);
    assert_eq!(render("  <think>A greeting.</think>Hello."), plain);
    let cut = render("<think>Still think");
    assert!(cut.contains("<|channel|>final<|message|><|end|>"), "{cut}");
    assert!(!cut.contains("Still think"), "{cut}");
    // A text that only mentions the tag later keeps it.
    assert!(render("Use <think> tags.").contains("final<|message|>Use <think> tags.<|end|>"));
}

#[test]
fn the_date_is_the_days_and_a_fixed_moment_gives_its_own() {
    let rendered = template(86_400 * 365)
        .render(&[ChatMessage::new(Role::User, "Hi")], true, None)
        .unwrap();
    assert!(
        rendered.contains("Current date: 1971-01-01\n"),
        "{rendered}"
    );
}

/// A random llama with gpt-oss's vocabulary size and the harmony fixture's tokenizer, stop
/// tokens and template, in a temporary folder.
fn harmony_model() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "intermediate_size": 128,
        "vocab_size": 201_088,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": true,
        "max_position_embeddings": 512,
        "eos_token_id": 200_002,
    })
    .to_string();
    let parsed = q4nx::ModelConfig::from_json(&config).unwrap();
    q4nx::synthetic::write_random_model(dir.path(), &parsed, 11).unwrap();
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    for file in [
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "chat_template.jinja",
    ] {
        std::fs::copy(harmony_dir().join(file), dir.path().join(file)).unwrap();
    }
    dir
}

#[test]
fn a_harmony_model_stops_on_return_and_call_and_reads_its_channels() {
    let dir = harmony_model();
    let mut model = Model::load(dir.path(), &LoadOptions::default()).unwrap();
    // <|endoftext|>, <|return|>, <|call|>: never <|end|> (200007), which ends the reasoning.
    assert_eq!(model.stop_ids(), [199_999, 200_002, 200_012]);
    let messages = [ChatMessage::new(Role::User, "Hello!")];
    let options = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: 24,
        speculative: Some(false),
        ..ChatOptions::default()
    };
    let prompt = model.tokenize_chat(&messages, &options).unwrap();
    // The generation prompt opens the assistant's header: `<|start|>assistant`.
    let tokenizer = model.tokenizer().unwrap();
    let opened = [200_006, tokenizer.token_to_id("assistant").unwrap()];
    assert_eq!(prompt[prompt.len() - 2..], opened);
    let mut pieces = String::new();
    model
        .chat(&messages, &options, &mut |piece| {
            pieces.push_str(piece);
            ControlFlow::Continue(())
        })
        .unwrap();
    // The same ids, read by the harmony reader: `chat` shows what it shows.
    let (ids, _) = model
        .generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    let tokenizer = model.tokenizer().unwrap();
    let tokens = HarmonyTokens::find(tokenizer).unwrap();
    let mut reader = HarmonyStream::after(tokenizer, tokens, &prompt).unwrap();
    let mut expected = String::new();
    for id in ids.iter().filter(|id| !model.stop_ids().contains(id)) {
        expected.extend(reader.step(*id).unwrap());
    }
    expected.extend(reader.finish());
    assert_eq!(pieces, expected);

    // An answer cut short continues in its final channel, where the reader starts.
    let cut = [
        ChatMessage::new(Role::User, "Hello!"),
        ChatMessage::new(Role::Assistant, "The answer"),
    ];
    let prompt = model.tokenize_chat_continuing(&cut, &options).unwrap();
    let text = model.tokenizer().unwrap().decode(&prompt, false).unwrap();
    assert!(
        text.ends_with("<|start|>assistant<|channel|>final<|message|>The answer"),
        "{text}"
    );
}
