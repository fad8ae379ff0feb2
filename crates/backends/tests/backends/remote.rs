//! The remote backend against a scripted loopback server and a fault proxy: streaming, usage
//! wherever (or never) it comes, and every failure a user can meet, each with its plain message.
//! Loopback only; every wait is bounded by a timeout of a second or two.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::{
    refused_address, ChatReply, Ending, Fault, FaultProxy, Script, ScriptedServer,
};
use crate::common::{Connection, Recorded, UsageMode};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_chat::answer::{answer, Answer, AnswerError, AnswerEvent, AnswerRequest, AnswerStop};
use hearth_chat::{Backend, BackendError, BackendKind, FailureKind, Input};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};
use serde_json::json;

const MODEL: &str = "qwen2.5-7b-instruct";
const KEY: &str = "sk-test-SECRET-4242";

/// Short timeouts so stalls are found in about a second.
fn quick() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(1),
        reuse_connections: true,
    }
}

fn config(url: &str) -> RemoteConfig {
    RemoteConfig::new(url).unwrap().with_key(KEY)
}

fn connect(url: &str) -> RemoteBackend {
    RemoteBackend::connect(&config(url), MODEL, quick()).expect("connect")
}

fn chat(text: &str) -> Input {
    Input::Chat(vec![
        ChatMessage::new(Role::System, "You are brief."),
        ChatMessage::new(Role::User, text),
    ])
}

fn request(input: Input) -> AnswerRequest<'static> {
    AnswerRequest {
        input,
        options: ChatOptions {
            sampling: SamplingParams::greedy(),
            max_tokens: 64,
            enable_thinking: None,
            speculative: None,
            format: hearth_engine::ResponseFormat::Text,
        },
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    }
}

#[allow(clippy::result_large_err)] // the answer loop's own result, passed through
fn ask(backend: &mut RemoteBackend) -> Result<Answer, AnswerError> {
    answer(backend, request(chat("Say hello.")), &mut |_| {
        ControlFlow::Continue(())
    })
}

/// The failure kind and message of a backend error; the key must never be in it.
fn failure(error: &BackendError) -> (FailureKind, String) {
    let message = error.to_string();
    assert!(!message.contains(KEY), "the key leaked: {message}");
    assert!(
        !format!("{error:?}").contains(KEY),
        "the key leaked in Debug: {error:?}"
    );
    match error {
        BackendError::Failed { kind, .. } => (*kind, message),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The error and the partial text of an answer that failed after it started.
fn failed_answer(result: Result<Answer, AnswerError>) -> (FailureKind, String, String) {
    match result {
        Err(AnswerError::Failed { text, error }) => {
            let (kind, message) = failure(&error);
            (kind, message, text)
        }
        Err(other) => panic!("expected a failure after the start, got {other:?}"),
        Ok(a) => panic!("expected a failure, got an answer {:?}", a.text),
    }
}

fn chat_requests(server: &ScriptedServer) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect()
}

fn demo_tokenizer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/tokenizer.json")
}

// ---- answers ----

#[test]
fn streams_an_answer_with_usage_in_the_last_chunk() {
    let server = ScriptedServer::start(Script::new(MODEL, &["Hel", "lo", "!"]));
    let mut backend = connect(&format!("{}/v1/", server.url()));
    let info = backend.info().clone();
    assert_eq!(info.kind, BackendKind::Remote);
    assert_eq!(info.label, format!("remote ({})", server.url()));
    assert_eq!(info.device, server.addr.to_string());
    assert_eq!(info.model, MODEL);
    assert_eq!(
        info.context_length, None,
        "the scripted server does not say"
    );

    let mut texts = Vec::new();
    let answer = answer(&mut backend, request(chat("Say hello.")), &mut |e| {
        if let AnswerEvent::Text(t) = e {
            texts.push(t);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(answer.text, "Hello!");
    assert_eq!(texts.concat(), "Hello!");
    assert_eq!(answer.stop, AnswerStop::EndOfTurn);
    let r = &answer.receipt;
    assert_eq!(r.backend_kind, BackendKind::Remote);
    assert_eq!((r.prompt_tokens, r.generated_tokens), (7, 3));
    assert!(r.counts_exact, "the server's usage is exact");
    let timings = r
        .backend_timings
        .as_ref()
        .expect("FastFlowLM-style timings");
    assert_eq!(timings.prefill_secs, Some(0.25));
    assert_eq!(timings.prefill_tokens_per_s, None, "null is no number");
    assert_eq!(timings.decode_tokens_per_s, Some(12.5));

    // What was sent: the key to this server, a streamed request, greedy sampling, no stops.
    let models = &server.requests()[0];
    assert_eq!(models.path, "/v1/models");
    assert_eq!(
        models.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let sent = chat_requests(&server)[0].json();
    assert_eq!(sent["model"], MODEL);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["temperature"], 0.0);
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(
        sent["repeat_penalty"], 1.0,
        "sent even when off: defaults differ"
    );
    assert_eq!(sent["min_p"], 0.05);
    assert_eq!(sent["top_k"], 40);
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][1]["content"], "Say hello.");
    assert!(sent.get("stop").is_none(), "stops are applied by Hearth");
}

#[test]
fn usage_in_every_chunk_counts_the_last_one() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a", "b", "c", "d"]));
    server.set_chat(ChatReply::pieces(&["a", "b", "c", "d"]).with_usage(UsageMode::EveryChunk));
    let answer = ask(&mut connect(&server.url())).unwrap();
    assert_eq!(answer.text, "abcd");
    assert_eq!(answer.receipt.generated_tokens, 4);
    assert!(answer.receipt.counts_exact);
}

#[test]
fn no_usage_is_estimated_and_marked_approximate() {
    let server = ScriptedServer::start(Script::new(MODEL, &["Hello ", "there, ", "friend."]));
    server.set_chat(
        ChatReply::pieces(&["Hello ", "there, ", "friend."]).with_usage(UsageMode::Never),
    );
    let answer = ask(&mut connect(&server.url())).unwrap();
    assert_eq!(answer.text, "Hello there, friend.");
    assert!(
        !answer.receipt.counts_exact,
        "no usage: the receipt says approximate"
    );
    assert_eq!(answer.receipt.generated_tokens, 5, "20 characters / 4");
    assert!(answer.receipt.prompt_tokens > 0);
}

#[test]
fn no_usage_is_counted_by_the_servers_tokenizer_when_it_has_one() {
    let server = ScriptedServer::start(Script::new(MODEL, &[]));
    server.edit(|s| s.counts_tokens = true);
    server.set_chat(
        ChatReply::pieces(&["Hello ", "there, ", "friend."]).with_usage(UsageMode::Never),
    );
    let mut backend = connect(&server.url());
    let answer = ask(&mut backend).unwrap();
    assert_eq!(
        answer.receipt.generated_tokens, 3,
        "3 words; the BOS taken off"
    );
    assert!(
        !answer.receipt.counts_exact,
        "the prompt is still estimated"
    );
    let counts: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.path == "/extras/tokenize/count")
        .map(|r| r.json()["input"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        counts,
        ["", "Hello there, friend."],
        "the BOS is measured once"
    );
    ask(&mut backend).unwrap();
    let asked = server
        .requests()
        .iter()
        .filter(|r| r.path == "/extras/tokenize/count")
        .count();
    assert_eq!(asked, 3);
}

#[test]
fn no_usage_with_a_tokenizer_counts_the_answer_exactly() {
    let server = ScriptedServer::start(Script::new(MODEL, &["Hello", " world"]));
    server.set_chat(ChatReply::pieces(&["Hello", " world"]).with_usage(UsageMode::Never));
    let mut config = config(&server.url());
    config.tokenizer = Some(demo_tokenizer());
    let mut backend = RemoteBackend::connect(&config, MODEL, quick()).unwrap();
    let expected = hearth_engine::TextTokenizer::from_file(&demo_tokenizer())
        .unwrap()
        .encode("Hello world", false)
        .unwrap()
        .len();
    assert_eq!(backend.count_text("Hello world").tokens, expected);
    let answer = ask(&mut backend).unwrap();
    assert_eq!(answer.receipt.generated_tokens, expected);
    // The prompt is still an estimate: the server's chat template is not known here.
    assert!(!answer.receipt.counts_exact);
}

#[test]
fn reasoning_arrives_folded_in_think_tags() {
    let server = ScriptedServer::start(Script::new(MODEL, &[]));
    server.set_chat(ChatReply::Stream {
        reasoning: vec!["Let me ".into(), "think.".into()],
        pieces: vec!["Four.".into()],
        usage: UsageMode::LastChunk,
        finish: "stop",
        ending: Ending::Complete,
        delay: Duration::ZERO,
    });
    let answer = ask(&mut connect(&server.url())).unwrap();
    assert_eq!(answer.text, "<think>Let me think.</think>Four.");
}

#[test]
fn length_finish_is_the_length_limit_and_context_comes_from_the_server() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    server.edit(|s| s.models = vec![(MODEL.into(), Some(4096)), ("other".into(), None)]);
    server.set_chat(ChatReply::Stream {
        reasoning: vec![],
        pieces: vec!["a".into()],
        usage: UsageMode::LastChunk,
        finish: "length",
        ending: Ending::Complete,
        delay: Duration::ZERO,
    });
    let mut backend = connect(&server.url());
    assert_eq!(
        backend.info().context_length,
        Some(4096),
        "vLLM's max_model_len"
    );
    let answer = ask(&mut backend).unwrap();
    assert_eq!(answer.stop, AnswerStop::MaxTokens);
}

#[test]
fn stopping_drops_the_stream() {
    let pieces: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let server = ScriptedServer::start(Script::new(MODEL, &refs));
    server.set_chat(ChatReply::pieces(&refs).with_delay(Duration::from_millis(5)));
    let mut backend = connect(&server.url());
    let answer = answer(&mut backend, request(chat("Count.")), &mut |e| match e {
        AnswerEvent::Text(_) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .unwrap();
    assert_eq!(answer.stop, AnswerStop::Cancelled);
    assert_eq!(answer.text, "w0 ");
    // The server notices the closed connection long before its 200 pieces.
    let until = Instant::now() + Duration::from_secs(3);
    let mut last = usize::MAX;
    while Instant::now() < until {
        let now = server
            .pieces_written
            .load(std::sync::atomic::Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        last < 200,
        "the server wrote all {last} pieces: the stream was not dropped"
    );
}

#[test]
fn raw_text_goes_to_the_servers_own_completions() {
    let server = ScriptedServer::start(Script::new(MODEL, &[" there", " was", " a fox."]));
    let mut backend = connect(&server.url());
    let mut texts = Vec::new();
    let mut asked = request(Input::Raw("Once upon a time".into()));
    asked.options.enable_thinking = Some(false);
    asked.stops = vec![" a fox".into()];
    let answer = answer(&mut backend, asked, &mut |e| {
        if let AnswerEvent::Text(t) = e {
            texts.push(t);
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(
        answer.text, " there was",
        "cut at the stop string, as in chat"
    );
    assert_eq!(texts.concat(), " there was");
    assert_eq!(answer.stop, AnswerStop::StopString);

    let sent: Vec<Recorded> = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/completions")
        .collect();
    assert_eq!(sent.len(), 1, "one completion request");
    assert!(chat_requests(&server).is_empty(), "no chat request");
    let sent = sent[0].json();
    assert_eq!(sent["prompt"], "Once upon a time");
    assert!(sent.get("messages").is_none(), "no messages: {sent}");
    assert!(
        sent.get("chat_template_kwargs").is_none(),
        "no template renders raw text: {sent}"
    );
    assert_eq!(sent["model"], MODEL);
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(sent["temperature"], 0.0);
    assert_eq!(sent["repeat_penalty"], 1.0);
    assert!(sent.get("stop").is_none(), "stops are applied by Hearth");
}

#[test]
fn a_raw_completion_cut_in_the_middle_keeps_its_text() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a", "b"]));
    server.set_chat(ChatReply::pieces(&["one", " two"]).with_ending(Ending::CutChunked));
    let mut backend = connect(&server.url());
    let (kind, message, text) = failed_answer(answer(
        &mut backend,
        request(Input::Raw("Count:".into())),
        &mut |_| ControlFlow::Continue(()),
    ));
    assert_eq!(kind, FailureKind::Cut, "{message}");
    assert_eq!(text, "one two");
}

#[test]
fn a_raw_completion_brings_the_servers_usage() {
    let server = ScriptedServer::start(Script::new(MODEL, &["Hel", "lo"]));
    let mut backend = connect(&server.url());
    let answer = answer(
        &mut backend,
        request(Input::Raw("Say:".into())),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap();
    assert_eq!(answer.text, "Hello");
    assert_eq!(answer.stop, AnswerStop::EndOfTurn);
    let r = &answer.receipt;
    assert_eq!((r.prompt_tokens, r.generated_tokens), (7, 2));
    assert!(r.counts_exact, "the server's usage is exact");
}

// ---- the model ----

#[test]
fn a_model_the_server_lacks_lists_the_ones_it_has() {
    let server = ScriptedServer::start(Script::new("llama-3.1-8b", &["a"]));
    server.edit(|s| s.models.push(("mistral-7b".into(), None)));
    let e = RemoteBackend::connect(&config(&server.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::ModelNotFound);
    assert!(
        message.contains(&format!("no model named \"{MODEL}\"")),
        "{message}"
    );
    assert!(
        message.contains("It has: llama-3.1-8b, mistral-7b."),
        "{message}"
    );
    let listed = RemoteBackend::list_models(&config(&server.url()), quick()).unwrap();
    assert_eq!(listed.len(), 2);
}

#[test]
fn a_404_on_chat_is_a_missing_model() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::status(
        404,
        json!({"error": {"message": "The model `x` does not exist.", "code": 404}}),
    ));
    let (kind, message, text) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::ModelNotFound);
    assert!(message.contains("has no model named"), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(text.is_empty());
}

// ---- connecting ----

#[test]
fn nothing_listening_is_refused() {
    let url = refused_address();
    let e = RemoteBackend::connect(&config(&url), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Refused);
    assert_eq!(
        message,
        format!(
            "Hearth could not reach the server at {url}: nothing is listening there. Check the \
             address and that the server is running."
        )
    );
    assert_eq!(e.code(), "connection");
}

#[test]
fn a_name_that_resolves_nowhere_is_a_dns_failure() {
    // RFC 6761: .invalid never resolves.
    let url = "http://hearth-remote-test.invalid:8000";
    let e = RemoteBackend::connect(&config(url), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Dns, "{message}");
    assert!(message.contains("does not resolve"), "{message}");
    assert!(message.contains(url), "{message}");
}

#[test]
fn https_to_a_plain_http_server_is_a_tls_failure() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let url = format!("https://{}", server.addr);
    let e = RemoteBackend::connect(&config(&url), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Tls, "{message}");
    assert!(message.contains("secure (https) connection"), "{message}");
    assert!(message.contains("use an http:// address"), "{message}");
    // The key is never sent in the clear to a server that could not be verified.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.header("authorization").is_none()),
        "the key went out before the TLS handshake"
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let proxy = FaultProxy::start(server.addr, Fault::Stall);
    let started = Instant::now();
    let e = RemoteBackend::connect(&config(&proxy.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Timeout, "{message}");
    assert!(message.contains("sent nothing back for 1 s"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(e.code(), "timeout");
}

#[test]
fn a_stall_in_the_middle_keeps_the_partial_answer() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::pieces(&["The ", "answer "]).with_ending(Ending::Stall));
    let started = Instant::now();
    let (kind, message, text) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Timeout, "{message}");
    assert!(
        message.contains("stopped sending for 1 s in the middle of the answer"),
        "{message}"
    );
    assert!(
        message.contains("The part that arrived is kept"),
        "{message}"
    );
    assert_eq!(text, "The answer ");
    assert!(started.elapsed() < Duration::from_secs(5));
}

// ---- the key ----

#[test]
fn a_refused_key_is_an_auth_failure() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    server.edit(|s| {
        s.models_reply = Some(ChatReply::status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
        ))
    });
    let e = RemoteBackend::connect(&config(&server.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Auth);
    assert_eq!(
        message,
        format!(
            "The server at {} refused the API key (HTTP 401). Check the key in the remote \
             server settings.",
            server.url()
        )
    );
    // Without a key: a 403 says one is needed.
    server.edit(|s| s.models_reply = Some(ChatReply::status(403, json!({"error": "forbidden"}))));
    let no_key = RemoteConfig::new(&server.url()).unwrap();
    let e = RemoteBackend::connect(&no_key, MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::Auth);
    assert!(message.contains("needs an API key (HTTP 403)"), "{message}");
    assert!(server
        .requests()
        .last()
        .unwrap()
        .header("authorization")
        .is_none());
}

#[test]
fn the_key_is_not_sent_where_a_redirect_points() {
    let elsewhere = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let target = format!("{}/v1/models", elsewhere.url());
    server.edit(|s| {
        s.models_reply = Some(ChatReply::status(302, json!({})).with_header("Location", &target))
    });
    let e = RemoteBackend::connect(&config(&server.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::BadReply);
    assert!(message.contains("redirected the request"), "{message}");
    assert!(message.contains(&target), "{message}");
    assert!(message.contains("does not follow redirects"), "{message}");
    assert!(elsewhere.requests().is_empty(), "the redirect was followed");
    // Through a proxy the key goes only in requests to the configured address.
    let proxy = FaultProxy::start(server.addr, Fault::Pass);
    server.edit(|s| s.models_reply = None);
    let mut backend = connect(&proxy.url());
    ask(&mut backend).unwrap();
    // /v1/models, /props (llama.cpp's context length), /api/show (Ollama's capabilities: does
    // it see pictures) and the chat.
    assert_eq!(proxy.seen().matches(&format!("Bearer {KEY}")).count(), 4);
    assert!(elsewhere.requests().is_empty());
}

// ---- busy ----

#[test]
fn busy_servers_say_when_to_come_back() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(
        ChatReply::status(429, json!({"error": {"message": "rate limited"}}))
            .with_header("Retry-After", "7"),
    );
    let result = ask(&mut backend);
    let Err(AnswerError::Failed {
        error:
            BackendError::Failed {
                kind,
                ref message,
                retry_after_secs,
            },
        ..
    }) = result
    else {
        panic!("expected a failure: {result:?}")
    };
    assert_eq!(kind, FailureKind::Busy);
    assert_eq!(retry_after_secs, Some(7));
    assert_eq!(
        message,
        &format!(
            "The server at {} is busy (HTTP 429) and asks to wait 7 s. Try again then.",
            server.url()
        )
    );
    server.set_chat(ChatReply::status(
        503,
        json!({"error": "NPU is in use and request queue is full (limit: 10). Please try again later."}),
    ));
    let result = ask(&mut backend);
    let Err(AnswerError::Failed {
        error:
            BackendError::Failed {
                kind,
                ref message,
                retry_after_secs,
            },
        ..
    }) = result
    else {
        panic!("expected a failure: {result:?}")
    };
    assert_eq!((kind, retry_after_secs), (FailureKind::Busy, None));
    assert!(message.contains("busy (HTTP 503)"), "{message}");
    assert!(message.contains("Try again in a moment"), "{message}");
}

// ---- cut answers ----

#[test]
fn a_cut_stream_keeps_the_partial_answer() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::pieces(&["Paris ", "is "]).with_ending(Ending::CutChunked));
    let (kind, message, text) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Cut, "{message}");
    assert!(message.contains("stopped before its end"), "{message}");
    assert!(
        message.contains("The part that arrived is kept"),
        "{message}"
    );
    assert_eq!(text, "Paris is ");
}

#[test]
fn a_stream_that_ends_without_done_is_cut() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::pieces(&["Half ", "an "]).with_ending(Ending::EndsEarly));
    let (kind, message, text) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Cut, "{message}");
    assert!(
        message.contains("closed in the middle of the answer"),
        "{message}"
    );
    assert_eq!(text, "Half an ");
}

#[test]
fn a_proxy_cutting_after_some_bytes_is_a_cut() {
    let server = ScriptedServer::start(Script::new(MODEL, &["one ", "two ", "three ", "four "]));
    let proxy = FaultProxy::start(server.addr, Fault::Pass);
    let mut backend = connect(&proxy.url());
    // The head is about 130 bytes and each piece's event about 200: cut in the third one.
    proxy.set(Fault::CutAfter(560));
    let (kind, message, text) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Cut, "{message}");
    assert!(
        "one two three four ".starts_with(&text) && !text.is_empty(),
        "partial text kept: {text:?}"
    );
    assert!(text.len() < "one two three four ".len());
}

#[test]
fn a_connection_closed_before_any_reply_is_plain() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let proxy = FaultProxy::start(server.addr, Fault::Pass);
    let mut backend = connect(&proxy.url());
    proxy.set(Fault::Reply(String::new()));
    let (kind, message, _) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Cut, "{message}");
    assert!(
        message.contains("closed the connection without answering"),
        "{message}"
    );
}

// ---- replies that are not OpenAI's ----

#[test]
fn a_reply_that_is_not_json_or_sse_is_a_bad_reply() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::Fixed {
        status: 200,
        headers: vec![],
        content_type: "text/html".into(),
        body: "<html><body>Welcome to nginx!</body></html>".into(),
    });
    let (kind, message, _) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::BadReply);
    assert!(
        message.contains("neither JSON nor an event stream"),
        "{message}"
    );
    assert!(message.contains("<html><body>Welcome"), "{message}");
    assert!(message.contains("OpenAI-compatible server"), "{message}");
}

#[test]
fn rewritten_events_and_model_lists_are_bad_replies() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a", "b"]));
    let proxy = FaultProxy::start(server.addr, Fault::Pass);
    let mut backend = connect(&proxy.url());
    // Same length, so the chunk sizes still hold: events whose data is not JSON.
    proxy.set(Fault::Rewrite {
        from: "data: {".into(),
        to: "data: <".into(),
    });
    let (kind, message, _) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::BadReply);
    assert!(
        message.contains("one of its events is not JSON"),
        "{message}"
    );
    proxy.set(Fault::Rewrite {
        from: "\"data\"".into(),
        to: "\"dada\"".into(),
    });
    let e = RemoteBackend::connect(&config(&proxy.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::BadReply);
    assert!(message.contains("no \"data\" array"), "{message}");
    proxy.set(Fault::Reply(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello".into(),
    ));
    let e = RemoteBackend::connect(&config(&proxy.url()), MODEL, quick()).unwrap_err();
    let (kind, message) = failure(&e);
    assert_eq!(kind, FailureKind::BadReply);
    assert!(message.contains("is not JSON"), "{message}");
}

#[test]
fn an_error_body_with_status_200_is_the_servers_error() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    let mut backend = connect(&server.url());
    server.set_chat(ChatReply::status(
        200,
        json!({"error": "Failed to load qwen3:1.7b model!"}),
    ));
    let (kind, message, _) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Server);
    assert_eq!(
        message,
        format!(
            "The server at {} reported an error: Failed to load qwen3:1.7b model!",
            server.url()
        )
    );
    server.set_chat(ChatReply::status(
        500,
        json!({"error": {"message": "CUDA out of memory", "type": "server_error"}}),
    ));
    let (kind, message, _) = failed_answer(ask(&mut backend));
    assert_eq!(kind, FailureKind::Server);
    assert!(
        message.contains("(HTTP 500): CUDA out of memory"),
        "{message}"
    );
}

#[test]
fn connections_are_reused_only_when_allowed() {
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    server.edit(|s| s.connection = Connection::KeepAlive);
    // Reused: /v1/models and /props share one connection; /api/show, answered 404 here (not
    // Ollama), ends on a connection of its own.
    RemoteBackend::connect(&config(&server.url()), MODEL, quick()).unwrap();
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.connections(), 2);
    // Not reused: one connection each.
    let options = ClientOptions {
        reuse_connections: false,
        ..quick()
    };
    RemoteBackend::connect(&config(&server.url()), MODEL, options).unwrap();
    assert_eq!(server.requests().len(), 6);
    assert_eq!(server.connections(), 5);
}

#[test]
fn a_server_that_closes_after_every_reply_works_without_reuse() {
    // FastFlowLM closes its socket after every response without saying so.
    let server = ScriptedServer::start(Script::new(MODEL, &["a"]));
    server.edit(|s| s.connection = Connection::SilentClose);
    let options = ClientOptions {
        reuse_connections: false,
        ..quick()
    };
    let mut backend = RemoteBackend::connect(&config(&server.url()), MODEL, options).unwrap();
    for _ in 0..3 {
        assert_eq!(ask(&mut backend).unwrap().text, "a");
    }
    // Three to open (/v1/models, /props, /api/show) and one per answer.
    assert_eq!(server.requests().len(), 6);
    assert_eq!(server.connections(), 6);
}

// ---- the settings file ----

#[test]
fn the_settings_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config/hearth");
    let mut config = RemoteConfig::new("https://gpu-box.lan:8443/v1")
        .unwrap()
        .with_key(KEY);
    config.model = Some(MODEL.into());
    config.save(&config_dir).unwrap();
    let path = RemoteConfig::path_in(&config_dir);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!format!("{config:?}").contains(KEY));
    let loaded = RemoteConfig::load(&config_dir).unwrap().unwrap();
    assert_eq!(loaded.base_url, "https://gpu-box.lan:8443");
    assert_eq!(loaded.api_key.unwrap().expose(), KEY);
}
