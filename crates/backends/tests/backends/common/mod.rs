//! Loopback stand-ins for the remote-backend tests: a scripted OpenAI-compatible server and a
//! fault proxy between Hearth and it. Both listen on 127.0.0.1 only, answer from threads, and
//! give up any wait after a few seconds, so no test can hang on them.

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Longest any helper thread waits or stalls: past it, it gives up by itself.
pub const HELPER_LIMIT: Duration = Duration::from_secs(8);

/// Where `usage` goes in a streamed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageMode {
    /// Only in the last chunk (vLLM with `include_usage`, FastFlowLM, Hearth).
    LastChunk,
    /// In every chunk, counting up (some proxies).
    EveryChunk,
    /// Never.
    Never,
}

/// How a streamed answer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// A finish chunk, `[DONE]`, and the end of the chunked body.
    Complete,
    /// After the pieces the socket closes in the middle of the chunked body.
    CutChunked,
    /// After the pieces the body ends cleanly (close-delimited) but without a finish or `[DONE]`.
    EndsEarly,
    /// After the pieces nothing more is sent until the helper gives up.
    Stall,
}

/// What the server answers to a chat request.
#[derive(Debug, Clone)]
pub enum ChatReply {
    /// A streamed answer.
    Stream {
        /// Reasoning pieces (`reasoning_content`) first.
        reasoning: Vec<String>,
        /// Answer pieces.
        pieces: Vec<String>,
        /// Where usage goes.
        usage: UsageMode,
        /// `finish_reason` of the last chunk.
        finish: &'static str,
        /// How it ends.
        ending: Ending,
        /// Pause between pieces.
        delay: Duration,
    },
    /// A fixed reply: status, extra headers, content type and body.
    Fixed {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Content-Type.
        content_type: String,
        /// Body.
        body: String,
    },
    /// No reply at all until the helper gives up (a stuck server).
    Silent,
}

impl ChatReply {
    /// A complete streamed answer of `pieces` with usage in the last chunk.
    pub fn pieces(pieces: &[&str]) -> ChatReply {
        ChatReply::Stream {
            reasoning: Vec::new(),
            pieces: pieces.iter().map(|s| s.to_string()).collect(),
            usage: UsageMode::LastChunk,
            finish: "stop",
            ending: Ending::Complete,
            delay: Duration::ZERO,
        }
    }

    /// The same stream with another usage mode.
    pub fn with_usage(mut self, mode: UsageMode) -> ChatReply {
        if let ChatReply::Stream { usage, .. } = &mut self {
            *usage = mode;
        }
        self
    }

    /// The same stream with another ending.
    pub fn with_ending(mut self, end: Ending) -> ChatReply {
        if let ChatReply::Stream { ending, .. } = &mut self {
            *ending = end;
        }
        self
    }

    /// The same stream with a pause between pieces.
    pub fn with_delay(mut self, pause: Duration) -> ChatReply {
        if let ChatReply::Stream { delay, .. } = &mut self {
            *delay = pause;
        }
        self
    }

    /// A fixed JSON reply.
    pub fn status(status: u16, body: Value) -> ChatReply {
        ChatReply::Fixed {
            status,
            headers: Vec::new(),
            content_type: "application/json".into(),
            body: body.to_string(),
        }
    }

    /// The same fixed reply with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> ChatReply {
        if let ChatReply::Fixed { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
}

/// What the server knows and does.
#[derive(Debug, Clone)]
pub struct Script {
    /// `/v1/models` entries (ids, and an optional `max_model_len`).
    pub models: Vec<(String, Option<u64>)>,
    /// The reply to `/v1/models`, instead of the list, when set.
    pub models_reply: Option<ChatReply>,
    /// The reply to `/v1/chat/completions`.
    pub chat: ChatReply,
    /// The `model` named in chunks (the requested one when None).
    pub answered_model: Option<String>,
    /// Answers llama-cpp-python's `/extras/tokenize/count`: one token per word, plus a BOS.
    pub counts_tokens: bool,
    /// What happens to the connection after a fixed (non-streamed) reply.
    pub connection: Connection,
    /// Answers Ollama's `/api/show` when not empty: these models list `vision` among their
    /// capabilities, the others only `completion`.
    pub vision_models: Vec<String>,
    /// A body sent with status 200 to every `/api/show`, in place of capabilities.
    pub show_reply: Option<String>,
    /// Pauses before answering `/api/show` about a model (a slow Ollama).
    pub show_delays: Vec<(String, Duration)>,
    /// Counts the `/api/show` questions being answered at once.
    pub shows: Arc<Gauge>,
}

/// How many of something are under way now, and the most there were at once.
#[derive(Debug, Default)]
pub struct Gauge {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl Gauge {
    /// One more under way.
    pub fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    /// One fewer.
    pub fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    /// The most there were at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// What the server does with a connection after a fixed reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Says `Connection: close` and closes it.
    Close,
    /// Keeps it open for the next request.
    KeepAlive,
    /// Closes it without saying so first (FastFlowLM).
    SilentClose,
}

impl Script {
    /// A server with `model` that answers `pieces`.
    pub fn new(model: &str, pieces: &[&str]) -> Script {
        Script {
            models: vec![(model.to_string(), None)],
            models_reply: None,
            chat: ChatReply::pieces(pieces),
            answered_model: None,
            counts_tokens: false,
            connection: Connection::Close,
            vision_models: Vec::new(),
            show_reply: None,
            show_delays: Vec::new(),
            shows: Arc::default(),
        }
    }
}

/// One request the server got.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`.
    pub method: String,
    /// `/v1/models`, ...
    pub path: String,
    /// Headers, names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// A scripted OpenAI-compatible server on 127.0.0.1. Stops when dropped.
pub struct ScriptedServer {
    /// Its address.
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<AtomicUsize>,
    /// Pieces of streamed answers written so far (a cancelled stream writes fewer).
    pub pieces_written: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl ScriptedServer {
    /// Starts serving `script`.
    pub fn start(script: Script) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().unwrap();
        let server = ScriptedServer {
            addr,
            script: Arc::new(Mutex::new(script)),
            requests: Arc::default(),
            connections: Arc::default(),
            pieces_written: Arc::default(),
            stop: Arc::default(),
        };
        let (script, requests, connections, written, stop) = (
            server.script.clone(),
            server.requests.clone(),
            server.connections.clone(),
            server.pieces_written.clone(),
            server.stop.clone(),
        );
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                connections.fetch_add(1, Ordering::SeqCst);
                let (script, requests, written, stop) = (
                    script.clone(),
                    requests.clone(),
                    written.clone(),
                    stop.clone(),
                );
                thread::spawn(move || serve(conn, &script, &requests, &written, &stop));
            }
        });
        server
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Changes the chat reply.
    pub fn set_chat(&self, chat: ChatReply) {
        self.script.lock().unwrap().chat = chat;
    }

    /// Changes the script.
    pub fn edit(&self, f: impl FnOnce(&mut Script)) {
        f(&mut self.script.lock().unwrap());
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Reads one HTTP request: head and Content-Length body.
fn read_request(conn: &TcpStream) -> Option<Recorded> {
    conn.set_read_timeout(Some(HELPER_LIMIT)).ok()?;
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((n, v)) = h.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn serve(
    mut conn: TcpStream,
    script: &Mutex<Script>,
    requests: &Mutex<Vec<Recorded>>,
    written: &AtomicUsize,
    stop: &AtomicBool,
) {
    // Like a real plain-HTTP server, answer a TLS handshake (or any non-HTTP bytes) with 400.
    let mut first = [0u8; 1];
    let _ = conn.set_read_timeout(Some(HELPER_LIMIT));
    if matches!(conn.peek(&mut first), Ok(1) if !first[0].is_ascii_uppercase()) {
        let _ = conn.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        let _ = conn.shutdown(Shutdown::Both);
        return;
    }
    loop {
        let Some(request) = read_request(&conn) else {
            return;
        };
        let keep_open = answer_one(&mut conn, request, script, requests, written, stop);
        if !keep_open {
            break;
        }
    }
    let _ = conn.flush();
    let _ = conn.shutdown(Shutdown::Both);
}

/// Answers one request; true when the connection stays open for another.
fn answer_one(
    conn: &mut TcpStream,
    request: Recorded,
    script: &Mutex<Script>,
    requests: &Mutex<Vec<Recorded>>,
    written: &AtomicUsize,
    stop: &AtomicBool,
) -> bool {
    requests.lock().unwrap().push(request.clone());
    let script = script.lock().unwrap().clone();
    let reply = match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/v1/models") => script.models_reply.clone().unwrap_or_else(|| {
            let data: Vec<Value> = script
                .models
                .iter()
                .map(|(id, len)| {
                    let mut m = json!({ "id": id, "object": "model", "owned_by": "test" });
                    if let Some(len) = len {
                        m["max_model_len"] = json!(len);
                    }
                    m
                })
                .collect();
            ChatReply::status(200, json!({ "object": "list", "data": data }))
        }),
        // A raw prompt's completion is scripted as the chat answer, sent as `text` pieces.
        ("POST", "/v1/chat/completions" | "/v1/completions") => script.chat.clone(),
        ("POST", "/extras/tokenize/count") if script.counts_tokens => {
            let words = request.json()["input"]
                .as_str()
                .unwrap_or_default()
                .split_whitespace()
                .count();
            ChatReply::status(200, json!({ "count": words + 1 }))
        }
        ("POST", "/api/show") if script.show_reply.is_some() => ChatReply::Fixed {
            status: 200,
            headers: Vec::new(),
            content_type: "application/json".into(),
            body: script.show_reply.clone().unwrap_or_default(),
        },
        ("POST", "/api/show") if !script.vision_models.is_empty() => {
            let model = request.json()["model"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            script.shows.enter();
            if let Some((_, pause)) = script.show_delays.iter().find(|(m, _)| *m == model) {
                thread::sleep(*pause);
            }
            script.shows.leave();
            let capabilities = if script.vision_models.contains(&model) {
                json!(["completion", "vision"])
            } else {
                json!(["completion"])
            };
            ChatReply::status(200, json!({ "capabilities": capabilities }))
        }
        _ => ChatReply::status(404, json!({ "error": "Not Found" })),
    };
    let model = script
        .answered_model
        .clone()
        .or_else(|| request.json()["model"].as_str().map(str::to_string))
        .unwrap_or_default();
    match reply {
        ChatReply::Fixed {
            status,
            headers,
            content_type,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
                reason(status),
                body.len()
            );
            if script.connection == Connection::Close {
                head.push_str("Connection: close\r\n");
            }
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body.as_bytes());
            let _ = conn.flush();
            return script.connection == Connection::KeepAlive;
        }
        ChatReply::Silent => hold(stop),
        ChatReply::Stream {
            reasoning,
            pieces,
            usage,
            finish,
            ending,
            delay,
        } => {
            let chunked = ending != Ending::EndsEarly;
            let mut head = String::from(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n",
            );
            if chunked {
                head.push_str("Transfer-Encoding: chunked\r\n");
            }
            head.push_str("\r\n");
            if conn.write_all(head.as_bytes()).is_err() {
                return false;
            }
            let send = |conn: &mut TcpStream, data: &str| -> bool {
                let event = format!("data: {data}\n\n");
                let framed = if chunked {
                    format!("{:x}\r\n{event}\r\n", event.len())
                } else {
                    event
                };
                conn.write_all(framed.as_bytes()).is_ok() && conn.flush().is_ok()
            };
            let prompt_tokens = 7;
            let completion = request.path == "/v1/completions";
            let mut n = 0;
            let items = reasoning
                .iter()
                .map(|r| ("reasoning_content", r))
                .chain(pieces.iter().map(|p| ("content", p)));
            for (field, text) in items {
                if !delay.is_zero() {
                    thread::sleep(delay);
                }
                n += 1;
                let mut delta = serde_json::Map::new();
                delta.insert(field.to_string(), json!(text));
                let choice = if completion {
                    json!({ "index": 0, "text": text, "logprobs": null, "finish_reason": null })
                } else {
                    json!({ "index": 0, "delta": delta, "finish_reason": null })
                };
                let mut chunk = json!({
                    "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model,
                    "choices": [choice],
                });
                if usage == UsageMode::EveryChunk {
                    chunk["usage"] = json!({ "prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n });
                } else {
                    chunk["usage"] = Value::Null;
                }
                if !send(conn, &chunk.to_string()) {
                    return false;
                }
                written.fetch_add(1, Ordering::SeqCst);
            }
            match ending {
                Ending::Complete => {
                    let mut last = json!({
                        "id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model,
                        "choices": [{ "index": 0, "delta": {}, "finish_reason": finish }],
                    });
                    if usage != UsageMode::Never {
                        last["usage"] = json!({
                            "prompt_tokens": prompt_tokens, "completion_tokens": n,
                            "total_tokens": prompt_tokens + n,
                            "prefill_duration_ttft": 0.25, "prefill_speed_tps": null,
                            "decoding_duration": 0.5, "decoding_speed_tps": 12.5, "load_duration": 0.0
                        });
                    }
                    send(conn, &last.to_string());
                    send(conn, "[DONE]");
                    let _ = conn.write_all(b"0\r\n\r\n");
                }
                Ending::CutChunked | Ending::EndsEarly => {}
                Ending::Stall => hold(stop),
            }
        }
    }
    false
}

/// Waits until the helper limit or the stop flag.
fn hold(stop: &AtomicBool) {
    let until = Instant::now() + HELPER_LIMIT;
    while Instant::now() < until && !stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(20));
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        302 => "Found",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// What the fault proxy does to each connection.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Passes everything through.
    Pass,
    /// Takes the request and never answers (until the helper gives up).
    Stall,
    /// Passes the first `n` bytes of the response, then closes both sides.
    CutAfter(usize),
    /// Replaces `from` with `to` everywhere in the response (read whole, then sent).
    Rewrite {
        /// Text to replace.
        from: String,
        /// What to put instead.
        to: String,
    },
    /// Answers with these bytes without asking the server.
    Reply(String),
}

/// A loopback proxy in front of `upstream` that breaks responses on purpose. Stops when dropped.
pub struct FaultProxy {
    /// Its address.
    pub addr: SocketAddr,
    fault: Arc<Mutex<Fault>>,
    seen: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` doing `fault`.
    pub fn start(upstream: SocketAddr, fault: Fault) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let proxy = FaultProxy {
            addr: listener.local_addr().unwrap(),
            fault: Arc::new(Mutex::new(fault)),
            seen: Arc::default(),
            stop: Arc::default(),
        };
        let (fault, seen, stop) = (proxy.fault.clone(), proxy.seen.clone(), proxy.stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let fault = fault.lock().unwrap().clone();
                let (seen, stop) = (seen.clone(), stop.clone());
                thread::spawn(move || relay(conn, upstream, fault, &seen, &stop));
            }
        });
        proxy
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Changes what it does to new connections.
    pub fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
    }

    /// Every request byte it saw, as text.
    pub fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    fault: Fault,
    seen: &Mutex<Vec<u8>>,
    stop: &AtomicBool,
) {
    // Read the request head (and body) from the client first, whatever the fault.
    let Some(request) = read_request(&client) else {
        return;
    };
    let mut raw = format!("{} {} HTTP/1.1\r\n", request.method, request.path);
    for (n, v) in &request.headers {
        raw.push_str(&format!("{n}: {v}\r\n"));
    }
    raw.push_str("\r\n");
    raw.push_str(&request.body);
    seen.lock().unwrap().extend_from_slice(raw.as_bytes());
    match fault {
        Fault::Stall => {
            hold(stop);
            return;
        }
        Fault::Reply(bytes) => {
            let _ = client.write_all(bytes.as_bytes());
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
        _ => {}
    }
    let Ok(mut server) = TcpStream::connect_timeout(&upstream, HELPER_LIMIT) else {
        return;
    };
    let _ = server.set_read_timeout(Some(HELPER_LIMIT));
    if server.write_all(raw.as_bytes()).is_err() {
        return;
    }
    match fault {
        Fault::Pass => {
            let _ = std::io::copy(&mut server, &mut client);
        }
        Fault::CutAfter(n) => {
            let mut buf = vec![0; n];
            let mut got = 0;
            while got < n {
                match server.read(&mut buf[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => got += k,
                }
            }
            let _ = client.write_all(&buf[..got]);
        }
        Fault::Rewrite { from, to } => {
            let mut all = Vec::new();
            let _ = server.read_to_end(&mut all);
            let text = String::from_utf8_lossy(&all).replace(&from, &to);
            let _ = client.write_all(text.as_bytes());
        }
        Fault::Stall | Fault::Reply(_) => unreachable!(),
    }
    let _ = client.flush();
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// An address where nothing listens (a port bound, then let go).
pub fn refused_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}
