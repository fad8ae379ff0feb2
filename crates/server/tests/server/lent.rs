//! The server started inside another program over the model that program holds (the desktop
//! app's "Let other apps on this computer use Hearth"): on a loopback socket, on its own thread,
//! the OpenAI and Ollama routes answer with the holder's model; while the holder answers with it
//! a request gets the busy answer; the Host/Origin checks hold; stopping frees the port; a taken
//! port falls back to a free one and says so. The holder here is a plain mutex over the tiny
//! Qwen3 fixture on Hearth's engine, as the app holds its loaded model.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_backends::CpuBackend;
use hearth_chat::{Backend, BackendInfo};
use hearth_server::{AppState, HeldModel, RunningServer, ServerOptions, Unavailable};
use serde_json::Value;

const MODEL_ID: &str = "tiny-qwen3";

/// A model held the way the app holds its own: one lock, taken for a whole answer.
struct Holder {
    model: Mutex<Option<Box<dyn Backend>>>,
    info: Option<BackendInfo>,
}

impl Holder {
    fn with_fixture() -> Arc<Holder> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine/tiny-qwen3");
        let backend = CpuBackend::open(&dir, MODEL_ID, &Default::default(), None).unwrap();
        Arc::new(Holder {
            info: Some(backend.info().clone()),
            model: Mutex::new(Some(Box::new(backend))),
        })
    }
}

impl HeldModel for Holder {
    fn info(&self) -> Option<BackendInfo> {
        self.info.clone()
    }

    fn try_with(&self, f: &mut dyn FnMut(&mut dyn Backend)) -> Result<(), Unavailable> {
        let mut model = self.model.try_lock().map_err(|_| Unavailable::InUse)?;
        let backend = model.as_mut().ok_or(Unavailable::NotLoaded)?;
        f(backend.as_mut());
        Ok(())
    }
}

fn start_over(holder: &Arc<Holder>, port: u16) -> RunningServer {
    let state = AppState::lent(holder.clone(), ServerOptions::default());
    hearth_server::start(state, port).expect("the server starts")
}

/// Sends one request on a new connection; the status code and the body.
fn exchange(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP status line: {text}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn post(path: &str, body: &str, extra_headers: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

fn get(path: &str, extra_headers: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{extra_headers}\r\n")
}

fn openai_chat() -> String {
    post(
        "/v1/chat/completions",
        &format!(
            r#"{{"model":"{MODEL_ID}","messages":[{{"role":"user","content":"Hello"}}],"temperature":0,"max_tokens":8}}"#
        ),
        "",
    )
}

fn ollama_chat() -> String {
    post(
        "/api/chat",
        &format!(
            r#"{{"model":"{MODEL_ID}","messages":[{{"role":"user","content":"Hello"}}],"stream":false,"options":{{"temperature":0,"num_predict":8}}}}"#
        ),
        "",
    )
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("a JSON body ({e}): {body}"))
}

#[test]
fn both_apis_answer_with_the_held_model() {
    let holder = Holder::with_fixture();
    let server = start_over(&holder, 0);
    let addr = server.address();
    assert!(addr.ip().is_loopback(), "only this computer may call it");
    assert!(!server.fell_back());

    let (status, body) = exchange(addr, &openai_chat());
    assert_eq!(status, 200, "{body}");
    let reply = json(&body);
    assert_eq!(reply["model"], MODEL_ID);
    assert!(reply["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    let (status, body) = exchange(addr, &ollama_chat());
    assert_eq!(status, 200, "{body}");
    let reply = json(&body);
    assert_eq!(reply["done"], true, "{body}");
    assert_eq!(reply["message"]["role"], "assistant");

    let (status, body) = exchange(addr, &get("/api/tags", ""));
    assert_eq!(status, 200);
    assert_eq!(json(&body)["models"][0]["name"], MODEL_ID);
    let (status, body) = exchange(addr, &get("/api/ps", ""));
    assert_eq!(status, 200);
    assert_eq!(json(&body)["models"][0]["name"], MODEL_ID);
    server.stop();
}

#[test]
fn a_request_while_the_holder_answers_gets_the_busy_answer() {
    let holder = Holder::with_fixture();
    let server = start_over(&holder, 0);
    let addr = server.address();
    {
        // The holder answers with its model (it holds its lock) meanwhile.
        let _answering = holder.model.lock().unwrap();
        let (status, body) = exchange(addr, &openai_chat());
        assert_eq!(status, 503, "{body}");
        assert_eq!(json(&body)["error"]["code"], "server_busy", "{body}");
        let (status, body) = exchange(addr, &ollama_chat());
        assert_eq!(status, 503, "{body}");
        assert!(json(&body)["error"].as_str().unwrap().contains("busy"));
        // What is loaded can still be read.
        let (status, _) = exchange(addr, &get("/v1/models", ""));
        assert_eq!(status, 200);
    }
    let (status, body) = exchange(addr, &openai_chat());
    assert_eq!(
        status, 200,
        "once the holder is done, the server answers: {body}"
    );
    server.stop();
}

#[test]
fn another_model_or_none_loaded_is_not_found() {
    let holder = Holder::with_fixture();
    let server = start_over(&holder, 0);
    let body = r#"{"model":"other","messages":[{"role":"user","content":"Hi"}]}"#;
    let (status, _) = exchange(server.address(), &post("/v1/chat/completions", body, ""));
    assert_eq!(status, 404);
    holder.model.lock().unwrap().take();
    let (status, body) = exchange(server.address(), &openai_chat());
    assert_eq!(status, 404, "the holder unloaded its model: {body}");
    server.stop();
}

#[test]
fn foreign_hosts_and_origins_are_refused() {
    let holder = Holder::with_fixture();
    let server = start_over(&holder, 0);
    let addr = server.address();
    let rebound = "GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n";
    let (status, body) = exchange(addr, rebound);
    assert_eq!(status, 403, "{body}");
    let (status, body) = exchange(addr, &get("/api/tags", "Origin: https://evil.example\r\n"));
    assert_eq!(status, 403, "{body}");
    let (status, _) = exchange(addr, &get("/api/tags", "Origin: http://localhost:5173\r\n"));
    assert_eq!(status, 200, "this machine's own pages are answered");
    server.stop();
}

#[test]
fn stopping_frees_the_port() {
    let holder = Holder::with_fixture();
    let server = start_over(&holder, 0);
    let addr = server.address();
    assert_eq!(exchange(addr, &get("/", "")).0, 200);
    server.stop();
    assert!(
        TcpStream::connect(addr).is_err(),
        "nothing listens at {addr} any more"
    );
    let again = TcpListener::bind(addr);
    assert!(again.is_ok(), "the port can be taken again: {again:?}");
    assert!(
        holder.model.try_lock().is_ok(),
        "the model is not held by the server once it stopped"
    );
}

#[test]
fn a_taken_port_falls_back_to_a_free_one_and_says_so() {
    let holder = Holder::with_fixture();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let server = start_over(&holder, port);
    assert!(server.fell_back(), "port {port} is taken");
    assert_eq!(server.wanted_port(), port);
    assert_ne!(server.address().port(), port);
    assert_eq!(server.url(), format!("http://{}", server.address()));
    assert_eq!(exchange(server.address(), &get("/", "")).0, 200);
    server.stop();
}
