//! FastFlowLM's prompt cache: when its server reuses the KV cache of the previous request.
//!
//! The rule, as `src/include/prompt_cache.hpp` (0.9.45) has it and 1.0.6's `rest_handler.cpp`
//! calls it (`docs/fastflowlm-1.0.md`, "The prompt cache"):
//!
//! - every message of a request gets a checksum: its `role`, `content`, `tool_calls`,
//!   `tool_call_id` and `name`, each present one as its JSON text, added up by
//!   `_calculate_checksum` (little-endian u64 words, then the last `len % 8` bytes one by one);
//! - the first request for a model (`model != model_used_for_last_message`) only records them;
//! - a request of two messages or fewer records them and misses;
//! - otherwise it is a hit when the previous request's checksums are the first ones of this
//!   request and at least two messages are new; either way this request's checksums are kept;
//! - a cancelled or failed answer clears them (`reset()`).
//!
//! An additive sum does not see where a word is: swapping two 8-byte words of a message, or
//! two bytes 8 apart, keeps its checksum. What a hit then reads differs by release: 0.9.45's
//! engines restore the previous prompt's KV and compare its tokens with the new prompt's
//! (`_shared_insert`, `automodel.cpp:162-177`), so an edited message is read again; 1.0.x
//! reuses the cached messages as they are (issue 37's report), so the model reads the old text.

use hearth_engine::{ChatMessage, Role};
use serde_json::{json, Value};

use crate::setup::Release;

/// `_calculate_checksum`: `bytes` as little-endian u64 words added to `sum` (wrapping), then
/// the last `len % 8` bytes one by one.
pub fn checksum(bytes: &[u8], sum: u64) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    let sum = words.fold(sum, |s, w| {
        s.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")))
    });
    tail.iter().fold(sum, |s, b| s.wrapping_add(u64::from(*b)))
}

/// `_calculate_single_message_checksum` of a message as the server holds it after
/// normalising (role and content as JSON strings).
pub fn message_checksum(message: &ChatMessage) -> u64 {
    let role = match message.role {
        Role::System => "system",
        Role::Assistant => "assistant",
        _ => "user",
    };
    let fields = [json!(role), json!(message.content)];
    fields
        .iter()
        .map(Value::to_string)
        .fold(0, |sum, text| checksum(text.as_bytes(), sum))
}

/// What the server decided for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The first request for this model: checksums recorded, nothing reused.
    NewModel,
    /// The cache is reused: the previous request had `kept` messages.
    Hit { kept: usize },
    /// The cache is cleared and the whole conversation read.
    Miss,
}

/// The server's prompt cache state and what the KV cache holds.
#[derive(Debug, Default)]
pub struct PromptCache {
    /// `message_checksums_`: one per message of the last request.
    checksums: Vec<u64>,
    /// `model_used_for_last_message` (a static in `rest_handler.cpp`).
    last_model: Option<String>,
    /// The conversation the KV cache holds: the last request and its answer.
    held: Option<Vec<ChatMessage>>,
}

impl PromptCache {
    /// `can_use_cache` as `handle_openai_chat_completion` calls it for `messages` asked of
    /// `model` (the request's `model` string, compared as it is).
    pub fn decide(&mut self, model: &str, messages: &[ChatMessage]) -> Decision {
        let new: Vec<u64> = messages.iter().map(message_checksum).collect();
        if self.last_model.as_deref() != Some(model) {
            self.last_model = Some(model.to_string());
            self.checksums = new;
            self.held = None;
            return Decision::NewModel;
        }
        if messages.len() <= 2 {
            self.checksums = new;
            return Decision::Miss;
        }
        let stored = std::mem::replace(&mut self.checksums, new);
        let matched = stored
            .iter()
            .zip(&self.checksums)
            .take_while(|(a, b)| a == b)
            .count();
        if stored.len() <= messages.len() - 2 && matched == stored.len() {
            Decision::Hit { kept: stored.len() }
        } else {
            Decision::Miss
        }
    }

    /// What the model reads after a hit on a request of `kept` earlier messages: 1.0.x keeps
    /// the cached conversation (the earlier messages as they were, and its own answer) and
    /// reads only the messages after it; 0.9.45 reads `messages` (its token check catches an
    /// edited message).
    pub fn reused(
        &mut self,
        kept: usize,
        messages: Vec<ChatMessage>,
        release: &Release,
    ) -> Vec<ChatMessage> {
        match self.held.take() {
            Some(mut held) if release.is_1_0() && held.len() == kept + 1 => {
                held.extend(messages.into_iter().skip(kept + 1));
                held
            }
            _ => messages,
        }
    }

    /// After a complete answer `text` to `conversation`: what the KV cache now holds.
    pub fn answered(&mut self, mut conversation: Vec<ChatMessage>, text: &str) {
        conversation.push(ChatMessage::new(Role::Assistant, text));
        self.held = Some(conversation);
    }

    /// `reset()`: after a cancelled or failed answer, nothing is reused.
    pub fn reset(&mut self) {
        self.checksums.clear();
        self.held = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_words_keep_the_checksum() {
        let a = checksum(b"AAAAAAAABBBBBBBB", 0);
        let b = checksum(b"BBBBBBBBAAAAAAAA", 0);
        assert_eq!(a, b, "the word sum does not see order");
        assert_ne!(checksum(b"AAAAAAAB", 0), checksum(b"AAAAAAAA", 0));
        assert_eq!(checksum(b"abc", 0), 97 + 98 + 99);
    }

    #[test]
    fn a_hit_needs_the_old_messages_first_and_two_new() {
        let m = |r: Role, t: &str| ChatMessage::new(r, t);
        let mut cache = PromptCache::default();
        let first = vec![m(Role::User, "Hi")];
        assert_eq!(cache.decide("demo:5m", &first), Decision::NewModel);
        let second = vec![
            m(Role::User, "Hi"),
            m(Role::Assistant, "Hello"),
            m(Role::User, "Bye"),
        ];
        assert_eq!(cache.decide("demo:5m", &second), Decision::Hit { kept: 1 });
        let edited = vec![
            m(Role::User, "Ho"),
            m(Role::Assistant, "Hello"),
            m(Role::User, "Bye"),
        ];
        assert_eq!(cache.decide("demo:5m", &edited), Decision::Miss);
        assert_eq!(cache.decide("demo:5m", &first), Decision::Miss);
    }
}
