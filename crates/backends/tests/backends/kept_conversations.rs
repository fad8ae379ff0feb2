//! Conversations the engine switched away from are kept (its KV store): through the answer
//! loop on the demo model, coming back to conversation A after B reads only what A's cache did
//! not hold, the receipt says how many tokens were read (`backend_timings.prefill_tokens`), and
//! the answer is the one a model with nothing kept gives.

use std::ops::ControlFlow;
use std::path::PathBuf;

use hearth_backends::CpuBackend;
use hearth_chat::{answer, AnswerRequest, Backend, Input, Receipt};
use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Role, SamplingParams};

fn demo(kv_store_bytes: Option<u64>) -> CpuBackend {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    let options = LoadOptions {
        kv_store_bytes,
        ..LoadOptions::default()
    };
    CpuBackend::open(&dir, "demo", &options, None).unwrap()
}

fn options() -> ChatOptions {
    ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: 12,
        ..ChatOptions::default()
    }
}

/// Answers `messages`; its text and receipt.
fn ask(backend: &mut CpuBackend, messages: &[ChatMessage]) -> (String, Receipt) {
    let request = AnswerRequest {
        input: Input::Chat(messages.to_vec()),
        options: options(),
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    };
    let answer = answer(backend, request, &mut |_| ControlFlow::Continue(())).unwrap();
    (answer.text, answer.receipt)
}

/// Tokens the receipt says were run through the model.
fn read(receipt: &Receipt) -> usize {
    let timings = receipt
        .backend_timings
        .as_ref()
        .expect("the cpu reports its timings");
    timings.prefill_tokens.expect("the cpu says what it read")
}

fn tokens(backend: &mut CpuBackend, messages: &[ChatMessage]) -> Vec<u32> {
    let input = Input::Chat(messages.to_vec());
    backend.prepare(input, &options()).unwrap().tokens.unwrap()
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn coming_back_to_a_conversation_reads_only_what_is_new_and_says_so_on_the_receipt() {
    let mut cpu = demo(None);
    let a = vec![ChatMessage::new(
        Role::User,
        "Here is a long note about the garden: the tomatoes went in along the south wall in \
         April, the beans climb the old fence, and the herbs share the raised bed by the door \
         with the strawberries. What should I water first when it is hot?",
    )];
    let b = vec![ChatMessage::new(Role::User, "Name three rivers in Europe.")];
    let a_tokens = tokens(&mut cpu, &a);
    let b_tokens = tokens(&mut cpu, &b);

    let (a_answer, first) = ask(&mut cpu, &a);
    assert_eq!(
        read(&first),
        first.prompt_tokens,
        "a first question reads it all"
    );
    let (_, second) = ask(&mut cpu, &b);
    assert_eq!(
        read(&second),
        b_tokens.len() - common_prefix(&a_tokens, &b_tokens),
        "B reads all but the chat template's opening it shares with A"
    );

    let mut again = a.clone();
    again.push(ChatMessage::new(Role::Assistant, a_answer));
    again.push(ChatMessage::new(Role::User, "And in the evening?"));
    let (text, third) = ask(&mut cpu, &again);
    let new = third.prompt_tokens - a_tokens.len();
    assert!(
        read(&third) <= new,
        "A's {} prompt tokens were kept: read {} of {} ({new} after A's prompt)",
        a_tokens.len(),
        read(&third),
        third.prompt_tokens
    );

    // The same answer as a model that keeps nothing, which reads the whole prompt.
    let mut cold = demo(Some(0));
    let (cold_text, cold_receipt) = ask(&mut cold, &again);
    assert_eq!(text, cold_text);
    assert_eq!(read(&cold_receipt), cold_receipt.prompt_tokens);
}

#[test]
fn a_receipt_saved_before_the_count_existed_still_reads() {
    let saved = r#"{"model_name": "demo", "model_sha256": null, "backend": "cpu (avx2)",
        "device": "cpu", "prompt_tokens": 30, "generated_tokens": 5, "ttft_secs": 0.2,
        "decode_secs": 0.1, "tokens_per_second": 40.0, "stop_reason": "end of turn",
        "trimmed_messages": 0, "finished_at": 0,
        "backend_timings": {"load_secs": null, "prefill_secs": 0.1,
            "prefill_tokens_per_s": 300.0, "decode_secs": 0.1, "decode_tokens_per_s": 40.0}}"#;
    let receipt: Receipt = serde_json::from_str(saved).unwrap();
    assert_eq!(receipt.backend_timings.unwrap().prefill_tokens, None);
}
