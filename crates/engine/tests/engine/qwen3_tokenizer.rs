//! The genuine Qwen3 tokenizer and chat template against transformers, on a corpus of strings
//! (unicode, CJK, emoji, whitespace runs, special tokens) and conversations.

use crate::common;

use common::fixture;
use hearth_engine::{ChatMessage, ChatTemplate, Role, TextTokenizer};

#[derive(serde::Deserialize)]
struct Cases {
    encode: Vec<EncodeCase>,
    chat: Vec<ChatCase>,
}

#[derive(serde::Deserialize)]
struct EncodeCase {
    text: String,
    ids: Vec<u32>,
    decoded: String,
}

#[derive(serde::Deserialize)]
struct ChatCase {
    messages: Vec<ChatMessage>,
    add_generation_prompt: bool,
    enable_thinking: Option<bool>,
    text: String,
    ids: Vec<u32>,
}

fn cases() -> Cases {
    let text = std::fs::read_to_string(fixture("qwen3-tokenizer-cases.json")).expect("cases");
    serde_json::from_str(&text).expect("cases parse")
}

/// Loaded once per test binary: the real tokenizer.json is 11 MB.
fn tokenizer() -> &'static TextTokenizer {
    static TOKENIZER: std::sync::OnceLock<TextTokenizer> = std::sync::OnceLock::new();
    TOKENIZER.get_or_init(|| {
        TextTokenizer::from_file(&fixture("qwen3-tokenizer").join("tokenizer.json")).expect("loads")
    })
}

#[test]
fn hello_world_has_the_documented_ids() {
    assert_eq!(
        tokenizer().encode("Hello, world!", false).unwrap(),
        [9707, 11, 1879, 0]
    );
}

#[test]
fn encoding_matches_transformers_on_the_corpus() {
    let tokenizer = tokenizer();
    for case in cases().encode {
        let ids = tokenizer.encode(&case.text, false).unwrap();
        assert_eq!(ids, case.ids, "ids of {:?}", case.text);
        let decoded = tokenizer.decode(&ids, false).unwrap();
        assert_eq!(decoded, case.decoded, "decoding of {:?}", case.text);
    }
}

#[test]
fn streaming_decode_reassembles_every_string() {
    let tokenizer = tokenizer();
    for case in cases().encode {
        let mut stream = tokenizer.stream();
        let mut text = String::new();
        for &id in &case.ids {
            text.extend(stream.step(id).unwrap());
        }
        let expected = tokenizer.decode(&case.ids, true).unwrap();
        assert_eq!(text, expected, "streamed {:?}", case.text);
    }
}

#[test]
fn chat_template_renders_and_tokenizes_as_transformers() {
    let dir = fixture("qwen3-tokenizer");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap())
            .unwrap();
    let template = ChatTemplate::from_dir(&dir, Some(&config))
        .unwrap()
        .expect("has a template");
    let tokenizer = tokenizer();
    let cases = cases().chat;
    assert!(cases.len() >= 20);
    for case in cases {
        let text = template
            .render(
                &case.messages,
                case.add_generation_prompt,
                case.enable_thinking,
            )
            .unwrap();
        assert_eq!(
            text, case.text,
            "render of {:?} (generation prompt {}, thinking {:?})",
            case.messages, case.add_generation_prompt, case.enable_thinking
        );
        assert_eq!(tokenizer.encode(&text, false).unwrap(), case.ids);
    }
}

#[test]
fn roles_serialize_lowercase() {
    let json = serde_json::to_string(&ChatMessage::new(Role::System, "x")).unwrap();
    assert_eq!(json, r#"{"role":"system","content":"x"}"#);
}
