//! Keeping FastFlowLM's prompt cache from answering from old text.
//!
//! FastFlowLM's server reuses its KV cache when a checksum per message of the previous request
//! equals this request's first ones and at least two messages are new. The checksum adds the
//! message's text as little-endian 8-byte words, so an edit that keeps that sum (two words
//! swapped, two bytes 8 apart exchanged) is not seen, and 1.0.x then answers from the text it
//! holds, not from the edited one (`docs/fastflowlm-1.0.md`, "The prompt cache").
//!
//! Hearth does not trust the checksum: it remembers what FastFlowLM's cache holds (the
//! conversation it last sent and the answer it got back), and when a conversation does not
//! begin with exactly that, it first sends [`clearing_messages`]: a request of one message,
//! which FastFlowLM never takes from its cache (two messages or fewer always miss), which
//! clears its KV cache, and whose checksums cannot be the beginning of the real request. The
//! real request then misses too, and FastFlowLM reads the whole conversation.

use hearth_engine::{ChatMessage, Role};

/// What FastFlowLM's KV cache holds, as far as Hearth can tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheState {
    /// Nothing this backend sent: FastFlowLM just started. Its first request for a model
    /// reuses nothing.
    #[default]
    Fresh,
    /// The conversation last sent, followed by FastFlowLM's whole answer to it.
    Holds(Vec<ChatMessage>),
    /// Unknown: the last answer was stopped early, cut or failed.
    Unknown,
}

impl CacheState {
    /// Whether FastFlowLM's cache must be cleared before it answers `messages`: it may reuse
    /// its cache (more than two messages), and what it holds is not where `messages` begins.
    pub fn needs_clearing(&self, messages: &[ChatMessage]) -> bool {
        if messages.len() <= 2 {
            return false;
        }
        match self {
            CacheState::Fresh => false,
            CacheState::Unknown => true,
            CacheState::Holds(held) => !messages.starts_with(held),
        }
    }

    /// After a complete answer `answer` to `messages`.
    pub fn answered(messages: &[ChatMessage], answer: &str) -> CacheState {
        let mut held = messages.to_vec();
        held.push(ChatMessage::new(Role::Assistant, answer));
        CacheState::Holds(held)
    }
}

/// The request that clears FastFlowLM's prompt cache before `messages`: one short user message
/// that is not the first of `messages`.
pub fn clearing_messages(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    let text = match messages.first() {
        Some(m) if m.content == "." => ",",
        _ => ".",
    };
    vec![ChatMessage::new(Role::User, text)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role, text: &str) -> ChatMessage {
        ChatMessage::new(role, text)
    }

    #[test]
    fn a_conversation_that_goes_on_needs_no_clearing() {
        let first = [m(Role::User, "My number is 1234567890123456.")];
        let held = CacheState::answered(&first, "Noted.");
        let next = [
            first[0].clone(),
            m(Role::Assistant, "Noted."),
            m(Role::User, "What is it?"),
        ];
        assert!(!held.needs_clearing(&next));
        assert!(!CacheState::Fresh.needs_clearing(&next));
    }

    #[test]
    fn an_edit_a_trimmed_answer_or_an_unknown_cache_needs_clearing() {
        let first = [m(Role::User, "My number is 1234567890123456.")];
        let held = CacheState::answered(&first, "Noted.");
        let edited = [
            m(Role::User, "My number is 9234567810123456."),
            m(Role::Assistant, "Noted."),
            m(Role::User, "What is it?"),
        ];
        assert!(held.needs_clearing(&edited), "an edited message");
        let trimmed = [
            first[0].clone(),
            m(Role::Assistant, "Noted"),
            m(Role::User, "What is it?"),
        ];
        assert!(held.needs_clearing(&trimmed), "an answer saved shorter");
        assert!(CacheState::Unknown.needs_clearing(&edited));
        assert!(
            !CacheState::Unknown.needs_clearing(&edited[..2]),
            "two messages never hit"
        );
    }

    #[test]
    fn the_clearing_request_is_not_the_first_message() {
        let dot = [m(Role::User, ".")];
        assert_ne!(clearing_messages(&dot)[0], dot[0]);
        assert_eq!(clearing_messages(&[])[0].content, ".");
    }
}
