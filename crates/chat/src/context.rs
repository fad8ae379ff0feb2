//! Fitting a conversation into the model's context: the oldest turns are left out first,
//! predictably, and the system prompt and the newest user message always stay.
//!
//! The prompt is rendered and tokenized once when the conversation fits, which is the usual case.
//! When it does not, the turns to leave out are chosen from an estimate (each message's own tokens
//! plus an equal share of the template's overhead, measured on the full render) and the shortened
//! conversation is rendered once more to confirm; only an estimate that was too low costs another
//! round.

use hearth_engine::{ChatMessage, Role};

use crate::backend::{BackendError, Prompt};

/// A conversation cut to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The prepared prompt of the messages kept.
    pub prompt: Prompt,
    /// How many of the oldest messages were left out.
    pub trimmed: usize,
}

/// Why a conversation cannot be fitted.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// Even the newest message alone (with the system prompt) is too long.
    #[error("your message is too long for this model: with the system prompt it takes {needed} tokens, and the model can hold {limit} in total (leaving room for the answer). Shorten it or split it into parts.")]
    TooLong {
        /// Tokens needed including room for an answer.
        needed: usize,
        /// The model's context length.
        limit: usize,
    },
    /// Rendering or counting failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// Room kept free for the answer: `max_tokens`, but at most a quarter of the context.
pub fn answer_reserve(max_tokens: usize, limit: usize) -> usize {
    max_tokens.min(limit / 4).max(1)
}

/// The share of the context the user's files may take: passages of attached files get at most
/// half of what is left after the answer's reserve, so the question and recent turns keep the
/// other half. The same rule on every backend.
pub fn passage_budget(limit: usize, reserve: usize) -> usize {
    limit.saturating_sub(reserve) / 2
}

/// Tokens a passage is taken to cost: the count itself when the model's tokenizer counted it,
/// else the estimate plus half again (a remote server's tokenizer is unknown; the estimate of
/// 4 characters per token is far too low for Chinese or Japanese, so the margin errs long).
pub fn passage_cost(count: crate::backend::TokenCount) -> usize {
    if count.exact {
        count.tokens
    } else {
        count.tokens + count.tokens.div_ceil(2)
    }
}

/// How many of the passages (best first, each costing `costs[i]` tokens) fit in `budget`: the
/// longest run from the best that fits; the rest are left out.
pub fn passages_that_fit(costs: &[usize], budget: usize) -> usize {
    let mut used = 0;
    costs
        .iter()
        .take_while(|&&c| {
            used += c;
            used <= budget
        })
        .count()
}

/// Leaves out the oldest non-system messages (whole turns: up to the next user message) until the
/// prompt plus `reserve` fits in `limit`. `prepare` renders and counts a message list;
/// `cost` counts one message's text alone.
#[allow(clippy::result_large_err)] // see `answer::answer`
pub fn fit(
    messages: Vec<ChatMessage>,
    limit: usize,
    reserve: usize,
    cost: &mut dyn FnMut(&ChatMessage) -> usize,
    prepare: &mut dyn FnMut(Vec<ChatMessage>) -> Result<Prompt, BackendError>,
) -> Result<Fitted, FitError> {
    let fits = |prompt: &Prompt| prompt.count.tokens + reserve <= limit;
    let full = prepare(messages.clone())?;
    if fits(&full) {
        return Ok(Fitted {
            prompt: full,
            trimmed: 0,
        });
    }

    let (system, rest): (Vec<ChatMessage>, Vec<ChatMessage>) =
        messages.into_iter().partition(|m| m.role == Role::System);
    let own: Vec<usize> = system.iter().chain(&rest).map(&mut *cost).collect();
    let overhead = full.count.tokens.saturating_sub(own.iter().sum()) / own.len().max(1);
    let estimate = |kept: &[usize]| kept.iter().map(|c| c + overhead).sum::<usize>();
    let system_cost = estimate(&own[..system.len()]);
    let rest_costs = &own[system.len()..];

    let mut dropped = 0; // messages of `rest` left out so far
    let mut last_needed = full.count.tokens + reserve;
    loop {
        // Leave out whole turns until the estimate fits (or only the newest turn is left).
        while let Some(next) = next_turn(&rest, dropped) {
            if system_cost + estimate(&rest_costs[dropped..]) + reserve <= limit {
                break;
            }
            dropped = next;
        }
        let kept: Vec<ChatMessage> = system.iter().chain(&rest[dropped..]).cloned().collect();
        let prompt = prepare(kept)?;
        if fits(&prompt) {
            return Ok(Fitted {
                prompt,
                trimmed: dropped,
            });
        }
        last_needed = last_needed.min(prompt.count.tokens + reserve);
        match next_turn(&rest, dropped) {
            Some(next) => dropped = next, // the estimate was low: one more turn goes
            None => {
                return Err(FitError::TooLong {
                    needed: last_needed,
                    limit,
                })
            }
        }
    }
}

/// Where the conversation would start after leaving out the turn that starts at `from`: just
/// after it, at the next user message. None when `from` is the newest user message (it stays).
fn next_turn(rest: &[ChatMessage], from: usize) -> Option<usize> {
    let newest_user = rest.iter().rposition(|m| m.role == Role::User)?;
    if from >= newest_user {
        return None;
    }
    let after = rest[from + 1..=newest_user]
        .iter()
        .position(|m| m.role == Role::User)
        .map_or(newest_user, |i| from + 1 + i);
    Some(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Input, TokenCount};

    fn msg(role: Role, text: &str) -> ChatMessage {
        ChatMessage::new(role, text)
    }

    fn words(m: &ChatMessage) -> usize {
        m.content.split_whitespace().count()
    }

    /// One token per word, plus 2 per message (a stand-in for a chat template), counting renders.
    fn renderer(
        renders: &mut usize,
    ) -> impl FnMut(Vec<ChatMessage>) -> Result<Prompt, BackendError> + '_ {
        move |messages| {
            *renders += 1;
            let tokens = messages.iter().map(|m| words(m) + 2).sum();
            Ok(Prompt {
                input: Input::Chat(messages),
                count: TokenCount {
                    tokens,
                    exact: true,
                },
                tokens: None,
            })
        }
    }

    fn kept(f: &Fitted) -> Vec<&str> {
        match &f.prompt.input {
            Input::Chat(m) => m.iter().map(|m| m.content.as_str()).collect(),
            Input::Continue(_) | Input::Raw(_) => unreachable!(),
        }
    }

    #[test]
    fn a_fitting_conversation_is_rendered_once_and_untouched() {
        let m = vec![msg(Role::System, "be nice"), msg(Role::User, "hi there")];
        let mut renders = 0;
        let f = fit(m, 100, 10, &mut words, &mut renderer(&mut renders)).unwrap();
        assert_eq!(kept(&f), ["be nice", "hi there"]);
        assert_eq!((f.trimmed, f.prompt.count.tokens, renders), (0, 8, 1));
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
        // total = 3 + 6 + 6 + 4 + 4 + 3 = 26; limit 20 with reserve 5 forces leaving out turn one.
        let mut renders = 0;
        let f = fit(m, 20, 5, &mut words, &mut renderer(&mut renders)).unwrap();
        assert_eq!(
            f.trimmed, 2,
            "the first user message and its answer go together"
        );
        assert_eq!(kept(&f), ["sys", "two two", "b b", "three"]);
        assert_eq!(f.prompt.count.tokens, 14);
        assert_eq!(renders, 2, "one full render, one to confirm the estimate");
    }

    #[test]
    fn a_low_estimate_costs_one_more_round() {
        let m = vec![
            msg(Role::User, "one"),
            msg(Role::Assistant, "a"),
            msg(Role::User, "two"),
            msg(Role::Assistant, "b"),
            msg(Role::User, &"three ".repeat(10)),
        ];
        // `cost` knows nothing (0), so every message is estimated at the average render (24 / 5
        // = 4 tokens); the newest message really takes 12, so keeping the second turn looks
        // like 12 tokens but renders as 18, over the 16 allowed: one more turn goes.
        let mut renders = 0;
        let f = fit(m, 20, 4, &mut |_| 0, &mut renderer(&mut renders)).unwrap();
        assert_eq!(f.trimmed, 4);
        assert_eq!(f.prompt.count.tokens, 12);
        assert_eq!(renders, 3);
    }

    #[test]
    fn a_message_too_long_alone_is_an_error() {
        let m = vec![
            msg(Role::User, "old"),
            msg(Role::Assistant, "reply"),
            msg(Role::User, &"word ".repeat(50)),
        ];
        let mut renders = 0;
        let e = fit(m, 40, 10, &mut words, &mut renderer(&mut renders)).unwrap_err();
        match &e {
            FitError::TooLong { needed, limit } => assert_eq!((*needed, *limit), (62, 40)),
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("Shorten it"));
    }

    #[test]
    fn passages_take_at_most_half_of_the_room_and_estimates_get_a_margin() {
        assert_eq!(passage_budget(2048, 48), 1000);
        assert_eq!(
            passages_that_fit(&[400, 500, 200], 1000),
            2,
            "the best first, in order"
        );
        assert_eq!(passages_that_fit(&[1200, 10], 1000), 0);
        let exact = crate::backend::TokenCount {
            tokens: 100,
            exact: true,
        };
        assert_eq!(passage_cost(exact), 100);
        assert_eq!(
            passage_cost(crate::backend::TokenCount {
                exact: false,
                ..exact
            }),
            150
        );
    }

    #[test]
    fn reserve_is_capped_to_a_quarter_of_the_context() {
        assert_eq!(answer_reserve(1024, 4096), 1024);
        assert_eq!(answer_reserve(1024, 512), 128);
        assert_eq!(answer_reserve(0, 512), 1);
    }

    #[test]
    fn turns_end_at_the_next_user_message() {
        let r = [
            msg(Role::User, "1"),
            msg(Role::Assistant, "a"),
            msg(Role::Assistant, "a2"),
            msg(Role::User, "2"),
            msg(Role::User, "3"),
        ];
        assert_eq!(next_turn(&r, 0), Some(3));
        assert_eq!(next_turn(&r, 3), Some(4));
        assert_eq!(next_turn(&r, 4), None, "the newest user message stays");
    }
}
