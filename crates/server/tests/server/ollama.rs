//! Ollama's routes through `app(state)` with `oneshot` (no socket), on the tiny Qwen3 model from
//! the engine fixtures served on demand (real weights, tokenizer and chat template; trained for
//! 128 positions, loaded with 64 unless a request asks for more). Every answer is checked
//! against the keys Ollama gives (tests/fixtures/ollama_keys.json).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_app::{Home, LocalModel};
use hearth_server::{app, AppState, LoadSettings, LocalModels, ServerOptions};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

const MODEL: &str = "tiny-qwen3";

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

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3")
}

fn state_with(options: ServerOptions) -> AppState {
    let models = LocalModels::new(
        home(),
        vec![LocalModel {
            name: MODEL.into(),
            ..LocalModel::folder(fixture_dir())
        }],
        LoadSettings {
            context_length: Some(64),
            ..LoadSettings::default()
        },
    );
    AppState::on_demand(models, options)
}

fn state() -> AppState {
    state_with(ServerOptions::default())
}

/// The keys Ollama answers with, by object.
fn keys(object: &str) -> Vec<String> {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ollama_keys.json"),
    )
    .expect("the key fixture is committed");
    let all: Value = serde_json::from_str(&text).expect("the key fixture is JSON");
    serde_json::from_value(all[object].clone()).expect("a list of keys")
}

fn assert_keys(object: &str, value: &Value) {
    for key in keys(object) {
        assert!(
            value.get(&key).is_some(),
            "Ollama's {object} has '{key}'; Hearth's lacks it: {value}"
        );
    }
}

fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header(header::HOST, "localhost:11434")
        .body(Body::empty())
        .unwrap()
}

fn post(path: &str, body: Value) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "127.0.0.1:11434")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
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

/// The objects of a newline-delimited JSON body.
fn ndjson(body: &[u8]) -> Vec<Value> {
    String::from_utf8(body.to_vec())
        .expect("UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

fn chat(extra: Value) -> Value {
    let mut body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell me a story"}],
        "options": {"temperature": 0, "seed": 1, "num_predict": 12},
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn error_text(value: &Value) -> &str {
    assert_keys("error", value);
    value["error"]
        .as_str()
        .expect("Ollama's error is a plain string")
}

#[tokio::test]
async fn chat_streams_newline_delimited_json_ending_with_counters() {
    let state = state();
    let (status, body) = send(&state, post("/api/chat", chat(json!({})))).await;
    assert_eq!(status, StatusCode::OK);
    let objects = ndjson(&body);
    assert!(objects.len() >= 2, "pieces then the last: {objects:?}");
    let (last, pieces) = objects.split_last().unwrap();
    for piece in pieces {
        assert_keys("chat_piece", piece);
        assert_keys("chat_message", &piece["message"]);
        assert_eq!(piece["done"], false);
    }
    assert_keys("chat_last", last);
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "length", "12 tokens asked for");
    assert_eq!(last["eval_count"], 12);
    assert!(last["prompt_eval_count"].as_u64().unwrap() > 0);
    assert!(
        last["load_duration"].as_u64().unwrap() > 0,
        "the first request loads the model"
    );
    assert!(last["total_duration"].as_u64() >= last["eval_duration"].as_u64());

    // The same request unstreamed gives the same text in one object, the model already loaded.
    let streamed: String = pieces
        .iter()
        .map(|p| p["message"]["content"].as_str().unwrap())
        .collect();
    let (status, one) = send_json(&state, post("/api/chat", chat(json!({"stream": false})))).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("chat_last", &one);
    assert_eq!(one["message"]["content"], streamed.as_str());
    assert_eq!(one["message"]["role"], "assistant");
    assert_eq!(one["load_duration"], 0, "already loaded");
}

#[tokio::test]
async fn generate_answers_a_prompt_streamed_or_not_and_raw() {
    let state = state();
    let body = json!({
        "model": MODEL, "prompt": "Why is the sky blue?", "system": "Be brief.",
        "options": {"temperature": 0, "num_predict": 8},
    });
    let (status, streamed) = send(&state, post("/api/generate", body.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let objects = ndjson(&streamed);
    let (last, pieces) = objects.split_last().unwrap();
    pieces.iter().for_each(|p| assert_keys("generate_piece", p));
    assert_keys("generate_last", last);
    let text: String = pieces
        .iter()
        .map(|p| p["response"].as_str().unwrap())
        .collect();

    let mut plain = body.clone();
    plain["stream"] = json!(false);
    let (status, one) = send_json(&state, post("/api/generate", plain)).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("generate_last", &one);
    assert_eq!(one["response"], text.as_str());

    let raw = json!({"model": MODEL, "prompt": "Once upon a time", "raw": true, "stream": false,
                     "options": {"num_predict": 4, "temperature": 0}});
    let (status, one) = send_json(&state, post("/api/generate", raw)).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["eval_count"], 4);
}

#[tokio::test]
async fn show_gives_family_context_parameters_and_template() {
    let state = state();
    let (status, show) = send_json(&state, post("/api/show", json!({"model": MODEL}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("show", &show);
    assert_keys("details", &show["details"]);
    assert_eq!(show["details"]["family"], "qwen3");
    assert_eq!(show["model_info"]["general.architecture"], "qwen3");
    assert_eq!(show["model_info"]["qwen3.context_length"], 128);
    assert!(show["template"].as_str().unwrap().contains("<|im_start|>"));
    assert!(show["parameters"].as_str().unwrap().contains("temperature"));

    let (status, missing) = send_json(&state, post("/api/show", json!({"model": "nope"}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_text(&missing).contains("model 'nope' not found"));
}

#[tokio::test]
async fn tags_list_installed_models_and_version_answers() {
    let state = state();
    let (status, tags) = send_json(&state, get("/api/tags")).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("tags", &tags);
    let model = &tags["models"][0];
    assert_keys("tags_model", model);
    assert_keys("details", &model["details"]);
    assert_eq!(model["name"], MODEL);
    assert!(model["size"].as_u64().unwrap() > 0);

    let (status, version) = send_json(&state, get("/api/version")).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("version", &version);

    let (status, body) = send(&state, get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, b"Hearth is running");
}

#[tokio::test]
async fn keep_alive_sets_when_ps_says_the_model_unloads() {
    let state = state();
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(ps["models"], json!([]), "nothing loaded before a request");

    // An empty prompt only loads, for five minutes here.
    let load = json!({"model": MODEL, "keep_alive": "5m"});
    let (status, loaded) = send_json(&state, post("/api/generate", load)).await;
    assert_eq!(status, StatusCode::OK);
    assert_keys("load", &loaded);
    assert_eq!(loaded["done_reason"], "load");
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_keys("ps", &ps);
    let running = &ps["models"][0];
    assert_keys("ps_model", running);
    assert_eq!(running["name"], MODEL);
    assert_eq!(running["context_length"], 64);
    assert_eq!(running["backend"], "cpu");

    // Not yet expired four minutes on; expired six minutes on.
    assert!(!state.unload_expired(Instant::now() + Duration::from_secs(240)));
    assert!(state.unload_expired(Instant::now() + Duration::from_secs(360)));
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(ps["models"], json!([]));

    // -1 keeps it however long; 0 unloads it at once.
    let keep = chat(json!({"stream": false, "keep_alive": -1}));
    assert_eq!(
        send(&state, post("/api/chat", keep)).await.0,
        StatusCode::OK
    );
    assert!(!state.unload_expired(Instant::now() + Duration::from_secs(86_400 * 365)));
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert!(ps["models"][0]["expires_at"].as_str().unwrap() > "2200");

    let unload = json!({"model": MODEL, "messages": [], "keep_alive": 0});
    let (status, unloaded) = send_json(&state, post("/api/chat", unload)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(unloaded["done_reason"], "unload");
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(ps["models"], json!([]));
}

#[tokio::test]
async fn num_ctx_above_the_loaded_context_reloads_or_is_refused() {
    let state = state();
    let ask = |num_ctx: u64| {
        chat(json!({"stream": false, "options": {"num_ctx": num_ctx, "num_predict": 2}}))
    };
    let load = json!({"model": MODEL});
    assert_eq!(
        send(&state, post("/api/generate", load)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        send(&state, post("/api/chat", ask(32))).await.0,
        StatusCode::OK
    );
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(
        ps["models"][0]["context_length"], 64,
        "less than loaded: kept"
    );

    let (status, one) = send_json(&state, post("/api/chat", ask(100))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(one["load_duration"].as_u64().unwrap() > 0, "loaded again");
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(ps["models"][0]["context_length"], 100);

    let (status, refused) = send_json(&state, post("/api/chat", ask(1000))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error_text(&refused).contains("trained for 128"),
        "{refused}"
    );
    let (_, ps) = send_json(&state, get("/api/ps")).await;
    assert_eq!(
        ps["models"][0]["context_length"], 100,
        "a refused request unloads nothing"
    );
}

#[tokio::test]
async fn errors_come_in_ollamas_shape_with_its_status_codes() {
    let state = state_with(ServerOptions {
        body_limit: 1024,
        ..ServerOptions::default()
    });
    let cases = [
        (
            chat(json!({"model": "llama3.2"})),
            StatusCode::NOT_FOUND,
            "not found",
        ),
        (
            chat(json!({"model": null})),
            StatusCode::BAD_REQUEST,
            "model is required",
        ),
        (
            chat(json!({"options": {"temperature": "hot"}})),
            StatusCode::BAD_REQUEST,
            "'temperature' must be a number",
        ),
        (
            chat(json!({"think": "high"})),
            StatusCode::BAD_REQUEST,
            "no thinking levels",
        ),
        (
            chat(json!({"tools": [{"type": "function", "function": {"name": "f"}}]})),
            StatusCode::BAD_REQUEST,
            "does not support tools",
        ),
        (
            chat(json!({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})),
            StatusCode::BAD_REQUEST,
            "not a PNG, JPEG or WebP",
        ),
        (
            // A real picture, to the demo model on the processor, which sees none.
            chat(
                json!({"messages": [{"role": "user", "content": "x", "images": [
                    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgZGIGAAAOAAfXb+R4AAAAAElFTkSuQmCC"
                ]}]}),
            ),
            StatusCode::BAD_REQUEST,
            "does not see pictures",
        ),
        (
            chat(json!({"messages": "hi"})),
            StatusCode::BAD_REQUEST,
            "'messages' is invalid",
        ),
    ];
    for (body, status, says) in cases {
        let (got, value) = send_json(&state, post("/api/chat", body.clone())).await;
        assert_eq!(got, status, "{body}: {value}");
        assert!(error_text(&value).contains(says), "{body}: {value}");
    }

    // A route that carries no pictures keeps the server's body limit.
    let big = json!({"model": "x".repeat(4096)});
    let (status, value) = send_json(&state, post("/api/show", big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    error_text(&value);

    let (status, value) = send_json(
        &state,
        post("/api/embed", json!({"model": MODEL, "input": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error_text(&value).contains("does not make embeddings"),
        "a chat model is not an embedding model: {value}"
    );

    let (status, value) = send_json(&state, get("/api/pull")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    error_text(&value);
}

#[tokio::test]
async fn allowed_origins_get_cors_answers_and_others_are_refused() {
    let state = state_with(ServerOptions {
        allowed_origins: vec!["app://obsidian.md".into(), "vscode-webview://*".into()],
        ..ServerOptions::default()
    });
    let with_origin = |origin: &str| {
        Request::get("/api/tags")
            .header(header::HOST, "localhost:11434")
            .header(header::ORIGIN, origin)
            .body(Body::empty())
            .unwrap()
    };
    for origin in [
        "app://obsidian.md",
        "vscode-webview://abc",
        "http://localhost:3000",
    ] {
        let response = app(state.clone())
            .oneshot(with_origin(origin))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{origin}");
        assert_eq!(
            response.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            origin,
            "{origin} may read the answer"
        );
    }
    let (status, value) = send_json(&state, with_origin("https://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(error_text(&value).contains("evil.example"));

    let preflight = Request::options("/api/chat")
        .header(header::HOST, "127.0.0.1:11434")
        .header(header::ORIGIN, "app://obsidian.md")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type")
        .body(Body::empty())
        .unwrap();
    let response = app(state.clone()).oneshot(preflight).await.unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let headers = response.headers();
    assert_eq!(
        headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "app://obsidian.md"
    );
    assert!(headers[header::ACCESS_CONTROL_ALLOW_METHODS]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert!(headers[header::ACCESS_CONTROL_ALLOW_HEADERS]
        .to_str()
        .unwrap()
        .to_ascii_lowercase()
        .contains("content-type"));

    // DNS rebinding is still refused, whatever the origin list says.
    let rebound = Request::get("/api/tags")
        .header(header::HOST, "evil.example:11434")
        .header(header::ORIGIN, "app://obsidian.md")
        .body(Body::empty())
        .unwrap();
    let (status, value) = send_json(&state, rebound).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    error_text(&value);
}

#[tokio::test]
async fn json_format_and_a_schema_give_answers_that_parse() {
    let state = state();
    let json_mode = chat(json!({"stream": false, "format": "json",
                               "options": {"temperature": 0, "num_predict": 48}}));
    let (status, one) = send_json(&state, post("/api/chat", json_mode)).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    let text = one["message"]["content"].as_str().unwrap();
    if one["done_reason"] == "stop" {
        let value: Value = serde_json::from_str(text).expect("JSON mode answers JSON");
        assert!(value.is_object(), "{text}");
    }

    let schema = json!({
        "type": "object",
        "properties": {"age": {"type": "integer"}, "available": {"type": "boolean"}},
        "required": ["age", "available"],
        "additionalProperties": false
    });
    let with_schema = json!({"model": MODEL, "prompt": "Describe a person", "stream": false,
                             "format": schema, "options": {"temperature": 0, "num_ctx": 128}});
    let (status, one) = send_json(&state, post("/api/generate", with_schema)).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(
        one["done_reason"], "stop",
        "the value ends the answer: {one}"
    );
    let text = one["response"].as_str().unwrap();
    let value: Value = serde_json::from_str(text).expect("answers JSON");
    assert!(value["available"].is_boolean(), "{text}");
    assert_eq!(value.as_object().unwrap().len(), 2, "{text}");
    // An integer may have more digits than an i64 holds: read its literal.
    let age = text.split("\"age\"").nth(1).unwrap().trim_start();
    let literal: String = age[1..]
        .trim_start()
        .chars()
        .take_while(|c| !matches!(c, ',' | '}') && !c.is_whitespace())
        .collect();
    assert!(
        literal
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit()),
        "age is an integer: {text}"
    );

    let bad = chat(json!({"format": {"type": "object", "properties": 3}}));
    let (status, value) = send_json(&state, post("/api/chat", bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(error_text(&value).contains("format"));
}

#[tokio::test]
async fn another_model_replaces_the_loaded_one_and_v1_models_lists_both() {
    // The same fixture under two names: two models as far as the server knows.
    let model = |name: &str| LocalModel {
        name: name.into(),
        ..LocalModel::folder(fixture_dir())
    };
    let state = AppState::on_demand(
        LocalModels::new(
            home(),
            vec![model("first"), model("second")],
            LoadSettings::default(),
        ),
        ServerOptions::default(),
    );
    for name in ["first", "second"] {
        let body = json!({"model": name, "prompt": "hi", "stream": false,
                          "options": {"num_predict": 2}});
        let (status, one) = send_json(&state, post("/api/generate", body)).await;
        assert_eq!(status, StatusCode::OK, "{one}");
        let (_, ps) = send_json(&state, get("/api/ps")).await;
        let loaded: Vec<&str> = ps["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(loaded, [name], "one model at a time");
    }
    let (status, models) = send_json(&state, get("/v1/models")).await;
    assert_eq!(status, StatusCode::OK);
    let listed: Vec<(&str, bool)> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].as_str().unwrap(), m["loaded"].as_bool().unwrap()))
        .collect();
    assert_eq!(listed, [("first", false), ("second", true)]);
    let (status, one) = send_json(&state, get("/v1/models/first:latest")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the :latest tag names the same model"
    );
    assert_eq!(one["id"], "first");
}
