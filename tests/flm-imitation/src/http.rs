//! HTTP as FastFlowLM's server speaks it: one request per connection, closed after the
//! response; routes matched on the exact `METHOD target` string (a query string or a trailing
//! slash is a 404); SSE events as HTTP chunks.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::chat;
use crate::serve::Server;

/// One HTTP request read from a connection.
pub struct Request {
    method: String,
    target: String,
    content_type: String,
    /// The Content-Type as sent (a multipart boundary keeps its case).
    content_type_raw: String,
    body: Vec<u8>,
}

pub fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut length = 0usize;
    let mut content_type = String::new();
    let mut content_type_raw = String::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            break;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap_or(0),
                "content-type" => {
                    content_type_raw = v.trim().to_string();
                    content_type = content_type_raw.to_ascii_lowercase();
                }
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        target,
        content_type,
        content_type_raw,
        body,
    })
}

/// Writes a whole response and closes the connection (FastFlowLM closes after each response,
/// although it does not say `Connection: close`).
pub fn respond(mut stream: &TcpStream, status: u16, body: &Value) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let body = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nAccess-Control-Allow-Origin: *\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn handle_connection(server: &Server, stream: TcpStream) {
    let Some(req) = read_request(&stream) else {
        return;
    };
    println!("==========================================================");
    println!("[⬇️ ]  Incoming Request: {}", req.method);
    println!("[LOG]  Target: {}", req.target);
    let route = format!("{} {}", req.method, req.target);
    match route.as_str() {
        "GET /api/version" | "GET /v1/version" => {
            respond(&stream, 200, &json!({"version": server.release.version}))
        }
        "GET /api/tags" => {
            let models: Vec<Value> = server
                .catalog
                .entries()
                .into_iter()
                .map(|(f, s, e)| {
                    json!({"name": format!("{f}:{s}"), "model": format!("{f}:{s}"), "details": {
                        "family": e["details"]["family"], "parameter_size": e["details"]["parameter_size"],
                        "quantization_level": e["details"]["quantization_level"]}})
                })
                .collect();
            respond(&stream, 200, &json!({ "models": models }))
        }
        "GET /v1/models" => {
            let now = unix_secs();
            let data: Vec<Value> = server
                .catalog
                .entries()
                .into_iter()
                .map(|(f, s, _)| json!({"id": format!("{f}:{s}"), "object": "model", "created": now, "owned_by": "FastFlowLM"}))
                .collect();
            respond(&stream, 200, &json!({"object": "list", "data": data}))
        }
        "GET /api/ps" => {
            let npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
            let entry = server.catalog.entry(&npu.tag).unwrap_or(Value::Null);
            respond(
                &stream,
                200,
                &json!({"models": [{"name": npu.tag, "model": npu.tag, "size": entry["size"],
                    "details": entry["details"], "expires_at": "2099-01-01T00:00:00.000000000+00:00"}]}),
            )
        }
        "GET /api/npu/status" => {
            let busy = server.waiting.load(Ordering::SeqCst) > 0;
            respond(
                &stream,
                200,
                &json!({"npu_available": !busy, "active_requests": server.waiting.load(Ordering::SeqCst),
                        "message": if busy { "NPU is currently in use" } else { "NPU is available" }}),
            )
        }
        "POST /v1/chat/completions" => {
            let body: Value = match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(_) if req.content_type.contains("application/json") => {
                    return respond(&stream, 400, &json!({"error": "Invalid JSON"}))
                }
                Err(_) => Value::Null,
            };
            chat::chat_completions(server, &stream, &body);
        }
        "POST /v1/audio/transcriptions" => {
            // The NPU does one job at a time.
            let _npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
            let (status, body) =
                crate::asr::transcribe(server.asr, &req.content_type_raw, &req.body);
            respond(&stream, status, &body)
        }
        _ => respond(&stream, 404, &json!({"error": "Not Found"})),
    }
}

/// One SSE event as one HTTP chunk: `data: <payload>\n\n`.
pub fn send_event(writer: &mut &TcpStream, payload: &str) -> std::io::Result<()> {
    let event = format!("data: {payload}\n\n");
    write!(writer, "{:x}\r\n{event}\r\n", event.len())?;
    writer.flush()
}
