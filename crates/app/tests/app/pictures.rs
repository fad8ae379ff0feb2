//! Pictures through the app without Tauri, on a temporary home whose model (the tiny Llama on
//! the processor) does not see: a pasted picture is checked and described, a file that is not a
//! picture is refused in words, a picture sent to a model that does not see is refused before
//! anything is saved, and pictures handed to the documents' path are written out as a drop.

use std::path::Path;
use std::sync::Mutex;

use hearth_app::pictures::{PictureUpload, PICTURES_READ_DIR};
use hearth_app::turn::{ChatAction, ChatEvent};
use hearth_app::{App, ErrorCode, Home};
use hearth_chat::picture::base64;
use hearth_chat::ConversationSettings;
use hearth_hub::{BuiltinKind, BuiltinModel};

/// The app with its folders in `dir` and the tiny Llama fixture as its built-in model.
fn app(dir: &Path) -> App {
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: Some(BuiltinModel {
            kind: BuiltinKind::Demo,
            folder: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/engine/tiny-llama"),
            sha256: None,
        }),
        system_root: dir.join("no-system"),
    };
    App::open(home).unwrap()
}

/// A 3 x 2 grey PNG made here (stored deflate blocks, so no compressor is needed).
fn png() -> Vec<u8> {
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
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    // Two rows of filter byte 0 and three grey pixels (one byte each: colour type 0).
    let raw = [0u8, 128, 128, 128, 0, 128, 128, 128];
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
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&3u32.to_be_bytes());
    ihdr.extend_from_slice(&2u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn a_pasted_picture_is_checked_and_a_file_that_is_not_one_is_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let draft = app.check_picture("screen.png", &base64(&png())).unwrap();
    assert_eq!((draft.width, draft.height), (3, 2));
    assert_eq!(draft.media_type, "image/png");
    assert!(draft.tokens >= 256, "the stated estimate: {}", draft.tokens);
    let refused = app
        .check_picture("notes.png", &base64(b"%PDF-1.7 not a picture"))
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidInput);
    assert!(
        refused
            .message
            .starts_with("notes.png: this is not a PNG, JPEG or WebP picture"),
        "{}",
        refused.message
    );
    let cut = png()[..40].to_vec();
    let e = app.check_picture("cut.png", &base64(&cut)).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput, "{}", e.message);
}

#[test]
fn a_picture_for_a_model_that_does_not_see_is_refused_before_anything_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app
        .create_conversation(&ConversationSettings::default())
        .unwrap();
    let events = Mutex::new(Vec::new());
    let error = app
        .answer(
            app.begin_answer().unwrap(),
            &c.id,
            ChatAction::Send {
                content: "What is in this picture?".into(),
                pictures: vec![PictureUpload {
                    name: "screen.png".into(),
                    data: base64(&png()),
                }],
            },
            &hearth_app::npu::logged_progress(),
            &|e: ChatEvent| events.lock().unwrap().push(e),
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::Unsupported);
    assert_eq!(error.detail.as_deref(), Some("seesNoPictures"));
    assert!(
        error.message.contains("does not see pictures"),
        "{}",
        error.message
    );
    assert!(events.lock().unwrap().is_empty(), "nothing started");
    assert!(
        app.conversation(&c.id).unwrap().messages.is_empty(),
        "nothing was saved"
    );
}

#[test]
fn pictures_handed_to_the_documents_are_written_out_as_a_drop_of_documents() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let upload = PictureUpload {
        name: "receipt.png".into(),
        data: base64(&png()),
    };
    let token = app
        .pictures_as_documents(&[upload.clone(), upload])
        .unwrap();
    let folder = dir.path().join("data").join(PICTURES_READ_DIR);
    assert!(folder.join("receipt.png").exists());
    assert!(
        folder.join("receipt (2).png").exists(),
        "never over another"
    );
    // The token names a drop of documents: taken once (here as pictures, as a drop is).
    let taken = app.take_dropped_pictures(&token).unwrap();
    assert_eq!(taken.len(), 2);
    assert_eq!(
        app.take_dropped_pictures(&token).unwrap_err().code,
        ErrorCode::NotFound
    );
    let bad = PictureUpload {
        name: "x.png".into(),
        data: "not base64 at all!".into(),
    };
    assert!(app.pictures_as_documents(&[bad]).is_err());
}
