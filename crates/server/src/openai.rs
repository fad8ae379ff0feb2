//! OpenAI's routes as the server speaks them, over the wire types it shares with the remote
//! client ([`hearth_wire::openai`]): a request checked and translated into engine
//! options, the receipt as `usage`, and the reply bodies' common fields.

use axum::response::sse::Event as SseEvent;
use hearth_chat::picture::{bytes_of_url, check_picture, DEFAULT_LONGEST_SIDE, MAX_PICTURES};
use hearth_chat::Receipt;
use hearth_chat::{ChatMessage, ChatOptions, Picture, ResponseFormat, Role, SamplingParams};
use hearth_wire::openai::{
    self as wire, ChatRequest, Choice, MessageContent, RequestMessage, StopStrings,
};

use crate::error::AppError;

/// Most stop strings one request may give (OpenAI's limit).
const MAX_STOP_STRINGS: usize = 4;

/// A request checked and translated for the engine.
#[derive(Debug)]
pub struct Generation {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Sampling and length.
    pub options: ChatOptions,
    /// Stop strings.
    pub stops: Vec<String>,
    /// Whether to stream.
    pub stream: bool,
}

/// Checks a chat request and translates it; `default_seed` is used when it gives none.
pub fn generation(request: ChatRequest, default_seed: u64) -> Result<Generation, AppError> {
    if request.messages.is_empty() {
        return Err(AppError::bad_field(
            "messages",
            "'messages' is empty: give at least one message, e.g. \
             [{\"role\": \"user\", \"content\": \"Hello\"}]",
        ));
    }
    let messages = request
        .messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| chat_message(m, i))
        .collect::<Result<Vec<_>, _>>()?;

    let (options, stops) = translate(
        Requested {
            max_tokens: request.max_completion_tokens.or(request.max_tokens),
            temperature: request.temperature,
            top_p: request.top_p,
            seed: request.seed,
            stop: request.stop,
            response_format: request.response_format,
        },
        default_seed,
    )?;
    Ok(Generation {
        messages,
        options,
        stops,
        stream: request.stream.unwrap_or(false),
    })
}

/// OpenAI's `response_format` as the engine's format; a schema Hearth cannot follow is refused
/// before any work.
fn response_format(value: Option<&serde_json::Value>) -> Result<ResponseFormat, AppError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(ResponseFormat::Text);
    };
    let bad = |message: String| AppError::bad_field("response_format", message);
    let format = match value.get("type").and_then(|t| t.as_str()) {
        Some("text") => ResponseFormat::Text,
        Some("json_object") => ResponseFormat::JsonObject,
        Some("json_schema") => {
            let schema = value
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    bad(
                        "'response_format' of type json_schema needs json_schema.schema, a \
                         JSON Schema object"
                            .to_owned(),
                    )
                })?;
            ResponseFormat::JsonSchema(schema.clone())
        }
        _ => {
            return Err(bad(format!(
                "'response_format' is {value}; use {{\"type\": \"text\"}}, \
                 {{\"type\": \"json_object\"}} or {{\"type\": \"json_schema\", \
                 \"json_schema\": {{\"name\": ..., \"schema\": {{...}}}}}}"
            )))
        }
    };
    format
        .validate()
        .map_err(|e| bad(format!("invalid response_format: {e}")))?;
    Ok(format)
}

/// The sampling fields both OpenAI routes share, as the request gave them.
#[derive(Debug, Default)]
pub struct Requested {
    /// Most tokens to generate.
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    pub top_p: Option<f32>,
    /// Seed.
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Option<StopStrings>,
    /// `response_format`, as sent.
    pub response_format: Option<serde_json::Value>,
}

/// Checks the sampling fields and translates them for the engine; `default_seed` is used when
/// the request gives none.
pub fn translate(
    requested: Requested,
    default_seed: u64,
) -> Result<(ChatOptions, Vec<String>), AppError> {
    let mut options = ChatOptions::default();
    if let Some(max) = requested.max_tokens {
        if max == 0 {
            return Err(AppError::bad_field(
                "max_tokens",
                "'max_tokens' must be at least 1",
            ));
        }
        options.max_tokens = usize::try_from(max).unwrap_or(usize::MAX);
    }
    let mut sampling = SamplingParams {
        seed: requested.seed.unwrap_or(default_seed),
        ..SamplingParams::default()
    };
    if let Some(t) = requested.temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(AppError::bad_field(
                "temperature",
                format!("'temperature' is {t}; it must be between 0 and 2"),
            ));
        }
        sampling.temperature = t;
    }
    if let Some(p) = requested.top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(AppError::bad_field(
                "top_p",
                format!("'top_p' is {p}; it must be more than 0 and at most 1"),
            ));
        }
        sampling.top_p = p;
    }
    options.sampling = sampling;
    options.format = response_format(requested.response_format.as_ref())?;

    let stops = match requested.stop {
        None => Vec::new(),
        Some(StopStrings::One(s)) => vec![s],
        Some(StopStrings::Many(list)) => list,
    };
    if stops.len() > MAX_STOP_STRINGS {
        return Err(AppError::bad_field(
            "stop",
            format!(
                "'stop' has {} strings; give at most {MAX_STOP_STRINGS}",
                stops.len()
            ),
        ));
    }
    Ok((options, stops))
}

/// One message of a chat request as the engine's; `index` names it in errors.
fn chat_message(message: RequestMessage, index: usize) -> Result<ChatMessage, AppError> {
    let role = match message.role.as_str() {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            return Err(AppError::bad_field(
                "messages",
                format!(
                    "message {index} has role '{other}'; Hearth understands system, \
                     developer, user and assistant (no tools)"
                ),
            ))
        }
    };
    let mut urls = Vec::new();
    let content = match message.content {
        None => String::new(),
        Some(MessageContent::Text(text)) => text,
        Some(MessageContent::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), part.text, part.image_url) {
                    ("text", Some(t), _) => text.push_str(&t),
                    ("image_url", _, Some(url)) if role == Role::User => {
                        urls.push(url.url().to_owned())
                    }
                    ("image_url", _, Some(_)) => {
                        return Err(AppError::bad_field(
                            "messages",
                            format!(
                                "message {index} is not the user's but has a picture; \
                                 pictures go in user messages"
                            ),
                        ))
                    }
                    (kind, _, _) => {
                        return Err(AppError::bad_field(
                            "messages",
                            format!(
                                "message {index} has a '{kind}' content part without its \
                                 field; Hearth reads text and image_url parts"
                            ),
                        ))
                    }
                }
            }
            text
        }
    };
    let pictures = checked_pictures(
        urls.iter().map(String::as_str),
        "messages",
        &format!("message {index}"),
    )?;
    Ok(ChatMessage::new(role, content).with_pictures(pictures))
}

/// Pictures a request gives (OpenAI's `image_url` URLs, Ollama's base64 `images`), each read
/// and checked as every front end checks them ([`hearth_chat::picture`]); `whose` names them
/// in the error a bad one gets (a 400 on `param`). Whether the model sees them is the answer
/// loop's question, answered with a 400 too.
pub fn checked_pictures<'a>(
    urls: impl IntoIterator<Item = &'a str>,
    param: &'static str,
    whose: &str,
) -> Result<Vec<Picture>, AppError> {
    let urls: Vec<&str> = urls.into_iter().collect();
    if urls.len() > MAX_PICTURES {
        return Err(AppError::bad_field(
            param,
            format!(
                "{whose} has {} pictures; Hearth takes at most {MAX_PICTURES} in one message: \
                 send the others in another request",
                urls.len()
            ),
        ));
    }
    let mut pictures = Vec::with_capacity(urls.len());
    for (n, url) in urls.into_iter().enumerate() {
        let bad =
            |why: String| AppError::bad_field(param, format!("{whose}, picture {}: {why}", n + 1));
        let bytes = bytes_of_url(url).map_err(bad)?;
        let picture =
            check_picture(&bytes, DEFAULT_LONGEST_SIDE).map_err(|e| bad(e.to_string()))?;
        pictures.push(picture);
    }
    Ok(pictures)
}

/// A receipt as `usage`: OpenAI's token counts plus FastFlowLM's timing fields (seconds,
/// tokens per second), every one written; `load_duration` is 0 when the model was loaded.
pub fn usage(receipt: &Receipt) -> wire::Usage {
    let timings = receipt.backend_timings.clone().unwrap_or_default();
    let prompt = receipt.prompt_tokens as u64;
    let generated = receipt.generated_tokens as u64;
    wire::Usage {
        prompt_tokens: Some(prompt),
        // A final end-of-turn token included.
        completion_tokens: Some(generated),
        total_tokens: Some(prompt + generated),
        prefill_duration_ttft: Some(receipt.ttft_secs),
        prefill_speed_tps: Some(timings.prefill_tokens_per_s.unwrap_or(0.0)),
        decoding_duration: Some(receipt.decode_secs),
        decoding_speed_tps: Some(receipt.tokens_per_second),
        load_duration: Some(timings.load_secs.unwrap_or(0.0)),
    }
}

/// What every reply to one request shares: a whole answer, or each chunk of a streamed one.
pub struct ReplyMeta {
    /// `chatcmpl-...` or `cmpl-...`: the same for every chunk.
    pub id: String,
    /// `chat.completion`, `chat.completion.chunk` or `text_completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model that answers.
    pub model: String,
}

impl ReplyMeta {
    /// A reply with `choice` (its index set to 0, the one choice) and `usage`.
    pub fn reply(&self, choice: Choice, usage: Option<wire::Usage>) -> wire::Reply {
        wire::Reply {
            id: Some(self.id.clone()),
            object: Some(self.object.to_owned()),
            created: Some(self.created),
            model: Some(self.model.clone()),
            choices: vec![Choice {
                index: Some(0),
                ..choice
            }],
            usage,
            ..wire::Reply::default()
        }
    }
}

/// `value` as the data of one server-sent event.
pub fn json_event(value: &impl serde::Serialize) -> SseEvent {
    // Serializing these plain structs cannot fail.
    SseEvent::default().data(serde_json::to_string(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> ChatRequest {
        serde_json::from_str(json).expect("valid request")
    }

    fn checked(json: &str, seed: u64) -> Result<Generation, AppError> {
        generation(parse(json), seed)
    }

    #[test]
    fn unknown_fields_are_ignored_and_defaults_apply() {
        let g = checked(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1,"foo":{}}"#,
            7,
        )
        .unwrap();
        assert_eq!(g.messages, [ChatMessage::new(Role::User, "hi")]);
        assert_eq!(g.options.sampling.seed, 7, "the default seed is used");
        assert_eq!(g.options.max_tokens, ChatOptions::default().max_tokens);
        assert!(!g.stream);
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let g = checked(
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":9,"max_completion_tokens":3}"#,
            0,
        )
        .unwrap();
        assert_eq!(g.options.max_tokens, 3);
    }

    #[test]
    fn text_parts_are_joined_and_developer_is_system() {
        let g = checked(
            r#"{"messages":[{"role":"developer","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#,
            0,
        )
        .unwrap();
        assert_eq!(g.messages[0].role, Role::System);
        assert_eq!(g.messages[1].content, "ab");
    }

    #[test]
    fn pictures_are_read_checked_and_refused_in_words() {
        // A 1 x 1 PNG.
        const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGNgZGIGAAAOAAfXb+R4AAAAAElFTkSuQmCC";
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":"what?"}},
                {{"type":"image_url","image_url":{{"url":"data:image/png;base64,{PNG_1X1}"}}}},
                {{"type":"image_url","image_url":"{PNG_1X1}"}}]}}]}}"#
        );
        let g = checked(&body, 0).unwrap();
        assert_eq!(g.messages[0].content, "what?");
        assert_eq!(g.messages[0].pictures.len(), 2);
        assert_eq!(g.messages[0].pictures[0].width, 1);
        for (body, words) in [
            (
                r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,bm90IGFuIGltYWdl"}}]}]}"#,
                "not a PNG, JPEG or WebP",
            ),
            (
                r#"{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.org/a.png"}}]}]}"#,
                "not fetched",
            ),
            (
                r#"{"messages":[{"role":"system","content":[{"type":"image_url","image_url":"AAAA"}]}]}"#,
                "pictures go in user messages",
            ),
        ] {
            let err = checked(body, 0).unwrap_err();
            assert_eq!(err.status(), 400, "{body}");
            assert!(format!("{err:?}").contains(words), "{body}: {err:?}");
        }
    }

    #[test]
    fn images_tools_and_bad_ranges_are_refused() {
        for body in [
            r#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
            r#"{"messages":[{"role":"tool","content":"x"}]}"#,
            r#"{"messages":[{"role":"user","content":"x"}],"temperature":3}"#,
            r#"{"messages":[{"role":"user","content":"x"}],"top_p":0}"#,
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
            r#"{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}"#,
            r#"{"messages":[]}"#,
        ] {
            let err = checked(body, 0).unwrap_err();
            assert_eq!(err.status(), 400, "{body} is refused");
        }
    }

    #[test]
    fn usage_reports_rates() {
        let receipt: Receipt = serde_json::from_value(serde_json::json!({
            "model_name": "m", "model_sha256": null, "backend": "cpu", "device": "cpu",
            "prompt_tokens": 10, "generated_tokens": 5, "ttft_secs": 0.6, "decode_secs": 2.0,
            "tokens_per_second": 2.0, "stop_reason": "end of turn", "trimmed_messages": 0,
            "finished_at": 0, "backend_timings": {"prefill_secs": 0.5, "prefill_tokens_per_s": 20.0}
        }))
        .unwrap();
        let u = usage(&receipt);
        assert_eq!(u.total_tokens, Some(15));
        assert_eq!(u.prefill_speed_tps, Some(20.0));
        assert_eq!(u.decoding_speed_tps, Some(2.0));
        assert_eq!(u.load_duration, Some(0.0), "every timing field is written");
    }

    #[test]
    fn replies_are_written_in_openai_shape() {
        let meta = ReplyMeta {
            id: "chatcmpl-1".into(),
            object: "chat.completion.chunk",
            created: 5,
            model: "m".into(),
        };
        let first = Choice {
            delta: Some(wire::Delta {
                role: Some("assistant".into()),
                content: Some(String::new()),
                ..wire::Delta::default()
            }),
            ..Choice::default()
        };
        assert_eq!(
            serde_json::to_value(meta.reply(first, None)).unwrap(),
            serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                "created": 5, "model": "m", "choices": [{"index": 0,
                "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
        );
        let meta = ReplyMeta {
            object: "text_completion",
            ..meta
        };
        let last = Choice {
            text: Some(String::new()),
            logprobs: Some(serde_json::Value::Null),
            finish_reason: Some("length".into()),
            ..Choice::default()
        };
        let usage = wire::Usage {
            prompt_tokens: Some(1),
            ..wire::Usage::default()
        };
        assert_eq!(
            serde_json::to_value(meta.reply(last, Some(usage))).unwrap(),
            serde_json::json!({"id": "chatcmpl-1", "object": "text_completion", "created": 5,
                "model": "m", "choices": [{"index": 0, "text": "", "logprobs": null,
                "finish_reason": "length"}], "usage": {"prompt_tokens": 1}})
        );
    }
}
