//! The API end to end through `app(state)` with `oneshot` (no socket), on the tiny Qwen3 model
//! from the engine fixtures (real weights, tokenizer and chat template; a 128-token context).

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_backends::CpuBackend;
use hearth_server::{app, AppState, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const MODEL_ID: &str = "tiny-qwen3";

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3")
}

fn state_with(options: ServerOptions) -> AppState {
    let backend = CpuBackend::open(&model_dir(), MODEL_ID, &Default::default(), None)
        .expect("fixture model loads");
    backend.require_chat().expect("the fixture is a chat model");
    AppState::new(Box::new(backend), options)
}

fn state() -> AppState {
    state_with(ServerOptions::default())
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, "127.0.0.1:11435")
        .body(Body::empty())
        .unwrap()
}

fn post(body: impl Into<Body>) -> Request<Body> {
    Request::post("/v1/chat/completions")
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap()
}

async fn send(state: &AppState, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, bytes.to_vec())
}

async fn send_json(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let (status, body) = send(state, request).await;
    let value = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("body is JSON ({e}): {}", String::from_utf8_lossy(&body)));
    (status, value)
}

fn chat_body(extra: Value) -> String {
    let mut body = json!({
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "Tell me a story"}],
        "temperature": 0,
        "seed": 1,
        "max_tokens": 16,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

/// Parses an SSE body into its `data:` payloads.
fn sse_data(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8(body.to_vec()).expect("SSE is UTF-8");
    text.split("\n\n")
        .filter(|event| !event.trim().is_empty())
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("event is a data line: {event:?}"))
                .to_owned()
        })
        .collect()
}

/// The streamed text and the last JSON chunk.
fn stream_text(body: &[u8]) -> (String, Value) {
    let data = sse_data(body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{data:?}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk is JSON"))
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect::<String>();
    (text, chunks.last().unwrap().clone())
}

fn error_of(value: &Value) -> (&str, &str) {
    let error = &value["error"];
    (
        error["message"].as_str().expect("error.message"),
        error["code"].as_str().unwrap_or_default(),
    )
}

#[tokio::test]
async fn models_tags_and_version_describe_the_served_model() {
    let state = state();
    let (status, models) = send_json(&state, get("/v1/models")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL_ID);
    assert_eq!(models["data"][0]["context_length"], 128);

    let (status, one) = send_json(&state, get("/v1/models/tiny-qwen3")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["id"], MODEL_ID);

    let (status, tags) = send_json(&state, get("/api/tags")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(tags["models"][0]["name"], MODEL_ID);

    let (status, version) = send_json(&state, get("/api/version")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test]
async fn greedy_completion_reports_text_usage_and_timings() {
    let state = state();
    let (status, first) = send_json(&state, post(chat_body(json!({})))).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["object"], "chat.completion");
    assert_eq!(first["model"], MODEL_ID);
    let choice = &first["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().unwrap();
    assert!(!text.is_empty(), "the model says something");
    let usage = &first["usage"];
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!(prompt > 3, "the rendered prompt has the template's tokens");
    assert!((1..=16).contains(&completion), "max_tokens is honoured");
    assert_eq!(usage["total_tokens"].as_u64(), Some(prompt + completion));
    for field in [
        "prefill_duration_ttft",
        "prefill_speed_tps",
        "decoding_duration",
        "decoding_speed_tps",
    ] {
        assert!(usage[field].is_f64(), "usage.{field} is reported");
    }
    let expected_reason = if completion == 16 { "length" } else { "stop" };
    assert_eq!(choice["finish_reason"], expected_reason);

    let (_, second) = send_json(&state, post(chat_body(json!({})))).await;
    assert_eq!(
        second["choices"][0]["message"]["content"], text,
        "greedy answers repeat exactly"
    );
}

#[tokio::test]
async fn max_completion_tokens_limits_the_answer() {
    let state = state();
    let (status, answer) = send_json(
        &state,
        post(chat_body(
            json!({"max_completion_tokens": 2, "max_tokens": 50}),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(answer["usage"]["completion_tokens"].as_u64().unwrap() <= 2);
}

#[tokio::test]
async fn seeded_sampling_is_reproducible() {
    let state = state();
    let body = chat_body(json!({"temperature": 1.0, "top_p": 0.9, "seed": 42}));
    let (_, a) = send_json(&state, post(body.clone())).await;
    let (_, b) = send_json(&state, post(body)).await;
    assert_eq!(a["choices"][0]["message"], b["choices"][0]["message"]);
}

#[tokio::test]
async fn stream_chunks_concatenate_to_the_plain_answer() {
    let state = state();
    let (_, plain) = send_json(&state, post(chat_body(json!({})))).await;
    let (status, body) = send(&state, post(chat_body(json!({"stream": true})))).await;
    assert_eq!(status, StatusCode::OK);
    let (text, last) = stream_text(&body);
    assert_eq!(
        text,
        plain["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(
        last["choices"][0]["finish_reason"],
        plain["choices"][0]["finish_reason"]
    );
    assert_eq!(last["object"], "chat.completion.chunk");
    assert_eq!(
        last["usage"]["completion_tokens"],
        plain["usage"]["completion_tokens"]
    );
    assert_eq!(
        last["usage"]["prompt_tokens"],
        plain["usage"]["prompt_tokens"]
    );
}

#[tokio::test]
async fn stop_strings_end_the_answer_before_them() {
    let state = state();
    let (_, plain) = send_json(&state, post(chat_body(json!({"max_tokens": 24})))).await;
    let full = plain["choices"][0]["message"]["content"].as_str().unwrap();
    let chars: Vec<char> = full.chars().collect();
    assert!(
        chars.len() >= 4,
        "the fixture answer is long enough: {full:?}"
    );
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let expected = &full[..full.find(&stop).unwrap()];

    let body = chat_body(json!({"max_tokens": 24, "stop": [stop.clone(), "\u{0}never"]}));
    let (status, cut) = send_json(&state, post(body.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cut["choices"][0]["message"]["content"], expected);
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");

    let body = chat_body(json!({"max_tokens": 24, "stop": stop, "stream": true}));
    let (_, streamed) = send(&state, post(body)).await;
    let (text, last) = stream_text(&streamed);
    assert_eq!(text, expected, "streaming never shows the stop string");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn malformed_requests_get_clear_400s() {
    let state = state();
    let cases = [
        ("{not json", "not valid JSON"),
        ("", "body is empty"),
        (r#"{"messages": "hi"}"#, "'messages' is invalid"),
        (r#"{"model": "tiny-qwen3"}"#, "missing field `messages`"),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#,
            "'temperature' is invalid",
        ),
        (r#"{"messages": []}"#, "'messages' is empty"),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"temperature":9}"#,
            "between 0 and 2",
        ),
    ];
    for (body, expected) in cases {
        let (status, value) = send_json(&state, post(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {value}");
        let (message, _) = error_of(&value);
        assert!(message.contains(expected), "{body}: {message}");
        assert_eq!(value["error"]["type"], "invalid_request_error");
    }
}

#[tokio::test]
async fn unknown_model_is_404() {
    let state = state();
    let (status, value) = send_json(&state, post(chat_body(json!({"model": "gpt-4o"})))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (message, code) = error_of(&value);
    assert_eq!(code, "model_not_found");
    assert!(
        message.contains("gpt-4o") && message.contains(MODEL_ID),
        "{message}"
    );
}

#[tokio::test]
async fn a_prompt_longer_than_the_context_is_refused_plain_and_streamed() {
    let state = state();
    let long = "tell me more about this ".repeat(100);
    for stream in [false, true] {
        let body = chat_body(json!({
            "messages": [{"role": "user", "content": long}],
            "stream": stream,
        }));
        let (status, value) = send_json(&state, post(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "stream {stream}: {value}");
        let (message, code) = error_of(&value);
        assert_eq!(code, "context_length_exceeded");
        assert!(message.contains("holds 128"), "{message}");
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_in_json() {
    let state = state();
    let (status, value) = send_json(&state, get("/v1/audio/speech")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_of(&value).0.contains("/v1/audio/speech"));
    let (status, _) = send_json(&state, get("/v1/chat/completions")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn foreign_host_and_origin_are_refused() {
    let state = state();
    let rebound = Request::get("/v1/models")
        .header(header::HOST, "attacker.example:11435")
        .body(Body::empty())
        .unwrap();
    let (status, value) = send_json(&state, rebound).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (message, code) = error_of(&value);
    assert_eq!(code, "forbidden_host");
    assert!(message.contains("attacker.example"), "{message}");

    let no_host = Request::get("/v1/models").body(Body::empty()).unwrap();
    assert_eq!(send(&state, no_host).await.0, StatusCode::FORBIDDEN);

    let cross_site = Request::post("/v1/chat/completions")
        .header(header::HOST, "127.0.0.1:11435")
        .header(header::ORIGIN, "https://evil.example")
        .body(Body::from(chat_body(json!({}))))
        .unwrap();
    let (status, value) = send_json(&state, cross_site).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(error_of(&value).1, "forbidden_origin");

    let local_page = Request::get("/v1/models")
        .header(header::HOST, "localhost:11435")
        .header(header::ORIGIN, "http://localhost:5173")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&state, local_page).await.0, StatusCode::OK);
}

#[tokio::test]
async fn oversize_body_is_413() {
    // A route without pictures keeps the plain limit (the chat routes add the bounded pictures
    // on top: pictures_body.rs).
    let state = state();
    let big = format!(
        r#"{{"prompt":"{}"}}"#,
        "a".repeat(hearth_server::DEFAULT_BODY_LIMIT + 1)
    );
    let request = Request::post("/v1/completions")
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(big))
        .unwrap();
    let (status, value) = send_json(&state, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(error_of(&value).0.contains("4 MB"), "{value}");
}

#[tokio::test]
async fn full_queue_is_503() {
    let state = state_with(ServerOptions {
        queue: 0,
        ..ServerOptions::default()
    });
    // A streamed answer the test does not read holds the model: the greedy answer runs to the
    // end of the context (about 100 pieces, more than the server buffers), so the generating
    // thread blocks with its place in line until the client reads or leaves.
    let body = chat_body(json!({"stream": true, "max_tokens": 120}));
    let held = app(state.clone()).oneshot(post(body)).await.unwrap();
    assert_eq!(held.status(), StatusCode::OK);

    let (status, value) = send_json(&state, post(chat_body(json!({})))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{value}");
    assert!(error_of(&value).0.contains("busy"));
    drop(held);
}

#[tokio::test]
async fn a_client_leaving_mid_stream_cancels_generation() {
    let state = state();
    let body = chat_body(json!({"stream": true, "max_tokens": 120}));
    // As above: the greedy answer is longer than the server buffers, so it cannot end before
    // the client leaves.
    let response = app(state.clone()).oneshot(post(body)).await.unwrap();
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.is_data());
    drop(body);
    // Wait (without a deadline: this checks what happens, not how fast) for the generating
    // thread to notice.
    let receipt = loop {
        if let Some(receipt) = state.last_receipt() {
            break receipt;
        }
        tokio::task::yield_now().await;
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(receipt.stop_reason, "stopped", "{receipt:?}");
    assert!(receipt.generated_tokens < 120);
}
