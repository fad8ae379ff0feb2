//! Fitting a conversation into the model's context: the oldest turns are left out first,
//! predictably, and the system prompt and the newest user message always stay.

use hearth_engine::{ChatMessage, Role};

/// A conversation cut to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// Messages to send to the model.
    pub messages: Vec<ChatMessage>,
    /// Tokens of the rendered prompt.
    pub prompt_tokens: usize,
    /// How many of the oldest messages were left out.
    pub trimmed: usize,
}

/// Why a conversation cannot fit at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Even the newest message alone (with the system prompt) is too long.
    #[error("your message is too long for this model: with the system prompt it takes {needed} tokens, and the model can hold {limit} in total (leaving room for the answer). Shorten it or split it into parts.")]
    TooLong {
        /// Tokens needed including room for an answer.
        needed: usize,
        /// The model's context length.
        limit: usize,
    },
    /// Counting tokens failed (template or tokenizer error).
    #[error("{0}")]
    Count(String),
}

/// Room kept free for the answer: `max_tokens`, but at most a quarter of the context.
pub fn answer_reserve(max_tokens: usize, limit: usize) -> usize {
    max_tokens.min(limit / 4).max(1)
}

/// Drop the oldest non-system messages (whole turns: up to the next user message) until the
/// prompt plus `reserve` fits in `limit`. `count` renders and tokenizes a message list.
pub fn fit(
    messages: Vec<ChatMessage>,
    limit: usize,
    reserve: usize,
    count: &mut dyn FnMut(&[ChatMessage]) -> Result<usize, String>,
) -> Result<Fitted, FitError> {
    let (system, mut rest): (Vec<ChatMessage>, Vec<ChatMessage>) =
        messages.into_iter().partition(|m| m.role == Role::System);
    let mut trimmed = 0;
    loop {
        let candidate: Vec<ChatMessage> =
            system.iter().cloned().chain(rest.iter().cloned()).collect();
        let tokens = count(&candidate).map_err(FitError::Count)?;
        if tokens + reserve <= limit {
            return Ok(Fitted {
                messages: candidate,
                prompt_tokens: tokens,
                trimmed,
            });
        }
        // Keep at least the newest user message.
        let last_user = rest.iter().rposition(|m| m.role == Role::User).unwrap_or(0);
        if last_user == 0 {
            return Err(FitError::TooLong {
                needed: tokens + reserve,
                limit,
            });
        }
        // Drop the oldest message, then anything up to the next user message (a whole turn).
        rest.remove(0);
        trimmed += 1;
        while !rest.is_empty() && rest[0].role != Role::User && rest.len() > 1 {
            rest.remove(0);
            trimmed += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: Role, text: &str) -> ChatMessage {
        ChatMessage::new(role, text)
    }

    /// One token per word, plus 2 per message (a stand-in for a chat template).
    fn words(messages: &[ChatMessage]) -> Result<usize, String> {
        Ok(messages
            .iter()
            .map(|m| m.content.split_whitespace().count() + 2)
            .sum())
    }

    #[test]
    fn fitting_conversation_is_untouched() {
        let m = vec![msg(Role::System, "be nice"), msg(Role::User, "hi there")];
        let f = fit(m.clone(), 100, 10, &mut words).unwrap();
        assert_eq!(f.messages, m);
        assert_eq!(f.trimmed, 0);
        assert_eq!(f.prompt_tokens, 8);
    }

    #[test]
    fn oldest_turns_go_first_and_system_stays() {
        let m = vec![
            msg(Role::System, "sys"),
            msg(Role::User, "one one one one"),
            msg(Role::Assistant, "a a a a"),
            msg(Role::User, "two two"),
            msg(Role::Assistant, "b b"),
            msg(Role::User, "three"),
        ];
        // total = 3 + 6 + 6 + 4 + 4 + 3 = 26; limit 20 with reserve 5 forces dropping turn one.
        let f = fit(m, 20, 5, &mut words).unwrap();
        assert_eq!(
            f.trimmed, 2,
            "the first user message and its answer go together"
        );
        assert_eq!(f.messages[0].role, Role::System);
        assert_eq!(f.messages[1].content, "two two");
        assert_eq!(f.prompt_tokens, 14);
    }

    #[test]
    fn a_message_too_long_alone_is_an_error() {
        let m = vec![msg(Role::User, &"word ".repeat(50))];
        let e = fit(m, 40, 10, &mut words).unwrap_err();
        assert_eq!(
            e,
            FitError::TooLong {
                needed: 62,
                limit: 40
            }
        );
        assert!(e.to_string().contains("Shorten it"));
    }

    #[test]
    fn reserve_is_capped_to_a_quarter_of_the_context() {
        assert_eq!(answer_reserve(1024, 4096), 1024);
        assert_eq!(answer_reserve(1024, 512), 128);
        assert_eq!(answer_reserve(0, 512), 1);
    }
}
