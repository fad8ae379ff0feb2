//! Generation behaviour on the tiny fixture models: reproducible sampling, cancellation, chat
//! streaming, reuse of the cached prefix, the progress of a long prefill, and a context that
//! fills up.

use crate::common;

use std::ops::ControlFlow;

use common::{fixture, reference};
use hearth_engine::{
    ChatMessage, ChatOptions, LoadOptions, Model, PrefillProgress, Role, SamplingParams,
    StopReason, WeightsMemory,
};

fn load(name: &str) -> Model {
    Model::load(&fixture(name), &LoadOptions::default()).expect("model loads")
}

fn sampled(seed: u64, max_tokens: usize) -> ChatOptions {
    ChatOptions {
        sampling: SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.1,
            seed,
        },
        max_tokens,
        enable_thinking: None,
        speculative: None,
        format: Default::default(),
    }
}

fn run(model: &mut Model, prompt: &[u32], options: &ChatOptions) -> Vec<u32> {
    model
        .generate(prompt, options, &mut |_| ControlFlow::Continue(()))
        .expect("generate")
        .0
}

#[test]
fn a_seed_makes_sampling_reproducible() {
    let mut model = load("tiny-qwen3");
    let prompt = [10, 20, 30, 40];
    let a = run(&mut model, &prompt, &sampled(7, 12));
    let b = run(&mut model, &prompt, &sampled(7, 12));
    let c = run(&mut model, &prompt, &sampled(8, 12));
    assert_eq!(a, b, "same seed, same tokens");
    assert_ne!(a, c, "another seed should sample another continuation");
}

#[test]
fn the_callback_cancels_at_any_token() {
    let mut model = load("tiny-qwen3-untied");
    let mut seen = 0;
    let (tokens, stats) = model
        .generate(&[5, 6, 7], &sampled(1, 50), &mut |_| {
            seen += 1;
            if seen == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .expect("generate");
    assert_eq!(tokens.len(), 3);
    assert_eq!(stats.stop_reason, StopReason::Cancelled);
    assert_eq!(stats.generated_tokens, 3);
}

#[test]
fn reusing_the_cached_prefix_gives_the_same_tokens_as_a_fresh_model() {
    let reference = reference("tiny-qwen3");
    let long: Vec<u32> = reference.tokens[..20].to_vec();
    let mut warm = load("tiny-qwen3");
    run(&mut warm, &long[..12], &sampled(3, 4)); // caches a prefix of `long`
    let reused = run(&mut warm, &long, &sampled(3, 8));
    let fresh = run(&mut load("tiny-qwen3"), &long, &sampled(3, 8));
    assert_eq!(reused, fresh);
}

/// Generates after `prompt` and returns what the prefill reported.
fn readings(model: &mut Model, prompt: &[u32], max_tokens: usize) -> Vec<PrefillProgress> {
    let mut seen = Vec::new();
    model
        .generate_text(
            prompt,
            &sampled(5, max_tokens),
            &mut |progress| {
                seen.push(progress);
                ControlFlow::Continue(())
            },
            &mut |_| ControlFlow::Continue(()),
        )
        .expect("generate");
    seen
}

/// `(done, total)` pairs, for short assertions.
fn pairs(readings: &[PrefillProgress]) -> Vec<(usize, usize)> {
    readings.iter().map(|r| (r.done, r.total)).collect()
}

#[test]
fn a_long_prefill_reports_its_progress_chunk_by_chunk() {
    // Chunks run 64 tokens at a time: 120 tokens are read in two, reported at 0, 64 and 120.
    let mut model = load("tiny-qwen3");
    let prompt: Vec<u32> = (0..120).map(|i| 1 + (i * 7) % 500).collect();
    assert_eq!(
        pairs(&readings(&mut model, &prompt, 1)),
        [(0, 120), (64, 120), (120, 120)]
    );
}

#[test]
fn a_cached_prefix_is_not_read_again_nor_counted() {
    // With max_tokens 1 nothing generated is fed, so the cache holds the first 50 tokens.
    let mut model = load("tiny-qwen3");
    let prompt: Vec<u32> = (0..120).map(|i| 1 + (i * 11) % 500).collect();
    readings(&mut model, &prompt[..50], 1);
    let read = readings(&mut model, &prompt, 1);
    assert_eq!(
        pairs(&read),
        [(0, 70), (64, 70), (70, 70)],
        "only the 70 tokens after the cached 50 are read"
    );
    // The same prompt again: only its last token runs (its logits choose the next token).
    assert_eq!(pairs(&readings(&mut model, &prompt, 1)), [(0, 1), (1, 1)]);
}

#[test]
fn stopping_while_the_prompt_is_read_generates_nothing() {
    let mut model = load("tiny-qwen3");
    let prompt: Vec<u32> = (0..120).map(|i| 1 + (i * 13) % 500).collect();
    let mut seen = Vec::new();
    let mut texts = 0;
    let stats = model
        .generate_text(
            &prompt,
            &sampled(5, 8),
            &mut |progress| {
                seen.push(progress.done);
                if progress.done >= 64 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
            &mut |_| {
                texts += 1;
                ControlFlow::Continue(())
            },
        )
        .expect("generate");
    assert_eq!(seen, [0, 64], "the second chunk never runs");
    assert_eq!(stats.stop_reason, StopReason::Cancelled);
    assert_eq!((stats.generated_tokens, texts), (0, 0));
    assert_eq!(stats.prefilled_tokens, 64, "the receipt counts what ran");
    // What was read stays in the cache: the next turn reads only the rest.
    assert_eq!(
        pairs(&readings(&mut model, &prompt, 1)),
        [(0, 56), (56, 56)]
    );
}

#[test]
fn chat_streams_the_text_of_the_generated_tokens() {
    let mut model = load("tiny-qwen3");
    let messages = [
        ChatMessage::new(Role::System, "Be brief."),
        ChatMessage::new(Role::User, "Grüße! 你好 🙂"),
    ];
    let options = sampled(11, 24);
    let mut text = String::new();
    let stats = model
        .chat(&messages, &options, &mut |piece| {
            text.push_str(piece);
            ControlFlow::Continue(())
        })
        .expect("chat");
    let prompt = model.tokenize_chat(&messages, &options).expect("tokenize");
    assert_eq!(stats.prompt_tokens, prompt.len());
    let tokens = run(&mut model, &prompt, &options);
    let answer: Vec<u32> = tokens
        .iter()
        .copied()
        .filter(|t| !model.stop_ids().contains(t))
        .collect();
    let decoded = model.tokenizer().unwrap().decode(&answer, true).unwrap();
    assert_eq!(
        text, decoded,
        "streamed pieces add up to the decoded answer"
    );
    assert_eq!(stats.generated_tokens, tokens.len());
    assert!(stats.ttft_secs >= stats.prefill_secs);
}

#[test]
fn chat_renders_the_template_from_chat_template_jinja() {
    let model = load("tiny-llama");
    let text = model
        .render_chat(
            &[ChatMessage::new(Role::User, "Hi")],
            &ChatOptions::default(),
        )
        .expect("render");
    assert_eq!(
        text,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        model.stop_ids(),
        &[0, 2],
        "<|endoftext|> from config.json, <|im_end|> from the files"
    );
}

#[test]
fn a_full_context_stops_generation_with_its_reason() {
    let reference = reference("tiny-llama");
    let options = LoadOptions {
        context_length: Some(12),
        ..LoadOptions::default()
    };
    let mut model = Model::load(&fixture("tiny-llama"), &options).expect("loads");
    let prompt = &reference.greedy_prompt; // 7 tokens; its greedy path has no stop id
    let greedy = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: 100,
        enable_thinking: None,
        speculative: None,
        format: Default::default(),
    };
    let (tokens, stats) = model
        .generate(prompt, &greedy, &mut |_| ControlFlow::Continue(()))
        .expect("generate");
    assert_eq!(stats.stop_reason, StopReason::ContextFull);
    assert_eq!(
        tokens.len(),
        12 - prompt.len() + 1,
        "fills every position, then one last token"
    );
    assert_eq!(tokens, reference.greedy_tokens[..tokens.len()]);
}

#[test]
fn model_info_describes_the_model() {
    let model = load("tiny-qwen3");
    let info = model.info();
    assert_eq!(info.name, "tiny-qwen3");
    assert_eq!(info.family, "qwen3");
    assert_eq!(info.weight_format, "safetensors");
    assert_eq!(
        info.context_length, 128,
        "min(4096, max_position_embeddings)"
    );
    assert!(info.has_tokenizer && info.has_chat_template);
    // embed 512x64 (tied) + 2 layers x (q 128x64, k 64x64, v 64x64, o 64x128, mlp 3x128x64,
    // norms 64+64+32+32) + final norm 64
    let layer = 128 * 64 + 2 * 64 * 64 + 64 * 128 + 3 * 128 * 64 + 64 + 64 + 32 + 32;
    assert_eq!(info.parameter_count, 512 * 64 + 2 * layer + 64);
}

#[test]
fn weights_copied_into_huge_pages_give_the_mapped_weights_tokens() {
    let reference = reference("tiny-llama");
    let greedy = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: 8,
        enable_thinking: None,
        speculative: None,
        format: Default::default(),
    };
    let mut copied = load("tiny-llama");
    assert_eq!(copied.weights_memory(), WeightsMemory::HugePages);
    let options = LoadOptions {
        map_weights: true,
        ..LoadOptions::default()
    };
    let mut mapped = Model::load(&fixture("tiny-llama"), &options).expect("loads");
    assert_eq!(mapped.weights_memory(), WeightsMemory::Mapped);
    let prompt = &reference.greedy_prompt;
    assert_eq!(
        run(&mut copied, prompt, &greedy),
        run(&mut mapped, prompt, &greedy)
    );
}
