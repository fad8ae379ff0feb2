//! `POST /v1/audio/transcriptions` through `app(state)` with `oneshot`, on real multipart
//! bodies made here (and malformed ones), with the tiny random Whisper of the engine's fixtures
//! installed as the speech model `whisper-tiny`. Its words are noise; the shapes, limits and
//! errors are what is checked.

use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hearth_app::{Home, LocalModel};
use hearth_server::{app, AppState, LoadSettings, LocalModels, ServerOptions};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

const BOUNDARY: &str = "hearth-test-boundary-51";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

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

/// A speech models folder holding the tiny Whisper as `whisper-tiny`.
fn speech_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("whisper-tiny");
    std::fs::create_dir_all(&model).unwrap();
    let fixture = root().join("tests/fixtures/whisper/tiny");
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), model.join(entry.file_name())).unwrap();
    }
    dir
}

fn state(speech: Option<&Path>) -> AppState {
    let models = LocalModels::new(
        home(),
        vec![LocalModel {
            name: "tiny-qwen3".into(),
            ..LocalModel::folder(root().join("tests/fixtures/engine/tiny-qwen3"))
        }],
        LoadSettings::default(),
    );
    AppState::on_demand(
        models,
        ServerOptions {
            speech_models_dir: speech.map(Path::to_path_buf),
            ..ServerOptions::default()
        },
    )
}

/// One second of a 440 Hz tone, 16-bit mono 22,050 Hz WAV.
fn wav() -> Vec<u8> {
    let rate = 22_050u32;
    let samples: Vec<i16> = (0..rate)
        .map(|i| {
            (8000.0 * (2.0 * std::f64::consts::PI * 440.0 * f64::from(i) / f64::from(rate)).sin())
                as i16
        })
        .collect();
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + samples.len() as u32 * 2).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(samples.len() as u32 * 2).to_le_bytes());
    for s in samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out
}

/// A multipart/form-data body: text fields, then the file (if any) as `file`.
fn form(fields: &[(&str, &str)], file: Option<(&str, &[u8])>) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    if let Some((file_name, bytes)) = file {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

fn request(body: Vec<u8>, content_type: &str) -> Request<Body> {
    Request::post("/v1/audio/transcriptions")
        .header(header::HOST, "127.0.0.1:11434")
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap()
}

fn multipart(body: Vec<u8>) -> Request<Body> {
    request(body, &format!("multipart/form-data; boundary={BOUNDARY}"))
}

async fn send(state: AppState, request: Request<Body>) -> (StatusCode, String, String) {
    let response = app(state).oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

fn error_of(body: &str) -> Value {
    let value: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    value["error"].clone()
}

#[tokio::test]
async fn the_three_response_formats() {
    let dir = speech_dir();
    let state = state(Some(dir.path()));
    let wav = wav();
    let (status, kind, body) = send(
        state.clone(),
        multipart(form(&[("model", "whisper-1")], Some(("tone.wav", &wav)))),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(kind.starts_with("application/json"), "{kind}");
    let json: Value = serde_json::from_str(&body).unwrap();
    assert!(json["text"].is_string(), "{body}");

    let (status, kind, body) = send(
        state.clone(),
        multipart(form(
            &[("model", "whisper-tiny"), ("response_format", "text")],
            Some(("tone.wav", &wav)),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(kind.starts_with("text/plain"), "{kind}");
    assert_eq!(body.trim_end(), json["text"].as_str().unwrap().trim_end());

    let (status, _, body) = send(
        state,
        multipart(form(
            &[("model", "whisper-1"), ("response_format", "verbose_json")],
            Some(("tone.wav", &wav)),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let verbose: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(verbose["task"], "transcribe");
    assert!(verbose["language"].is_string(), "{body}");
    assert!(
        (verbose["duration"].as_f64().unwrap() - 1.0).abs() < 0.01,
        "{body}"
    );
    assert!(verbose["segments"].is_array(), "{body}");
}

#[tokio::test]
async fn bad_requests_get_plain_errors_in_openais_shape() {
    let dir = speech_dir();
    let wav = wav();
    let cases: Vec<(Request<Body>, StatusCode, Option<&str>, &str)> = vec![
        // Not multipart at all.
        (
            request(b"{\"model\":\"whisper-1\"}".to_vec(), "application/json"),
            StatusCode::BAD_REQUEST,
            None,
            "multipart/form-data",
        ),
        // A body cut before its closing boundary.
        (
            multipart({
                let mut b = form(&[("model", "whisper-1")], Some(("tone.wav", &wav)));
                b.truncate(b.len() - 40);
                b
            }),
            StatusCode::BAD_REQUEST,
            None,
            "the form could not be read",
        ),
        // No file.
        (
            multipart(form(&[("model", "whisper-1")], None)),
            StatusCode::BAD_REQUEST,
            Some("file"),
            "no 'file'",
        ),
        // A file that is not sound.
        (
            multipart(form(
                &[("model", "whisper-1")],
                Some(("notes.txt", b"Dear Sam, see you Tuesday.\n")),
            )),
            StatusCode::BAD_REQUEST,
            Some("file"),
            "the uploaded file is not a sound file Hearth can read (it looks like text)",
        ),
        // A 10-hour WAV header.
        (
            multipart(form(
                &[("model", "whisper-1")],
                Some(("long.wav", &{
                    let mut w = wav.clone();
                    let data = 22_050u32 * 2 * 36_000;
                    w[4..8].copy_from_slice(&(36 + data).to_le_bytes());
                    w[40..44].copy_from_slice(&data.to_le_bytes());
                    w
                })),
            )),
            StatusCode::BAD_REQUEST,
            Some("file"),
            "is 10 h 0 min long",
        ),
        // A format that is not served.
        (
            multipart(form(
                &[("response_format", "srt")],
                Some(("tone.wav", &wav)),
            )),
            StatusCode::BAD_REQUEST,
            Some("response_format"),
            "use json, text or verbose_json",
        ),
        // A model that is not installed, and a path.
        (
            multipart(form(
                &[("model", "whisper-large")],
                Some(("tone.wav", &wav)),
            )),
            StatusCode::NOT_FOUND,
            Some("model"),
            "whisper-tiny",
        ),
        (
            multipart(form(
                &[("model", "../whisper-tiny")],
                Some(("tone.wav", &wav)),
            )),
            StatusCode::BAD_REQUEST,
            Some("model"),
            "not a path",
        ),
    ];
    for (request, status, param, words) in cases {
        let (got, _, body) = send(state(Some(dir.path())), request).await;
        assert_eq!(got, status, "{body}");
        let error = error_of(&body);
        assert!(error["message"].as_str().unwrap().contains(words), "{body}");
        assert_eq!(error["param"].as_str(), param, "{body}");
    }
}

#[tokio::test]
async fn without_a_speech_model_the_answer_says_how_to_get_one() {
    let empty = tempfile::tempdir().unwrap();
    let (status, _, body) = send(
        state(Some(empty.path())),
        multipart(form(&[("model", "whisper-1")], Some(("tone.wav", &wav())))),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let error = error_of(&body);
    assert_eq!(error["code"], "model_not_found");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("hearth pull whisper-base"),
        "{body}"
    );
}

#[tokio::test]
async fn admission_is_the_other_routes_and_25_mib_is_the_limit() {
    let dir = speech_dir();
    // A foreign Host is refused before anything is read.
    let mut request = multipart(form(&[("model", "whisper-1")], Some(("tone.wav", &wav()))));
    request
        .headers_mut()
        .insert(header::HOST, "evil.example:80".parse().unwrap());
    let (status, _, body) = send(state(Some(dir.path())), request).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Past 25 MiB: 413, in OpenAI's shape.
    let big = vec![0u8; 25 * 1024 * 1024 + 1];
    let (status, _, body) = send(
        state(Some(dir.path())),
        multipart(form(&[("model", "whisper-1")], Some(("big.wav", &big)))),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    // 5 MiB, over the chat routes' 4 MiB, is read (and refused as not sound, not as too big).
    let five = vec![0u8; 5 * 1024 * 1024];
    let (status, _, body) = send(
        state(Some(dir.path())),
        multipart(form(&[("model", "whisper-1")], Some(("zeros.wav", &five)))),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(error_of(&body)["param"], "file", "{body}");
}
