//! What was computed for recent sequences, kept: the keys and values of conversations the
//! runner has left, so that coming back to one prefills only what changed.
//!
//! The KV cache holds one sequence, the live one, and a prompt that starts with part of it
//! runs only the rest (the next turn, a regenerated answer, an edited last message). A prompt
//! that keeps less than half of the live sequence moves to another one (another conversation):
//! before its rows are overwritten, the live sequence's rows are copied out, once, into the
//! store. A prompt that shares a longer prefix with a kept sequence than with the live one
//! starts from that sequence's rows, copied back. Which prefix is kept is decided on the token
//! ids alone, and a row is a pure function of the tokens up to it (a pass computes each token
//! as a pass of that token alone does, see `runner`), so an answer is the same, bit for bit,
//! whether its prompt was prefilled, continued or restored.
//!
//! This is llama.cpp server's host-memory prompt cache (idle slots saved on a switch, the
//! entry with the longest common prefix loaded back) rather than vLLM's shared blocks: Hearth
//! runs one sequence at a time in one contiguous cache, so a copy per switch (a few
//! milliseconds against seconds of prefill) is the whole mechanism, and whole prefixes keep the
//! bookkeeping to a list. Two kept sequences that share a prefix (a document attached to two
//! conversations) each hold their own copy of it.
//!
//! Memory is bounded by a budget in bytes ([`default_budget`]): the least recently used
//! sequences are dropped to make room, one larger than the budget is not kept, and a kept
//! sequence that another one extends is dropped as redundant.
//!
//! Sequences are kept apart by origin (an [`Origin`] the caller sets: the app's own
//! conversations, each client of a server): a prompt continues the live sequence, or starts
//! from a kept one, only when they have its origin, so how fast a prompt is read cannot tell
//! one origin whether another's conversation began the same way. Origin 0 is the default:
//! a caller that never sets one has one store, as before.

use crate::kv_cache::{KvCache, KvRows};

/// Full contexts of rows the store holds by default: four conversations as long as the context,
/// more of shorter ones.
pub const DEFAULT_KEPT_CONTEXTS: usize = 4;

/// The store's default budget for a live cache of `cache_bytes`: [`DEFAULT_KEPT_CONTEXTS`] times
/// it, at most a quarter of the `available` memory (`MemAvailable` when the model loads; unknown
/// takes no bound). Nothing is allocated until a sequence is kept.
pub fn default_budget(cache_bytes: usize, available: Option<u64>) -> u64 {
    let contexts = (cache_bytes as u64).saturating_mul(DEFAULT_KEPT_CONTEXTS as u64);
    available.map_or(contexts, |free| contexts.min(free / 4))
}

/// Whose prompts a sequence holds: prompts of one origin reuse only that origin's sequences.
pub type Origin = u64;

/// A sequence the runner left: its origin, its tokens, and their keys and values position by
/// position.
#[derive(Debug)]
struct Kept {
    origin: Origin,
    tokens: Vec<u32>,
    rows: KvRows,
}

/// Kept sequences within a byte budget, least recently used first.
#[derive(Debug)]
pub(crate) struct KvStore {
    budget: u64,
    kept: Vec<Kept>,
    /// The origin of the live sequence in the cache.
    live: Origin,
}

impl KvStore {
    /// An empty store that keeps at most `budget` bytes of rows.
    pub(crate) fn new(budget: u64) -> Self {
        KvStore {
            budget,
            kept: Vec::new(),
            live: 0,
        }
    }

    /// The most bytes it keeps.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Sets the most bytes it keeps, dropping the least recently used sequences beyond it.
    pub(crate) fn set_budget(&mut self, budget: u64) {
        self.budget = budget;
        self.make_room(0);
    }

    /// Bytes its kept rows occupy.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.kept.iter().map(|k| k.rows.size_bytes() as u64).sum()
    }

    /// Makes the live `cache`, holding the tokens `live`, ready for `prompt` of `origin`:
    /// keeps the live sequence when the prompt leaves it, starts from a kept one of `origin`
    /// when that shares more of the prompt, and returns how many positions of the prompt the
    /// cache now holds (`live` is truncated to them). The caller runs the rest. A live
    /// sequence of another origin is left, whatever it shares.
    pub(crate) fn prepare(
        &mut self,
        cache: &mut KvCache,
        live: &mut Vec<u32>,
        prompt: &[u32],
        origin: Origin,
    ) -> usize {
        let continued = if origin == self.live {
            common_prefix(live, prompt)
        } else {
            0
        };
        // The kept sequence of this origin sharing the most, the most recently used among
        // equals; taken out first, so keeping the live one cannot drop it to make room.
        let best = (self.kept.iter().enumerate())
            .filter(|(_, k)| k.origin == origin)
            .map(|(i, k)| (common_prefix(&k.tokens, prompt), i))
            .max()
            .filter(|&(shared, _)| shared > continued)
            .map(|(shared, i)| (self.kept.remove(i), shared));
        if leaves(continued, live.len()) {
            self.keep(live, cache);
        }
        self.live = origin;
        let Some((kept, shared)) = best else {
            live.truncate(continued);
            return continued;
        };
        cache.load_rows(&kept.rows, shared);
        live.clear();
        live.extend_from_slice(&prompt[..shared]);
        tracing::debug!(
            restored = shared,
            of = kept.tokens.len(),
            "started from a kept sequence"
        );
        // A kept sequence the prompt continues lives on in the cache; one it leaves stays kept.
        if leaves(shared, kept.tokens.len()) {
            self.push(kept);
        }
        shared
    }

    /// Copies the rows of `tokens` out of `cache` (they are its first positions) into the
    /// store, unless a kept sequence already holds them or they exceed the budget.
    fn keep(&mut self, tokens: &[u32], cache: &KvCache) {
        let origin = self.live;
        let held = |k: &Kept| k.origin == origin && k.tokens.starts_with(tokens);
        if tokens.is_empty() || self.kept.iter().any(held) {
            return;
        }
        let bytes = cache.rows_bytes(tokens.len()) as u64;
        if bytes > self.budget {
            tracing::debug!(
                tokens = tokens.len(),
                bytes,
                budget = self.budget,
                "sequence larger than the KV store's budget, not kept"
            );
            return;
        }
        self.make_room(bytes);
        match cache.copy_rows(tokens.len()) {
            Ok(rows) => {
                tracing::debug!(tokens = tokens.len(), bytes, "kept the live sequence");
                self.push(Kept {
                    origin,
                    tokens: tokens.to_vec(),
                    rows,
                });
            }
            // Kept rows only save time: without memory for them the sequence is recomputed.
            Err(e) => tracing::warn!(bytes, "could not keep the live sequence's KV rows: {e}"),
        }
    }

    /// Adds `kept` as the most recently used, dropping the sequences it extends (redundant)
    /// and the least recently used ones it needs room from; not at all when it exceeds the
    /// budget.
    fn push(&mut self, kept: Kept) {
        let bytes = kept.rows.size_bytes() as u64;
        if bytes > self.budget {
            return;
        }
        self.kept
            .retain(|k| k.origin != kept.origin || !kept.tokens.starts_with(&k.tokens));
        self.make_room(bytes);
        self.kept.push(kept);
    }

    /// Drops the least recently used sequences until `bytes` more fit in the budget.
    fn make_room(&mut self, bytes: u64) {
        while !self.kept.is_empty() && self.size_bytes() + bytes > self.budget {
            let dropped = self.kept.remove(0);
            tracing::debug!(tokens = dropped.tokens.len(), "dropped a kept sequence");
        }
    }
}

/// Whether a prompt that shares `shared` positions with a sequence of `len` leaves it: it keeps
/// less than half of it (a prompt that keeps more continues it, overwriting only the end of its
/// last turn).
fn leaves(shared: usize, len: usize) -> bool {
    shared * 2 < len
}

/// How many leading tokens `a` and `b` share.
pub(crate) fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_budget_is_four_caches_at_most_a_quarter_of_the_free_memory() {
        assert_eq!(default_budget(100 << 20, Some(16 << 30)), 400 << 20);
        assert_eq!(default_budget(100 << 20, Some(1 << 30)), 256 << 20);
        assert_eq!(
            default_budget(100 << 20, None),
            400 << 20,
            "unknown: no bound"
        );
    }

    #[test]
    fn a_prompt_leaves_a_sequence_it_keeps_less_than_half_of() {
        assert!(leaves(0, 1));
        assert!(leaves(49, 100));
        assert!(!leaves(50, 100), "half continues it");
        assert!(!leaves(0, 0), "an empty cache is not left");
    }
}
