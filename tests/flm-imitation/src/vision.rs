//! A vision model (a catalog entry with `vlm: true`), imitated: FastFlowLM reads `image_url`
//! parts (`data:image/png|jpeg;base64,...` or raw base64) in a chat message's content. The
//! imitation has no vision encoder, so a vision model answers from the bytes it was sent, in
//! words a test can check: each picture's format, its width x height (read from its header)
//! and a checksum (FNV-1a, 32 bits, of its bytes), e.g. "I see 1 picture: PNG 64 x 48,
//! checksum 1a2b3c4d.". A picture that is not base64 or not a PNG or JPEG is refused with a
//! 400 and FastFlowLM-like words; a model without `vlm` is refused the same way (what
//! FastFlowLM itself does then is not known: its text models drop the parts).

use std::io::Write;
use std::net::{Shutdown, TcpStream};

use serde_json::{json, Value};

use crate::http::{respond, send_event, unix_secs};

/// The pictures of a request (every `image_url` part of every message), in order.
fn image_urls(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for part in m["content"].as_array().into_iter().flatten() {
            if part["type"] == "image_url" {
                let url = match &part["image_url"] {
                    Value::String(s) => s.clone(),
                    other => other["url"].as_str().unwrap_or_default().to_owned(),
                };
                out.push(url);
            }
        }
    }
    out
}

fn from_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Format, width and height from a PNG's IHDR or a JPEG's frame header.
fn size_of(bytes: &[u8]) -> Option<(&'static str, u32, u32)> {
    if bytes.len() >= 24 && bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR" {
        let w = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
        let h = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
        return Some(("PNG", w, h));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        let mut at = 2;
        while at + 9 < bytes.len() {
            if bytes[at] != 0xFF {
                return None;
            }
            let marker = bytes[at + 1];
            let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
            if matches!(marker, 0xC0..=0xC3) {
                let h = u32::from(u16::from_be_bytes([bytes[at + 5], bytes[at + 6]]));
                let w = u32::from(u16::from_be_bytes([bytes[at + 7], bytes[at + 8]]));
                return Some(("JPEG", w, h));
            }
            at += 2 + len;
        }
    }
    None
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// What the vision model says of `urls`, or FastFlowLM-like words of why it cannot.
fn describe(urls: &[String]) -> Result<String, String> {
    let mut seen = Vec::new();
    for url in urls {
        let data = match url.strip_prefix("data:") {
            Some(rest) => rest.split_once(";base64,").map(|(_, d)| d).unwrap_or(""),
            None => url.as_str(),
        };
        let bytes = from_base64(data).ok_or("Failed to decode base64 image")?;
        let (format, w, h) = size_of(&bytes).ok_or("Failed to load image from memory")?;
        seen.push(format!(
            "{format} {w} x {h}, checksum {:08x}",
            fnv1a(&bytes)
        ));
    }
    let n = seen.len();
    Ok(format!(
        "I see {n} picture{}: {}.",
        if n == 1 { "" } else { "s" },
        seen.join("; ")
    ))
}

/// Answers a request with pictures, or returns false when it has none (the model answers as
/// usual). `entry` is the loaded model's catalog entry.
pub fn answer_pictures(stream: &TcpStream, body: &Value, entry: Option<&Value>, tag: &str) -> bool {
    let urls = image_urls(body);
    if urls.is_empty() {
        return false;
    }
    let vlm = entry.is_some_and(|e| e["vlm"].as_bool() == Some(true));
    let text = if vlm {
        describe(&urls)
    } else {
        Err(format!("Model {tag} does not support image input"))
    };
    let text = match text {
        Ok(text) => text,
        Err(words) => {
            respond(
                stream,
                400,
                &json!({"error": {"message": words, "type": "invalid_request_error", "code": 400}}),
            );
            return true;
        }
    };
    println!("[imitation]  the vision model saw {} pictures", urls.len());
    let created = unix_secs();
    let words = text.split_inclusive(' ').count();
    let usage = json!({"prompt_tokens": 256 * urls.len(), "completion_tokens": words,
        "total_tokens": 256 * urls.len() + words, "load_duration": 0.0,
        "prefill_duration_ttft": 0.01, "decoding_duration": 0.01,
        "prefill_speed_tps": 1000.0, "decoding_speed_tps": 100.0});
    if body["stream"].as_bool() != Some(true) {
        respond(
            stream,
            200,
            &json!({"id": "fastflowlm-chat-completion", "object": "chat.completion", "created": created,
                "model": tag, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "finish_reason": "stop"}], "usage": usage}),
        );
        return true;
    }
    let mut writer = stream;
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return true;
    }
    for piece in text.split_inclusive(' ') {
        let chunk = json!({"id": "chatcmpl-vision", "object": "chat.completion.chunk", "created": created,
            "model": tag, "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece},
            "finish_reason": null}]});
        if send_event(&mut writer, &chunk.to_string()).is_err() {
            return true;
        }
    }
    let last = json!({"id": "chatcmpl-vision", "object": "chat.completion.chunk", "created": created,
        "model": tag, "choices": [{"index": 0, "delta": {"content": null}, "finish_reason": "stop"}],
        "usage": usage});
    let _ = send_event(&mut writer, &last.to_string());
    let _ = send_event(&mut writer, "[DONE]");
    let _ = writer.write_all(b"0\r\n\r\n");
    let _ = writer.flush();
    let _ = writer.shutdown(Shutdown::Both);
    true
}
