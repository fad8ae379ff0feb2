//! What was computed is kept (the KV store): switching conversations A, B, A, regenerating an
//! answer and editing the last message prefill only what changed, counted by
//! `GenerationStats::prefilled_tokens`, and every answer is the one a freshly loaded model
//! gives to the same prompt. A budget too small for a conversation falls back to a full
//! prefill, with the same answer.

use crate::common;

use std::ops::ControlFlow;

use common::fixture;
use hearth_engine::{ChatOptions, GenerationStats, LoadOptions, Model, SamplingParams};

/// tiny-qwen3 with its whole 128-token context and `store` bytes for kept sequences.
fn load(store: Option<u64>) -> Model {
    let options = LoadOptions {
        kv_store_bytes: store,
        ..LoadOptions::default()
    };
    Model::load(&fixture("tiny-qwen3"), &options).expect("model loads")
}

/// Sampled at temperature 1 with a seed: any difference in the logits would show in the
/// tokens drawn.
fn sampled(seed: u64) -> ChatOptions {
    ChatOptions {
        sampling: SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed,
        },
        max_tokens: 6,
        // One pass per token, so the counts below are the prompt's alone.
        speculative: Some(false),
        ..ChatOptions::default()
    }
}

fn run(model: &mut Model, prompt: &[u32], seed: u64) -> (Vec<u32>, GenerationStats) {
    model
        .generate(prompt, &sampled(seed), &mut |_| ControlFlow::Continue(()))
        .expect("generate")
}

/// The answer a freshly loaded model (nothing cached, nothing kept) gives to `prompt`.
fn cold(prompt: &[u32], seed: u64) -> Vec<u32> {
    let (tokens, stats) = run(&mut load(Some(0)), prompt, seed);
    assert_eq!(
        stats.prefilled_tokens,
        prompt.len(),
        "a cold run reads it all"
    );
    tokens
}

/// `len` token ids from `first` on, distinct from other conversations' (ids < 512, no 0: the
/// stop id).
fn conversation(first: u32, len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| 1 + (first + i * 7) % 500).collect()
}

/// The next prompt of a conversation: `prompt`, the `answer` it got, then `message`.
fn next_turn(prompt: &[u32], answer: &[u32], message: &[u32]) -> Vec<u32> {
    [prompt, answer, message].concat()
}

#[test]
fn switching_a_b_a_prefills_only_what_a_did_not_hold() {
    let mut model = load(None);
    let a = conversation(3, 40);
    let b = conversation(200, 36);
    let (answer_a, first) = run(&mut model, &a, 1);
    assert_eq!(first.prefilled_tokens, a.len());
    let (answer_b, second) = run(&mut model, &b, 2);
    assert_eq!(second.prefilled_tokens, b.len(), "B shares nothing with A");
    assert!(model.kv_store_bytes() > 0, "A was kept when B began");

    let again = next_turn(&a, &answer_a, &[9, 8, 7, 6, 5]);
    let (tokens, third) = run(&mut model, &again, 3);
    // The cache held A and its answer but the last token (generated, never run): that one and
    // the new message are read.
    assert_eq!(third.prefilled_tokens, 1 + 5);
    assert_eq!(third.prompt_tokens, again.len());
    assert_eq!(tokens, cold(&again, 3), "the answer of a cold run");

    // And back to B: it was kept when A came back.
    let b_again = next_turn(&b, &answer_b, &[4, 4]);
    let (tokens, fourth) = run(&mut model, &b_again, 4);
    assert_eq!(fourth.prefilled_tokens, 1 + 2);
    assert_eq!(tokens, cold(&b_again, 4));
}

#[test]
fn regenerating_an_answer_reads_one_token() {
    let mut model = load(None);
    let prompt = conversation(5, 50);
    let (first, _) = run(&mut model, &prompt, 7);
    let (again, stats) = run(&mut model, &prompt, 8);
    assert_eq!(stats.prefilled_tokens, 1, "only the last prompt token runs");
    assert_eq!(again, cold(&prompt, 8));
    let (same_seed, _) = run(&mut model, &prompt, 7);
    assert_eq!(same_seed, first, "the same seed draws the same answer");
}

#[test]
fn editing_the_last_message_reads_only_the_edited_message() {
    let mut model = load(None);
    let history = conversation(11, 30);
    let asked = next_turn(&history, &[], &[21, 22, 23, 24]);
    run(&mut model, &asked, 1);
    let edited = next_turn(&history, &[], &[21, 25, 26]);
    let (tokens, stats) = run(&mut model, &edited, 2);
    assert_eq!(
        stats.prefilled_tokens, 2,
        "the message from its first changed token"
    );
    assert_eq!(tokens, cold(&edited, 2));
}

#[test]
fn asking_again_about_the_same_document_reads_only_the_question() {
    let mut model = load(None);
    let document = conversation(17, 60);
    let first = next_turn(&document, &[], &[31, 32, 33]);
    run(&mut model, &first, 1);
    // Another conversation between the two questions.
    run(&mut model, &conversation(300, 30), 2);
    let second = next_turn(&document, &[], &[41, 42]);
    let (tokens, stats) = run(&mut model, &second, 3);
    assert_eq!(stats.prefilled_tokens, 2, "the document's rows were kept");
    assert_eq!(tokens, cold(&second, 3));
}

#[test]
fn a_budget_too_small_for_a_conversation_reads_it_all_with_the_same_answer() {
    // 1 KiB: less than one conversation's rows (2 layers x 2 heads x (48 + 40) x 32 x 4 bytes).
    let mut model = load(Some(1024));
    let a = conversation(3, 40);
    let (answer_a, _) = run(&mut model, &a, 1);
    run(&mut model, &conversation(200, 36), 2);
    assert_eq!(model.kv_store_bytes(), 0, "nothing fits");
    let again = next_turn(&a, &answer_a, &[9, 8]);
    let (tokens, stats) = run(&mut model, &again, 3);
    assert_eq!(stats.prefilled_tokens, again.len(), "a full prefill");
    assert_eq!(tokens, cold(&again, 3));
}

#[test]
fn the_least_recently_used_conversation_makes_room() {
    // Room for one conversation's rows (40 tokens and 5 of the answer), not two.
    let one = 2 * 2 * (48 + 45) * 32 * 4;
    let mut model = load(Some(one + one / 2));
    let a = conversation(3, 40);
    let b = conversation(200, 40);
    let c = conversation(400, 40);
    let (answer_a, _) = run(&mut model, &a, 1);
    let (answer_b, _) = run(&mut model, &b, 2); // keeps A
    run(&mut model, &c, 3); // keeps B, dropping A
    let kept = model.kv_store_bytes();
    assert!(kept > 0 && kept <= one, "B alone: {kept} bytes");
    let b_again = next_turn(&b, &answer_b, &[7]);
    let (tokens, stats) = run(&mut model, &b_again, 4); // keeps C
    assert_eq!(stats.prefilled_tokens, 1 + 1, "B was kept");
    assert_eq!(tokens, cold(&b_again, 4));
    let a_again = next_turn(&a, &answer_a, &[7]);
    let (tokens, stats) = run(&mut model, &a_again, 5);
    assert_eq!(stats.prefilled_tokens, a_again.len(), "A was dropped");
    assert_eq!(tokens, cold(&a_again, 5));

    // A budget of 0 drops everything kept.
    model.set_kv_store_budget(0);
    assert_eq!(model.kv_store_bytes(), 0);
}

#[test]
fn p15_one_origins_prefix_does_not_speed_up_anothers() {
    let mut model = load(None);
    let victim = conversation(3, 40);
    let guess = [&victim[..30], &conversation(300, 10)[..]].concat();
    model.set_kv_origin(1);
    run(&mut model, &victim, 1);

    // Another origin reads the whole guess, while the victim's sequence is live and after it
    // was kept (and so does a third, after the second's guess was kept).
    model.set_kv_origin(2);
    let (_, probe) = run(&mut model, &guess, 2);
    assert_eq!(
        probe.prefilled_tokens,
        guess.len(),
        "the live sequence is not shared"
    );
    model.set_kv_origin(3);
    let (_, other) = run(&mut model, &conversation(400, 20), 3);
    assert_eq!(other.prefilled_tokens, 20);
    model.set_kv_origin(4);
    let (_, probe) = run(&mut model, &guess, 2);
    assert_eq!(
        probe.prefilled_tokens,
        guess.len(),
        "kept sequences are not shared"
    );

    // Each origin still reuses its own.
    model.set_kv_origin(2);
    let (_, own) = run(&mut model, &guess, 2);
    assert!(own.prefilled_tokens < guess.len() / 2, "{own:?}");
    model.set_kv_origin(1);
    let (_, own) = run(&mut model, &victim, 1);
    assert!(own.prefilled_tokens < victim.len() / 2, "{own:?}");
}
