//! `/v1/embeddings` (OpenAI's shape) and `/api/embed`, `/api/embeddings` (Ollama's) through
//! `app(state)` with `oneshot`, on the tiny BERT encoder of the engine fixtures (32 dimensions)
//! and the tiny Qwen3 embedding model (64 dimensions, standing in for an installed
//! Qwen3-Embedding-0.6B) beside the tiny Qwen3 chat model. The vectors must be the engine's own.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_app::{Home, LocalModel};
use hearth_engine::{DecoderEmbedder, Embedder};
use hearth_server::{app, AppState, EmbeddingSource, LoadSettings, LocalModels, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const EMBEDDER: &str = "tiny-bert";
/// The name the tiny Qwen3 embedding fixture is served under, as an installed model would be.
const QWEN3_EMBEDDER: &str = "Qwen3-Embedding-0.6B";

/// The home the models open in: a model on the processor reads nothing there, so its folders
/// are never created.
fn home() -> Home {
    let unused = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("server-tests-home");
    Home {
        data_dir: unused.join("data"),
        config_dir: unused.join("config"),
        state_dir: unused.join("state"),
        builtin: None,
        system_root: "/".into(),
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

fn state_with(embedding_models: Vec<EmbeddingSource>) -> AppState {
    let models = LocalModels::new(
        home(),
        vec![LocalModel {
            name: "tiny-qwen3".into(),
            ..LocalModel::folder(fixture("tiny-qwen3"))
        }],
        LoadSettings {
            context_length: Some(64),
            ..LoadSettings::default()
        },
    );
    AppState::on_demand(
        models,
        ServerOptions {
            embedding_models,
            ..ServerOptions::default()
        },
    )
}

fn state() -> AppState {
    state_with(vec![
        EmbeddingSource {
            name: EMBEDDER.into(),
            folder: fixture("tiny-bert"),
        },
        EmbeddingSource {
            name: QWEN3_EMBEDDER.into(),
            folder: fixture("tiny-qwen3-embedding"),
        },
    ])
}

fn post(path: &str, body: Value) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "127.0.0.1:11434")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

async fn send(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// The engine's vectors for `texts`, to compare the server's with.
fn engine_vectors(texts: &[&str]) -> Vec<Vec<f32>> {
    Embedder::load(&fixture("tiny-bert"), Some(1))
        .unwrap()
        .embed(texts)
        .unwrap()
}

fn floats(value: &Value) -> Vec<f32> {
    value
        .as_array()
        .expect("an array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

#[tokio::test]
async fn openai_embeddings_answer_in_openais_shape() {
    let texts = ["Hearth reads your files.", "The lazy dog sleeps."];
    let (status, value) = send(
        &state(),
        post("/v1/embeddings", json!({"model": EMBEDDER, "input": texts})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["object"], "list");
    assert_eq!(value["model"], EMBEDDER);
    let want = engine_vectors(&texts);
    let data = value["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, item) in data.iter().enumerate() {
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], i);
        assert_eq!(floats(&item["embedding"]), want[i], "vector {i}");
    }
    let tokens = value["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(tokens >= 4, "{value}");
    assert_eq!(value["usage"]["total_tokens"], tokens);
}

#[tokio::test]
async fn openai_base64_is_the_little_endian_floats() {
    let (status, value) = send(
        &state(),
        post(
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": "one text", "encoding_format": "base64"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    let encoded = value["data"][0]["embedding"]
        .as_str()
        .expect("a base64 string");
    let (_, float) = send(
        &state(),
        post(
            "/v1/embeddings",
            json!({"model": EMBEDDER, "input": "one text"}),
        ),
    )
    .await;
    let vector = floats(&float["data"][0]["embedding"]);
    assert_eq!(encoded.len(), (vector.len() * 4).div_ceil(3) * 4);
    // Decoded by hand: 4 base64 characters carry 3 bytes.
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bytes = Vec::new();
    for chunk in encoded.as_bytes().chunks(4) {
        let mut n = 0u32;
        let mut count = 0;
        for &c in chunk {
            n <<= 6;
            if c != b'=' {
                n |= alphabet.find(c as char).unwrap() as u32;
                count += 1;
            }
        }
        bytes.extend(&n.to_be_bytes()[1..count]);
    }
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(decoded, vector);
}

#[tokio::test]
async fn ollama_embed_answers_in_ollamas_shape() {
    let state = state();
    let (status, value) = send(
        &state,
        post(
            "/api/embed",
            json!({"model": EMBEDDER, "input": ["a", "b c"]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["model"], EMBEDDER);
    let embeddings = value["embeddings"].as_array().unwrap();
    let want = engine_vectors(&["a", "b c"]);
    assert_eq!(floats(&embeddings[0]), want[0]);
    assert_eq!(floats(&embeddings[1]), want[1]);
    for key in ["total_duration", "load_duration", "prompt_eval_count"] {
        assert!(value[key].is_u64(), "Ollama's answer has {key}: {value}");
    }

    let (status, value) = send(
        &state,
        post("/api/embeddings", json!({"model": EMBEDDER, "prompt": "a"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(floats(&value["embedding"]), want[0]);
}

#[tokio::test]
async fn a_long_text_is_cut_unless_truncate_is_false() {
    let long = "offline assistant cites files ".repeat(100);
    let state = state();
    let (status, value) = send(
        &state,
        post("/api/embed", json!({"model": EMBEDDER, "input": long})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(value["prompt_eval_count"], 256, "cut to 256 tokens");
    let (status, value) = send(
        &state,
        post(
            "/api/embed",
            json!({"model": EMBEDDER, "input": long, "truncate": false}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
}

#[tokio::test]
async fn wrong_requests_are_told_what_to_send() {
    let state = state();
    let cases = [
        (
            json!({"model": "tiny-qwen3", "input": "x"}),
            StatusCode::BAD_REQUEST,
            "use an embedding model: \"tiny-bert\", \"Qwen3-Embedding-0.6B\"",
        ),
        (
            json!({"model": "text-embedding-3-small", "input": "x"}),
            StatusCode::NOT_FOUND,
            "tiny-bert",
        ),
        (
            json!({"model": EMBEDDER, "input": []}),
            StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            json!({"model": EMBEDDER, "input": [1, 2, 3]}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
        (
            json!({"model": EMBEDDER, "input": "x", "dimensions": 8}),
            StatusCode::BAD_REQUEST,
            "32 dimensions",
        ),
        (
            json!({"model": EMBEDDER, "input": "x", "encoding_format": "int8"}),
            StatusCode::BAD_REQUEST,
            "base64",
        ),
    ];
    for (body, want, says) in cases {
        let (status, value) = send(&state, post("/v1/embeddings", body.clone())).await;
        assert_eq!(status, want, "{body}: {value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}: {message}");
    }
}

#[tokio::test]
async fn a_server_without_an_embedding_model_says_so() {
    let state = state_with(Vec::new());
    let (status, value) = send(
        &state,
        post("/api/embed", json!({"model": "tiny-qwen3", "input": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    let message = value["error"].as_str().unwrap();
    assert!(message.contains("no embedding model"), "{message}");
}

#[tokio::test]
async fn an_installed_qwen3_embedding_model_answers_when_named_and_the_encoder_after_it() {
    let state = state();
    let texts = ["Hearth reads your files.", "Le train part à neuf heures."];
    let (status, value) = send(
        &state,
        post(
            "/v1/embeddings",
            json!({"model": "qwen3-embedding-0.6b", "input": texts}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(
        value["model"], QWEN3_EMBEDDER,
        "the served name, whatever the case asked"
    );
    let want = DecoderEmbedder::load(&fixture("tiny-qwen3-embedding"), Some(1))
        .unwrap()
        .embed(&texts)
        .unwrap();
    let data = value["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, item) in data.iter().enumerate() {
        let vector = floats(&item["embedding"]);
        assert_eq!(vector.len(), 64, "the Qwen3 fixture's hidden size");
        assert_eq!(
            vector, want[i],
            "vector {i} is the decoder's last-token vector"
        );
    }
    let tokens = value["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        tokens >= 4,
        "each text counts its <|endoftext|> too: {value}"
    );

    // The other model is loaded in its place when a request names it.
    let (status, value) = send(
        &state,
        post("/v1/embeddings", json!({"model": EMBEDDER, "input": texts})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{value}");
    assert_eq!(
        floats(&value["data"][1]["embedding"]),
        engine_vectors(&texts)[1]
    );

    let (status, value) = send(
        &state,
        post(
            "/v1/embeddings",
            json!({"model": "text-embedding-3-small", "input": "x"}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{value}");
    assert_eq!(
        value["error"]["type"], "invalid_request_error",
        "OpenAI's shape: {value}"
    );
    assert_eq!(value["error"]["code"], "model_not_found", "{value}");
    let message = value["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("text-embedding-3-small")
            && message.contains("\"tiny-bert\"")
            && message.contains("\"Qwen3-Embedding-0.6B\""),
        "names what was asked and every embedding model there is: {message}"
    );
}

/// A request for `count` copies of `text` from `model`.
fn many(model: &str, text: &str, count: usize) -> Value {
    json!({"model": model, "input": vec![text; count]})
}

#[tokio::test]
async fn p14_a_request_with_too_many_inputs_or_tokens_is_refused_before_any_work() {
    let state = state();
    for path in ["/v1/embeddings", "/api/embed"] {
        let (status, value) = send(&state, post(path, many(EMBEDDER, "", 2049))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {value}");
        assert!(
            value.to_string().contains("at most 2048"),
            "{path}: {value}"
        );
    }
    let (status, value) = send(&state, post("/v1/embeddings", many(EMBEDDER, "", 2048))).await;
    assert_eq!(status, StatusCode::OK, "2048 texts are allowed: {value}");
    assert_eq!(value["data"].as_array().unwrap().len(), 2048);

    // Cut at what the model reads, 300 long texts are still more than 65,536 tokens.
    let long = "lighthouse keepers climb the tower every evening ".repeat(60);
    let (status, value) = send(&state, post("/v1/embeddings", many(EMBEDDER, &long, 300))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{value}");
    assert!(value.to_string().contains("65536 tokens"), "{value}");
}

#[tokio::test]
async fn p14_embedding_requests_cannot_take_chats_place_and_stop_when_their_client_leaves() {
    // One chat place (no queue), as the tightest server.
    let models = LocalModels::new(
        home(),
        vec![LocalModel {
            name: "tiny-qwen3".into(),
            ..LocalModel::folder(fixture("tiny-qwen3"))
        }],
        LoadSettings {
            context_length: Some(64),
            ..LoadSettings::default()
        },
    );
    let state = AppState::on_demand(
        models,
        ServerOptions {
            embedding_models: vec![EmbeddingSource {
                name: QWEN3_EMBEDDER.into(),
                folder: fixture("tiny-qwen3-embedding"),
            }],
            queue: 0,
            ..ServerOptions::default()
        },
    );
    // Within the bounds, and some seconds of work on the tiny model.
    let body = many(QWEN3_EMBEDDER, "a passage to embed", 2000);
    let mut clients: Vec<_> = (0..9)
        .map(|_| {
            let (state, body) = (state.clone(), body.clone());
            tokio::spawn(async move { send(&state, post("/v1/embeddings", body)).await })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let chat = json!({
        "model": "tiny-qwen3",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 2,
    });
    let (status, value) = send(&state, post("/v1/chat/completions", chat)).await;
    assert_eq!(status, StatusCode::OK, "chat keeps its place: {value}");
    let mut turned_away = 0;
    for client in std::mem::take(&mut clients) {
        if client.is_finished() {
            let (status, value) = client.await.unwrap();
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{value}");
            turned_away += 1;
        } else {
            clients.push(client);
        }
    }
    assert_eq!(turned_away, 7, "two embedding requests are let in at once");

    // Every client leaves; the embedding line is free again within a few batches.
    for client in &clients {
        client.abort();
    }
    let started = std::time::Instant::now();
    loop {
        let (status, value) =
            send(&state, post("/v1/embeddings", many(QWEN3_EMBEDDER, "x", 1))).await;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{value}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "the work of clients that left still holds the line"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
