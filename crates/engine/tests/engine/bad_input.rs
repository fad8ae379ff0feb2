//! Bad input gets a clear error, never a panic: missing or inconsistent files, token ids out of
//! range, an empty prompt, a full context.

use crate::common;

use std::ops::ControlFlow;

use common::{copy_fixture, fixture};
use hearth_engine::{ChatMessage, ChatOptions, Error, LoadOptions, Model, Role};

fn load(dir: &std::path::Path) -> Result<Model, Error> {
    Model::load(dir, &LoadOptions::default())
}

fn message(err: Error) -> String {
    err.to_string()
}

#[test]
fn a_missing_folder_says_so() {
    let err = message(load("no/such/model".as_ref()).unwrap_err());
    assert!(
        err.contains("does not exist") && err.contains("no/such/model"),
        "{err}"
    );
}

#[test]
fn a_folder_without_config_json_names_the_file() {
    let dir = copy_fixture("tiny-llama");
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("config.json"), "{err}");
}

#[test]
fn a_folder_without_weights_says_so() {
    let dir = copy_fixture("tiny-llama");
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(
        err.contains("model.safetensors") || err.contains("model.q4nx"),
        "{err}"
    );
}

#[test]
fn weights_that_disagree_with_the_config_name_the_tensor_or_field() {
    let dir = copy_fixture("tiny-llama");
    let path = dir.path().join("config.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"intermediate_size\": 128", "\"intermediate_size\": 96"),
    )
    .unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("mlp") || err.contains("intermediate"), "{err}");
}

#[test]
fn a_truncated_weight_file_is_an_error() {
    let dir = copy_fixture("tiny-qwen3");
    let path = dir.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("model.safetensors"), "{err}");
}

#[test]
fn a_malformed_tokenizer_json_names_the_file() {
    let dir = copy_fixture("tiny-qwen3");
    std::fs::write(dir.path().join("tokenizer.json"), "{ not json").unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("tokenizer.json"), "{err}");
}

#[test]
fn a_tokenizer_larger_than_the_vocabulary_is_inconsistent() {
    let dir = copy_fixture("tiny-llama");
    std::fs::copy(
        fixture("qwen3-tokenizer").join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("different models"), "{err}");
}

#[test]
fn a_malformed_tokenizer_config_names_the_file() {
    let dir = copy_fixture("tiny-qwen3");
    std::fs::write(dir.path().join("tokenizer_config.json"), "[1, 2").unwrap();
    let err = message(load(dir.path()).unwrap_err());
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

#[test]
fn without_a_tokenizer_token_ids_still_work_and_text_says_what_to_do() {
    let dir = copy_fixture("tiny-llama");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let mut model = load(dir.path()).expect("loads without a tokenizer");
    assert!(!model.info().has_tokenizer);
    assert_eq!(model.logits(&[1, 2, 3]).unwrap().len(), 3);
    let err = model
        .chat(
            &[ChatMessage::new(Role::User, "hi")],
            &ChatOptions::default(),
            &mut |_| ControlFlow::Continue(()),
        )
        .unwrap_err();
    assert!(matches!(err, Error::NoTokenizer { .. }), "{err}");
    assert!(err.to_string().contains("--tokens"), "{err}");
}

#[test]
fn token_ids_out_of_range_are_rejected() {
    let mut model = load(&fixture("tiny-qwen3")).unwrap();
    let err = model.logits(&[1, 512, 3]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::TokenOutOfRange {
                token: 512,
                position: 1,
                vocab_size: 512
            }
        ),
        "{err}"
    );
    let err = model
        .generate(&[u32::MAX], &ChatOptions::default(), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::TokenOutOfRange { .. }), "{err}");
}

#[test]
fn an_empty_prompt_is_rejected() {
    let mut model = load(&fixture("tiny-qwen3")).unwrap();
    assert!(matches!(model.logits(&[]).unwrap_err(), Error::EmptyPrompt));
    let err = model
        .generate(&[], &ChatOptions::default(), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::EmptyPrompt));
}

#[test]
fn a_prompt_longer_than_the_context_is_rejected() {
    let options = LoadOptions {
        context_length: Some(8),
        ..LoadOptions::default()
    };
    let mut model = Model::load(&fixture("tiny-qwen3"), &options).unwrap();
    let err = model.logits(&[1; 9]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ContextFull {
                needed: 9,
                limit: 8
            }
        ),
        "{err}"
    );
    let err = model
        .generate(&[1; 9], &ChatOptions::default(), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(err.to_string().contains("context is full"), "{err}");
    assert_eq!(
        model.logits(&[1; 8]).unwrap().len(),
        8,
        "exactly full still works"
    );
}

#[test]
fn invalid_sampling_settings_are_rejected_before_any_work() {
    let mut model = load(&fixture("tiny-qwen3")).unwrap();
    let mut options = ChatOptions::default();
    options.sampling.top_p = 0.0;
    let err = model
        .generate(&[1, 2], &options, &mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidSampling { .. }), "{err}");
}

#[test]
fn a_chat_template_that_raises_reports_its_message() {
    let dir = copy_fixture("tiny-llama");
    std::fs::write(
        dir.path().join("chat_template.jinja"),
        "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message') }}{% endif %}",
    )
    .unwrap();
    let model = load(dir.path()).unwrap();
    let err = model
        .tokenize_chat(
            &[ChatMessage::new(Role::Assistant, "x")],
            &ChatOptions::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("must start with a user message"),
        "{err}"
    );
}

#[test]
fn context_lengths_beyond_the_model_or_memory_are_refused_with_a_plain_message() {
    let with_context = |n: usize| LoadOptions {
        context_length: Some(n),
        ..LoadOptions::default()
    };
    // The fixture was trained for 128 positions.
    for n in [0, 129, 100_000_000, usize::MAX] {
        let err = Model::load(&fixture("tiny-qwen3"), &with_context(n)).unwrap_err();
        assert!(matches!(err, Error::InvalidLoadOption { .. }), "{n}: {err}");
    }
    assert!(Model::load(&fixture("tiny-qwen3"), &with_context(128)).is_ok());

    // A model that claims a huge trained length is still bounded by memory.
    let dir = copy_fixture("tiny-qwen3");
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["max_position_embeddings"] = serde_json::json!(1u64 << 50);
    std::fs::write(&path, config.to_string()).unwrap();
    let err = Model::load(dir.path(), &with_context(1 << 49)).unwrap_err();
    assert!(matches!(err, Error::InvalidLoadOption { .. }), "{err}");
    assert!(err.to_string().contains("KV cache"), "{err}");
}

/// `MemAvailable` of `/proc/meminfo`, in bytes (None off Linux).
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Review N9: a KV cache the machine cannot hold was a panic when its map failed (and a kill
/// by the kernel later when it did not). Now the load fails with a message naming the size
/// and what to do.
#[test]
fn a_kv_cache_larger_than_the_available_memory_is_refused_naming_its_size() {
    let dir = copy_fixture("tiny-qwen3");
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    config["max_position_embeddings"] = serde_json::json!(1u64 << 40);
    std::fs::write(&path, config.to_string()).unwrap();
    let field = |name: &str| config[name].as_u64().unwrap();
    let head_dim = config["head_dim"]
        .as_u64()
        .unwrap_or_else(|| field("hidden_size") / field("num_attention_heads"));
    // Keys and values at 4 bytes: the largest context the 64 GiB limit lets through, whose
    // cache (32 or 64 GiB) is more than this machine has.
    let per_position = field("num_hidden_layers") * field("num_key_value_heads") * head_dim * 2 * 4;
    let context = (64u64 << 30) / per_position;
    if available_memory().is_none_or(|free| free >= 32 << 30) {
        eprintln!("skipped: this machine has 32 GiB or more available, or says nothing");
        return;
    }
    let options = LoadOptions {
        context_length: Some(context as usize),
        ..LoadOptions::default()
    };
    let err = Model::load(dir.path(), &options).expect_err("the cache does not fit");
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidLoadOption { .. }), "{text}");
    assert!(
        text.contains("KV cache") && text.contains("bytes") && text.contains("shorter context"),
        "the message names the cache, its size and what to do: {text}"
    );
}
