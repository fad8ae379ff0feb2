//! A picture sent from the desktop to a model on the NPU arrives: a turn through the app (a
//! conversation, a message with a picture, the answer saved) against the FastFlowLM imitation
//! (`tests/flm-imitation`), whose vision model (a registry entry with `vlm: true`) answers from
//! the bytes it was sent: each picture's format, width x height and an FNV-1a checksum. The
//! answer is compared with the picture the conversation kept, so a turn that dropped the picture
//! on the way (the imitation then answers with the engine's words) fails here. A second
//! question in the same conversation sends the kept picture again.
//!
//! No NPU here: the imitation stands in for FastFlowLM. It is built next to this test's binary
//! by `cargo build -p flm-imitation` (or `cargo test --workspace`); without it the test says it
//! was skipped.
//!
//! It sets `HEARTH_FLM` for the whole process, so it is a test binary of its own, not a module of
//! `tests/app/`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hearth_app::pictures::PictureUpload;
use hearth_app::session::BackendKind;
use hearth_app::turn::{ChatAction, ChatEvent};
use hearth_app::{App, Home};
use hearth_chat::conversations::Role;
use hearth_chat::picture::{base64, from_base64};
use hearth_chat::ConversationSettings;

const NAME: &str = "Demo-NPU2";

/// The imitation's `flm`, built beside this test's binary (`target/<profile>/flm`).
fn imitation() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let flm = exe.parent()?.parent()?.join("flm");
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

/// FastFlowLM's install in `dir` as the imitation: a wrapper `flm` next to `xclbins/NAME/`.
fn install_fastflowlm(dir: &Path, imitation: &Path) -> PathBuf {
    let install = dir.join("fastflowlm");
    std::fs::create_dir_all(install.join("xclbins").join(NAME)).unwrap();
    let flm = install.join("flm");
    let tmp = install.join("flm.tmp");
    std::fs::write(
        &tmp,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", imitation.display()),
    )
    .unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&tmp, &flm).unwrap();
    flm
}

/// The app on a private home in `dir`, with a ready NPU as the doctor sees it and no
/// built-in model.
fn app(dir: &Path) -> App {
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/npu/strix-ready"),
    };
    App::open(home).unwrap()
}

/// Marks the registry's entry `name` as a vision model, as FastFlowLM's catalog does (`vlm`).
fn mark_vision(registry: &Path, name: &str) {
    let mut list: serde_json::Value =
        serde_json::from_slice(&std::fs::read(registry).unwrap()).unwrap();
    let mut marked = 0;
    for sizes in list["models"].as_object_mut().unwrap().values_mut() {
        for entry in sizes.as_object_mut().unwrap().values_mut() {
            if entry["name"] == name {
                entry["vlm"] = serde_json::Value::Bool(true);
                marked += 1;
            }
        }
    }
    assert_eq!(marked, 1, "{name} is in the registry once: {list}");
    std::fs::write(registry, list.to_string()).unwrap();
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

/// A `width` x `height` RGB PNG made here (one stored deflate block, so no compressor).
fn png(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0);
        for x in 0..width {
            raw.extend_from_slice(&[(x * 6) as u8, (y * 8) as u8, 128]);
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    let len = raw.len() as u16;
    let mut z = vec![0x78, 0x01, 1];
    z.extend_from_slice(&len.to_le_bytes());
    z.extend_from_slice(&(!len).to_le_bytes());
    z.extend_from_slice(&raw);
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

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Sends `content` with `pictures` in the conversation `id`; the events the turn gave.
fn send(app: &App, id: &str, content: &str, pictures: Vec<PictureUpload>) -> Vec<ChatEvent> {
    let events = Mutex::new(Vec::new());
    app.answer(
        app.begin_answer().unwrap(),
        id,
        ChatAction::Send {
            content: content.into(),
            pictures,
        },
        &hearth_app::npu::logged_progress(),
        &|e: ChatEvent| events.lock().unwrap().push(e),
    )
    .unwrap();
    events.into_inner().unwrap()
}

#[test]
fn a_picture_sent_to_a_model_on_the_npu_arrives_and_is_answered_from_its_bytes() {
    let Some(imitation) = imitation() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let flm = install_fastflowlm(dir.path(), &imitation);
    // The only test of this file (one process): FastFlowLM is found where HEARTH_FLM says.
    std::env::set_var("HEARTH_FLM", &flm);
    let app = app(dir.path());
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
    app.import_model(&demo, Some(NAME.into()), &mut |_| {})
        .unwrap();
    mark_vision(&app.home().registry(), NAME);

    let status = app
        .select_model(
            NAME,
            Some(BackendKind::Npu),
            false,
            &hearth_app::npu::logged_progress(),
        )
        .unwrap();
    assert_eq!(status.backend_kind, BackendKind::Npu);
    assert!(status.sees_pictures, "the registry's vlm");

    let c = app
        .create_conversation(&ConversationSettings::default())
        .unwrap();
    // Words a chat template would take for a turn marker travel with the picture, broken.
    let upload = PictureUpload {
        name: "chart.png".into(),
        data: base64(&png(40, 30)),
    };
    let events = send(&app, &c.id, "What is in it? <|im_end|>", vec![upload]);
    if let Some(ChatEvent::Error { .. }) = events.last() {
        panic!("the answer failed: {:?}", events.last());
    }

    let saved = app.conversation(&c.id).unwrap();
    let [question, answer] = saved.messages.as_slice() else {
        panic!("a question and its answer: {:?}", saved.messages);
    };
    assert_eq!(question.role, Role::User);
    assert_eq!(question.pictures.len(), 1, "the picture is kept");
    let url = app.message_picture(question.id, 0).unwrap();
    let kept = from_base64(url.split_once(";base64,").unwrap().1).unwrap();
    let seen = format!(
        "I see 1 picture: PNG 40 x 30, checksum {:08x}.",
        fnv1a(&kept)
    );
    assert_eq!(
        answer.content, seen,
        "the model on the NPU was sent the kept picture, byte for byte"
    );

    // The next question carries no picture of its own; the conversation's picture goes again.
    send(&app, &c.id, "And the colours?", Vec::new());
    let saved = app.conversation(&c.id).unwrap();
    assert_eq!(saved.messages.len(), 4);
    assert_eq!(saved.messages[3].content, seen);
}
