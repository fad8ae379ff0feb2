//! Pictures on the NPU backend against the imitation's vision model (a catalog entry with
//! `vlm: true`, which answers from the bytes it was sent: format, width x height, checksum):
//! a checked picture arrives whole as an `image_url` part, a model without `vlm` is never sent
//! one, and FastFlowLM's refusal of a picture is said as "the server refused the picture".
//! No NPU here: the imitation stands in for FastFlowLM (its vision answers are made up from the
//! bytes, not seen).

use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_backends::npu::discover::{self, FlmProgram, Lookup};
use hearth_backends::npu::{NpuBackend, NpuOptions};
use hearth_chat::answer::{answer, AnswerRequest};
use hearth_chat::{check_picture, Backend, Input, Picture, PictureFormat};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};

const NAME: &str = "Demo-NPU2";
const TEXT_TAG: &str = "demo:5m";
const VISION_TAG: &str = "demo-vl:5m";

fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

struct Fixture {
    _dir: tempfile::TempDir,
    flm: PathBuf,
    registry: PathBuf,
    state: PathBuf,
}

fn entry(vlm: bool) -> serde_json::Value {
    serde_json::json!({
        "name": NAME, "url": "", "size": 5050000, "flm_min_version": "1.0.0",
        "files": ["config.json", "model.q4nx", "tokenizer.json", "tokenizer_config.json"],
        "default_context_length": 2048, "vlm": vlm,
        "details": { "family": "llama3", "think": false, "parameter_size": "5M",
                     "quantization_level": "Q4_1" },
        "footprint": 0.01
    })
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("data/models");
    std::fs::create_dir_all(&models).unwrap();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    std::os::unix::fs::symlink(demo.canonicalize().unwrap(), models.join(NAME)).unwrap();
    let registry = dir.path().join("data/model_list.json");
    let list = serde_json::json!({
        "model_path": models,
        "models": { "demo": { "5m": entry(false) }, "demo-vl": { "5m": entry(true) } }
    });
    std::fs::write(&registry, list.to_string()).unwrap();
    let bin = dir.path().join("flm-install");
    std::fs::create_dir_all(bin.join("xclbins").join(NAME)).unwrap();
    let flm = bin.join("flm");
    let script = format!(
        "#!/bin/sh\nexport FLM_IMITATION_VERSION='1.0.6'\nexport FLM_CONFIG_PATH=\"${{FLM_CONFIG_PATH:-{}}}\"\nexec '{}' \"$@\"\n",
        registry.display(),
        env!("CARGO_BIN_EXE_flm")
    );
    let tmp = bin.join("flm.tmp");
    std::fs::write(&tmp, script).unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &flm).unwrap();
    let state = dir.path().join("state");
    Fixture {
        _dir: dir,
        flm,
        registry,
        state,
    }
}

impl Fixture {
    fn program(&self) -> FlmProgram {
        discover::find(&Lookup {
            hearth_flm: Some(self.flm.clone()),
            path: None,
            standard: PathBuf::from("/nonexistent"),
            ..Lookup::default()
        })
        .unwrap()
    }

    fn backend(&self, tag: &str) -> NpuBackend {
        let options = NpuOptions {
            start_timeout: Duration::from_secs(60),
            idle_stop: None,
            read_timeout: Duration::from_secs(60),
            ..NpuOptions::new(&self.state)
        };
        NpuBackend::open(self.program(), &self.registry, tag, options).unwrap()
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    let mut typed = kind.to_vec();
    typed.extend_from_slice(data);
    out.extend_from_slice(&typed);
    out.extend_from_slice(&crc32(&typed).to_be_bytes());
    out
}

/// A `width` x `height` RGB PNG made by hand (one stored deflate block).
fn png(width: u32, height: u32) -> Vec<u8> {
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0);
        for x in 0..width {
            raw.extend_from_slice(&[(x * 6) as u8, (y * 8) as u8, 128]);
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    let len = raw.len() as u16;
    let mut zlib = vec![0x78, 0x01, 0x01];
    zlib.extend_from_slice(&len.to_le_bytes());
    zlib.extend_from_slice(&(!len).to_le_bytes());
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    out.extend(chunk(b"IDAT", &zlib));
    out.extend(chunk(b"IEND", &[]));
    out
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn request(pictures: Vec<Picture>) -> AnswerRequest<'static> {
    AnswerRequest {
        input: Input::Chat(vec![
            ChatMessage::new(Role::User, "What is in it?").with_pictures(pictures)
        ]),
        options: ChatOptions {
            sampling: SamplingParams::greedy(),
            max_tokens: 16,
            ..ChatOptions::default()
        },
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    }
}

#[test]
fn the_vision_model_sees_the_picture_it_was_sent() {
    let _one = serial();
    let f = fixture();
    let mut backend = f.backend(VISION_TAG);
    assert!(backend.sees_pictures(), "the registry's vlm");
    let picture = check_picture(&png(40, 30), backend.picture_side()).unwrap();
    let second = check_picture(&png(20, 50), backend.picture_side()).unwrap();
    let done = answer(
        &mut backend,
        request(vec![picture.clone(), second.clone()]),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap();
    assert_eq!(
        done.text,
        format!(
            "I see 2 pictures: PNG 40 x 30, checksum {:08x}; PNG 20 x 50, checksum {:08x}.",
            fnv1a(&picture.bytes),
            fnv1a(&second.bytes)
        )
    );
    assert_eq!(done.receipt.prompt_tokens, 512, "FastFlowLM's usage");
}

#[test]
fn a_model_without_vlm_is_never_sent_a_picture() {
    let _one = serial();
    let f = fixture();
    let mut backend = f.backend(TEXT_TAG);
    assert!(!backend.sees_pictures());
    let picture = check_picture(&png(8, 8), 1536).unwrap();
    let err = answer(&mut backend, request(vec![picture]), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    let words = err.to_string();
    assert!(
        words.contains("does not see pictures") && words.contains("NPU"),
        "{words}"
    );
    assert_eq!(
        backend.server_pid(),
        None,
        "FastFlowLM was not even started"
    );
}

#[test]
fn a_picture_fastflowlm_cannot_read_is_refused_in_its_words() {
    let _one = serial();
    let f = fixture();
    let mut backend = f.backend(VISION_TAG);
    // Past Hearth's check (made here by hand): bytes no decoder reads.
    let broken = Picture {
        format: PictureFormat::Png,
        width: 1,
        height: 1,
        bytes: Arc::from(&b"not a picture at all"[..]),
    };
    let err = answer(&mut backend, request(vec![broken]), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap_err();
    let words = err.to_string();
    assert!(
        words.starts_with("the server refused the picture: ")
            && words.contains("Failed to load image from memory"),
        "{words}"
    );
}
