//! Structured output: answers under a JSON format or schema parse and match it, on the starter
//! model (SmolLM2-135M-Instruct, made by `scripts/starter-model.sh`; the bundled demo model
//! where it has not been made), neither of which writes valid JSON on its own, and on the tiny
//! random fixtures sampled hot (a random walk through everything the schema allows), greedy
//! and sampled, with and without speculative decoding.

use crate::common;

use std::ops::ControlFlow;
use std::path::PathBuf;

use common::fixture;
use hearth_engine::{
    ChatMessage, ChatOptions, LoadOptions, Model, ResponseFormat, Role, SamplingParams, StopReason,
};
use serde_json::{json, Value};

/// The starter model when `models/starter` has been made (`npm test` makes it), else the
/// demo model.
fn assistant_model() -> Model {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let starter = models.join("starter");
    let dir = match starter.join("config.json").is_file() {
        true => starter,
        false => models.join("demo"),
    };
    Model::load(&dir, &LoadOptions::default()).expect("the model loads")
}

fn options(sampling: SamplingParams, format: ResponseFormat) -> ChatOptions {
    ChatOptions {
        sampling,
        max_tokens: 300,
        format,
        ..ChatOptions::default()
    }
}

fn hot(seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 1.5,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repetition_penalty: 1.0,
        seed,
    }
}

/// The answer's text and why it stopped.
fn chat(model: &mut Model, question: &str, options: &ChatOptions) -> (String, StopReason) {
    let mut text = String::new();
    let stats = model
        .chat(
            &[ChatMessage::new(Role::User, question)],
            options,
            &mut |piece| {
                text.push_str(piece);
                ControlFlow::Continue(())
            },
        )
        .expect("chat");
    (text, stats.stop_reason)
}

/// Whether `value` matches `schema`, for the keywords the engine supports (an independent
/// check of what the automaton let through).
fn matches(schema: &Value, value: &Value) -> bool {
    let Some(s) = schema.as_object() else {
        return schema == &json!(true);
    };
    if let Some(c) = s.get("const") {
        return c == value;
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        return options.contains(value);
    }
    if let Some(Value::Array(alternatives)) = s.get("anyOf") {
        return alternatives.iter().any(|a| matches(a, value));
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => vec!["null", "boolean", "number", "string", "array", "object"],
    };
    let count = |key: &str| s.get(key).and_then(Value::as_u64).map(|n| n as usize);
    types.iter().any(|t| match (*t, value) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        ("string", Value::String(text)) => {
            let chars = text.chars().count();
            count("minLength").is_none_or(|m| chars >= m)
                && count("maxLength").is_none_or(|m| chars <= m)
        }
        ("array", Value::Array(items)) => {
            count("minItems").is_none_or(|m| items.len() >= m)
                && count("maxItems").is_none_or(|m| items.len() <= m)
                && items
                    .iter()
                    .all(|item| s.get("items").is_none_or(|i| matches(i, item)))
        }
        ("object", Value::Object(fields)) => {
            let listed = s.get("properties").and_then(Value::as_object);
            let required = s.get("required").and_then(Value::as_array);
            let additional = s.get("additionalProperties").unwrap_or(&Value::Bool(true));
            required.is_none_or(|r| r.iter().all(|k| fields.contains_key(k.as_str().unwrap())))
                && fields
                    .iter()
                    .all(|(k, v)| match listed.and_then(|l| l.get(k)) {
                        Some(property) => matches(property, v),
                        None => matches(additional, v),
                    })
        }
        _ => false,
    })
}

/// Parses an answer and checks it against `schema`, with a message that shows the text.
fn check(text: &str, schema: &Value) {
    let value: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("the answer does not parse ({e}): {text:?}"));
    assert!(matches(schema, &value), "{value} does not match {schema}");
}

fn crate_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 30},
            "version": {"type": "integer"},
            "stable": {"type": "boolean"},
            "kind": {"enum": ["library", "binary"]},
            "keywords": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}
        },
        "required": ["name", "version", "stable", "kind"],
        "additionalProperties": false
    })
}

const QUESTION: &str =
    "Describe a Rust crate as JSON with the fields name, version, stable, kind and keywords.";

#[test]
fn the_model_alone_does_not_write_json() {
    let mut model = assistant_model();
    let (text, _) = chat(
        &mut model,
        QUESTION,
        &ChatOptions {
            max_tokens: 100,
            ..options(SamplingParams::greedy(), ResponseFormat::Text)
        },
    );
    assert!(
        serde_json::from_str::<Value>(&text).is_err(),
        "the control case parses already: {text:?}"
    );
}

#[test]
fn the_model_follows_a_schema_greedy_and_sampled() {
    let mut model = assistant_model();
    let schema = crate_schema();
    let format = ResponseFormat::JsonSchema(schema.clone());
    let mut answers = Vec::new();
    for sampling in [SamplingParams::greedy()]
        .into_iter()
        .chain((1..=4).map(|seed| SamplingParams {
            seed,
            ..SamplingParams::default()
        }))
    {
        let (text, stop) = chat(&mut model, QUESTION, &options(sampling, format.clone()));
        assert_eq!(
            stop,
            StopReason::EndOfTurn,
            "it ends after the value: {text:?}"
        );
        check(&text, &schema);
        answers.push(text);
    }
    answers.dedup();
    assert!(
        answers.len() > 1,
        "sampling varies the answers: {answers:?}"
    );
}

#[test]
fn the_model_writes_a_json_object() {
    let mut model = assistant_model();
    for sampling in [SamplingParams::greedy(), hot(3)] {
        let (text, stop) = chat(
            &mut model,
            QUESTION,
            &ChatOptions {
                max_tokens: 200,
                ..options(sampling, ResponseFormat::JsonObject)
            },
        );
        // A free object can go on for ever; when it ends, it parses.
        if stop == StopReason::EndOfTurn {
            let value: Value = serde_json::from_str(&text).expect("parses");
            assert!(value.is_object(), "{text}");
        } else {
            assert_eq!(stop, StopReason::MaxTokens);
            assert!(
                text.starts_with('{') || text.trim_start().starts_with('{'),
                "{text:?}"
            );
        }
    }
}

/// Sampled hot, a random model writes whatever the schema allows: every answer that ends
/// parses and matches, for schemas that use every supported keyword.
#[test]
fn random_models_sampled_hot_stay_within_the_schema() {
    let schemas = [
        crate_schema(),
        json!({"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 1, "maxItems": 4}),
        json!({"anyOf": [
            {"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"], "additionalProperties": false},
            {"type": "string", "maxLength": 5}
        ]}),
        json!({"type": "object", "properties": {
            "n": {"type": "number"},
            "nested": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}
        }, "required": ["nested"], "additionalProperties": false}),
        json!({"enum": ["one", "two", 3, null, [1, 2]]}),
    ];
    for name in ["tiny-llama", "tiny-qwen3"] {
        let mut model = Model::load(&fixture(name), &LoadOptions::default()).unwrap();
        let prompt: Vec<u32> = (0..12u32).map(|i| i * 37 % 400 + 3).collect();
        let mut ended = 0;
        for schema in &schemas {
            for seed in 0..6 {
                let options = options(hot(seed), ResponseFormat::JsonSchema(schema.clone()));
                let (tokens, stats) = model
                    .generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))
                    .unwrap();
                if stats.stop_reason != StopReason::EndOfTurn {
                    continue;
                }
                ended += 1;
                let text = model.tokenizer().unwrap().decode(&tokens, true).unwrap();
                check(&text, schema);
            }
        }
        assert!(ended >= 20, "{name}: only {ended} of 30 answers ended");
    }
}

/// Drafts are verified under the constraint too: speculative decoding writes the same
/// answer, greedy and sampled, on a prompt that repeats (so drafts are tried).
#[test]
fn speculative_decoding_keeps_the_constraint() {
    let mut model = Model::load(&fixture("tiny-llama"), &LoadOptions::default()).unwrap();
    let tokenizer_prompt = "{\"a\": [1, 2, 3], \"a\": [1, 2, 3], \"a\": [1, 2, 3], \"a\": [1, 2";
    let prompt = model.tokenize(tokenizer_prompt).unwrap();
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "integer"}, "maxItems": 6}
    }, "required": ["a"], "additionalProperties": false});
    let mut drafted = 0;
    for sampling in [SamplingParams::greedy(), hot(5), hot(6)] {
        let run = |model: &mut Model, speculative| {
            let options = ChatOptions {
                speculative,
                ..options(sampling, ResponseFormat::JsonSchema(schema.clone()))
            };
            model
                .generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))
                .unwrap()
        };
        let (plain, plain_stats) = run(&mut model, Some(false));
        let (fast, fast_stats) = run(&mut model, Some(true));
        assert_eq!(fast, plain, "{sampling:?}");
        assert_eq!(fast_stats.stop_reason, plain_stats.stop_reason);
        drafted += fast_stats.drafted_tokens;
        if plain_stats.stop_reason == StopReason::EndOfTurn {
            check(
                &model.tokenizer().unwrap().decode(&plain, true).unwrap(),
                &schema,
            );
        }
    }
    assert!(drafted > 0, "no draft was tried");
}

#[test]
fn a_schema_with_an_unsupported_keyword_is_refused_before_generating() {
    let mut model = assistant_model();
    let format = ResponseFormat::JsonSchema(json!({
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email"}}
    }));
    let err = model
        .chat(
            &[ChatMessage::new(Role::User, "Hi")],
            &options(SamplingParams::greedy(), format.clone()),
            &mut |_| panic!("nothing is generated"),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"format\"") && err.contains("\"email\""),
        "{err}"
    );
    assert!(format.validate().is_err());
}
