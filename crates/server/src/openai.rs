//! The OpenAI chat-completions wire format: the request as clients send it (unknown fields
//! ignored), its translation into engine options, and the response and chunk bodies.

use hearth_chat::Receipt;
use hearth_engine::{ChatMessage, ChatOptions, ResponseFormat, Role, SamplingParams};
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// Most stop strings one request may give (OpenAI's limit).
const MAX_STOP_STRINGS: usize = 4;

/// `POST /v1/chat/completions` body. Fields Hearth does not use are ignored.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// The model id; optional here (there is one model), checked when given.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation so far.
    pub messages: Vec<RequestMessage>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Most tokens to generate (older name).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most tokens to generate (newer name; wins over `max_tokens`).
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature; 0 is greedy.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// Seed for reproducible sampling.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Stop strings: one or a list.
    #[serde(default)]
    pub stop: Option<StopStrings>,
    /// `{"type": "text" | "json_object"}`, or `{"type": "json_schema", "json_schema":
    /// {"name", "schema", "strict"}}`: the shape the answer must have.
    #[serde(default)]
    pub response_format: Option<serde_json::Value>,
}

/// `stop`: a string or a list of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum StopStrings {
    /// One stop string.
    One(String),
    /// Several stop strings.
    Many(Vec<String>),
}

/// One message of the conversation.
#[derive(Debug, Deserialize)]
pub struct RequestMessage {
    /// `system`, `developer`, `user` or `assistant`.
    pub role: String,
    /// Text, a list of content parts, or null.
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts; only `{"type": "text", "text": ...}` is understood.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    /// `text` (others, such as `image_url`, are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

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

impl ChatRequest {
    /// Checks the request and translates it; `seed` is used when the request gives none.
    pub fn into_generation(self, default_seed: u64) -> Result<Generation, AppError> {
        if self.messages.is_empty() {
            return Err(AppError::bad_field(
                "messages",
                "'messages' is empty: give at least one message, e.g. \
                 [{\"role\": \"user\", \"content\": \"Hello\"}]",
            ));
        }
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| m.into_chat_message(i))
            .collect::<Result<Vec<_>, _>>()?;

        let (options, stops) = translate(
            Requested {
                max_tokens: self.max_completion_tokens.or(self.max_tokens),
                temperature: self.temperature,
                top_p: self.top_p,
                seed: self.seed,
                stop: self.stop,
                response_format: self.response_format,
            },
            default_seed,
        )?;
        Ok(Generation {
            messages,
            options,
            stops,
            stream: self.stream.unwrap_or(false),
        })
    }
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

impl RequestMessage {
    fn into_chat_message(self, index: usize) -> Result<ChatMessage, AppError> {
        let role = match self.role.as_str() {
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
        let content = match self.content {
            None => String::new(),
            Some(MessageContent::Text(text)) => text,
            Some(MessageContent::Parts(parts)) => {
                let mut text = String::new();
                for part in parts {
                    match (part.kind.as_str(), part.text) {
                        ("text", Some(t)) => text.push_str(&t),
                        (kind, _) => {
                            return Err(AppError::bad_field(
                                "messages",
                                format!(
                                    "message {index} has a '{kind}' content part; \
                                     this model reads text parts only"
                                ),
                            ))
                        }
                    }
                }
                text
            }
        };
        Ok(ChatMessage::new(role, content))
    }
}

/// `usage`: OpenAI's token counts plus FastFlowLM-style timing fields (seconds, tokens/s).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Tokens generated (a final end-of-turn token included).
    pub completion_tokens: usize,
    /// The sum of both.
    pub total_tokens: usize,
    /// Seconds from the request to the first answer text.
    pub prefill_duration_ttft: f64,
    /// Prompt tokens per second of prefill.
    pub prefill_speed_tps: f64,
    /// Seconds from the first generated token to the last.
    pub decoding_duration: f64,
    /// Tokens per second after the first.
    pub decoding_speed_tps: f64,
    /// Seconds spent loading the model for this request: 0, the model stays loaded.
    pub load_duration: f64,
}

impl From<&Receipt> for Usage {
    fn from(r: &Receipt) -> Self {
        let timings = r.backend_timings.clone().unwrap_or_default();
        Usage {
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.generated_tokens,
            total_tokens: r.prompt_tokens + r.generated_tokens,
            prefill_duration_ttft: r.ttft_secs,
            prefill_speed_tps: timings.prefill_tokens_per_s.unwrap_or(0.0),
            decoding_duration: r.decode_secs,
            decoding_speed_tps: r.tokens_per_second,
            load_duration: timings.load_secs.unwrap_or(0.0),
        }
    }
}

/// A non-streamed answer.
#[derive(Debug, Serialize)]
pub struct ChatCompletion<'a> {
    /// `chatcmpl-...`.
    pub id: &'a str,
    /// `chat.completion`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: &'a str,
    /// One choice.
    pub choices: [Choice<'a>; 1],
    /// Counts and timings.
    pub usage: Usage,
}

/// The one choice of a non-streamed answer.
#[derive(Debug, Serialize)]
pub struct Choice<'a> {
    /// Always 0.
    pub index: usize,
    /// The assistant's message.
    pub message: AssistantMessage<'a>,
    /// `stop` or `length`.
    pub finish_reason: &'static str,
}

/// The assistant's answer.
#[derive(Debug, Serialize)]
pub struct AssistantMessage<'a> {
    /// `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: &'a str,
}

/// One server-sent event of a streamed answer.
#[derive(Debug, Serialize)]
pub struct ChatChunk<'a> {
    /// Same for every chunk of one answer.
    pub id: &'a str,
    /// `chat.completion.chunk`.
    pub object: &'static str,
    /// Unix seconds.
    pub created: u64,
    /// The model id.
    pub model: &'a str,
    /// One choice.
    pub choices: [ChunkChoice<'a>; 1],
    /// Only on the last chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// The choice of a chunk.
#[derive(Debug, Serialize)]
pub struct ChunkChoice<'a> {
    /// Always 0.
    pub index: usize,
    /// New text (and the role, on the first chunk).
    pub delta: Delta<'a>,
    /// Set on the last chunk.
    pub finish_reason: Option<&'static str>,
}

/// What a chunk adds.
#[derive(Debug, Serialize)]
pub struct Delta<'a> {
    /// `assistant` on the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// New text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> ChatRequest {
        serde_json::from_str(json).expect("valid request")
    }

    #[test]
    fn unknown_fields_are_ignored_and_defaults_apply() {
        let g =
            parse(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1,"foo":{}}"#)
                .into_generation(7)
                .unwrap();
        assert_eq!(g.messages, [ChatMessage::new(Role::User, "hi")]);
        assert_eq!(g.options.sampling.seed, 7, "the default seed is used");
        assert_eq!(g.options.max_tokens, ChatOptions::default().max_tokens);
        assert!(!g.stream);
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let g = parse(
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":9,"max_completion_tokens":3}"#,
        )
        .into_generation(0)
        .unwrap();
        assert_eq!(g.options.max_tokens, 3);
    }

    #[test]
    fn text_parts_are_joined_and_developer_is_system() {
        let g = parse(
            r#"{"messages":[{"role":"developer","content":"be brief"},
                {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#,
        )
        .into_generation(0)
        .unwrap();
        assert_eq!(g.messages[0].role, Role::System);
        assert_eq!(g.messages[1].content, "ab");
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
            let err = parse(body).into_generation(0).unwrap_err();
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
        let u = Usage::from(&receipt);
        assert_eq!(u.total_tokens, 15);
        assert_eq!(u.prefill_speed_tps, 20.0);
        assert_eq!(u.decoding_speed_tps, 2.0);
    }
}
