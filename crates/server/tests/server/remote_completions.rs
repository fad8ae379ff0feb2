//! `POST /v1/completions` on a server whose backend is a remote server (as `hearth serve
//! --backend remote`): the raw prompt goes on to the remote server's own `/v1/completions`.
//! The remote server is another Hearth server on loopback running the tiny Qwen3 fixture on the
//! CPU, so the continuation must be the one it gives when asked directly.

use std::path::PathBuf;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_backends::CpuBackend;
use hearth_chat::{Backend, BackendKind};
use hearth_server::{app, serve_blocking, AppState, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const MODEL: &str = "tiny-qwen3";

/// A Hearth server on a free loopback port running the fixture on the CPU, serving until the
/// test process ends; its state, for asking it directly, and its address.
fn upstream() -> (AppState, String) {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, MODEL, &Default::default(), None).expect("fixture loads");
    let state = AppState::new(Box::new(backend), ServerOptions::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let serving = state.clone();
    std::thread::spawn(move || serve_blocking(listener, serving));
    (state, url)
}

fn post(body: Value) -> Request<Body> {
    Request::post("/v1/completions")
        .header(header::HOST, "localhost:11435")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn send(state: &AppState, body: Value) -> (StatusCode, String) {
    let response = app(state.clone()).oneshot(post(body)).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn a_raw_prompt_is_continued_by_the_remote_servers_own_completions() {
    let (direct, url) = upstream();
    let config = RemoteConfig::new(&url).unwrap();
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(30),
        reuse_connections: true,
    };
    // Connecting is blocking HTTP: off the runtime's thread.
    let remote =
        tokio::task::spawn_blocking(move || RemoteBackend::connect(&config, MODEL, options))
            .await
            .unwrap()
            .expect("the remote server lists the fixture");
    assert_eq!(remote.info().kind, BackendKind::Remote);
    let through = AppState::new(Box::new(remote), ServerOptions::default());

    let body = json!({
        "model": MODEL, "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0,
    });
    let (status, asked) = send(&direct, body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{asked}");
    let asked: Value = serde_json::from_str(&asked).unwrap();
    let (status, relayed) = send(&through, body.clone()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the remote no longer refuses: {relayed}"
    );
    let relayed: Value = serde_json::from_str(&relayed).unwrap();
    assert_eq!(
        relayed["choices"][0]["text"], asked["choices"][0]["text"],
        "the same greedy continuation through the remote backend as asked directly"
    );
    assert_eq!(relayed["choices"][0]["finish_reason"], "length");
    assert_eq!(
        relayed["usage"]["completion_tokens"], 6,
        "the remote's usage: {relayed}"
    );

    let mut streamed_body = body;
    streamed_body["stream"] = json!(true);
    let (status, events) = send(&through, streamed_body).await;
    assert_eq!(status, StatusCode::OK, "{events}");
    let data: Vec<&str> = events
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| e.strip_prefix("data: ").expect("a data line"))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let streamed: String = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .map(|c| {
            c["choices"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        streamed, asked["choices"][0]["text"],
        "the streamed pieces add up"
    );
}
