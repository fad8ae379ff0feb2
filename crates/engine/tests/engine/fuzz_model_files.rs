//! Property tests (a fuzz target) for the text files of a model folder, which come with
//! downloaded and imported models: `config.json`, `generation_config.json`, `tokenizer.json` and
//! `tokenizer_config.json`. Each case starts from the tiny Llama fixture's real files and breaks
//! one of them: a field given another type, a huge, negative or fractional number, a field
//! removed, the file cut short, a byte changed. The folder must then load (and tokenize, render
//! its chat template and write a token) or fail with an error, never panic; a file that is no
//! longer JSON is named in the error.
//!
//! The cases are the same on every run (a fixed seed and count); for a long run with another
//! seed: `PROPTEST_CASES=20000 PROPTEST_RNG_SEED=7 cargo test -p hearth-engine --release
//! --test engine fuzz_model_files::`.

use crate::common;

use std::ops::ControlFlow;
use std::path::Path;

use common::copy_fixture;
use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role};
use proptest::prelude::*;
use serde_json::Value;

const FILES: [&str; 4] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
];

/// A JSON value of any type, including the sizes and signs that break arithmetic.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        Just(Value::from(0)),
        Just(Value::from(-1)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(1u64 << 40)),
        Just(Value::from(1e300)),
        Just(Value::from(0.5)),
        any::<u32>().prop_map(Value::from),
        "[a-z<|>]{0,8}".prop_map(Value::from),
        Just(serde_json::json!([])),
        Just(serde_json::json!([1, "a", null])),
        Just(serde_json::json!({})),
    ]
}

/// One way of breaking a file.
#[derive(Debug, Clone)]
enum Damage {
    /// The value at a path of object keys (chosen by index, wrapping) replaced.
    Replace(Vec<usize>, Value),
    /// The entry at a path of object keys removed.
    Remove(Vec<usize>),
    /// The file cut at a fraction (per mille) of its length.
    Truncate(u16),
    /// One byte at a fraction (per mille) of the length changed.
    Byte(u16, u8),
}

fn damage() -> impl Strategy<Value = Damage> {
    let path = prop::collection::vec(any::<usize>(), 1..4);
    prop_oneof![
        4 => (path.clone(), hostile_value()).prop_map(|(p, v)| Damage::Replace(p, v)),
        2 => path.prop_map(Damage::Remove),
        1 => (0u16..1000).prop_map(Damage::Truncate),
        1 => (0u16..1000, any::<u8>()).prop_map(|(at, b)| Damage::Byte(at, b)),
    ]
}

/// The object entry a path of indices leads to, as (parent object, key); it stops early at a
/// value that is not an object.
fn entry<'a>(
    mut value: &'a mut Value,
    path: &[usize],
) -> Option<(&'a mut serde_json::Map<String, Value>, String)> {
    for (depth, &i) in path.iter().enumerate() {
        let object = value.as_object_mut()?;
        if object.is_empty() {
            return None;
        }
        let key = object.keys().nth(i % object.len())?.clone();
        if depth + 1 == path.len() || !object[&key].is_object() {
            return Some((object, key));
        }
        value = object.get_mut(&key)?;
    }
    None
}

fn apply(bytes: &[u8], damage: &Damage) -> Vec<u8> {
    let at = |per_mille: u16| bytes.len() * usize::from(per_mille) / 1000;
    match damage {
        Damage::Truncate(p) => bytes[..at(*p)].to_vec(),
        Damage::Byte(p, b) => {
            let mut out = bytes.to_vec();
            if let Some(byte) = out.get_mut(at(*p)) {
                *byte = *b;
            }
            out
        }
        Damage::Replace(path, _) | Damage::Remove(path) => {
            let mut json: Value = serde_json::from_slice(bytes).expect("fixture files are JSON");
            if let Some((object, key)) = entry(&mut json, path) {
                match damage {
                    Damage::Replace(_, v) => {
                        object.insert(key, v.clone());
                    }
                    _ => {
                        object.remove(&key);
                    }
                }
            }
            serde_json::to_vec(&json).unwrap()
        }
    }
}

/// Loads the folder and, when it loads, uses it as a chat would; every failure is an `Err`.
fn load_and_use(dir: &Path) -> Result<(), String> {
    let options = LoadOptions {
        context_length: Some(64),
        threads: Some(1),
        ..LoadOptions::default()
    };
    let mut model = Model::load(dir, &options).map_err(|e| e.to_string())?;
    model.tokenize("Hello, world!").map_err(|e| e.to_string())?;
    let chat = ChatOptions {
        max_tokens: 1,
        ..ChatOptions::default()
    };
    model
        .chat(&[ChatMessage::new(Role::User, "Hi")], &chat, &mut |_| {
            ControlFlow::Continue(())
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

proptest! {
    #![proptest_config(common::fixed_proptest_config(192))]

    #[test]
    fn a_broken_model_file_is_an_error_never_a_panic(
        file in prop::sample::select(FILES.to_vec()),
        damage in damage(),
    ) {
        let dir = copy_fixture("tiny-llama");
        let path = dir.path().join(file);
        let broken = apply(&std::fs::read(&path).unwrap(), &damage);
        std::fs::write(&path, &broken).unwrap();
        let outcome = std::panic::catch_unwind(|| load_and_use(dir.path())).unwrap_or_else(|_| {
            panic!("{file} with {damage:?} panicked: {}", String::from_utf8_lossy(&broken))
        });
        // A file that is no longer JSON at all is named in the error.
        if serde_json::from_slice::<Value>(&broken).is_err() {
            let e = outcome.expect_err("a file that is not JSON is refused");
            prop_assert!(e.contains(file), "{file} with {damage:?}: the error does not name it: {e}");
        }
    }
}
