//! The answer loop over Hearth's CPU engine on the bundled demo model: greedy answers through the
//! loop are the engine's own, and raw text is continued without a chat template.

use std::ops::ControlFlow;
use std::path::PathBuf;

use hearth_backends::CpuBackend;
use hearth_chat::{
    answer, Answer, AnswerError, AnswerEvent, AnswerRequest, Backend, BackendKind, Input,
};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};

fn chat(messages: &[(Role, &str)]) -> Input {
    Input::Chat(
        messages
            .iter()
            .map(|(role, text)| ChatMessage::new(*role, *text))
            .collect(),
    )
}

fn request(input: Input) -> AnswerRequest<'static> {
    AnswerRequest {
        input,
        options: ChatOptions {
            max_tokens: 8,
            ..ChatOptions::default()
        },
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    }
}

/// Runs the loop to its end and collects its events.
fn run(
    backend: &mut dyn Backend,
    request: AnswerRequest<'_>,
) -> (Vec<AnswerEvent>, Result<Answer, AnswerError>) {
    let mut events = Vec::new();
    let result = answer(backend, request, &mut |event| {
        events.push(event);
        ControlFlow::Continue(())
    });
    (events, result)
}

fn texts(events: &[AnswerEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AnswerEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

#[test]
fn the_cpu_engine_answers_through_the_loop() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    cpu.require_chat().unwrap();
    let mut req = request(chat(&[(Role::User, "What is ownership?")]));
    req.options.sampling = SamplingParams::greedy();
    req.options.max_tokens = 12;
    let (events, result) = run(&mut cpu, req);
    let answer = result.unwrap();
    assert!(!answer.text.is_empty());
    assert_eq!(texts(&events), answer.text);
    let r = &answer.receipt;
    assert_eq!(r.backend_kind, BackendKind::Cpu);
    assert!(r.backend.starts_with("cpu"), "{}", r.backend);
    assert!(r.counts_exact);
    assert!(r.generated_tokens >= 1 && r.generated_tokens <= 12);
    assert!(r.prompt_tokens > 3);

    // Greedy decoding through the loop is the engine's own greedy decoding.
    let mut model = hearth_engine::Model::load(&demo_model(), &Default::default()).unwrap();
    let mut direct = String::new();
    model
        .chat(
            &[ChatMessage::new(Role::User, "What is ownership?")],
            &ChatOptions {
                sampling: SamplingParams::greedy(),
                max_tokens: 12,
                enable_thinking: None,
                speculative: None,
                format: hearth_engine::ResponseFormat::Text,
            },
            &mut |piece| {
                direct.push_str(piece);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    assert_eq!(answer.text, direct);
}

#[test]
fn raw_text_is_continued_without_a_template() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    let mut req = request(Input::Raw("Ownership is".into()));
    req.options.sampling = SamplingParams::greedy();
    req.options.max_tokens = 5;
    req.trim_to_fit = false;
    let answer = run(&mut cpu, req).1.unwrap();
    assert!(!answer.text.is_empty());
    assert_eq!(answer.receipt.backend_kind, BackendKind::Cpu);
}
