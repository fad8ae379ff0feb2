//! The answer loop against a scripted backend (events, stop strings, cancel, errors, context
//! fitting). The loop over Hearth's CPU engine is tested in hearth-backends (tests/cpu_answer.rs).

use std::ops::ControlFlow;

use hearth_chat::backend::EventSink;
use hearth_chat::context::FitError;
use hearth_chat::{
    answer, AnswerError, AnswerEvent, AnswerRequest, AnswerStop, Backend, BackendError,
    BackendEvent, BackendInfo, BackendKind, BackendTimings, FailureKind, Generation, Input, Prompt,
    TokenCount,
};
use hearth_engine::{ChatMessage, ChatOptions, Role, StopReason};

/// A backend that "generates" a fixed list of pieces, counting one token per word plus two per
/// message, and can fail after a given number of pieces.
struct Scripted {
    info: BackendInfo,
    pieces: Vec<&'static str>,
    fail_after: Option<usize>,
    prepared: Vec<usize>,
    asked_max_tokens: Option<usize>,
}

impl Scripted {
    fn new(pieces: Vec<&'static str>) -> Self {
        Scripted {
            info: BackendInfo {
                kind: BackendKind::Remote,
                label: "remote (scripted)".into(),
                device: "127.0.0.1:9".into(),
                model: "scripted".into(),
                context_length: Some(64),
                model_sha256: None,
                runtime_version: None,
            },
            pieces,
            fail_after: None,
            prepared: Vec::new(),
            asked_max_tokens: None,
        }
    }
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

impl Backend for Scripted {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn prepare(&mut self, input: Input, _: &ChatOptions) -> Result<Prompt, BackendError> {
        let tokens = match &input {
            Input::Chat(m) | Input::Continue(m) => m.iter().map(|m| words(&m.content) + 2).sum(),
            Input::Raw(t) => words(t),
        };
        self.prepared.push(tokens);
        Ok(Prompt {
            input,
            count: TokenCount {
                tokens,
                exact: false,
            },
            tokens: None,
        })
    }

    fn count_text(&self, text: &str) -> TokenCount {
        TokenCount {
            tokens: words(text),
            exact: false,
        }
    }

    fn generate(
        &mut self,
        prompt: Prompt,
        options: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError> {
        self.asked_max_tokens = Some(options.max_tokens);
        let mut written = 0;
        let mut stop = StopReason::EndOfTurn;
        for piece in &self.pieces {
            if self.fail_after == Some(written) {
                return Err(BackendError::failed(
                    FailureKind::Cut,
                    "the connection to the server was cut in the middle of the answer",
                ));
            }
            written += 1;
            if on_event(BackendEvent::Text(piece)).is_break() {
                stop = StopReason::Cancelled;
                break;
            }
        }
        Ok(Generation {
            prompt_tokens: prompt.count,
            generated_tokens: TokenCount {
                tokens: written,
                exact: false,
            },
            stop_reason: stop,
            timings: BackendTimings {
                decode_tokens_per_s: Some(42.0),
                ..Default::default()
            },
        })
    }
}

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

/// Runs the loop and collects its events.
fn run(
    backend: &mut dyn Backend,
    request: AnswerRequest<'_>,
    mut stop_after_texts: Option<usize>,
) -> (Vec<AnswerEvent>, Result<hearth_chat::Answer, AnswerError>) {
    let mut events = Vec::new();
    let result = answer(backend, request, &mut |event| {
        let is_text = matches!(event, AnswerEvent::Text(_));
        events.push(event);
        match &mut stop_after_texts {
            Some(0) => ControlFlow::Break(()),
            Some(n) if is_text => {
                *n -= 1;
                if *n == 0 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }
            _ => ControlFlow::Continue(()),
        }
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

#[test]
fn events_come_in_order_and_the_receipt_says_where_it_ran() {
    let mut backend = Scripted::new(vec!["Hello", ", ", "world", "."]);
    let (events, result) = run(
        &mut backend,
        request(chat(&[(Role::User, "hi there")])),
        None,
    );
    let answer = result.unwrap();
    let AnswerEvent::Started(start) = &events[0] else {
        panic!("the first event is Started: {events:?}");
    };
    assert_eq!(start.prompt_tokens.tokens, 4);
    assert_eq!(start.context_limit, Some(64));
    assert_eq!(start.backend.kind, BackendKind::Remote);
    assert_eq!(texts(&events), "Hello, world.");
    assert_eq!(answer.text, "Hello, world.");
    assert_eq!(answer.stop, AnswerStop::EndOfTurn);
    let r = &answer.receipt;
    assert_eq!(r.backend_kind, BackendKind::Remote);
    assert_eq!(r.device, "127.0.0.1:9");
    assert_eq!((r.prompt_tokens, r.generated_tokens), (4, 4));
    assert!(!r.counts_exact, "the scripted backend only estimates");
    assert_eq!(r.stop_reason, "end of turn");
    assert_eq!(
        r.backend_timings
            .as_ref()
            .and_then(|t| t.decode_tokens_per_s),
        Some(42.0),
        "the backend's own timings are kept next to Hearth's"
    );
    assert!(matches!(events.last(), Some(AnswerEvent::Stats(_))));
    assert_eq!(
        backend.prepared.len(),
        1,
        "a fitting prompt is prepared once"
    );
}

#[test]
fn a_stop_string_across_pieces_ends_the_answer_before_it() {
    let mut backend = Scripted::new(vec!["one two ", "EN", "D three", " four"]);
    let mut req = request(chat(&[(Role::User, "count")]));
    req.stops = vec!["END".into()];
    let (events, result) = run(&mut backend, req, None);
    let answer = result.unwrap();
    assert_eq!(answer.text, "one two ");
    assert_eq!(
        texts(&events),
        "one two ",
        "no part of the stop string is shown"
    );
    assert_eq!(answer.stop, AnswerStop::StopString);
    assert_eq!(answer.receipt.stop_reason, "stop string");
}

#[test]
fn the_caller_can_stop_the_answer_and_keeps_what_was_written() {
    let mut backend = Scripted::new(vec!["a ", "b ", "c ", "d "]);
    let (_, result) = run(&mut backend, request(chat(&[(Role::User, "go")])), Some(2));
    let answer = result.unwrap();
    assert_eq!(answer.text, "a b ");
    assert_eq!(answer.stop, AnswerStop::Cancelled);
    assert_eq!(answer.receipt.stop_reason, "stopped");
}

#[test]
fn stopping_at_start_generates_nothing() {
    let mut backend = Scripted::new(vec!["never"]);
    let (_, result) = run(&mut backend, request(chat(&[(Role::User, "go")])), Some(0));
    let answer = result.unwrap();
    assert_eq!(answer.text, "");
    assert_eq!(answer.stop, AnswerStop::Cancelled);
    assert_eq!(
        backend.asked_max_tokens, None,
        "the backend was never asked"
    );
}

#[test]
fn a_failure_mid_answer_keeps_the_partial_text_held_back_included() {
    let mut backend = Scripted::new(vec!["partial ", "ans", "wer"]);
    backend.fail_after = Some(2);
    let mut req = request(chat(&[(Role::User, "go")]));
    req.stops = vec!["answer!".into()]; // "ans" could start it, so it is held back
    let (events, result) = run(&mut backend, req, None);
    match result {
        Err(AnswerError::Failed { text, error }) => {
            assert_eq!(text, "partial ans", "nothing written is lost");
            assert_eq!(error.code(), "cut");
            assert!(error.to_string().contains("cut"), "{error}");
        }
        other => panic!("expected a failure after the start: {other:?}"),
    }
    assert_eq!(texts(&events), "partial ");
}

#[test]
fn old_turns_are_left_out_when_the_conversation_is_too_long() {
    let mut backend = Scripted::new(vec!["ok"]);
    let long = "word ".repeat(30);
    let input = chat(&[
        (Role::System, "be brief"),
        (Role::User, &long),
        (Role::Assistant, &long),
        (Role::User, "and now?"),
    ]);
    let (events, result) = run(&mut backend, request(input), None);
    result.unwrap();
    let AnswerEvent::Started(start) = &events[0] else {
        panic!("{events:?}");
    };
    assert_eq!(start.trimmed_messages, 2);
    assert_eq!(start.prompt_tokens.tokens, 4 + 4);
    assert_eq!(
        backend.asked_max_tokens,
        Some(8),
        "max_tokens fits in what the context has left"
    );
}

#[test]
fn without_trimming_a_prompt_that_fills_the_context_is_refused() {
    let mut backend = Scripted::new(vec!["ok"]);
    let long = "word ".repeat(70);
    let mut req = request(chat(&[(Role::User, &long)]));
    req.trim_to_fit = false;
    let (events, result) = run(&mut backend, req, None);
    match result {
        Err(AnswerError::NotStarted(FitError::TooLong { needed, limit })) => {
            assert_eq!((needed, limit), (73, 64));
        }
        other => panic!("{other:?}"),
    }
    assert!(events.is_empty(), "nothing starts");
}

#[test]
fn max_tokens_is_cut_to_the_room_left_in_the_context() {
    let mut backend = Scripted::new(vec!["ok"]);
    let mut req = request(chat(&[(Role::User, &"w ".repeat(58))]));
    req.options.max_tokens = 1000;
    req.trim_to_fit = false;
    run(&mut backend, req, None).1.unwrap();
    assert_eq!(backend.asked_max_tokens, Some(4), "64 - 60 prompt tokens");
}
