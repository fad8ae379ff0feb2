//! `POST /v1/chat/completions`: the NPU queue, model switching and the `llama3.2:1b`
//! fallback, the request fields FastFlowLM reads (and how it misreads some), the prompt cache,
//! and the answer as SSE chunks or one body.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};
use serde_json::{json, Value};

use crate::http::{respond, send_event, unix_secs};
use crate::prompt_cache::Decision;
use crate::serve::{load, Loaded, Server};
use crate::setup::Fault;
use crate::FALLBACK_TAG;

/// Releases a place in the NPU queue when dropped.
struct QueuePlace<'a>(&'a AtomicUsize);

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Holds the NPU for 333 ms after a job when others wait, as FastFlowLM's queue does.
struct Cooldown<'a>(&'a AtomicUsize);

impl Drop for Cooldown<'_> {
    fn drop(&mut self) {
        if self.0.load(Ordering::SeqCst) > 1 {
            std::thread::sleep(Duration::from_millis(333));
        }
    }
}

fn sampling(body: &Value) -> Result<ChatOptions, String> {
    let mut options = ChatOptions {
        sampling: SamplingParams::default(),
        ..ChatOptions::default()
    };
    let float = |key: &str| -> Result<Option<f32>, String> {
        match body.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64().map(|f| f as f32)),
            Some(other) => Err(format!(
                "[json.exception.type_error.302] type must be number, but is {}",
                type_name(other)
            )),
        }
    };
    if let Some(t) = float("temperature")? {
        options.sampling.temperature = t;
    }
    if let Some(p) = float("top_p")? {
        options.sampling.top_p = p;
    }
    if let Some(r) = float("repetition_penalty")? {
        options.sampling.repetition_penalty = r;
    }
    if let Some(k) = float("top_k")? {
        options.sampling.top_k = k.max(0.0) as usize;
    }
    // FastFlowLM reads min_p into an int: anything below 1 becomes 0.
    if let Some(m) = float("min_p")? {
        options.sampling.min_p = m.trunc();
    }
    let max = match (body.get("max_tokens"), body.get("max_completion_tokens")) {
        (Some(v), _) | (None, Some(v)) => v.as_i64().ok_or_else(|| {
            format!(
                "[json.exception.type_error.302] type must be number, but is {}",
                type_name(v)
            )
        })?,
        (None, None) => 4096,
    };
    options.max_tokens = if max <= 0 { usize::MAX } else { max as usize };
    Ok(options)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn messages(body: &Value) -> Result<Vec<ChatMessage>, String> {
    let list = body["messages"]
        .as_array()
        .ok_or("[json.exception.type_error.302] type must be array, but is null")?;
    let mut out: Vec<ChatMessage> = Vec::new();
    for m in list {
        let role = match m["role"].as_str() {
            Some("system") => Role::System,
            Some("assistant") => Role::Assistant,
            _ => Role::User,
        };
        let content = match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        };
        // Consecutive user or system messages are merged, as FastFlowLM does.
        match out.last_mut() {
            Some(last) if last.role == role && role != Role::Assistant => {
                last.content.push('\n');
                last.content.push_str(&content);
            }
            _ => out.push(ChatMessage::new(role, content)),
        }
    }
    Ok(out)
}

pub fn chat_completions(server: &Server, stream: &TcpStream, body: &Value) {
    let queued = server.waiting.fetch_add(1, Ordering::SeqCst);
    let _place = QueuePlace(&server.waiting);
    if queued > server.q_len {
        return respond(
            stream,
            503,
            &json!({"error": format!("NPU is in use and request queue is full (limit: {}). Please try again later.", server.q_len)}),
        );
    }
    let mut npu = server.npu.lock().unwrap_or_else(|e| e.into_inner());
    // Declared after the lock: dropped before it, so the lock is held through the cooldown.
    let _cooldown = Cooldown(&server.waiting);
    let started = Instant::now();
    // Which model: the request's tag if known, else FastFlowLM's silent fallback.
    let asked = body["model"].as_str().map(str::to_string);
    let mut tag = match &asked {
        None => npu.tag.clone(),
        Some(a) => {
            let t = server.catalog.rectify(a);
            if server.catalog.entry(&t).is_some() {
                t
            } else {
                eprintln!("\x1b[31m[ERROR]  Model tag '{a}' is not supported; using default model: {FALLBACK_TAG}\x1b[0m");
                FALLBACK_TAG.to_string()
            }
        }
    };
    if tag != npu.tag && server.catalog.entry(&tag).is_some() {
        std::thread::sleep(Duration::from_millis(50));
        npu.model = None;
        match load(server, &tag) {
            Ok(m) => {
                npu.model = Some(m);
                npu.tag = tag.clone();
            }
            Err(what) => {
                eprintln!("[ERROR]  Failed to load model: {what}");
                npu.tag = "model-faker".into();
                return respond(
                    stream,
                    200,
                    &json!({"error": format!("Failed to load {tag} model!")}),
                );
            }
        }
    }
    let load_secs = started.elapsed().as_secs_f64();
    if server.fault == Fault::WrongModel {
        tag = FALLBACK_TAG.to_string();
    }
    let model_asked = asked.clone().unwrap_or_else(|| npu.tag.clone());
    let Loaded { model, cache, .. } = &mut *npu;
    let Some(model) = model.as_mut() else {
        return respond(
            stream,
            200,
            &json!({"error": format!("Failed to load {tag} model!")}),
        );
    };
    if server.fault == Fault::EngineError {
        return respond(
            stream,
            200,
            &json!({"error": "runlist failed execution (ERT_CMD_STATE_TIMEOUT)"}),
        );
    }
    // A vision model answers pictures from their bytes (vision.rs).
    if crate::vision::answer_pictures(stream, body, server.catalog.entry(&tag).as_ref(), &tag) {
        return;
    }
    let (msgs, mut options) = match messages(body).and_then(|m| Ok((m, sampling(body)?))) {
        Ok(x) => x,
        Err(e) => return respond(stream, 200, &json!({ "error": e })),
    };
    // What the KV cache holds decides what the model reads (see prompt_cache.rs).
    let msgs = match cache.decide(&model_asked, &msgs) {
        Decision::Hit { kept } => {
            println!("[FLM]  Use cached prompt!");
            cache.reused(kept, msgs, &server.release)
        }
        Decision::Miss => {
            println!("[FLM]  Prompt cache miss.");
            println!("[FLM]  Clearing context...");
            msgs
        }
        Decision::NewModel => msgs,
    };
    // For the tests: which text the model reads (FastFlowLM's log shows only 10+10 characters).
    println!(
        "[imitation]  the model reads {} messages, the first: {:?}",
        msgs.len(),
        msgs.first().map_or("", |m| m.content.as_str())
    );
    let context = model.info().context_length;
    let prompt = match model.tokenize_chat(&msgs, &options) {
        Ok(p) => p,
        Err(e) => return respond(stream, 200, &json!({"error": e.to_string()})),
    };
    if prompt.len() >= context {
        cache.reset();
        return respond(
            stream,
            400,
            &json!({"error": {"message": "Max length reached!", "type": "model_error", "code": 400}}),
        );
    }
    options.max_tokens = options.max_tokens.min(context - prompt.len());
    let id = format!(
        "chatcmpl-{:024x}",
        started.elapsed().as_nanos() ^ unix_secs() as u128
    );
    let created = unix_secs();
    let streaming = body["stream"].as_bool().unwrap_or(false);
    let crash = server.fault == Fault::CrashMidStream
        && streaming
        && server.streams.fetch_add(1, Ordering::SeqCst) == 0;
    let mut writer = stream;
    if streaming {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nAccess-Control-Allow-Origin: *\r\n\r\n";
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
    }
    let mut text = String::new();
    let mut chunks = 0usize;
    let mut client_gone = false;
    let mut failed_mid_stream = false;
    let mut reading = |_| ControlFlow::Continue(());
    let result = model.generate_text(&prompt, &options, &mut reading, &mut |piece: &str| {
        text.push_str(piece);
        if !streaming {
            return ControlFlow::Continue(());
        }
        let chunk = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": tag,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": null}]});
        if send_event(&mut writer, &chunk.to_string()).is_err() {
            client_gone = true;
            return ControlFlow::Break(());
        }
        chunks += 1;
        if server.fault == Fault::ErrorMidStream && chunks == 3 {
            failed_mid_stream = true;
            return ControlFlow::Break(());
        }
        if crash && chunks == 3 {
            eprintln!("[imitation]  crashing mid-stream as asked (FLM_IMITATION_FAULT=crash-mid-stream)");
            std::process::exit(139);
        }
        ControlFlow::Continue(())
    });
    println!("[FLM]  Model RAW Output:");
    println!("{text}");
    let result = match result {
        Ok(_) if failed_mid_stream => {
            Err("runlist failed execution (ERT_CMD_STATE_TIMEOUT)".into())
        }
        Ok(s) => Ok(s),
        Err(e) => Err(e.to_string()),
    };
    let stats = match result {
        Ok(s) => s,
        Err(e) if !streaming => {
            cache.reset();
            return respond(stream, 200, &json!({ "error": e }));
        }
        Err(e) if server.release.is_1_0() => {
            // 1.0.x: a model error after streaming began is an SSE event, then [DONE].
            cache.reset();
            let error = json!({"error": {"message": e, "type": "model_error",
                "code": 500, "session_cleared": true}});
            let _ = send_event(&mut writer, &error.to_string());
            let _ = send_event(&mut writer, "[DONE]");
            let _ = writer.write_all(b"0\r\n\r\n");
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
        Err(_) => {
            // 0.9.45: an error after streaming began ends the stream with no final chunk.
            cache.reset();
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    };
    if client_gone {
        // A cancelled answer: FastFlowLM resets the prompt cache.
        cache.reset();
    } else {
        cache.answered(msgs, &text);
    }
    let finish = if client_gone {
        "cancel"
    } else if stats.stop_reason == hearth_engine::StopReason::MaxTokens {
        "length"
    } else {
        "stop"
    };
    let rate = |n: usize, secs: f64| {
        if secs > 0.0 {
            json!(n as f64 / secs)
        } else {
            Value::Null
        }
    };
    let decode_rate = stats
        .decode_tokens_per_sec()
        .map_or(Value::Null, |r| json!(r));
    let mut usage = json!({
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        "kv_token_occupancy_rate_percentage": 100.0 * (stats.prompt_tokens + stats.generated_tokens) as f64 / context as f64,
        "load_duration": load_secs, "prefill_duration_ttft": stats.prefill_secs,
        "decoding_duration": stats.decode_secs,
        "prefill_speed_tps": rate(stats.prompt_tokens, stats.prefill_secs),
        "decoding_speed_tps": decode_rate,
    });
    if streaming {
        usage["active_kv_tokens"] = json!(stats.prompt_tokens + stats.generated_tokens);
        usage["max_kv_token_capacity"] = json!(context);
        let last = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": tag,
            "system_fingerprint": "fp_0123456789abcdef",
            "choices": [{"index": 0, "delta": {"content": null}, "finish_reason": finish}],
            "usage": usage});
        let _ = send_event(&mut writer, &last.to_string());
        let _ = send_event(&mut writer, "[DONE]");
        let _ = writer.write_all(b"0\r\n\r\n");
        let _ = writer.flush();
        let _ = writer.shutdown(Shutdown::Both);
    } else {
        respond(
            stream,
            200,
            &json!({"id": "fastflowlm-chat-completion", "object": "chat.completion", "created": created,
                "model": tag, "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                "logprobs": null, "finish_reason": "stop"}], "usage": usage, "service_tier": "default"}),
        );
    }
}
