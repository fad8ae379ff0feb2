//! Structured output at the token level: which tokens keep an answer on its [`Grammar`], given
//! what each token writes ([`TokenBytes`], computed once per tokenizer). The sampler asks
//! [`Constraint::allows`] about its most likely candidates first and scans the whole vocabulary
//! ([`Constraint::allowed`]) only when none of them fits.
//!
//! Choosing one token is bounded: all the automaton's steps between two accepted tokens share
//! one budget of work ([`STEP_WORK`]), and a state may hold only so many readings
//! (`json_automaton::MAX_THREADS`). Past either, every token is refused and
//! [`Constraint::within_bounds`] names the error, so the answer ends in milliseconds with a
//! message instead of holding the model for minutes. The bound is also what keeps Stop and a
//! client that left waiting no longer than that: they are seen between tokens.

use std::cell::Cell;

use crate::json_automaton::{JsonState, Overrun, MAX_THREADS};
use crate::json_schema::Grammar;
use crate::tokenizer::TextTokenizer;
use crate::Error;

/// Work the automaton may do to choose one token, in its units (a reading stepped costs one
/// plus its depth; see `JsonState::step`). Choosing a token for an ordinary schema costs from
/// a few thousand units (greedy, the likeliest token fits) to a few hundred thousand (a scan of
/// a 150,000-token vocabulary inside a string); this is about a tenth of a second of work.
pub(crate) const STEP_WORK: u64 = 4_000_000;

/// What every token of a vocabulary writes, in bytes.
#[derive(Debug)]
pub(crate) struct TokenBytes {
    /// By id; empty for tokens that write no text (special tokens).
    bytes: Vec<Vec<u8>>,
    /// The ids that write text, sorted by their bytes, so tokens sharing a beginning are
    /// neighbours and a scan reads each shared beginning once.
    sorted: Vec<u32>,
}

impl TokenBytes {
    pub(crate) fn new(tokenizer: &TextTokenizer) -> Self {
        let bytes = tokenizer.token_bytes();
        Self::from_bytes(bytes.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// The table of `bytes`, by id (empty for tokens that write no text).
    pub(crate) fn from_bytes(bytes: Vec<Vec<u8>>) -> Self {
        let mut sorted: Vec<u32> = (0..bytes.len() as u32)
            .filter(|&id| !bytes[id as usize].is_empty())
            .collect();
        sorted.sort_by(|&a, &b| bytes[a as usize].cmp(&bytes[b as usize]));
        TokenBytes { bytes, sorted }
    }

    /// What `token` writes (empty for special tokens and ids past the vocabulary).
    pub(crate) fn get(&self, token: u32) -> &[u8] {
        self.bytes.get(token as usize).map_or(&[], Vec::as_slice)
    }
}

/// An answer being written under a grammar: the tokens that may come next.
#[derive(Debug)]
pub(crate) struct Constraint<'a> {
    grammar: Grammar,
    vocab: &'a TokenBytes,
    /// The model's end-of-turn ids: allowed exactly when the answer is complete.
    stop_ids: &'a [u32],
    state: JsonState,
    /// Work left for choosing the next token ([`Constraint::begin_token`] refills it).
    work: Cell<u64>,
    /// How a step went past a bound, once one has: from then on no token is allowed, and the
    /// answer ends with [`Constraint::within_bounds`]'s error.
    overrun: Cell<Option<Overrun>>,
}

impl<'a> Constraint<'a> {
    pub(crate) fn new(grammar: Grammar, vocab: &'a TokenBytes, stop_ids: &'a [u32]) -> Self {
        Constraint {
            grammar,
            vocab,
            stop_ids,
            state: JsonState::new(),
            work: Cell::new(STEP_WORK),
            overrun: Cell::new(None),
        }
    }

    /// Starts choosing the next token: the work of [`Constraint::allows`] and
    /// [`Constraint::allowed`] from here on is charged to a fresh [`STEP_WORK`].
    pub(crate) fn begin_token(&self) {
        self.work.set(STEP_WORK);
    }

    /// Whether the answer so far is a whole value (it may end here).
    pub(crate) fn is_complete(&self) -> bool {
        self.state.is_complete(&self.grammar)
    }

    /// `state` after `bytes`, charged to this token's work; fails once a bound is passed (then
    /// or before).
    fn advanced(&self, state: &JsonState, bytes: &[u8]) -> Result<JsonState, Overrun> {
        if let Some(overrun) = self.overrun.get() {
            return Err(overrun);
        }
        let mut work = self.work.get();
        let result = state.advanced(&self.grammar, bytes, &mut work);
        self.work.set(work);
        result.inspect_err(|&overrun| self.overrun.set(Some(overrun)))
    }

    /// Whether `token` may come next. False for every token once a step went past its bounds
    /// (see [`Constraint::within_bounds`]).
    pub(crate) fn allows(&self, token: u32) -> bool {
        if self.stop_ids.contains(&token) {
            return self.is_complete();
        }
        let bytes = self.vocab.get(token);
        !bytes.is_empty()
            && self
                .advanced(&self.state, bytes)
                .is_ok_and(|state| !state.is_dead())
    }

    /// Every token that may come next, by scanning the vocabulary in byte order: the state
    /// after each shared beginning is kept for the tokens that follow, and tokens whose
    /// beginning is already refused cost nothing more. Fails when the scan goes past the
    /// bounds of one token's work.
    pub(crate) fn allowed(&self) -> Result<Vec<u32>, Error> {
        let mut allowed = Vec::new();
        // states[d]: the state after the first d bytes of the previous token.
        let mut states = vec![self.state.clone()];
        let mut previous: &[u8] = &[];
        for &id in &self.vocab.sorted {
            if self.stop_ids.contains(&id) {
                continue; // decided by completeness below, not by its text
            }
            let bytes = self.vocab.get(id);
            let shared = previous
                .iter()
                .zip(bytes)
                .take_while(|(a, b)| a == b)
                .count();
            states.truncate(shared.min(states.len() - 1) + 1);
            while states.len() <= bytes.len() {
                let last = &states[states.len() - 1];
                if last.is_dead() {
                    break;
                }
                let byte = &bytes[states.len() - 1..states.len()];
                let next = self.advanced(last, byte).map_err(overrun_error)?;
                states.push(next);
            }
            if states.len() == bytes.len() + 1 && !states[bytes.len()].is_dead() {
                allowed.push(id);
            }
            previous = bytes;
        }
        if self.is_complete() {
            allowed.extend_from_slice(self.stop_ids);
        }
        Ok(allowed)
    }

    /// Whether every step so far stayed within its bounds; else the error that ends the
    /// answer, saying which bound and what to change.
    pub(crate) fn within_bounds(&self) -> Result<(), Error> {
        match self.overrun.get() {
            None => Ok(()),
            Some(overrun) => Err(overrun_error(overrun)),
        }
    }

    /// Moves past `token`, which [`Constraint::allows`] allowed (with work of its own).
    pub(crate) fn accept(&mut self, token: u32) {
        if !self.stop_ids.contains(&token) {
            self.begin_token();
            // Within the bounds, as it was when allowed; should it not be, the overrun stays
            // and the next choice reports it.
            if let Ok(state) = self.advanced(&self.state, self.vocab.get(token)) {
                self.state = state;
            }
        }
    }
}

/// The error that ends an answer whose next token went past `overrun`: which bound, and what
/// to change.
fn overrun_error(overrun: Overrun) -> Error {
    let reason = match overrun {
        Overrun::Threads => format!(
            "the answer could be read more than {MAX_THREADS} ways at once under the schema \
             (its \"anyOf\" alternatives begin alike and nest), so Hearth stopped it; make the \
             alternatives differ in their first character or key, or nest them less"
        ),
        Overrun::Work => format!(
            "choosing one token under the schema took more than {STEP_WORK} steps of work \
             (the answer nests too deeply, or the schema's \"anyOf\" alternatives begin \
             alike), so Hearth stopped it; simplify the schema"
        ),
    };
    Error::ResponseFormat { reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A vocabulary of every single byte (ids 0 to 255), a few longer pieces, and a special
    /// token that writes nothing (the stop id).
    fn vocab() -> TokenBytes {
        let mut bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for piece in [
            "{\"", "\":", "\"}", "true", "tr", "name", "na", "\\u00e9", "é", " \n",
        ] {
            bytes.push(piece.as_bytes().to_vec());
        }
        bytes.push(Vec::new());
        TokenBytes::from_bytes(bytes)
    }

    fn schema() -> Grammar {
        Grammar::from_schema(&json!({
            "type": "object",
            "properties": {"name": {"type": "boolean"}},
            "required": ["name"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    fn id(vocab: &TokenBytes, text: &str) -> u32 {
        (0..vocab.bytes.len() as u32)
            .find(|&t| vocab.get(t) == text.as_bytes())
            .unwrap_or_else(|| panic!("no token {text:?}"))
    }

    #[test]
    fn the_scan_finds_exactly_the_tokens_allowed_one_by_one() {
        let vocab = vocab();
        let stop = [vocab.bytes.len() as u32 - 1];
        let mut constraint = Constraint::new(schema(), &vocab, &stop);
        for piece in ["{\"", "na", "m", "e", "\":", "tr", "u", "e", "}"] {
            let mut scanned = constraint.allowed().unwrap();
            scanned.sort_unstable();
            let one_by_one: Vec<u32> = (0..vocab.bytes.len() as u32)
                .filter(|&t| constraint.allows(t))
                .collect();
            assert_eq!(scanned, one_by_one, "before {piece:?}");
            let token = id(&vocab, piece);
            assert!(scanned.contains(&token), "{piece:?}");
            constraint.accept(token);
        }
        assert!(constraint.is_complete());
    }

    #[test]
    fn the_stop_id_is_allowed_exactly_when_the_value_is_complete() {
        let vocab = vocab();
        let stop = [vocab.bytes.len() as u32 - 1];
        let mut constraint = Constraint::new(schema(), &vocab, &stop);
        assert!(!constraint.allows(stop[0]));
        for piece in ["{\"", "name", "\":", "true"] {
            constraint.accept(id(&vocab, piece));
            assert!(!constraint.allows(stop[0]), "after {piece:?}");
        }
        constraint.accept(id(&vocab, "}"));
        assert!(constraint.is_complete());
        assert_eq!(
            constraint.allowed().unwrap(),
            stop,
            "only the stop id after the value"
        );
    }

    #[test]
    fn tokens_may_split_a_character() {
        let vocab = TokenBytes::from_bytes(vec![
            b"\"".to_vec(),
            vec![0xC3],
            vec![0xA9, b'"'],
            vec![0xA9],
        ]);
        let grammar = Grammar::from_schema(&json!({"type": "string"})).unwrap();
        let mut constraint = Constraint::new(grammar, &vocab, &[]);
        constraint.accept(0);
        assert_eq!(
            constraint.allowed().unwrap(),
            [0, 1],
            "a quote or the first half of é"
        );
        constraint.accept(1);
        let mut allowed = constraint.allowed().unwrap();
        allowed.sort_unstable();
        assert_eq!(allowed, [2, 3], "only the second half may follow");
        constraint.accept(2);
        assert!(constraint.is_complete());
    }

    #[test]
    fn p13_a_choice_past_its_bounds_ends_with_a_plain_error() {
        // Any of 64 different arrays of the same: after "[", a second "[" would be 4,096
        // readings.
        let alternatives: Vec<serde_json::Value> = (1..=64)
            .map(|max| json!({"type": "array", "items": {"$ref": "#/$defs/s"}, "maxItems": max}))
            .collect();
        let grammar = Grammar::from_schema(
            &json!({"$defs": {"s": {"anyOf": alternatives}}, "$ref": "#/$defs/s"}),
        )
        .unwrap();
        let vocab = vocab();
        let mut constraint = Constraint::new(grammar, &vocab, &[]);
        constraint.begin_token();
        assert!(constraint.allows(id(&vocab, "[")));
        constraint.accept(id(&vocab, "["));
        constraint.begin_token();
        let started = std::time::Instant::now();
        let e = constraint.allowed().unwrap_err().to_string();
        assert!(e.contains("more than 256 ways at once"), "{e}");
        assert!(
            started.elapsed().as_millis() < 500,
            "{:?}",
            started.elapsed()
        );
        // From then on nothing is allowed, and the error stays.
        assert!(!constraint.allows(id(&vocab, "]")));
        assert!(constraint.within_bounds().is_err());
    }

    #[test]
    fn an_ordinary_choice_is_well_within_its_work() {
        let vocab = vocab();
        let constraint = Constraint::new(schema(), &vocab, &[]);
        constraint.begin_token();
        constraint.allowed().unwrap();
        let spent = STEP_WORK - constraint.work.get();
        assert!(spent < STEP_WORK / 1_000, "{spent}");
    }
}
