//! Ollama's API bodies as Ollama writes them (its `docs/api.md` and `api/types.go`). Requests are
//! read strictly where Hearth uses a field (a wrong type is an error naming it) and ignore
//! fields Hearth does not use; replies are written with exactly Ollama's field names. Where
//! Hearth's answers differ from Ollama's is in docs/ollama-api.md.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::keep_alive::KeepAlive;
use crate::openai::EmbeddingInput;

/// The fields `/api/chat` and `/api/generate` share.
#[derive(Debug, Default, Deserialize)]
pub struct Common {
    /// The model's name (required by Ollama).
    #[serde(default)]
    pub model: Option<String>,
    /// Stream newline-delimited JSON (the default) or answer with one object.
    #[serde(default)]
    pub stream: Option<bool>,
    /// `"json"` or a JSON schema.
    #[serde(default)]
    pub format: Option<Value>,
    /// How long the model stays loaded afterwards.
    #[serde(default)]
    pub keep_alive: Option<KeepAlive>,
    /// Model parameters (`temperature`, `num_predict`, `num_ctx`, ...).
    #[serde(default)]
    pub options: Option<Map<String, Value>>,
    /// Thinking: `true`/`false` (passed to the chat template), or a level (refused).
    #[serde(default)]
    pub think: Option<Value>,
}

/// `POST /api/chat` body.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    /// Model, stream, format, keep_alive, options, think.
    #[serde(flatten)]
    pub common: Common,
    /// The conversation; none only loads (or with `keep_alive: 0` unloads) the model.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
}

/// One message of `/api/chat`.
#[derive(Debug, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text.
    #[serde(default)]
    pub content: String,
    /// Images, base64.
    #[serde(default)]
    pub images: Option<Vec<Value>>,
    /// Tool calls of an earlier answer.
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
}

/// `POST /api/generate` body.
#[derive(Debug, Deserialize)]
pub struct GenerateRequest {
    /// Model, stream, format, keep_alive, options, think.
    #[serde(flatten)]
    pub common: Common,
    /// The prompt; empty only loads (or with `keep_alive: 0` unloads) the model.
    #[serde(default)]
    pub prompt: String,
    /// A system message put before the prompt.
    #[serde(default)]
    pub system: String,
    /// Continue the prompt as it is, without the chat template.
    #[serde(default)]
    pub raw: bool,
    /// Text after the answer (fill-in-the-middle).
    #[serde(default)]
    pub suffix: String,
    /// A template of the request's own.
    #[serde(default)]
    pub template: String,
    /// Token ids of an earlier answer (deprecated by Ollama).
    #[serde(default)]
    pub context: Vec<Value>,
    /// Images, base64.
    #[serde(default)]
    pub images: Vec<Value>,
}

/// `POST /api/show` body.
#[derive(Debug, Deserialize)]
pub struct ShowRequest {
    /// The model's name.
    #[serde(default)]
    pub model: Option<String>,
    /// Its older name for the same field.
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /api/embed` body, and the older `/api/embeddings` (which sends `prompt`).
#[derive(Debug, Deserialize)]
pub struct EmbedRequest {
    /// The embedding model's name.
    pub model: Option<String>,
    /// One text or a list of texts.
    pub input: Option<EmbeddingInput>,
    /// The older `/api/embeddings` field: one text.
    pub prompt: Option<String>,
    /// Cut texts longer than the model reads (the default); false refuses them.
    pub truncate: Option<bool>,
    /// Keep only the first this many dimensions.
    pub dimensions: Option<usize>,
}

/// The counters and durations (nanoseconds) of a finished answer, on the last object of a
/// stream or the one object of a whole answer. A request that only loaded or unloaded a model
/// carries only `done_reason`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counters {
    /// `stop`, `length`, `load` or `unload`.
    pub done_reason: String,
    /// From the request's arrival to its end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_duration: Option<u64>,
    /// Loading the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_duration: Option<u64>,
    /// Prompt tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_eval_count: Option<usize>,
    /// Reading the prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_eval_duration: Option<u64>,
    /// Tokens written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_count: Option<usize>,
    /// Writing them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_duration: Option<u64>,
}

/// The assistant's message in a `/api/chat` reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyMessage {
    /// Always `assistant`.
    pub role: &'static str,
    /// A piece of the answer (streamed) or all of it.
    pub content: String,
}

/// One object of a `/api/chat` reply: a piece (`done: false`) or the last (`done: true`, with
/// the counters).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatChunk {
    /// The model's name.
    pub model: String,
    /// When this object was written (RFC 3339).
    pub created_at: String,
    /// The text.
    pub message: ReplyMessage,
    /// Whether this is the last object.
    pub done: bool,
    /// On the last object.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
}

/// One object of a `/api/generate` reply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GenerateChunk {
    /// The model's name.
    pub model: String,
    /// When this object was written (RFC 3339).
    pub created_at: String,
    /// A piece of the answer (streamed) or all of it.
    pub response: String,
    /// Whether this is the last object.
    pub done: bool,
    /// On the last object.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
}

/// A model's `details`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Details {
    /// Always empty in Hearth.
    pub parent_model: String,
    /// How the weights are stored (`q4nx`, `safetensors`, `gguf`).
    pub format: String,
    /// The model family (`minicpm`, `qwen2`…), empty when unknown.
    pub family: String,
    /// The family again, as a list.
    pub families: Vec<String>,
    /// Always empty in Hearth.
    pub parameter_size: String,
    /// The weights' quantization in Ollama's words (`Q4_1`, `F32`).
    pub quantization_level: String,
    /// The context in use (on `/api/ps` and `/api/show`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_length: Option<usize>,
}

/// One model of `GET /api/tags`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedModel {
    /// Its name.
    pub name: String,
    /// Its name again (Ollama sends both).
    pub model: String,
    /// When its files last changed (RFC 3339).
    pub modified_at: String,
    /// Bytes on disk.
    pub size: u64,
    /// The weights' sha256, empty when unknown.
    pub digest: String,
    /// Format and family.
    pub details: Details,
}

/// One model of `GET /api/ps`: in memory now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunningModel {
    /// Its name.
    pub name: String,
    /// Its name again.
    pub model: String,
    /// Bytes on disk.
    pub size: u64,
    /// The weights' sha256, empty when unknown.
    pub digest: String,
    /// Format, family and the context in use.
    pub details: Details,
    /// When it will be unloaded (RFC 3339).
    pub expires_at: String,
    /// Always 0: Hearth uses no video memory.
    pub size_vram: u64,
    /// The context in use.
    pub context_length: Option<usize>,
    /// Hearth's own: the backend it runs on (`cpu`, `npu`, `remote`).
    pub backend: String,
    /// Hearth's own: the device, in words.
    pub device: String,
}

/// `GET /api/tags` and `GET /api/ps`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelList<T> {
    /// The models.
    pub models: Vec<T>,
}

/// `POST /api/show`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShowReply {
    /// A Modelfile naming the model.
    pub modelfile: String,
    /// The default parameters, one `name value` a line.
    pub parameters: String,
    /// The chat template.
    pub template: String,
    /// Format, family and context.
    pub details: Details,
    /// `general.architecture` and `<family>.context_length`.
    pub model_info: Map<String, Value>,
    /// What the model can do.
    pub capabilities: Vec<String>,
    /// When its files last changed (RFC 3339).
    pub modified_at: String,
    /// Hearth's own: the backend it would run on.
    pub backend: String,
}

/// `POST /api/embed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbedReply {
    /// The embedding model.
    pub model: String,
    /// One vector per input text.
    pub embeddings: Vec<Vec<f32>>,
    /// From the request's arrival to its end (nanoseconds).
    pub total_duration: u64,
    /// Loading the model (nanoseconds).
    pub load_duration: u64,
    /// Tokens read.
    pub prompt_eval_count: usize,
}

/// `POST /api/embeddings` (the older route).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingReply {
    /// The vector.
    pub embedding: Vec<f32>,
}

/// `GET /api/version`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    /// Hearth's version.
    pub version: String,
}

/// An error: `{"error": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorReply {
    /// What went wrong, in words.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_last_chunk_carries_the_counters_beside_the_message() {
        let chunk = ChatChunk {
            model: "m".into(),
            created_at: "t".into(),
            message: ReplyMessage {
                role: "assistant",
                content: String::new(),
            },
            done: true,
            counters: Some(Counters {
                done_reason: "stop".into(),
                eval_count: Some(3),
                ..Counters::default()
            }),
        };
        assert_eq!(
            serde_json::to_value(&chunk).unwrap(),
            json!({"model": "m", "created_at": "t", "done": true, "done_reason": "stop",
                   "message": {"role": "assistant", "content": ""}, "eval_count": 3})
        );
    }

    #[test]
    fn a_piece_has_no_counters() {
        let chunk = GenerateChunk {
            model: "m".into(),
            created_at: "t".into(),
            response: "hi".into(),
            done: false,
            counters: None,
        };
        assert_eq!(
            serde_json::to_value(&chunk).unwrap(),
            json!({"model": "m", "created_at": "t", "response": "hi", "done": false})
        );
    }

    #[test]
    fn requests_name_a_field_of_the_wrong_type() {
        let err = serde_json::from_value::<ChatRequest>(json!({"model": 3})).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
        let ok: ChatRequest =
            serde_json::from_value(json!({"model": "m", "keep_alive": "5m", "extra": 1})).unwrap();
        assert_eq!(ok.common.model.as_deref(), Some("m"));
    }
}
