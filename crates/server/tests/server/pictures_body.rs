//! How much a request may weigh, over a real loopback socket: the routes that carry pictures
//! (`/v1/chat/completions`, `/api/chat`, `/api/generate`) take a 5 MB picture (7 MB of base64,
//! past the 4 MB every other route keeps), and the same body on `/v1/embeddings` is a 413 in
//! OpenAI's JSON error shape.
//!
//! On the processor (the tiny Qwen3 fixture, which sees no pictures) the picture gets through
//! the body limit and is read and checked whole before the model's refusal; on the FastFlowLM
//! imitation's vision model (`tests/flm-imitation`, built by `cargo build -p flm-imitation`;
//! without it that test says it was skipped) the answer is made from the picture's bytes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_backends::npu::discover::{self, Lookup};
use hearth_backends::npu::{NpuBackend, NpuOptions};
use hearth_backends::CpuBackend;
use hearth_chat::picture::{base64, check_picture, DEFAULT_LONGEST_SIDE};
use hearth_chat::Backend;
use hearth_server::{body_limit_for, AppState, ServerOptions, DEFAULT_BODY_LIMIT};
use serde_json::{json, Value};

/// Serves `backend` on a free loopback port; the model's name as the server lists it.
fn start(backend: Box<dyn Backend>) -> (SocketAddr, String) {
    let model = backend.info().model.clone();
    let state = AppState::new(backend, ServerOptions::default());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || hearth_server::serve_blocking(listener, state));
    (addr, model)
}

/// POSTs `body` to `path` on a new connection: the status and the JSON the server answered.
fn post(addr: SocketAddr, path: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The body is written while the answer is read: the server may answer (a 413) and close
    // before the whole body is sent.
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        let _ = writer.write_all(body.as_bytes());
    });
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    let _ = sending.join();
    let text = String::from_utf8_lossy(&out);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("an HTTP answer: {text:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    let json = serde_json::from_str(rest.trim())
        .unwrap_or_else(|e| panic!("{path} answered JSON ({e}): {head}\n{rest:.400}"));
    (status, json)
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A `width` x `height` RGB PNG whose pixels are stored uncompressed (stored deflate blocks), so
/// its size is about 3 bytes a pixel.
fn png(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::with_capacity((height * (1 + 3 * width)) as usize);
    for y in 0..height {
        raw.push(0);
        for x in 0..width {
            raw.extend_from_slice(&[(x * 7) as u8, (y * 13) as u8, ((x ^ y) * 3) as u8]);
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A picture of about 5 MB (1,400 x 1,250 pixels).
fn five_mb_png() -> Vec<u8> {
    png(1400, 1250)
}

/// [`five_mb_png`] as base64.
fn five_mb_picture() -> String {
    let picture = five_mb_png();
    assert!(
        (5_000_000..6_000_000).contains(&picture.len()),
        "{}",
        picture.len()
    );
    let data = base64(&picture);
    assert!(
        data.len() > DEFAULT_BODY_LIMIT,
        "more than every other route takes"
    );
    data
}

/// The three requests with `picture`, one per route that carries pictures, for `model`.
fn requests(model: &str, picture: &str) -> [(&'static str, Value); 3] {
    [
        (
            "/v1/chat/completions",
            json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in it?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{picture}")}}
            ]}]}),
        ),
        (
            "/api/chat",
            json!({"model": model, "stream": false, "options": {"num_predict": 8},
                "messages": [{"role": "user", "content": "What is in it?", "images": [picture]}]}),
        ),
        (
            "/api/generate",
            json!({"model": model, "stream": false, "options": {"num_predict": 8},
                "prompt": "What is in it?", "images": [picture]}),
        ),
    ]
}

/// The words of an error in OpenAI's (`error.message`) or Ollama's (`error`) shape.
fn error_words(value: &Value) -> &str {
    value["error"]["message"]
        .as_str()
        .or_else(|| value["error"].as_str())
        .unwrap_or_else(|| panic!("an error: {value}"))
}

#[test]
fn picture_routes_take_a_five_mb_picture_and_other_routes_keep_four_mb() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, "tiny-qwen3", &Default::default(), None).unwrap();
    let (addr, model) = start(Box::new(backend));
    let picture = five_mb_picture();
    for (path, body) in requests(&model, &picture) {
        let (status, value) = post(addr, path, &body);
        // Past the body limit and read whole: the picture was checked, and only then refused
        // because this model does not see.
        assert_eq!(status, 400, "{path}: {value}");
        assert!(
            error_words(&value).contains("does not see pictures"),
            "{path}: {value}"
        );
    }
    let (_, body) = &requests(&model, &picture)[0];
    let embed = json!({"model": model, "input": body.to_string()});
    let (status, value) = post(addr, "/v1/embeddings", &embed);
    assert_eq!(status, 413, "{value}");
    assert!(
        error_words(&value).contains("larger than this server accepts (4 MB)"),
        "{value}"
    );
    assert_eq!(value["error"]["type"], "invalid_request_error", "{value}");
}

#[test]
fn each_route_has_its_bound() {
    let limit = DEFAULT_BODY_LIMIT;
    let pictures = 4 * (20 * 1024 * 1024usize).div_ceil(3) * 4;
    for path in ["/v1/chat/completions", "/api/chat", "/api/generate"] {
        assert_eq!(body_limit_for(path, limit), limit + pictures, "{path}");
    }
    for path in [
        "/v1/embeddings",
        "/v1/completions",
        "/api/show",
        "/api/embed",
    ] {
        assert_eq!(body_limit_for(path, limit), limit, "{path}");
    }
    assert_eq!(
        body_limit_for("/v1/audio/transcriptions", limit),
        25 * 1024 * 1024
    );
}

/// The imitation's `flm`, built beside this test's binary (`target/<profile>/flm`).
fn imitation() -> Option<PathBuf> {
    let flm = std::env::current_exe()
        .ok()?
        .parent()?
        .parent()?
        .join("flm");
    if flm.is_file() {
        Some(flm)
    } else {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built ({}); `cargo build -p flm-imitation` builds it",
            flm.display()
        );
        None
    }
}

/// The NPU backend on the imitation's vision model (the demo model, marked `vlm` in a registry
/// of its own in `dir`).
fn vision_backend(dir: &Path, imitation: &Path) -> NpuBackend {
    const NAME: &str = "Demo-NPU2";
    let models = dir.join("data/models");
    std::fs::create_dir_all(&models).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    // The demo model's files, with a context of 4096 positions: a 5 MB picture is about 2,250
    // tokens, more than the demo's 2048 (the imitation answers from the picture's bytes, not
    // from the weights).
    let folder = models.join(NAME);
    std::fs::create_dir_all(&folder).unwrap();
    for file in ["model.q4nx", "tokenizer.json", "tokenizer_config.json"] {
        std::os::unix::fs::symlink(demo.join(file).canonicalize().unwrap(), folder.join(file))
            .unwrap();
    }
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(demo.join("config.json")).unwrap()).unwrap();
    config["max_position_embeddings"] = json!(4096);
    std::fs::write(folder.join("config.json"), config.to_string()).unwrap();
    let registry = dir.join("data/model_list.json");
    let entry = json!({
        "name": NAME, "url": "", "size": 5050000, "flm_min_version": "1.0.0",
        "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
        "default_context_length": 4096, "vlm": true,
        "details": { "family": "llama3", "think": false, "parameter_size": "5M",
                     "quantization_level": "Q4_1" },
        "footprint": 0.01
    });
    let list = json!({"model_path": models, "models": {"demo-vl": {"5m": entry}}});
    std::fs::write(&registry, list.to_string()).unwrap();
    let install = dir.join("flm-install");
    std::fs::create_dir_all(install.join("xclbins").join(NAME)).unwrap();
    let flm = install.join("flm");
    let tmp = install.join("flm.tmp");
    let script = format!(
        "#!/bin/sh\nexport FLM_CONFIG_PATH=\"${{FLM_CONFIG_PATH:-{}}}\"\nexec '{}' \"$@\"\n",
        registry.display(),
        imitation.display()
    );
    std::fs::write(&tmp, script).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &flm).unwrap();
    let program = discover::find(&Lookup {
        hearth_flm: Some(flm),
        path: None,
        standard: PathBuf::from("/nonexistent"),
        ..Lookup::default()
    })
    .unwrap();
    let options = NpuOptions {
        start_timeout: Duration::from_secs(60),
        idle_stop: None,
        read_timeout: Duration::from_secs(60),
        ..NpuOptions::new(dir.join("state"))
    };
    NpuBackend::open(program, &registry, "demo-vl:5m", options).unwrap()
}

#[test]
fn a_five_mb_picture_reaches_a_model_that_sees_through_both_apis() {
    let Some(imitation) = imitation() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (addr, model) = start(Box::new(vision_backend(dir.path(), &imitation)));
    let picture = five_mb_picture();
    // What the server makes of it, as every front end checks a picture.
    let checked = check_picture(&five_mb_png(), DEFAULT_LONGEST_SIDE).unwrap();
    let fnv1a = checked.bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let seen = format!("I see 1 picture: PNG 1400 x 1250, checksum {fnv1a:08x}.");
    for (path, body) in requests(&model, &picture) {
        let (status, value) = post(addr, path, &body);
        assert_eq!(status, 200, "{path}: {value}");
        let text = value["choices"][0]["message"]["content"]
            .as_str()
            .or_else(|| value["message"]["content"].as_str())
            .or_else(|| value["response"].as_str())
            .unwrap_or_else(|| panic!("{path}: an answer: {value}"));
        assert_eq!(text, seen, "{path}: the vision model was sent the picture");
    }
}
