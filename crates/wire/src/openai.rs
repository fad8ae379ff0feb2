//! OpenAI's wire format, one home for both ends: the request bodies of `/v1/chat/completions`
//! and `/v1/completions` (Hearth's server parses them, the remote client writes them), and the
//! reply: a whole answer, a streamed chunk, their usage (the server writes them, the client
//! reads them back from any OpenAI-compatible server); the model list of `/v1/models` (the
//! server writes it, the client reads it); and what only the server speaks: `/v1/embeddings`
//! and the error body.
//!
//! Requests are read strictly: a field of the wrong type is an error naming it (unknown fields
//! are ignored, as OpenAI's clients send fields Hearth does not use). Replies are read
//! tolerantly, since real servers send nulls, leave fields out and add their own: every reply
//! field is optional, and one of an unexpected type reads as absent. Error bodies are only
//! written: the client reads other servers' errors, which come as objects, strings or other
//! shapes, as JSON values.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// `POST /v1/chat/completions` body. Fields not listed here are ignored when read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model id (optional for Hearth's server, which has one model at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The conversation so far.
    pub messages: Vec<RequestMessage>,
    /// Stream the answer as server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// What to stream besides text (`include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Most tokens to generate (older name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Most tokens to generate (newer name; wins over `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature; 0 is greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Seed for reproducible sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings: one or a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopStrings>,
    /// `{"type": "text" | "json_object"}`, or `{"type": "json_schema", "json_schema":
    /// {"name", "schema", "strict"}}`: the shape the answer must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
}

/// `POST /v1/completions` body (OpenAI's legacy completions). Fields not listed are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The model id; optional for Hearth's server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The text to continue: a string, or a list of one string.
    pub prompt: PromptText,
    /// Stream as server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// What to stream besides text (`include_usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Most tokens to generate; OpenAI's default is 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Sampling temperature; 0 is greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Seed for reproducible sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings: one or a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopStrings>,
    /// Text after the completion (fill in the middle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Repeat the prompt before the completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    /// Completions per prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Log probabilities to return.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Value>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send `usage` in a last chunk (OpenAI and vLLM send it only when asked).
    #[serde(default)]
    pub include_usage: bool,
}

/// `stop`: a string or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StopStrings {
    /// One stop string.
    One(String),
    /// Several stop strings.
    Many(Vec<String>),
}

/// `prompt`: a string or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptText {
    /// One prompt.
    One(String),
    /// Several prompts (or token ids, which fail to read as strings).
    Many(Vec<String>),
}

impl Default for PromptText {
    fn default() -> Self {
        PromptText::One(String::new())
    }
}

/// One message of a request's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestMessage {
    /// `system`, `developer`, `user`, `assistant` (or `tool`, which Hearth refuses).
    pub role: String,
    /// Text, a list of content parts, or null.
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts, such as `{"type": "text", "text": ...}`.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The picture of an `image_url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<ImageUrl>,
}

impl ContentPart {
    /// A `text` part.
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart {
            kind: "text".into(),
            text: Some(text.into()),
            image_url: None,
        }
    }

    /// An `image_url` part for `url` (a `data:image/png;base64,...` URL, as Hearth sends them).
    pub fn image(url: impl Into<String>) -> Self {
        ContentPart {
            kind: "image_url".into(),
            text: None,
            image_url: Some(ImageUrl::Object {
                url: url.into(),
                detail: None,
            }),
        }
    }
}

/// The `image_url` of a part: `{"url": ..., "detail": ...}` as OpenAI writes it, or the URL
/// alone as some clients send it (read, never written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ImageUrl {
    /// `{"url": "data:image/png;base64,...", "detail": "auto"}`.
    Object {
        /// A `data:` URL, plain base64, or a web address.
        url: String,
        /// `auto`, `low` or `high` (not used by Hearth).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// The URL alone.
    Url(String),
}

impl ImageUrl {
    /// The URL, however it was given.
    pub fn url(&self) -> &str {
        match self {
            ImageUrl::Object { url, .. } | ImageUrl::Url(url) => url,
        }
    }
}

/// A reply: a whole answer (`chat.completion`, `text_completion`) or one streamed chunk
/// (`chat.completion.chunk`, or `text_completion` again), or an error in their place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Same for every chunk of one answer.
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    /// `chat.completion`, `chat.completion.chunk` or `text_completion`.
    #[serde(default, deserialize_with = "lenient")]
    pub object: Option<String>,
    /// Unix seconds.
    #[serde(default, deserialize_with = "lenient")]
    pub created: Option<u64>,
    /// The model that answers.
    #[serde(default, deserialize_with = "lenient")]
    pub model: Option<String>,
    /// The answer's choices (Hearth writes one).
    #[serde(default, deserialize_with = "lenient_list")]
    pub choices: Vec<Choice>,
    /// Counts and timings: on a whole answer, and on a stream's last chunk.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub usage: Option<Usage>,
    /// llama.cpp's server: milliseconds and rates in their own object.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub timings: Option<LlamaTimings>,
    /// An error in place of the answer (some servers send it with status 200, or mid-stream).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub error: Option<Value>,
}

/// One choice of a reply: a chat answer's `message`, a chat chunk's `delta`, or a legacy
/// completion's `text`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Which choice (Hearth writes 0).
    #[serde(default, deserialize_with = "lenient")]
    pub index: Option<u32>,
    /// A whole chat answer.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub message: Option<Delta>,
    /// What a chat chunk adds.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub delta: Option<Delta>,
    /// A legacy completion's text (whole, or a chunk's piece).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<String>,
    /// A legacy completion's log probabilities: written as null, never read.
    #[serde(default, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub logprobs: Option<Value>,
    /// `stop`, `length` (or FastFlowLM's `error`); null until the last chunk.
    #[serde(default, deserialize_with = "lenient")]
    pub finish_reason: Option<String>,
}

/// A chat message in a reply, or what a chunk adds to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// `assistant` (on a whole answer, and on a stream's first chunk).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub role: Option<String>,
    /// Answer text.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub content: Option<String>,
    /// Reasoning text, as DeepSeek, vLLM and llama.cpp name it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_content: Option<String>,
    /// Reasoning text, as Ollama, OpenRouter and newer vLLM name it. Its own field rather than
    /// an alias of `reasoning_content`: some servers send both, and an alias would refuse that.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning: Option<String>,
}

impl Delta {
    /// The reasoning text, under either name; None when empty.
    pub fn reasoning_text(&self) -> Option<&str> {
        non_empty(&self.reasoning_content).or_else(|| non_empty(&self.reasoning))
    }

    /// The answer text; None when empty.
    pub fn content_text(&self) -> Option<&str> {
        non_empty(&self.content)
    }
}

fn non_empty(text: &Option<String>) -> Option<&str> {
    text.as_deref().filter(|s| !s.is_empty())
}

/// `usage`: OpenAI's token counts, plus the timing fields FastFlowLM (and Hearth's server)
/// add: seconds and tokens per second.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the rendered prompt.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub completion_tokens: Option<u64>,
    /// The sum of both.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub total_tokens: Option<u64>,
    /// Seconds from the request to the first answer text.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefill_duration_ttft: Option<f64>,
    /// Prompt tokens per second of prefill.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub prefill_speed_tps: Option<f64>,
    /// Seconds from the first generated token to the last.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub decoding_duration: Option<f64>,
    /// Tokens per second after the first.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub decoding_speed_tps: Option<f64>,
    /// Seconds spent loading the model for this request.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub load_duration: Option<f64>,
}

/// llama.cpp's `timings` object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlamaTimings {
    /// Milliseconds of prompt processing.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_ms: Option<f64>,
    /// Prompt tokens per second.
    #[serde(default, deserialize_with = "lenient")]
    pub prompt_per_second: Option<f64>,
    /// Milliseconds of generation.
    #[serde(default, deserialize_with = "lenient")]
    pub predicted_ms: Option<f64>,
    /// Generated tokens per second.
    #[serde(default, deserialize_with = "lenient")]
    pub predicted_per_second: Option<f64>,
}

/// `GET /v1/models` reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// `list`.
    #[serde(default, deserialize_with = "lenient")]
    pub object: Option<String>,
    /// The models; None when the reply has no list (it is not an OpenAI-compatible server).
    /// An item that is not a model object is left out.
    #[serde(default, deserialize_with = "lenient_items")]
    pub data: Option<Vec<Model>>,
}

/// One model of `/v1/models`: OpenAI's fields, vLLM's context length, and what Hearth's
/// server adds (its context, where it runs, whether it is loaded; written as null when not
/// known).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The id requests use.
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    /// `model`.
    #[serde(default, deserialize_with = "lenient")]
    pub object: Option<String>,
    /// Unix seconds.
    #[serde(default, deserialize_with = "lenient")]
    pub created: Option<u64>,
    /// Who owns it (Hearth's server: `hearth`).
    #[serde(default, deserialize_with = "lenient")]
    pub owned_by: Option<String>,
    /// Positions it holds, as vLLM says.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_model_len: Option<u64>,
    /// Hearth's server: positions it holds as loaded, or as trained when it is not loaded.
    #[serde(default, deserialize_with = "lenient")]
    pub context_length: Option<u64>,
    /// Hearth's server: the backend that runs it (`cpu`, `npu`, `remote`).
    #[serde(default, deserialize_with = "lenient")]
    pub backend: Option<String>,
    /// Hearth's server: the device it runs on, while loaded.
    #[serde(default, deserialize_with = "lenient")]
    pub device: Option<String>,
    /// Hearth's server: whether it is loaded.
    #[serde(default, deserialize_with = "lenient")]
    pub loaded: Option<bool>,
}

/// `POST /v1/embeddings` body (read by Hearth's server only). Fields not listed are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct EmbeddingRequest {
    /// The embedding model's id.
    pub model: String,
    /// A text or a list of texts (token-id inputs fail to read as texts).
    pub input: EmbeddingInput,
    /// `float` (OpenAI's default) or `base64` (little-endian f32s, what the openai client asks
    /// for).
    #[serde(default)]
    pub encoding_format: Option<String>,
    /// Dimensions of each vector.
    #[serde(default)]
    pub dimensions: Option<u64>,
    /// The end user's id.
    #[serde(default)]
    pub user: Option<String>,
}

/// What to embed: a text or a list of texts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingInput {
    /// One text.
    One(String),
    /// Several texts.
    Many(Vec<String>),
}

/// `POST /v1/embeddings` reply (written by Hearth's server only).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingList {
    /// `list`.
    pub object: String,
    /// One vector per text, in their order.
    pub data: Vec<Embedding>,
    /// The model that embedded them.
    pub model: String,
    /// `prompt_tokens` and `total_tokens`: the tokens read.
    pub usage: Usage,
}

/// One vector of an [`EmbeddingList`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Embedding {
    /// `embedding`.
    pub object: String,
    /// The place of its text in the request.
    pub index: usize,
    /// The vector.
    pub embedding: EmbeddingVector,
}

/// A vector as the request's `encoding_format` asks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    /// `float`: a list of numbers.
    Float(Vec<f32>),
    /// `base64`: the little-endian bytes of the f32s in standard base64.
    Base64(String),
}

/// An error reply, `{"error": {"message", "type", "param", "code"}}`: sent with a 4xx or 5xx
/// status, or as the last event of a stream that fails after its status line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorReply {
    /// What went wrong.
    pub error: ApiError,
}

/// The `error` object of an [`ErrorReply`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    /// What went wrong, in plain words.
    pub message: String,
    /// `invalid_request_error`, `permission_error` or `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, if one (written as null otherwise).
    pub param: Option<String>,
    /// A short machine-readable code, such as `model_not_found` (written as null if none).
    pub code: Option<String>,
}

/// A reply field as `T`, or None when it is null or of another type: a server's odd field
/// never costs the rest of its reply.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    if value.is_null() {
        return Ok(None);
    }
    Ok(serde_json::from_value(value).ok())
}

/// A list of replies' items, or empty when it is not a list.
fn lenient_list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(lenient(deserializer)?.unwrap_or_default())
}

/// A list whose items are read one by one, an unreadable item left out; None when it is not
/// a list.
fn lenient_items<'de, D, T>(deserializer: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    match Value::deserialize(deserializer)? {
        Value::Array(items) => Ok(Some(
            items
                .into_iter()
                .filter_map(|item| serde_json::from_value(item).ok())
                .collect(),
        )),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn image_parts_read_both_shapes_and_write_openais() {
        let m: RequestMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"what?"},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},
                {"type":"image_url","image_url":"data:image/jpeg;base64,BBBB"}]}"#,
        )
        .unwrap();
        let Some(MessageContent::Parts(parts)) = m.content else {
            panic!("parts")
        };
        let urls: Vec<&str> = parts
            .iter()
            .filter_map(|p| p.image_url.as_ref().map(ImageUrl::url))
            .collect();
        assert_eq!(
            urls,
            ["data:image/png;base64,AAAA", "data:image/jpeg;base64,BBBB"]
        );
        assert_eq!(
            serde_json::to_value(ContentPart::image("data:x")).unwrap(),
            serde_json::json!({"type": "image_url", "image_url": {"url": "data:x"}})
        );
        assert_eq!(
            serde_json::to_value(ContentPart::text("hi")).unwrap(),
            serde_json::json!({"type": "text", "text": "hi"})
        );
    }

    use super::*;

    #[test]
    fn a_reply_reads_nulls_odd_types_and_both_reasoning_names() {
        let reply: Reply = serde_json::from_str(
            r#"{"model":"m","created":"soon","choices":[{"delta":{"content":null,
               "reasoning_content":"","reasoning":"hmm"},"finish_reason":null}],
               "usage":{"prompt_tokens":3,"completion_tokens":null,"decoding_duration":"x"}}"#,
        )
        .unwrap();
        assert_eq!(reply.model.as_deref(), Some("m"));
        assert_eq!(reply.created, None);
        let delta = reply.choices[0].delta.as_ref().unwrap();
        assert_eq!(delta.reasoning_text(), Some("hmm"));
        assert_eq!(delta.content_text(), None);
        let usage = reply.usage.unwrap();
        assert_eq!(usage.prompt_tokens, Some(3));
        assert_eq!(usage.completion_tokens, None);
        assert_eq!(usage.decoding_duration, None);
    }

    #[test]
    fn a_model_list_skips_what_is_not_a_model_and_reads_both_context_names() {
        let list: ModelList = serde_json::from_str(
            r#"{"object":"list","data":[{"id":"a","max_model_len":4096,"owned_by":null},
               "junk",{"id":"b","context_length":128,"loaded":"yes"}]}"#,
        )
        .unwrap();
        let data = list.data.unwrap();
        assert_eq!(data.len(), 2, "the string item is left out");
        assert_eq!(data[0].max_model_len, Some(4096));
        assert_eq!(data[0].owned_by, None);
        assert_eq!(data[1].context_length, Some(128));
        assert_eq!(
            data[1].loaded, None,
            "a field of another type reads as absent"
        );
        let none: ModelList = serde_json::from_str(r#"{"models":[]}"#).unwrap();
        assert_eq!(none.data, None, "no list is told apart from an empty one");
    }

    #[test]
    fn an_error_writes_param_and_code_as_null_when_unset() {
        let reply = ErrorReply {
            error: ApiError {
                message: "no".into(),
                kind: "server_error".into(),
                param: None,
                code: None,
            },
        };
        assert_eq!(
            serde_json::to_string(&reply).unwrap(),
            r#"{"error":{"message":"no","type":"server_error","param":null,"code":null}}"#
        );
    }

    #[test]
    fn a_request_leaves_out_what_is_unset() {
        let request = ChatRequest {
            model: Some("m".into()),
            messages: vec![RequestMessage {
                role: "user".into(),
                content: Some(MessageContent::Text("hi".into())),
            }],
            temperature: Some(0.7),
            ..ChatRequest::default()
        };
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7}"#
        );
    }
}
