//! Structured output through the answer loop: on the cpu backend a JSON answer parses even when
//! the request has stop strings that occur inside JSON; a remote backend passes the format on
//! as OpenAI's `response_format`.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{Script, ScriptedServer};
use hearth_backends::remote::{ClientOptions, RemoteBackend, RemoteConfig};
use hearth_backends::CpuBackend;
use hearth_chat::answer::{answer, AnswerError, AnswerRequest, AnswerStop};
use hearth_chat::{Input, ResponseFormat};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};
use serde_json::{json, Value};

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

fn request(format: ResponseFormat, sampling: SamplingParams) -> AnswerRequest<'static> {
    AnswerRequest {
        input: Input::Chat(vec![ChatMessage::new(Role::User, "Describe a Rust crate.")]),
        options: ChatOptions {
            sampling,
            max_tokens: 300,
            format,
            ..ChatOptions::default()
        },
        // Each occurs in a JSON answer: cutting there would leave it unparsable.
        stops: vec!["}".into(), "\"".into(), "\n".into(), ":".into()],
        power: None,
        trim_to_fit: true,
    }
}

#[test]
fn a_json_answer_on_the_cpu_parses_whatever_the_stop_strings() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "stable": {"type": "boolean"}
        },
        "required": ["name", "stable"],
        "additionalProperties": false
    });
    for sampling in [SamplingParams::greedy(), SamplingParams::default()] {
        let format = ResponseFormat::JsonSchema(schema.clone());
        let done = answer(&mut cpu, request(format, sampling), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(done.stop, AnswerStop::EndOfTurn, "{:?}", done.text);
        let value: Value =
            serde_json::from_str(&done.text).unwrap_or_else(|e| panic!("{e}: {:?}", done.text));
        assert!(
            value["name"].is_string() && value["stable"].is_boolean(),
            "{value}"
        );
        assert_eq!(value.as_object().unwrap().len(), 2, "{value}");
    }
    // Free text still stops at them.
    let free = answer(
        &mut cpu,
        request(ResponseFormat::Text, SamplingParams::greedy()),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap();
    assert!(!free.text.contains('\n') && !free.text.contains('"'));
}

#[test]
fn a_bad_schema_is_refused_before_the_answer_starts() {
    let mut cpu = CpuBackend::open(&demo_model(), "demo", &Default::default(), None).unwrap();
    let format = ResponseFormat::JsonSchema(json!({"type": "string", "pattern": "^a"}));
    let err = answer(
        &mut cpu,
        request(format, SamplingParams::greedy()),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap_err();
    assert!(matches!(err, AnswerError::NotStarted(_)), "{err:?}");
    assert!(err.to_string().contains("\"pattern\""), "{err}");
}

#[test]
fn a_remote_backend_sends_the_format_as_response_format() {
    let server = ScriptedServer::start(Script::new("m", &["{\"a\":", "1}"]));
    let config = RemoteConfig::new(&format!("{}/v1/", server.url())).unwrap();
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(1),
        reuse_connections: true,
    };
    let mut remote = RemoteBackend::connect(&config, "m", options).unwrap();
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let formats = [
        (ResponseFormat::Text, Value::Null),
        (ResponseFormat::JsonObject, json!({"type": "json_object"})),
        (
            ResponseFormat::JsonSchema(schema.clone()),
            json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": true}}),
        ),
    ];
    for (format, expected) in formats {
        let done = answer(
            &mut remote,
            request(format, SamplingParams::greedy()),
            &mut |_| ControlFlow::Continue(()),
        )
        .unwrap();
        let sent = server
            .requests()
            .into_iter()
            .rfind(|r| r.path == "/v1/chat/completions")
            .expect("a chat request")
            .json();
        assert_eq!(sent["response_format"], expected);
        if expected.is_null() {
            assert_eq!(done.text, "{", "free text is cut at the first stop string");
        } else {
            assert_eq!(done.text, "{\"a\":1}", "no stop string cuts a JSON answer");
        }
    }
}
