//! Pictures on the remote backend, against the scripted loopback server: which models see
//! (Ollama's `/api/show` capabilities, or the user's mark in the settings), the `image_url`
//! parts a seeing model is sent (checked part by part), the refusal before sending to a model
//! that does not see, and a server's refusal of a picture in its own words.

mod common;

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use common::{ChatReply, Recorded, Script, ScriptedServer};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_chat::answer::{answer, AnswerError, AnswerRequest};
use hearth_chat::context::FitError;
use hearth_chat::picture::from_base64;
use hearth_chat::{Backend, BackendError, Input, Picture, PictureFormat};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};
use serde_json::json;

const MODEL: &str = "llava-7b";

fn quick() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(1),
        reuse_connections: true,
    }
}

fn picture(format: PictureFormat, fill: u8) -> Picture {
    Picture {
        format,
        width: 3,
        height: 2,
        bytes: Arc::from(vec![fill, 1, 2, 3, 4, 5, 6]),
    }
}

fn request(pictures: Vec<Picture>) -> AnswerRequest<'static> {
    AnswerRequest {
        input: Input::Chat(vec![
            ChatMessage::new(Role::System, "You are brief."),
            ChatMessage::new(Role::User, "What is in it?").with_pictures(pictures),
        ]),
        options: ChatOptions {
            sampling: SamplingParams::greedy(),
            max_tokens: 32,
            enable_thinking: None,
            speculative: None,
            format: hearth_engine::ResponseFormat::Text,
        },
        stops: Vec::new(),
        power: None,
        trim_to_fit: true,
    }
}

fn chat_requests(server: &ScriptedServer) -> Vec<Recorded> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/chat/completions")
        .collect()
}

#[test]
fn a_marked_model_is_sent_its_pictures_as_image_url_parts() {
    let server = ScriptedServer::start(Script::new(MODEL, &["A ", "cat."]));
    let mut config = RemoteConfig::new(&server.url()).unwrap();
    config.mark_seeing(MODEL, true);
    let mut backend = RemoteBackend::connect(&config, MODEL, quick()).unwrap();
    assert!(backend.sees_pictures(), "the user marked it");

    let png = picture(PictureFormat::Png, 9);
    let jpeg = picture(PictureFormat::Jpeg, 8);
    let done = answer(
        &mut backend,
        request(vec![png.clone(), jpeg.clone()]),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap();
    assert_eq!(done.text, "A cat.");

    let sent = chat_requests(&server)[0].json();
    assert_eq!(
        sent["messages"][0]["content"], "You are brief.",
        "text alone stays a string"
    );
    let parts = sent["messages"][1]["content"].as_array().unwrap();
    assert_eq!(parts.len(), 3, "{parts:?}");
    for (part, expected) in parts.iter().zip([&png, &jpeg]) {
        assert_eq!(part["type"], "image_url");
        let url = part["image_url"]["url"].as_str().unwrap();
        let prefix = format!("data:{};base64,", expected.format.media_type());
        let data = url.strip_prefix(&prefix).expect(url);
        assert_eq!(from_base64(data).unwrap(), &expected.bytes[..]);
    }
    assert_eq!(
        parts[2],
        json!({ "type": "text", "text": "What is in it?" })
    );
}

#[test]
fn ollama_says_which_models_see() {
    let mut script = Script::new(MODEL, &["ok"]);
    script.models.push(("llama3".into(), None));
    script.vision_models = vec![MODEL.into()];
    let server = ScriptedServer::start(script);
    let config = RemoteConfig::new(&server.url()).unwrap();
    let seeing = RemoteBackend::connect(&config, MODEL, quick()).unwrap();
    assert!(seeing.sees_pictures());
    let blind = RemoteBackend::connect(&config, "llama3", quick()).unwrap();
    assert!(!blind.sees_pictures());
    let asked = server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/show")
        .map(|r| r.json()["model"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    assert_eq!(asked, vec![MODEL.to_owned(), "llama3".to_owned()]);
}

#[test]
fn a_model_that_does_not_see_is_never_sent_a_picture() {
    // Not Ollama (no /api/show) and not marked.
    let server = ScriptedServer::start(Script::new(MODEL, &["never"]));
    let config = RemoteConfig::new(&server.url()).unwrap();
    let mut backend = RemoteBackend::connect(&config, MODEL, quick()).unwrap();
    assert!(!backend.sees_pictures());
    let err = answer(
        &mut backend,
        request(vec![picture(PictureFormat::Png, 1)]),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    let words = err.to_string();
    assert!(
        matches!(
            err,
            AnswerError::NotStarted(FitError::Backend(BackendError::Unsupported(_)))
        ),
        "{err:?}"
    );
    assert!(words.contains("does not see pictures"), "{words}");
    assert!(chat_requests(&server).is_empty(), "nothing was sent");

    // The backend refuses on its own too, when called without the answer loop.
    let mut on_event = |_: hearth_chat::BackendEvent<'_>| ControlFlow::Continue(());
    let prompt = backend
        .prepare(
            request(vec![picture(PictureFormat::Png, 1)]).input,
            &ChatOptions::default(),
        )
        .unwrap();
    let err = backend
        .generate(prompt, &ChatOptions::default(), &mut on_event)
        .unwrap_err();
    assert!(err.to_string().contains("does not see pictures"), "{err}");
    assert!(chat_requests(&server).is_empty());
}

#[test]
fn a_servers_refusal_of_a_picture_is_said_in_its_words() {
    let mut script = Script::new(MODEL, &[]);
    script.chat = ChatReply::status(
        400,
        json!({ "error": { "message": "image input is not supported by this model" } }),
    );
    let server = ScriptedServer::start(script);
    let mut config = RemoteConfig::new(&server.url()).unwrap();
    config.mark_seeing(MODEL, true);
    let mut backend = RemoteBackend::connect(&config, MODEL, quick()).unwrap();
    let err = answer(
        &mut backend,
        request(vec![picture(PictureFormat::Jpeg, 3)]),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    let words = err.to_string();
    assert!(
        words.starts_with("the server refused the picture: ")
            && words.contains("image input is not supported by this model"),
        "{words}"
    );
}

#[test]
fn the_mark_is_kept_with_the_servers_settings() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = RemoteConfig::new("http://127.0.0.1:9").unwrap();
    config.mark_seeing("a", true);
    config.mark_seeing("b", true);
    config.mark_seeing("a", false);
    config.save(dir.path()).unwrap();
    let back = RemoteConfig::load(dir.path()).unwrap().unwrap();
    assert!(back.marked_seeing("b") && !back.marked_seeing("a"));
    let same = RemoteConfig::edited(Some(&back), "http://127.0.0.1:9/v1", None, None).unwrap();
    assert!(same.marked_seeing("b"), "kept for the same server");
    let other = RemoteConfig::edited(Some(&back), "http://127.0.0.1:10", None, None).unwrap();
    assert!(!other.marked_seeing("b"), "not carried to another server");
}
