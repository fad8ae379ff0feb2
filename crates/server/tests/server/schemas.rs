//! Hostile JSON schemas on both routes (issue 58, P12 and P13), through `app(state)` with
//! `oneshot` on the tiny Qwen3 fixture: a schema Hearth cannot follow within its bounds gets a
//! 400 that names the bound, before any work, on OpenAI's `response_format` and on Ollama's
//! `format`; a schema whose readings multiply only once the answer is written ends that answer
//! with a plain error within moments; and the server goes on answering.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_backends::CpuBackend;
use hearth_server::{app, AppState, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};
use tower::ServiceExt;

const MODEL: &str = "tiny-qwen3";

fn state() -> AppState {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, MODEL, &Default::default(), None).expect("fixture loads");
    AppState::new(Box::new(backend), ServerOptions::default())
}

async fn send(state: &AppState, path: &str, body: &Value) -> (StatusCode, Value) {
    let request = Request::post(path)
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// The error message of either API's error body.
fn message(value: &Value) -> &str {
    value["error"]
        .as_str()
        .or_else(|| value["error"]["message"].as_str())
        .unwrap_or_else(|| panic!("an error body: {value}"))
}

/// `schema` asked for on both routes: OpenAI's chat and Ollama's chat.
fn both_routes(schema: &Value, options: Value) -> [(&'static str, Value); 2] {
    let messages = json!([{"role": "user", "content": "[[[["}]);
    [
        (
            "/v1/chat/completions",
            json!({"model": MODEL, "messages": messages, "max_tokens": 8, "temperature": 0,
                   "response_format": {"type": "json_schema",
                                       "json_schema": {"name": "x", "schema": schema}}}),
        ),
        (
            "/api/chat",
            json!({"model": MODEL, "messages": messages, "stream": false, "format": schema,
                   "options": options}),
        ),
    ]
}

/// `{"$ref": "#/$defs/a0"}` and `a0` to `a{links - 1}` each pointing at the next.
fn ref_chain(links: usize) -> Value {
    let mut defs: Map<String, Value> = (0..links)
        .map(|i| {
            (
                format!("a{i}"),
                json!({"$ref": format!("#/$defs/a{}", i + 1)}),
            )
        })
        .collect();
    defs.insert(format!("a{links}"), json!({"type": "null"}));
    json!({"$ref": "#/$defs/a0", "$defs": defs})
}

/// The review's P13 schema: any of `alternatives` arrays of itself, all alike or each with its
/// own `maxItems`.
fn arrays_of_arrays(alternatives: usize, distinct: bool) -> Value {
    let array = |i: usize| match distinct {
        true => json!({"type": "array", "items": {"$ref": "#/$defs/s"}, "maxItems": i + 1}),
        false => json!({"type": "array", "items": {"$ref": "#/$defs/s"}}),
    };
    let alternatives: Vec<Value> = (0..alternatives).map(array).collect();
    json!({"$defs": {"s": {"anyOf": alternatives}}, "$ref": "#/$defs/s"})
}

/// A plain request still gets its answer.
async fn still_serving(state: &AppState) {
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                      "max_tokens": 4, "temperature": 0});
    let (status, value) = send(state, "/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK, "{value}");
}

#[tokio::test]
async fn p12_ref_chain_is_refused_not_a_stack_overflow() {
    let state = state();
    let chain = ref_chain(100_000); // about 3.4 MB, under the body limit
    for (path, body) in both_routes(&chain, json!({"temperature": 0})) {
        let started = Instant::now();
        let (status, value) = send(&state, path, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {value}");
        let text = message(&value);
        assert!(
            text.contains("a chain of more than 64 \"$ref\"s"),
            "{path}: {text}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{path}");
    }
    still_serving(&state).await;
}

#[tokio::test]
async fn p13_any_of_of_arrays_is_bounded() {
    let state = state();
    // 1,000 copies of one alternative (48 KB) are one: answered at once.
    let copies = arrays_of_arrays(1_000, false);
    for (path, body) in both_routes(&copies, json!({"temperature": 0, "num_predict": 8})) {
        let started = Instant::now();
        let (status, value) = send(&state, path, &body).await;
        assert_eq!(status, StatusCode::OK, "{path}: {value}");
        assert!(started.elapsed() < Duration::from_secs(10), "{path}");
    }
    // More different alternatives than an anyOf may have: refused by name before any work.
    let wide = arrays_of_arrays(65, true);
    for (path, body) in both_routes(&wide, json!({"temperature": 0})) {
        let (status, value) = send(&state, path, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {value}");
        assert!(
            message(&value).contains("more than 64 different alternatives"),
            "{path}"
        );
    }
    still_serving(&state).await;
}

#[tokio::test]
async fn p13_readings_that_multiply_end_the_answer_with_an_error_at_once() {
    let state = state();
    // 64 different alternatives pass the compile, but every "[" multiplies the readings by 64.
    // Sampled from every token, each choice scans the vocabulary, "[" included, so the first
    // choice after a "[" goes past the bound.
    let schema = arrays_of_arrays(64, true);
    let hot = json!({"temperature": 1.5, "top_k": 0, "top_p": 1, "min_p": 0, "seed": 3,
                     "num_predict": 40});
    let [_, (path, body)] = both_routes(&schema, hot);
    let started = Instant::now();
    let (status, value) = send(&state, path, &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    assert!(
        message(&value).contains("more than 256 ways at once"),
        "{value}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    still_serving(&state).await;
}
