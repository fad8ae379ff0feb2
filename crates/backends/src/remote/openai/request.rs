//! The body of a chat or completion request, as OpenAI-compatible servers read it.

use hearth_engine::ChatMessage;
use serde_json::Value;

/// One request for a streamed chat answer.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// The model id, exactly as the server lists it.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Longest answer in tokens.
    pub max_tokens: Option<usize>,
    /// Sampling temperature (0 = greedy).
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k sampling (llama.cpp, vLLM; ignored elsewhere).
    pub top_k: Option<usize>,
    /// Min-p sampling (llama.cpp, vLLM; ignored elsewhere).
    pub min_p: Option<f32>,
    /// Repetition penalty, sent as `repeat_penalty` (llama.cpp) and `repetition_penalty` (vLLM,
    /// FastFlowLM).
    pub repetition_penalty: Option<f32>,
    /// Random seed.
    pub seed: Option<u64>,
    /// More fields sent as they are (e.g. `chat_template_kwargs`, FastFlowLM's `think`).
    pub extra: serde_json::Map<String, Value>,
    /// Stop with [`FailureKind::WrongModel`] when a chunk names another model than `model`
    /// (before any of its text is passed on). By default, off: read
    /// [`StreamOutcome::model`] instead.
    pub require_model: bool,
}

impl ChatRequest {
    /// The JSON body sent.
    pub fn body(&self) -> Value {
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|m| serde_json::json!({ "role": m.role.as_str(), "content": m.content }))
            .collect();
        let mut body = serde_json::Map::new();
        body.insert("model".into(), self.model.clone().into());
        body.insert("messages".into(), messages.into());
        body.insert("stream".into(), true.into());
        // OpenAI and vLLM send `usage` in a last chunk only when asked.
        body.insert(
            "stream_options".into(),
            serde_json::json!({ "include_usage": true }),
        );
        // Absent fields are left out, never sent as null: FastFlowLM fails on a null.
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(name.into(), value);
            }
        };
        put("max_tokens", self.max_tokens.map(Value::from));
        put("temperature", self.temperature.map(|v| rounded(v).into()));
        put("top_p", self.top_p.map(|v| rounded(v).into()));
        put("top_k", self.top_k.map(Value::from));
        put("min_p", self.min_p.map(|v| rounded(v).into()));
        put(
            "repeat_penalty",
            self.repetition_penalty.map(|v| rounded(v).into()),
        );
        put(
            "repetition_penalty",
            self.repetition_penalty.map(|v| rounded(v).into()),
        );
        put("seed", self.seed.map(Value::from));
        for (name, value) in &self.extra {
            body.insert(name.clone(), value.clone());
        }
        Value::Object(body)
    }

    /// The JSON body sent to `/v1/completions` for the raw `prompt`: [`ChatRequest::body`]
    /// with `prompt` in place of `messages`.
    pub fn completion_body(&self, prompt: &str) -> Value {
        let mut body = self.body();
        if let Some(fields) = body.as_object_mut() {
            fields.remove("messages");
            fields.insert("prompt".into(), prompt.into());
        }
        body
    }
}

/// An f32 setting as the decimal people typed (0.7, not 0.699999988079071).
fn rounded(v: f32) -> f64 {
    (v as f64 * 1e6).round() / 1e6
}
