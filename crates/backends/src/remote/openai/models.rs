//! What a server says outside an answer: the models it offers (`GET /v1/models`), which of
//! them see pictures (Ollama's `/api/show`), the context length llama.cpp's server holds
//! (`/props`), and token counts by a model's own tokenizer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hearth_chat::backend::BackendError;
use hearth_wire::openai as wire;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::errors::{quote, read_json_text};
use super::OpenAiClient;

/// Most models of a list Ollama is asked about (one `/api/show` each): a server with hundreds
/// of models must not hold the list up.
pub const MOST_MODELS_ASKED: usize = 24;
/// Questions to `/api/show` in flight at once.
pub const ASKED_AT_ONCE: usize = 4;
/// Longest wait for one answer of `/api/show` while a list is shown.
pub const SHOW_TIMEOUT: Duration = Duration::from_secs(2);

/// A model a server offers, from `/v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerModel {
    /// Its id, as the server wants it in requests.
    pub id: String,
    /// Who owns it, as the server says (`owned_by`).
    pub owned_by: Option<String>,
    /// Positions it holds, when the server says (vLLM's `max_model_len`).
    pub context_length: Option<usize>,
    /// Whether the server says it sees pictures (Ollama's `/api/show` lists `vision` among
    /// its capabilities); false when not asked, not said, or not known
    /// ([`OpenAiClient::ask_which_see`]).
    #[serde(default)]
    pub sees_pictures: bool,
}

impl OpenAiClient {
    /// The models the server offers (`GET /v1/models`).
    pub fn models(&self) -> Result<Vec<ServerModel>, BackendError> {
        let url = format!("{}/v1/models", self.base_url);
        tracing::debug!(url = %url, "listing the server's models");
        let mut request = self.agent.get(&url);
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = request.call().map_err(|e| self.request_error(e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = read_json_text(response.into_body()).map_err(|e| self.body_error(e))?;
        if status != 200 {
            return Err(self.status_error(status, &headers, &text, None));
        }
        let value = self.parse_json(&text)?;
        if let Some(error) = value.get("error") {
            return Err(self.server_error(error));
        }
        let list: wire::ModelList = serde_json::from_value(value).unwrap_or_default();
        let Some(data) = list.data else {
            return Err(self.bad_reply(&format!(
                "its model list has no \"data\" array (starts with {})",
                quote(&text, self.key.as_ref())
            )));
        };
        Ok(data
            .into_iter()
            .filter_map(|m| {
                Some(ServerModel {
                    id: m.id?,
                    owned_by: m.owned_by,
                    context_length: m.max_model_len.map(|n| n as usize),
                    sees_pictures: false,
                })
            })
            .collect())
    }

    /// The context length llama.cpp's own server reports at `/props`
    /// (`default_generation_settings.n_ctx`); None from any other server or on any failure.
    pub fn props_context_length(&self) -> Option<usize> {
        let url = format!("{}/props", self.base_url);
        let mut request = self
            .agent
            .get(&url)
            .config()
            .timeout_per_read(Some(self.options.read_timeout.min(Duration::from_secs(5))))
            .build();
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = request.call().ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        let text = read_json_text(response.into_body()).ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        let n = value
            .get("default_generation_settings")?
            .get("n_ctx")?
            .as_u64()?;
        (n > 0).then_some(n as usize)
    }

    /// Whether `model` sees pictures, as Ollama's `/api/show` says (its `capabilities` list
    /// holds `vision`). None when the server has no `/api/show` (it is not Ollama) or fails.
    pub fn ollama_sees_pictures(&self, model: &str) -> Option<bool> {
        self.show_vision(model, self.options.read_timeout.min(Duration::from_secs(5)))
    }

    /// Marks the `models` of a list that Ollama says see pictures, asking `/api/show` about
    /// the first [`MOST_MODELS_ASKED`] of them, [`ASKED_AT_ONCE`] at a time, waiting at most
    /// [`SHOW_TIMEOUT`] for each. The first is asked alone: a server that does not answer it
    /// (not Ollama, or an Ollama too old to say) is not asked again. A question that fails
    /// only leaves its model unmarked.
    pub fn ask_which_see(&self, models: &mut [ServerModel]) {
        let asked = models.len().min(MOST_MODELS_ASKED);
        let Some((first, rest)) = models[..asked].split_first_mut() else {
            return;
        };
        match self.show_vision(&first.id, SHOW_TIMEOUT) {
            Some(sees) => first.sees_pictures = sees,
            None => {
                tracing::debug!(server = %self.base_url, "no answer from /api/show: not asking which models see");
                return;
            }
        }
        let next = AtomicUsize::new(0);
        let seeing: Vec<AtomicBool> = rest.iter().map(|_| AtomicBool::new(false)).collect();
        std::thread::scope(|scope| {
            for _ in 0..ASKED_AT_ONCE.min(rest.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(model) = rest.get(i) else { break };
                    if self.show_vision(&model.id, SHOW_TIMEOUT) == Some(true) {
                        seeing[i].store(true, Ordering::Relaxed);
                    }
                });
            }
        });
        for (model, sees) in rest.iter_mut().zip(&seeing) {
            model.sees_pictures = sees.load(Ordering::Relaxed);
        }
    }

    /// Asks Ollama's `/api/show` whether `model` has the `vision` capability, waiting at most
    /// `timeout` in all. None when there is no such answer (the server is not Ollama, is too
    /// old to list capabilities, fails, or is too slow).
    fn show_vision(&self, model: &str, timeout: Duration) -> Option<bool> {
        let url = format!("{}/api/show", self.base_url);
        let mut request = self
            .agent
            .post(&url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("Content-Type", "application/json");
        if let Some(key) = &self.key {
            request = request.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = request
            .send(serde_json::json!({ "model": model }).to_string())
            .ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        let value: Value =
            serde_json::from_str(&read_json_text(response.into_body()).ok()?).ok()?;
        let capabilities = value.get("capabilities")?.as_array()?;
        Some(capabilities.iter().any(|c| c.as_str() == Some("vision")))
    }

    /// Tokens of `text` by the server's own tokenizer, for servers that send no `usage` with a
    /// stream: llama-cpp-python's `/extras/tokenize/count`, or the `/tokenize` of llama.cpp's
    /// server (`tokens`) and vLLM (`count`). None when the server has neither or fails.
    /// llama-cpp-python adds the model's BOS token to the count; pass the count of `""` as
    /// `overhead` to take it off.
    pub fn server_token_count(&self, model: &str, text: &str) -> Option<usize> {
        let attempts = [
            (
                "/extras/tokenize/count",
                serde_json::json!({ "input": text, "model": model }),
            ),
            (
                "/tokenize",
                serde_json::json!({
                    "content": text, "add_special": false,
                    "model": model, "prompt": text, "add_special_tokens": false,
                }),
            ),
        ];
        for (path, body) in attempts {
            let url = format!("{}{path}", self.base_url);
            let mut request = self
                .agent
                .post(&url)
                .config()
                .timeout_per_read(Some(self.options.read_timeout.min(Duration::from_secs(10))))
                .build()
                .header("Content-Type", "application/json");
            if let Some(key) = &self.key {
                request = request.header("Authorization", format!("Bearer {}", key.expose()));
            }
            let Ok(response) = request.send(body.to_string()) else {
                return None;
            };
            if response.status().as_u16() != 200 {
                continue;
            }
            let value: Value =
                serde_json::from_str(&read_json_text(response.into_body()).ok()?).ok()?;
            let count = value
                .get("count")
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .or_else(|| value.get("tokens")?.as_array().map(Vec::len));
            if count.is_some() {
                return count;
            }
        }
        None
    }
}
