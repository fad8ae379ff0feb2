//! A remote answer is bounded whatever the server does: the security review's hostile-server
//! reproductions (N6), each scaled down, plus property tests of the event-stream reader.
//!
//! - one event split over many `data:` lines is refused at 4 MiB in all, not gathered;
//! - an endless stream that ignores `max_tokens` ends at the answer's length;
//! - keep-alive comments do not keep a token-less answer open past the read timeout;
//! - Stop ends an answer while the server sends nothing at all, and the answer loop takes the
//!   empty pieces that carry it for a chance to stop, not for tokens.
//!
//! Loopback only. Servers stop on their own after a bounded number of writes, so a broken
//! client fails instead of hanging.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::thread::JoinHandle;
use std::time::Duration;

use hearth_backends::remote::sse::{EventReader, Item, SseError};
use hearth_backends::remote::{ChatRequest, ClientOptions, OpenAiClient};
use hearth_chat::backend::{BackendEvent, EventSink};
use hearth_chat::{
    answer, AnswerEvent, AnswerRequest, AnswerStop, Backend, BackendError, BackendInfo,
    BackendKind, BackendTimings, FailureKind, Generation, Input, Prompt, TokenCount,
};
use hearth_engine::{ChatMessage, ChatOptions, Role, StopReason};
use proptest::prelude::*;

/// A server that answers one chat request with event-stream headers, then lets `body` write
/// what it likes. Write errors (the client left) end it.
fn hostile(body: impl FnOnce(&mut TcpStream) + Send + 'static) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        read_request(&mut socket);
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
        if socket.write_all(head.as_bytes()).is_ok() {
            body(&mut socket);
        }
    });
    (url, handle)
}

/// Reads the request's headers and its Content-Length body.
fn read_request(socket: &mut TcpStream) {
    let mut reader = BufReader::new(socket.try_clone().unwrap());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
}

fn client(url: &str, read_timeout: Duration) -> OpenAiClient {
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout,
        reuse_connections: false,
    };
    OpenAiClient::new(url, None, options).unwrap()
}

fn request(max_tokens: usize) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::new(Role::User, "hi")],
        max_tokens: Some(max_tokens),
        ..Default::default()
    }
}

fn kind(error: &BackendError) -> FailureKind {
    match error {
        BackendError::Failed { kind, .. } => *kind,
        other => panic!("expected a failure, got {other:?}"),
    }
}

fn chunk(text: &str) -> String {
    format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
}

#[test]
fn an_event_split_over_many_data_lines_is_refused_at_the_limit() {
    // The review sent 1500 lines of 1 MiB; 8 show the same: 4 MiB in all is the bound.
    let (url, server) = hostile(|socket| {
        let line = format!("data: {}\n", "x".repeat(1 << 20));
        for _ in 0..8 {
            if socket.write_all(line.as_bytes()).is_err() {
                return;
            }
        }
        let _ = socket.write_all(b"\n");
    });
    let result = client(&url, Duration::from_secs(5))
        .stream_chat(&request(16), &mut |_| ControlFlow::Continue(()));
    let error = result.unwrap_err();
    assert_eq!(kind(&error), FailureKind::BadReply, "{error}");
    assert!(
        error.to_string().contains("longer than 4 MiB"),
        "refused by size, not read whole and found not JSON: {error}"
    );
    server.join().unwrap();
}

#[test]
fn an_endless_stream_ends_at_the_answers_length() {
    let (url, server) = hostile(|socket| {
        let piece = chunk(&"y".repeat(64));
        for _ in 0..200_000 {
            if socket.write_all(piece.as_bytes()).is_err() {
                return;
            }
        }
    });
    let mut pieces = 0usize;
    let outcome = client(&url, Duration::from_secs(5))
        .stream_chat(&request(16), &mut |text| {
            pieces += usize::from(!text.is_empty());
            ControlFlow::Continue(())
        })
        .expect("ends as a complete answer at its length");
    assert_eq!(outcome.finish_reason.as_deref(), Some("length"));
    assert!(pieces < 200, "read on past max_tokens: {pieces} pieces");
    server.join().unwrap();
}

#[test]
fn keep_alive_comments_do_not_keep_a_silent_answer_open() {
    let (url, server) = hostile(|socket| {
        for _ in 0..100 {
            if socket.write_all(b": ping\n\n").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let error = client(&url, Duration::from_secs(1))
        .stream_chat(&request(16), &mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert_eq!(kind(&error), FailureKind::Timeout, "{error}");
    assert!(
        error.to_string().contains("sent no text for 1 s"),
        "{error}"
    );
    server.join().unwrap();
}

#[test]
fn stop_ends_an_answer_while_nothing_arrives() {
    let (url, server) = hostile(|socket| {
        // Headers, then silence; the server leaves once the client hangs up.
        let _ = socket.set_read_timeout(Some(Duration::from_secs(20)));
        let _ = socket.read(&mut [0u8; 1]);
    });
    let mut calls = 0usize;
    let outcome = client(&url, Duration::from_secs(30))
        .stream_chat(&request(16), &mut |text| {
            assert!(text.is_empty(), "no text was sent");
            calls += 1;
            ControlFlow::Break(()) // the user pressed Stop
        })
        .expect("a stopped answer is not an error");
    assert!(outcome.cancelled);
    assert_eq!(calls, 1);
    // The server is not waited for: the connection closes when the reading thread next
    // wakes (at the read timeout, as nothing comes).
    drop(server);
}

/// A backend that waits on a server sending nothing: it only hands the answer loop empty
/// pieces, as the remote client does once a second.
struct Waiting {
    info: BackendInfo,
}

impl Backend for Waiting {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn prepare(&mut self, input: Input, _: &ChatOptions) -> Result<Prompt, BackendError> {
        let count = TokenCount {
            tokens: 4,
            exact: false,
        };
        Ok(Prompt {
            input,
            count,
            tokens: None,
        })
    }

    fn count_text(&self, _: &str) -> TokenCount {
        TokenCount {
            tokens: 1,
            exact: false,
        }
    }

    fn generate(
        &mut self,
        prompt: Prompt,
        _: &ChatOptions,
        on_event: EventSink<'_>,
    ) -> Result<Generation, BackendError> {
        for _ in 0..100 {
            if on_event(BackendEvent::Text("")).is_break() {
                return Ok(Generation {
                    prompt_tokens: prompt.count,
                    generated_tokens: TokenCount {
                        tokens: 0,
                        exact: true,
                    },
                    stop_reason: StopReason::Cancelled,
                    timings: BackendTimings::default(),
                });
            }
        }
        Err(BackendError::failed(FailureKind::Timeout, "no Stop seen"))
    }
}

#[test]
fn the_answer_loop_lets_stop_through_on_an_empty_piece_and_counts_no_token() {
    let mut backend = Waiting {
        info: BackendInfo {
            kind: BackendKind::Remote,
            label: "remote (waiting)".into(),
            device: "127.0.0.1:9".into(),
            model: "m".into(),
            context_length: Some(64),
            model_sha256: None,
            runtime_version: None,
        },
    };
    let request = AnswerRequest {
        input: Input::Chat(vec![ChatMessage::new(Role::User, "hi")]),
        options: ChatOptions::default(),
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    };
    let mut stats = Vec::new();
    let answer = answer(&mut backend, request, &mut |event| match event {
        AnswerEvent::Stats(live) => {
            stats.push(live);
            ControlFlow::Break(()) // the user pressed Stop while nothing came
        }
        AnswerEvent::Text(text) => panic!("no text was written, got {text:?}"),
        AnswerEvent::Started(_) => ControlFlow::Continue(()),
        AnswerEvent::Reading(_) => panic!("a server does not say how far it has read"),
    })
    .expect("a stopped answer");
    assert_eq!(answer.stop, AnswerStop::Cancelled);
    assert_eq!(answer.text, "");
    assert!(!stats.is_empty());
    for live in &stats {
        assert_eq!(live.generated_tokens, 0, "an empty piece is not a token");
        assert_eq!(live.ttft_secs, None, "nor the first one");
    }
}

// ---------------------------------------------------------------- the event reader

/// A reader handing out its bytes in the given chunk sizes (cycled), as a network does.
struct Chunked {
    bytes: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl Read for Chunked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.turn % self.sizes.len()].max(1);
        self.turn += 1;
        let n = size.min(buf.len()).min(self.bytes.len() - self.at);
        buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn reader(bytes: Vec<u8>, sizes: Vec<usize>, limit: usize) -> EventReader<BufReader<Chunked>> {
    let chunked = Chunked {
        bytes,
        at: 0,
        sizes,
        turn: 0,
    };
    // A small buffer, so lines cross buffer refills too.
    EventReader::new(BufReader::with_capacity(7, chunked), limit)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5e_5e),
        ..ProptestConfig::default()
    }
}

/// One event: its data lines (no line ends inside), with comments before it.
fn event() -> impl Strategy<Value = (Vec<String>, usize, bool)> {
    (
        prop::collection::vec("[a-z{}\":, ]{0,12}", 1..4),
        0usize..3,
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(config())]

    /// Events written with LF or CRLF, comments in between, read back whole in any chunking.
    #[test]
    fn events_read_back_in_any_chunking(
        events in prop::collection::vec(event(), 0..8),
        sizes in prop::collection::vec(1usize..20, 1..5),
    ) {
        let mut bytes = Vec::new();
        for (lines, comments, crlf) in &events {
            let end = if *crlf { "\r\n" } else { "\n" };
            for _ in 0..*comments {
                bytes.extend_from_slice(format!(": ping{end}").as_bytes());
            }
            for line in lines {
                bytes.extend_from_slice(format!("data: {line}{end}").as_bytes());
            }
            bytes.extend_from_slice(end.as_bytes());
        }
        let mut events_read = Vec::new();
        let mut comments_read = 0;
        let mut r = reader(bytes, sizes, 1024);
        while let Some(item) = r.next_item().unwrap() {
            match item {
                Item::Event { name, data } => {
                    prop_assert!(name.is_empty());
                    events_read.push(data);
                }
                Item::Comment => comments_read += 1,
                Item::Unknown(line) => prop_assert!(false, "unknown line {line:?}"),
            }
        }
        let wanted: Vec<String> = events.iter().map(|(lines, _, _)| lines.join("\n")).collect();
        prop_assert_eq!(events_read, wanted);
        prop_assert_eq!(comments_read, events.iter().map(|e| e.1).sum::<usize>());
    }

    /// Any bytes: the reader ends (or refuses) without panicking, and no event it gives is
    /// longer than its limit.
    #[test]
    fn any_bytes_give_bounded_events(
        bytes in prop::collection::vec(
            prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '),
                Just(b'd'), Just(b'a'), Just(b't'), any::<u8>(),
            ],
            0..600,
        ),
        sizes in prop::collection::vec(1usize..50, 1..4),
        limit in 1usize..64,
    ) {
        let mut r = reader(bytes, sizes, limit);
        let mut items = 0;
        loop {
            match r.next_item() {
                Ok(Some(Item::Event { name, data })) => {
                    prop_assert!(name.len() + data.len() <= limit * 3, "{} > {limit}", data.len());
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(SseError::EventTooLong { limit: l }) => {
                    prop_assert_eq!(l, limit);
                    break;
                }
                Err(e) => prop_assert!(false, "{e}"),
            }
            items += 1;
            prop_assert!(items <= 600, "the reader must end");
        }
    }
}
