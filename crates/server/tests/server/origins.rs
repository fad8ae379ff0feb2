//! Issue 58 P15 through the API: the prompt prefixes the backend keeps are reused only for the
//! client that computed them (each `Authorization: Bearer` key is one client, requests without
//! one share another), so a client cannot time whether another's conversation began with a
//! text it guesses. Reuse is read from the receipt (tokens run through the model), never timed.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_backends::CpuBackend;
use hearth_server::{app, AppState, ServerOptions};
use http_body_util::BodyExt;
use serde_json::json;
use tower::ServiceExt;

const MODEL_ID: &str = "tiny-qwen3";

fn state() -> AppState {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend =
        CpuBackend::open(&dir, MODEL_ID, &Default::default(), None).expect("fixture model loads");
    AppState::new(Box::new(backend), ServerOptions::default())
}

/// Asks the same question as `key` (or with no key); the prompt's tokens and those the model
/// read (the rest came from a kept prefix).
async fn ask(state: &AppState, key: Option<&str>) -> (usize, usize) {
    let body = json!({
        "model": MODEL_ID,
        "messages": [{"role": "user", "content": "My secret project is called Bluebird"}],
        "temperature": 0,
        "max_tokens": 4,
    });
    let mut request = Request::post("/v1/chat/completions")
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let request = request.body(Body::from(body.to_string())).unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let receipt = state.last_receipt().expect("an answer leaves a receipt");
    let read = receipt
        .backend_timings
        .and_then(|t| t.prefill_tokens)
        .expect("the cpu says what it read");
    (receipt.prompt_tokens, read)
}

#[tokio::test]
async fn p15_one_clients_prompt_is_not_reused_for_another() {
    let state = state();
    let (prompt, read) = ask(&state, Some("key-a")).await;
    assert_eq!(read, prompt, "the first prompt is read whole");

    // Another key, and a request without one, read the same prompt whole: while the first
    // client's sequence is live, and after it was kept.
    assert_eq!(ask(&state, Some("key-b")).await, (prompt, prompt));
    assert_eq!(ask(&state, None).await, (prompt, prompt));

    // Each client still reuses its own: all but the last prompt token, which always runs.
    assert_eq!(ask(&state, Some("key-a")).await, (prompt, 1));
    assert_eq!(ask(&state, Some("key-b")).await, (prompt, 1));
    assert_eq!(
        ask(&state, None).await,
        (prompt, 1),
        "keyless requests share one"
    );
}
