//! Scoring token sequences by a few logits at their last position (a reranker's "yes" and
//! "no"): each sequence runs from the cache's common prefix with the one before (a question's
//! shared prefix is computed once for all its passages), and only the asked logits are kept.
//!
//! A conversation live in the cache is kept in the KV store first, as a prompt of another
//! conversation would keep it (`kv_store`), and the scored sequences are not kept: the cache
//! is left empty, so the next turn starts from the kept conversation.

use std::ops::ControlFlow;

use super::Runner;
use crate::kv_store::common_prefix;
use crate::Error;

impl Runner {
    /// For each of `prompts`, the logits of `ids` at its last position, computed as a pass of
    /// the whole prompt from an empty context computes them. `after_each` is told how many
    /// prompts are done and can stop early: the logits of those are returned.
    pub(crate) fn last_logits_of(
        &mut self,
        prompts: &[Vec<u32>],
        ids: &[u32],
        after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let vocab = self.config.vocab_size;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::TokenOutOfRange {
                token: id,
                position: 0,
                vocab_size: vocab,
            });
        }
        let limit = self.cache.capacity();
        for prompt in prompts {
            self.check_tokens(prompt)?;
            if prompt.len() > limit {
                return Err(Error::ContextFull {
                    needed: prompt.len(),
                    limit,
                });
            }
        }
        let result = self.score(prompts, ids, after_each);
        self.cached.clear();
        result
    }

    fn score(
        &mut self,
        prompts: &[Vec<u32>],
        ids: &[u32],
        after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Vec<Vec<f32>>, Error> {
        let vocab = self.config.vocab_size;
        let mut scores = Vec::with_capacity(prompts.len());
        for (i, prompt) in prompts.iter().enumerate() {
            // The last token always runs: its logits are the answer.
            let last = prompt.len() - 1;
            let reuse = if i == 0 {
                (self.store).prepare(
                    &mut self.cache,
                    &mut self.cached,
                    &prompt[..last],
                    self.origin,
                )
            } else {
                let shared = common_prefix(&self.cached, &prompt[..last]);
                self.cached.truncate(shared);
                shared
            };
            self.feed(&prompt[reuse..], None, None)?;
            let row = &self.state.logits[self.state.logits.len() - vocab..];
            scores.push(ids.iter().map(|&id| row[id as usize]).collect());
            if after_each(i + 1).is_break() {
                break;
            }
        }
        Ok(scores)
    }
}
