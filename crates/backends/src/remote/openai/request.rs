//! The body of a chat or completion request, as OpenAI-compatible servers read it.

use hearth_engine::ChatMessage;
use serde::Serialize;
use serde_json::Value;

use hearth_wire::openai as wire;

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

/// A message's content as sent: its text alone, or, when pictures were given with it, a list
/// of parts: each picture as an `image_url` part (a `data:image/...;base64,` URL, which every
/// server that sees reads, FastFlowLM among them), then the text.
fn content(m: &ChatMessage) -> wire::MessageContent {
    if m.pictures.is_empty() {
        return wire::MessageContent::Text(m.content.clone());
    }
    let mut parts: Vec<wire::ContentPart> = m
        .pictures
        .iter()
        .map(|p| wire::ContentPart::image(hearth_chat::picture::data_url(p)))
        .collect();
    parts.push(wire::ContentPart::text(m.content.clone()));
    wire::MessageContent::Parts(parts)
}

impl ChatRequest {
    /// The JSON body sent to `/v1/chat/completions`.
    pub fn body(&self) -> String {
        let messages = self
            .messages
            .iter()
            .map(|m| wire::RequestMessage {
                role: m.role.as_str().to_owned(),
                content: Some(content(m)),
            })
            .collect();
        self.encode(&wire::ChatRequest {
            model: Some(self.model.clone()),
            messages,
            stream: Some(true),
            stream_options: Some(wire::StreamOptions {
                include_usage: true,
            }),
            max_tokens: self.max_tokens.map(|n| n as u64),
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            ..wire::ChatRequest::default()
        })
    }

    /// The JSON body sent to `/v1/completions` for the raw `prompt`: [`ChatRequest::body`]
    /// with `prompt` in place of `messages`.
    pub fn completion_body(&self, prompt: &str) -> String {
        self.encode(&wire::CompletionRequest {
            model: Some(self.model.clone()),
            prompt: wire::PromptText::One(prompt.to_owned()),
            stream: Some(true),
            stream_options: Some(wire::StreamOptions {
                include_usage: true,
            }),
            max_tokens: self.max_tokens.map(|n| n as u64),
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            ..wire::CompletionRequest::default()
        })
    }

    /// `request` with the samplers OpenAI does not have and the extra fields. Unset fields are
    /// left out, never sent as null: FastFlowLM fails on a null. Floats are written as f32, so
    /// 0.7 goes out as 0.7, not 0.699999988079071.
    fn encode(&self, request: &impl Serialize) -> String {
        let body = Body {
            request,
            samplers: Samplers {
                top_k: self.top_k,
                min_p: self.min_p,
                repeat_penalty: self.repetition_penalty,
                repetition_penalty: self.repetition_penalty,
            },
            extra: &self.extra,
        };
        // Plain structs and JSON values: serializing them cannot fail.
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// A request body as sent: OpenAI's fields, then the servers' own.
#[derive(Serialize)]
struct Body<'a, R: Serialize> {
    #[serde(flatten)]
    request: &'a R,
    #[serde(flatten)]
    samplers: Samplers,
    #[serde(flatten)]
    extra: &'a serde_json::Map<String, Value>,
}

/// Samplers llama.cpp and vLLM read (ignored elsewhere); the repetition penalty under both
/// its names (`repeat_penalty`: llama.cpp; `repetition_penalty`: vLLM, FastFlowLM).
#[derive(Serialize)]
struct Samplers {
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    repeat_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    repetition_penalty: Option<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::openai::testing::request;

    #[test]
    fn request_body_leaves_out_unset_fields() {
        let mut req = request();
        req.temperature = Some(0.7);
        req.repetition_penalty = Some(1.1);
        let body: Value = serde_json::from_str(&req.body()).unwrap();
        assert_eq!(body["stream"], true);
        assert_eq!(body["temperature"], 0.7);
        assert_eq!(body["repeat_penalty"], 1.1);
        assert_eq!(body["repetition_penalty"], 1.1);
        assert_eq!(body["messages"][0]["role"], "user");
        assert!(body.get("top_p").is_none(), "no nulls: {body}");
        assert!(body.get("seed").is_none());
    }

    #[test]
    fn a_completion_body_has_the_prompt_in_place_of_messages() {
        let mut req = request();
        req.max_tokens = Some(5);
        let body: Value = serde_json::from_str(&req.completion_body("Once upon")).unwrap();
        assert_eq!(body["prompt"], "Once upon");
        assert!(body.get("messages").is_none(), "{body}");
        assert_eq!(body["max_tokens"], 5);
        assert_eq!(body["stream"], true);
    }
}
