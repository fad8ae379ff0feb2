//! LFM2 beyond its logits (those are in `reference.rs`), on the tiny random Lfm2ForCausalLM of
//! `tests/fixtures/engine/generate_lfm2.py`: its ChatML-like chat template renders and
//! tokenizes as transformers does and stops on `<|im_end|>`; the convolution state kept per
//! position follows the cache, so regenerating, editing the last message, switching
//! conversations A, B, A (the KV store) and rejected drafts (a rewind) each give the answer a
//! freshly loaded model gives, on the f32 safetensors and on its Q4NX conversion (f16 state);
//! its parameters are counted as the model card counts them; malformed configs and missing
//! convolution weights are refused in words; llama.cpp's lfm2 GGUF of it links and imports as
//! the original, and llama.cpp on that file agrees with Hearth on it.

use crate::common;

use std::ops::ControlFlow;
use std::path::Path;

use common::logits::spread_relative_distance;
use common::{copy_fixture, fixture};
use hearth_engine::{
    ChatMessage, ChatOptions, GenerationStats, LoadOptions, Model, Role, SamplingParams,
};
use q4nx::ConvertOptions;
use serde_json::Value;

const NAME: &str = "tiny-lfm2";

#[test]
fn chat_template_renders_and_tokenizes_as_transformers() {
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
    let tokenizer: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture(NAME).join("tokenizer.json")).unwrap(),
    )
    .unwrap();
    let im_end = tokenizer["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["content"] == "<|im_end|>")
        .map(|t| t["id"].as_u64().unwrap() as u32)
        .unwrap();
    assert!(
        model.stop_ids().contains(&im_end),
        "stops on <|im_end|>: {:?}",
        model.stop_ids()
    );
    assert_eq!(model.info().family, "lfm2");
}

/// The tiny model's parameters as transformers counts them (`model.num_parameters()`, the
/// tied head once): embedding 512x64, two conv layers (in_proj 192x64, kernel 64x3, out_proj
/// 64x64), two attention layers (q 64x64, k and v 32x64, out 64x64, q/k norms 16), feed-forward
/// 3x128x64 and two norms of 64 in every layer, the final norm.
#[test]
fn parameters_are_counted_as_transformers_counts_them() {
    let model = Model::load(&fixture(NAME), &LoadOptions::default()).expect("model loads");
    let conv = 192 * 64 + 64 * 3 + 64 * 64;
    let attention = 64 * 64 + 2 * 32 * 64 + 64 * 64 + 2 * 16;
    let common = 3 * 128 * 64 + 2 * 64;
    let expected = 512 * 64 + 2 * conv + 2 * attention + 4 * common + 64;
    assert_eq!(model.info().parameter_count, expected);
}

/// The fixture and its Q4NX conversion (in `tmp`).
fn folders(tmp: &Path) -> [std::path::PathBuf; 2] {
    let q4 = tmp.join("q4nx");
    q4nx::convert(&fixture(NAME), &q4, &ConvertOptions::default(), &mut |_| {}).expect("converts");
    [fixture(NAME), q4]
}

fn load(dir: &Path, store: Option<u64>) -> Model {
    let options = LoadOptions {
        kv_store_bytes: store,
        ..LoadOptions::default()
    };
    Model::load(dir, &options).expect("model loads")
}

/// Sampled at temperature 1 with a seed, one pass per token unless `speculative`: any
/// difference in the logits would show in the tokens drawn.
fn sampled(seed: u64, speculative: bool) -> ChatOptions {
    ChatOptions {
        sampling: SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed,
        },
        max_tokens: 8,
        speculative: Some(speculative),
        ..ChatOptions::default()
    }
}

fn run(model: &mut Model, prompt: &[u32], options: &ChatOptions) -> (Vec<u32>, GenerationStats) {
    model
        .generate(prompt, options, &mut |_| ControlFlow::Continue(()))
        .expect("generate")
}

/// The answer a freshly loaded model (nothing cached, nothing kept) gives to `prompt`.
fn cold(dir: &Path, prompt: &[u32], seed: u64) -> Vec<u32> {
    let (tokens, stats) = run(&mut load(dir, Some(0)), prompt, &sampled(seed, false));
    assert_eq!(stats.prefilled_tokens, prompt.len());
    tokens
}

/// `len` ordinary token ids from `first` on (past the 9 special tokens).
fn conversation(first: u32, len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| 9 + (first + i * 7) % 500).collect()
}

#[test]
fn regenerating_editing_and_switching_answer_as_a_fresh_model() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in folders(tmp.path()) {
        let mut model = load(&dir, None);
        let what = dir.display();

        // Regenerate: only the last prompt token runs, the answer is a cold run's.
        let prompt = conversation(5, 40);
        run(&mut model, &prompt, &sampled(1, false));
        let (again, stats) = run(&mut model, &prompt, &sampled(2, false));
        assert_eq!(stats.prefilled_tokens, 1, "{what}");
        assert_eq!(again, cold(&dir, &prompt, 2), "{what}: regenerated");

        // Edit the last message: read from its first changed token.
        let edited = [&prompt[..36], &[21, 25, 26]].concat();
        let (tokens, stats) = run(&mut model, &edited, &sampled(3, false));
        assert_eq!(stats.prefilled_tokens, 3, "{what}");
        assert_eq!(tokens, cold(&dir, &edited, 3), "{what}: edited");

        // A, B, A: B shares nothing; A comes back from the store with its state.
        let a = conversation(3, 30);
        let b = conversation(200, 26);
        let (answer_a, _) = run(&mut model, &a, &sampled(4, false));
        let (_, stats) = run(&mut model, &b, &sampled(5, false));
        assert_eq!(stats.prefilled_tokens, b.len(), "{what}");
        assert!(model.kv_store_bytes() > 0, "{what}: A was kept");
        let a_again = [&a[..], &answer_a, &[30, 31, 32]].concat();
        let (tokens, stats) = run(&mut model, &a_again, &sampled(6, false));
        assert_eq!(stats.prefilled_tokens, 1 + 3, "{what}");
        assert_eq!(tokens, cold(&dir, &a_again, 6), "{what}: A again");
    }
}

#[test]
fn rejected_drafts_rewind_to_the_answer_of_a_fresh_model() {
    let tmp = tempfile::tempdir().unwrap();
    for dir in folders(tmp.path()) {
        // Greedy on a random model falls into loops, which prompt lookup drafts; where the
        // loop changes, drafts are rejected and the cache (and the convolution state) is
        // rewound past them.
        let mut model = load(&dir, None);
        let (mut drafted, mut rejected) = (0, 0);
        for first in [3, 40, 77, 150, 260, 333] {
            let phrase = conversation(first, 6);
            let prompt = [&phrase[..], &phrase[..], &phrase[..3]].concat();
            let options = |speculative| ChatOptions {
                sampling: SamplingParams::greedy(),
                max_tokens: 24,
                speculative: Some(speculative),
                ..ChatOptions::default()
            };
            let (tokens, stats) = run(&mut model, &prompt, &options(true));
            drafted += stats.drafted_tokens;
            rejected += stats.drafted_tokens - stats.accepted_drafts;
            let (want, _) = run(&mut load(&dir, Some(0)), &prompt, &options(false));
            assert_eq!(tokens, want, "{}: prompt {prompt:?}", dir.display());
        }
        assert!(
            drafted > 0 && rejected > 0,
            "drafts ran: {drafted}, {rejected} rejected"
        );
        eprintln!("{}: {drafted} drafted, {rejected} rejected", dir.display());
    }
}

#[test]
fn q4nx_conversion_keeps_the_convolution_kernels_dense_and_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let [_, q4] = folders(tmp.path());
    let weights = q4nx::Weights::open(&q4).unwrap();
    match weights.get("model.layers.0.conv.conv.weight").unwrap() {
        q4nx::Tensor::Dense(t) => assert_eq!(t.shape, [64, 1, 3]),
        other => panic!("the kernel is stored as {}", other.describe()),
    }
    q4nx::validate(
        &weights,
        &q4nx::ModelConfig::from_path(&q4.join("config.json")).unwrap(),
    )
    .expect("the converted model is complete");
    let model = load(&q4, None);
    assert_eq!(model.info().weight_format, "q4nx");
    // Keys and values of the 2 attention layers (2 heads of 16, positions in blocks of 16) and
    // the 64 channels of the 2 convolution layers, at f16, for the 128-token context.
    assert_eq!(
        model.kv_cache_bytes(),
        2 * (2 * 2 * 128 * 16) * 2 + 2 * 128 * 64 * 2
    );
}

/// Writes `config.json` of a copy of the fixture changed by `edit`, and the load's error.
fn load_error(edit: impl FnOnce(&mut Value)) -> String {
    let dir = copy_fixture(NAME);
    let path = dir.path().join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(&path, config.to_string()).unwrap();
    match Model::load(dir.path(), &LoadOptions::default()) {
        Ok(_) => panic!("a broken LFM2 config loads: {config}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_configs_and_missing_weights_are_refused_in_words() {
    let e = load_error(|c| c["layer_types"] = serde_json::json!(["conv", "conv", "bogus", "conv"]));
    assert!(e.contains("\"bogus\""), "{e}");
    let e = load_error(|c| c["layer_types"] = serde_json::json!(["conv"]));
    assert!(e.contains("lists 1 layers"), "{e}");
    let e = load_error(|c| c["conv_L_cache"] = serde_json::json!(0));
    assert!(e.contains("conv_L_cache is 0"), "{e}");
    // A wider convolution than the weights hold: the kernel's shape is named.
    let e = load_error(|c| c["conv_L_cache"] = serde_json::json!(4));
    assert!(e.contains("model.layers.0.conv.conv.weight"), "{e}");
    // A convolution where the file has attention: the missing tensor is named.
    let e = load_error(|c| {
        c["layer_types"] = serde_json::json!(["conv", "conv", "conv", "full_attention"])
    });
    assert!(e.contains("model.layers.1.conv"), "{e}");
}

fn tiny_lfm2_gguf() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf/tiny-lfm2-f32.gguf")
}

/// llama.cpp's lfm2 GGUF of the fixture (`tiny-lfm2-f32.gguf`: KV head counts per layer, 0 for
/// a convolution layer; kernels squeezed to [hidden, width]; the final norm as
/// `token_embd_norm`; the derived feed-forward width) reads as the original model: linked
/// where it lies it computes transformers' logits with its f32 weights (up to the f16 keys,
/// values and convolution state a GGUF model keeps: measured 2.7e-3 of the logits' spread),
/// imported it is the Q4NX model `hearth convert` makes of the safetensors (the same bytes in
/// every tensor but the head, which the import keeps at 8 bits: 0.33 logit std apart, where
/// 4-bit weights put both 1.7 from transformers on this random 64-wide model), and its
/// tokenizer, rebuilt from the GGUF's vocabulary, gives the fixture's ids.
#[test]
fn the_lfm2_gguf_links_and_imports_as_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let (linked, imported_dir) = (tmp.path().join("linked"), tmp.path().join("imported"));
    q4nx::gguf::link_gguf(&tiny_lfm2_gguf(), &linked, &mut |_| {}).expect("links");
    q4nx::gguf::import_gguf(&tiny_lfm2_gguf(), &imported_dir, Some(1), &mut |_| {})
        .expect("imports");
    let original = q4nx::ModelConfig::from_path(&fixture(NAME).join("config.json")).unwrap();
    let reference = common::reference(NAME);
    let fixture_model = Model::load(&fixture(NAME), &LoadOptions::default()).unwrap();
    let text = "<|im_start|>user\nGrüße aus Köln, 你好 🙂<|im_end|>\n<|im_start|>assistant\n";
    let want = fixture_model
        .tokenizer()
        .unwrap()
        .encode(text, true)
        .unwrap();
    let [_, converted] = folders(tmp.path());
    let mut logits = Vec::new();
    for dir in [&linked, &imported_dir, &converted] {
        let mut model = Model::load(dir, &LoadOptions::default()).expect("loads");
        let c = model.config().clone();
        assert_eq!(c.family, q4nx::Family::Lfm2);
        assert_eq!(c.lfm2, original.lfm2);
        assert_eq!(
            (c.intermediate_size, c.num_key_value_heads, c.head_dim),
            (
                original.intermediate_size,
                original.num_key_value_heads,
                original.head_dim
            )
        );
        assert!(c.tie_word_embeddings && (c.rms_norm_eps - original.rms_norm_eps).abs() < 1e-9);
        assert_eq!(model.tokenizer().unwrap().encode(text, true).unwrap(), want);
        logits.push(model.logits(&reference.tokens).unwrap());
    }
    let linked = spread_relative_distance(&logits[0], &reference.logits);
    let imported = spread_relative_distance(&logits[1], &logits[2]);
    eprintln!(
        "tiny-lfm2 GGUF: linked {linked:.2e} logit std from transformers; imported \
         {imported:.2e} from the safetensors' Q4NX conversion"
    );
    assert!(linked < 0.01, "{linked}");
    // Every tensor but the head holds the same bytes as the conversion's: the import keeps an
    // f32 head at 8 bits (the conversion makes Q4_1 tiles of it), hence the logits' distance.
    let (a, b) = (
        q4nx::Weights::open(&imported_dir).unwrap(),
        q4nx::Weights::open(&converted).unwrap(),
    );
    assert_eq!(a.names(), b.names());
    let bytes = |t: q4nx::Tensor<'_>| -> Vec<u8> {
        match t {
            q4nx::Tensor::Dense(t) => t.bytes.to_vec(),
            q4nx::Tensor::Q4_1(t) | q4nx::Tensor::Q8(t) => t.bytes.to_vec(),
            other => panic!("{} in a Q4NX file", other.describe()),
        }
    };
    for name in a.names() {
        match name {
            "lm_head.weight" => assert!(matches!(a.get(name).unwrap(), q4nx::Tensor::Q8(_))),
            _ => assert!(
                bytes(a.get(name).unwrap()) == bytes(b.get(name).unwrap()),
                "{name}"
            ),
        }
    }
    assert!(imported < 0.5, "{imported}");
}

/// llama.cpp (PyPI `llama-cpp-python`, `tests/fixtures/gguf/llama_cpp_logits.py`) on
/// `tiny-lfm2-f32.gguf`, the fixture's weights in f32 as llama.cpp's converter lays out LFM2,
/// against Hearth on the same file linked where it lies: the same ids for a few strings (Hearth's
/// tokenizer rebuilt from the GGUF), the same top-1 token wherever llama.cpp's top-2 margin is
/// at least 0.3, and logits within 1% of their spread (both keep keys and values in f16;
/// measured 0.25%, mean KL 7e-8).
/// Needs `HEARTH_LLAMA_PYTHON`, as `llama_cpp_tiny.rs`; without it the test says SKIPPED.
#[test]
fn llama_cpp_on_the_same_weights_agrees() {
    use common::logits::{argmax, log_softmax, margin};
    let Some(python) = std::env::var_os("HEARTH_LLAMA_PYTHON") else {
        eprintln!("SKIPPED: HEARTH_LLAMA_PYTHON is not set (npm test sets it)");
        return;
    };
    let gguf_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf");
    let reference = common::reference(NAME);
    let texts = [
        "Hearth is a private, offline chat assistant.",
        "<|im_start|>user\nGrüße aus Köln, 你好 🙂<|im_end|>\n<|im_start|>assistant\n",
    ];
    let out = std::process::Command::new(python)
        .arg(gguf_dir.join("llama_cpp_logits.py"))
        .arg(tiny_lfm2_gguf())
        .arg(serde_json::to_string(&reference.tokens).unwrap())
        .arg(serde_json::to_string(&texts).unwrap())
        .output()
        .expect("run llama_cpp_logits.py");
    assert!(
        out.status.success(),
        "llama_cpp_logits.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Hearth on the same file, linked where it lies (its tokenizer rebuilt from the GGUF).
    let tmp = tempfile::tempdir().unwrap();
    let linked = tmp.path().join("linked");
    q4nx::gguf::link_gguf(&tiny_lfm2_gguf(), &linked, &mut |_| {}).expect("links");
    let mut model = Model::load(&linked, &LoadOptions::default()).expect("model loads");
    let tokenizer = model.tokenizer().expect("a tokenizer");
    for (text, ids) in texts.iter().zip(theirs["ids"].as_array().unwrap()) {
        let want: Vec<u32> = serde_json::from_value(ids.clone()).unwrap();
        assert_eq!(tokenizer.encode(text, true).unwrap(), want, "{text:?}");
    }
    let ours = model.logits(&reference.tokens).unwrap();
    let theirs: Vec<Vec<f32>> = serde_json::from_value(theirs["logits"].clone()).unwrap();
    assert_eq!(ours.len(), theirs.len());
    let all: Vec<f64> = theirs.iter().flatten().map(|&v| f64::from(v)).collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let spread = (all.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / all.len() as f64).sqrt();
    let (mut distance, mut kl) = (0.0f64, 0.0);
    for (pos, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        if margin(b) >= 0.3 {
            assert_eq!(argmax(a), argmax(b), "position {pos}: top-1 differs");
        }
        for (x, y) in a.iter().zip(b) {
            distance = distance.max(f64::from((x - y).abs()) / spread);
        }
        let (la, lb) = (log_softmax(a), log_softmax(b));
        kl += lb
            .iter()
            .zip(&la)
            .map(|(p, q)| p.exp() * (p - q))
            .sum::<f64>();
    }
    let kl = kl / ours.len() as f64;
    eprintln!("tiny-lfm2: Hearth against llama.cpp {distance:.2e} of the spread, mean KL {kl:.2e}");
    assert!(distance < 0.01 && kl < 1e-4, "{distance}, {kl}");
}
