//! Structured output at the token level: which tokens keep an answer on its [`Grammar`], given
//! what each token writes ([`TokenBytes`], computed once per tokenizer). The sampler asks
//! [`Constraint::allows`] about its most likely candidates first and scans the whole vocabulary
//! ([`Constraint::allowed`]) only when none of them fits.

use crate::json_automaton::JsonState;
use crate::json_schema::Grammar;
use crate::tokenizer::TextTokenizer;

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
        let bytes: Vec<Vec<u8>> = tokenizer
            .token_bytes()
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
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
}

impl<'a> Constraint<'a> {
    pub(crate) fn new(grammar: Grammar, vocab: &'a TokenBytes, stop_ids: &'a [u32]) -> Self {
        Constraint {
            grammar,
            vocab,
            stop_ids,
            state: JsonState::new(),
        }
    }

    /// Whether the answer so far is a whole value (it may end here).
    pub(crate) fn is_complete(&self) -> bool {
        self.state.is_complete(&self.grammar)
    }

    /// Whether `token` may come next.
    pub(crate) fn allows(&self, token: u32) -> bool {
        if self.stop_ids.contains(&token) {
            return self.is_complete();
        }
        let bytes = self.vocab.get(token);
        !bytes.is_empty() && !self.state.advanced(&self.grammar, bytes).is_dead()
    }

    /// Every token that may come next, by scanning the vocabulary in byte order: the state
    /// after each shared beginning is kept for the tokens that follow, and tokens whose
    /// beginning is already refused cost nothing more.
    pub(crate) fn allowed(&self) -> Vec<u32> {
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
                let next = last.step(&self.grammar, bytes[states.len() - 1]);
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
        allowed
    }

    /// Moves past `token`, which [`Constraint::allows`] allowed.
    pub(crate) fn accept(&mut self, token: u32) {
        if !self.stop_ids.contains(&token) {
            self.state = self.state.advanced(&self.grammar, self.vocab.get(token));
        }
    }
}
