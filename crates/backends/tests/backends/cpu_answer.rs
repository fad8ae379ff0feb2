//! The answer loop over Hearth's CPU engine on the bundled demo model: greedy answers through the
//! loop are the engine's own, and raw text is continued without a chat template.

use std::ops::ControlFlow;
use std::path::PathBuf;

use hearth_backends::CpuBackend;
use hearth_chat::{
    answer, Answer, AnswerError, AnswerEvent, AnswerRequest, AnswerStop, Backend, BackendKind,
    Input,
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

/// A question long enough to be read in several chunks of the engine's prefill.
fn long_question() -> Input {
    let text = "Ownership moves a value to its new owner, and borrowing lends it. ".repeat(20);
    chat(&[(Role::User, &format!("{text}What is ownership?"))])
}

#[test]
fn a_long_prompt_is_reported_read_chunk_by_chunk_before_the_first_text() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    let (events, result) = run(&mut cpu, request(long_question()));
    let answer = result.unwrap();
    let AnswerEvent::Started(start) = &events[0] else {
        panic!("Started comes first: {events:?}");
    };
    let prompt = start.prompt_tokens.tokens;
    assert!(
        prompt > 2 * 64,
        "the question takes several chunks: {prompt}"
    );
    let first_text = events
        .iter()
        .position(|e| matches!(e, AnswerEvent::Text(_)))
        .expect("some text");
    let read: Vec<(usize, usize)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            AnswerEvent::Reading(p) => {
                assert!(i < first_text, "reading is reported before the first text");
                Some((p.done, p.total))
            }
            _ => None,
        })
        .collect();
    let expected: Vec<(usize, usize)> = std::iter::once(0)
        .chain((64..prompt).step_by(64))
        .chain(std::iter::once(prompt))
        .map(|done| (done, prompt))
        .collect();
    assert_eq!(
        read, expected,
        "0, then after each chunk of 64, up to the prompt"
    );
    assert!(!answer.text.is_empty());
}

#[test]
fn stop_while_the_prompt_is_read_ends_the_answer_before_any_text() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    let mut events = Vec::new();
    let answer = answer(&mut cpu, request(long_question()), &mut |event| {
        let stop = matches!(event, AnswerEvent::Reading(p) if p.done > 0);
        events.push(event);
        if stop {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(answer.stop, AnswerStop::Cancelled);
    assert_eq!(
        (answer.text.as_str(), answer.receipt.generated_tokens),
        ("", 0)
    );
    let read = events
        .iter()
        .filter(|e| matches!(e, AnswerEvent::Reading(_)))
        .count();
    assert_eq!(read, 2, "no chunk is read after Stop: {events:?}");
    assert!(!events.iter().any(|e| matches!(e, AnswerEvent::Text(_))));
}
