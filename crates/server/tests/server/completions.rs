//! OpenAI's legacy `POST /v1/completions` and `response_format`, and a backend opened before the
//! server started (pinned: it stays loaded, and cannot be loaded again with more context),
//! through `app(state)` with `oneshot` on the tiny Qwen3 fixture.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_backends::CpuBackend;
use hearth_server::{app, AppState, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const MODEL: &str = "tiny-qwen3";

fn pinned() -> AppState {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, MODEL, &Default::default(), None).expect("fixture loads");
    AppState::new(Box::new(backend), ServerOptions::default())
}

fn post(path: &str, body: Value) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, "localhost:11435")
        .body(Body::empty())
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

fn completion(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL, "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

#[tokio::test]
async fn a_prompt_is_continued_plain_and_streamed() {
    let state = pinned();
    let (status, one) = send_json(&state, post("/v1/completions", completion(json!({})))).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["object"], "text_completion");
    assert!(one["id"].as_str().unwrap().starts_with("cmpl-"));
    let choice = &one["choices"][0];
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(one["usage"]["completion_tokens"], 6);
    let text = choice["text"].as_str().unwrap();

    let (status, body) = send(
        &state,
        post("/v1/completions", completion(json!({"stream": true}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let body = String::from_utf8(body).unwrap();
    let data: Vec<&str> = body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.strip_prefix("data: ").expect("a data line"))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let streamed: String = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, text, "the stream adds up to the plain answer");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn what_legacy_completions_cannot_do_is_refused() {
    let state = pinned();
    for (extra, says) in [
        (json!({"echo": true}), "'echo'"),
        (json!({"n": 2}), "n = 1"),
        (json!({"suffix": "end"}), "'suffix'"),
        (json!({"prompt": ""}), "empty"),
        (json!({"prompt": ["a", "b"]}), "give one"),
        (json!({"logprobs": 2}), "'logprobs'"),
        (json!({"model": "other"}), "not found"),
    ] {
        let (status, value) =
            send_json(&state, post("/v1/completions", completion(extra.clone()))).await;
        assert!(status.is_client_error(), "{extra}: {status}");
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{extra}: {message}");
    }
}

#[tokio::test]
async fn response_format_constrains_chat_completions() {
    let state = pinned();
    let chat = |format: Value| {
        json!({
            "model": MODEL, "messages": [{"role": "user", "content": "Hello"}],
            "max_tokens": 48, "temperature": 0, "response_format": format,
        })
    };
    let (status, one) = send_json(
        &state,
        post("/v1/chat/completions", chat(json!({"type": "json_object"}))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    let text = one["choices"][0]["message"]["content"].as_str().unwrap();
    if one["choices"][0]["finish_reason"] == "stop" {
        let value: Value = serde_json::from_str(text).expect("json_object answers JSON");
        assert!(value.is_object(), "{text}");
    } else {
        assert!(text.trim_start().starts_with('{'), "{text}");
    }

    for bad in [
        json!({"type": "xml"}),
        json!({"type": "json_schema"}),
        json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": 3}}}),
    ] {
        let (status, value) =
            send_json(&state, post("/v1/chat/completions", chat(bad.clone()))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {value}");
        assert_eq!(value["error"]["param"], "response_format", "{value}");
    }
}

#[tokio::test]
async fn a_pinned_backend_stays_loaded_and_cannot_grow_its_context() {
    let state = pinned();
    let unload = json!({"model": MODEL, "prompt": "", "keep_alive": 0});
    let (status, value) = send_json(&state, post("/api/generate", unload)).await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["done_reason"], "load", "it stays loaded: {value}");
    assert!(!state.unload_expired(Instant::now() + Duration::from_secs(86_400)));
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(ps["models"][0]["name"], MODEL, "still loaded: {ps}");

    let bigger = json!({"model": MODEL, "prompt": "hi", "options": {"num_ctx": 4096}});
    let (status, value) = send_json(&state, post("/api/generate", bigger)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        value["error"].as_str().unwrap().contains("--context"),
        "{value}"
    );
}
