//! Pictures on the remote backend, against the scripted loopback server: which models see
//! (Ollama's `/api/show` capabilities, asked within bounds when a list is shown, or the user's
//! mark in the settings), the `image_url`
//! parts a seeing model is sent (checked part by part), the refusal before sending to a model
//! that does not see, and a server's refusal of a picture in its own words.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{ChatReply, Recorded, Script, ScriptedServer};
use hearth_backends::remote::openai::{ASKED_AT_ONCE, MOST_MODELS_ASKED, SHOW_TIMEOUT};
use hearth_backends::remote::{test_connection, ClientOptions, RemoteBackend, RemoteConfig};
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

/// Options whose own read timeout is long, so only [`SHOW_TIMEOUT`] bounds a question.
fn patient() -> ClientOptions {
    ClientOptions {
        read_timeout: Duration::from_secs(60),
        ..quick()
    }
}

fn shows_asked(server: &ScriptedServer) -> Vec<String> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/show")
        .map(|r| r.json()["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn marked(models: &[hearth_backends::remote::ServerModel]) -> Vec<&str> {
    models
        .iter()
        .filter(|m| m.sees_pictures)
        .map(|m| m.id.as_str())
        .collect()
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
            && words.contains("image input is not supported by this model")
            && words.contains("\"sees pictures\" switch off in Settings"),
        "what happened and what to do: {words}"
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

#[test]
fn a_listed_ollama_model_that_sees_comes_back_marked() {
    let mut script = Script::new(MODEL, &["ok"]);
    script.models.push(("llama3".into(), None));
    script.vision_models = vec![MODEL.into()];
    let server = ScriptedServer::start(script);
    let config = RemoteConfig::new(&server.url()).unwrap();
    let listed = RemoteBackend::list_models(&config, quick()).unwrap();
    assert_eq!(marked(&listed), [MODEL]);
    assert_eq!(shows_asked(&server), [MODEL, "llama3"]);
    // "Test connection" marks them the same way.
    let tested = test_connection(&server.url(), None).unwrap();
    assert_eq!(marked(&tested), [MODEL]);

    // Opened with the list's word, the server is not asked again.
    let before = shows_asked(&server).len();
    let seeing = RemoteBackend::connect_known(&config, MODEL, Some(true), quick()).unwrap();
    assert!(seeing.sees_pictures());
    let blind = RemoteBackend::connect_known(&config, "llama3", Some(false), quick()).unwrap();
    assert!(!blind.sees_pictures());
    assert_eq!(shows_asked(&server).len(), before, "no second ask on open");
    // The user's mark adds to the server's word.
    let mut config = config;
    config.mark_seeing("llama3", true);
    let marked_blind =
        RemoteBackend::connect_known(&config, "llama3", Some(false), quick()).unwrap();
    assert!(marked_blind.sees_pictures());
}

#[test]
fn a_long_list_is_asked_about_its_first_models_only_a_few_at_a_time() {
    let names: Vec<String> = (0..MOST_MODELS_ASKED + 6)
        .map(|i| format!("model-{i:02}"))
        .collect();
    let mut script = Script::new(&names[0], &["ok"]);
    script.models = names.iter().map(|n| (n.clone(), None)).collect();
    script.vision_models = names.clone();
    // Each answer takes a while, so the questions overlap.
    script.show_delays = names
        .iter()
        .map(|n| (n.clone(), Duration::from_millis(100)))
        .collect();
    let shows = script.shows.clone();
    let server = ScriptedServer::start(script);
    let listed =
        RemoteBackend::list_models(&RemoteConfig::new(&server.url()).unwrap(), quick()).unwrap();
    assert_eq!(listed.len(), names.len(), "every model is listed");
    let expected: Vec<&str> = names[..MOST_MODELS_ASKED]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(marked(&listed), expected, "the first ones only are asked");
    let mut asked = shows_asked(&server);
    assert_eq!(asked[0], names[0], "the first is asked first, alone");
    asked.sort();
    assert_eq!(asked, expected);
    assert!(
        shows.peak() <= ASKED_AT_ONCE,
        "{} questions at once, at most {ASKED_AT_ONCE} allowed",
        shows.peak()
    );
}

#[test]
fn a_slow_answer_leaves_only_its_model_unmarked() {
    let mut script = Script::new("fast-1", &["ok"]);
    script.models = ["fast-1", "slow", "fast-2"]
        .iter()
        .map(|n| (n.to_string(), None))
        .collect();
    script.vision_models = vec!["fast-1".into(), "slow".into(), "fast-2".into()];
    // It would say "vision", but only after the wait allowed.
    script.show_delays = vec![("slow".into(), SHOW_TIMEOUT + Duration::from_secs(1))];
    let server = ScriptedServer::start(script);
    let listed =
        RemoteBackend::list_models(&RemoteConfig::new(&server.url()).unwrap(), patient()).unwrap();
    assert_eq!(listed.len(), 3, "the listing does not fail");
    assert_eq!(marked(&listed), ["fast-1", "fast-2"]);
}

#[test]
fn a_server_that_does_not_answer_the_first_question_is_not_asked_again() {
    // Not Ollama: /api/show is not found.
    let mut script = Script::new("a", &["ok"]);
    script.models = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| (n.to_string(), None))
        .collect();
    let server = ScriptedServer::start(script.clone());
    let listed =
        RemoteBackend::list_models(&RemoteConfig::new(&server.url()).unwrap(), quick()).unwrap();
    assert_eq!(listed.len(), 5);
    assert!(marked(&listed).is_empty());
    assert_eq!(shows_asked(&server), ["a"]);

    // An Ollama that does not answer in time.
    script.vision_models = vec!["a".into(), "b".into()];
    script.show_delays = vec![("a".into(), SHOW_TIMEOUT + Duration::from_secs(1))];
    let server = ScriptedServer::start(script);
    let listed =
        RemoteBackend::list_models(&RemoteConfig::new(&server.url()).unwrap(), patient()).unwrap();
    assert_eq!(listed.len(), 5);
    assert!(marked(&listed).is_empty());
    assert_eq!(shows_asked(&server), ["a"]);

    // An answer that is not JSON, or has no capabilities (an Ollama too old to say), is no
    // answer either.
    for body in [
        "<html>hello</html>",
        "{\"modelfile\": \"FROM x\"}",
        "{\"capabilities\": 3}",
    ] {
        let mut script = Script::new("a", &["ok"]);
        script.models.push(("b".into(), None));
        let server = ScriptedServer::start(script);
        server.edit(|s| s.show_reply = Some(body.to_owned()));
        let listed =
            RemoteBackend::list_models(&RemoteConfig::new(&server.url()).unwrap(), quick())
                .unwrap();
        assert!(marked(&listed).is_empty(), "{body}");
        assert_eq!(shows_asked(&server), ["a"], "{body}");
    }
}
