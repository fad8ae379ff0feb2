//! Running token ids through the model: prefill in chunks, reuse of the cached prefix, the decode
//! loop with its stop conditions and timings, and speculative decoding: a draft of the next
//! tokens (`draft`) fed with the last token in one pass, kept while the model agrees, the cache
//! rewound past the first token it does not. Each token still meets the stop conditions one at
//! a time, as plain decoding does.

use std::ops::ControlFlow;
use std::time::Instant;

use q4nx::ModelConfig;
use serde::{Deserialize, Serialize};

use crate::constraint::Constraint;
use crate::cpu::CpuContext;
use crate::draft::Drafter;
use crate::json_schema::ResponseFormat;
use crate::kv_cache::{KvCache, KvPrecision};
use crate::kv_store::{self, KvStore};
use crate::sampler::{sample, sample_allowed, Rng, SamplingParams};
use crate::transformer::{
    forward, last_token_embedding, Logits, RunState, TransformerWeights, MAX_CHUNK,
};
use crate::Error;

mod scoring;

self_cell::self_cell!(
    /// The memory-mapped weight file and the model's view of it (borrowed tensors).
    pub(crate) struct LoadedWeights {
        owner: q4nx::Weights,
        #[covariant]
        dependent: TransformerWeights,
    }
);

/// What to generate and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatOptions {
    /// How each token is chosen.
    pub sampling: SamplingParams,
    /// Stop after this many generated tokens. By default, 1024.
    pub max_tokens: usize,
    /// Passed to the chat template as `enable_thinking` when set (Qwen3-style reasoning switch).
    /// By default, unset.
    pub enable_thinking: Option<bool>,
    /// Speculative decoding by prompt lookup: up to 8 tokens copied from earlier in the
    /// conversation (`draft`) are verified in one pass with the next token, which reads the
    /// weights once for all of them. The answer is the same token for token, greedy or sampled
    /// with a seed, since a pass of several tokens computes each one's logits bit for bit as a
    /// pass of one does and each row is sampled with the random numbers plain decoding would
    /// use there (a draft is kept when it is the token drawn: with probability p(draft), the
    /// standard acceptance rule for a draft of one certain token). `Some(true)` drafts
    /// wherever a draft is found, `Some(false)` never; by default, unset, it drafts while the
    /// passes show it pays (`draft::Payoff`).
    pub speculative: Option<bool>,
    /// The shape the answer must have: with a JSON format, only tokens that keep the answer
    /// valid JSON (matching the schema) are chosen, and it ends right after the value. Drafts
    /// are verified under the same rule, so speculative decoding keeps it. By default, free
    /// text.
    pub format: ResponseFormat,
}

impl Default for ChatOptions {
    fn default() -> Self {
        ChatOptions {
            sampling: SamplingParams::default(),
            max_tokens: 1024,
            enable_thinking: None,
            speculative: None,
            format: ResponseFormat::Text,
        }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model wrote an end-of-sequence or end-of-turn token.
    EndOfTurn,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The caller's callback asked to stop.
    Cancelled,
    /// The context (KV cache) has no room for another token.
    ContextFull,
}

/// Counts and timings of one generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationStats {
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Of those, the tokens run through the model; the others' keys and values were already
    /// computed (the prefix the cache or the KV store held, see `kv_store`). At least 1: the
    /// last prompt token always runs, since its logits choose the first new token.
    #[serde(default)]
    pub prefilled_tokens: usize,
    /// Seconds spent running the prompt through the model (only the part not already cached).
    pub prefill_secs: f64,
    /// Seconds from the request (before templating and tokenizing, for chat) to the first
    /// generated token.
    pub ttft_secs: f64,
    /// Tokens generated, including a final end-of-turn token.
    pub generated_tokens: usize,
    /// Seconds from the first generated token to the last; the decode rate is
    /// `(generated_tokens - 1) / decode_secs`.
    pub decode_secs: f64,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Passes that verified drafts (speculative decoding; the other decode steps ran one token).
    #[serde(default)]
    pub draft_passes: usize,
    /// Tokens drafted in those passes.
    #[serde(default)]
    pub drafted_tokens: usize,
    /// Drafts the model agreed with, each generated without a pass of its own.
    #[serde(default)]
    pub accepted_drafts: usize,
}

/// How far a turn's prompt has been read: `done` of the `total` tokens this turn runs through
/// the model (the part not already in the cache; a reused prefix counts in neither). Reported
/// at 0 before the first chunk and after each chunk the prefill runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PrefillProgress {
    /// Tokens read so far.
    pub done: usize,
    /// Tokens to read.
    pub total: usize,
}

impl GenerationStats {
    /// Decode speed in tokens per second (tokens after the first over the decode time), if any.
    pub fn decode_tokens_per_sec(&self) -> Option<f64> {
        (self.generated_tokens > 1 && self.decode_secs > 0.0)
            .then(|| (self.generated_tokens - 1) as f64 / self.decode_secs)
    }
}

/// The computing half of a model: weights, buffers, KV cache and what the cache holds, and the
/// threads and kernel level it computes with.
pub(crate) struct Runner {
    pub(crate) config: ModelConfig,
    pub(crate) weights: LoadedWeights,
    pub(crate) cpu: CpuContext,
    state: RunState,
    cache: KvCache,
    /// The tokens whose keys and values are in the cache, position by position.
    cached: Vec<u32>,
    /// The keys and values of sequences the cache held before, to start from again.
    store: KvStore,
    /// Whose prompts come now: they reuse only this origin's sequences (see `kv_store`).
    origin: kv_store::Origin,
}

impl Runner {
    pub(crate) fn new(
        config: ModelConfig,
        weights: LoadedWeights,
        cpu: CpuContext,
        context: usize,
        precision: KvPrecision,
        store_budget: Option<u64>,
    ) -> Result<Self, Error> {
        let cache = KvCache::for_model(&config, context, precision)?;
        let store_budget = store_budget.unwrap_or_else(|| {
            let available = crate::weights_memory::available_memory();
            kv_store::default_budget(cache.size_bytes(), available)
        });
        tracing::debug!(
            bytes = cache.size_bytes(),
            context,
            ?precision,
            store_budget,
            "allocated the KV cache"
        );
        Ok(Runner {
            state: RunState::new(&config, context),
            config,
            weights,
            cpu,
            cache,
            cached: Vec::new(),
            store: KvStore::new(store_budget),
            origin: 0,
        })
    }

    /// Bytes the KV cache occupies.
    pub(crate) fn kv_cache_bytes(&self) -> usize {
        self.cache.size_bytes()
    }

    /// The most bytes the KV store keeps.
    pub(crate) fn kv_store_budget(&self) -> u64 {
        self.store.budget()
    }

    /// Sets the most bytes the KV store keeps (0 keeps nothing), dropping what is beyond it.
    pub(crate) fn set_kv_store_budget(&mut self, bytes: u64) {
        self.store.set_budget(bytes);
    }

    /// Sets whose prompts come from now on: they reuse only sequences of `origin`.
    pub(crate) fn set_kv_origin(&mut self, origin: kv_store::Origin) {
        self.origin = origin;
    }

    /// Bytes the KV store's kept sequences occupy now.
    pub(crate) fn kv_store_bytes(&self) -> u64 {
        self.store.size_bytes()
    }

    /// Forgets what the cache holds (the next feed starts at position 0; the KV store keeps
    /// what it holds).
    pub(crate) fn reset(&mut self) {
        self.cached.clear();
    }

    /// The last fed token's logits.
    #[cfg(test)]
    pub(crate) fn last_logits(&self) -> &[f32] {
        let vocab = self.config.vocab_size;
        &self.state.logits[self.state.logits.len() - vocab..]
    }

    /// Rejects an empty prompt and ids outside the vocabulary.
    pub(crate) fn check_tokens(&self, tokens: &[u32]) -> Result<(), Error> {
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        let vocab_size = self.config.vocab_size;
        match tokens.iter().position(|&t| t as usize >= vocab_size) {
            Some(position) => Err(Error::TokenOutOfRange {
                token: tokens[position],
                position,
                vocab_size,
            }),
            None => Ok(()),
        }
    }

    /// Runs `tokens` at positions `self.cached.len()..`, appending them to the cache. With
    /// `all_rows`, every token's logits are appended to it; otherwise only the last token's
    /// logits are left in the run state. `on_chunk` is told after each chunk how many of
    /// `tokens` have run; when it breaks, feeding stops there (the cache holds what ran).
    pub(crate) fn feed(
        &mut self,
        tokens: &[u32],
        mut all_rows: Option<&mut Vec<Vec<f32>>>,
        mut on_chunk: Option<&mut dyn FnMut(usize) -> ControlFlow<()>>,
    ) -> Result<(), Error> {
        let start = self.cached.len();
        let limit = self.cache.capacity();
        if start + tokens.len() > limit {
            return Err(Error::ContextFull {
                needed: start + tokens.len(),
                limit,
            });
        }
        let vocab = self.config.vocab_size;
        let chunks = tokens.chunks(MAX_CHUNK);
        let last_chunk = chunks.len() - 1;
        for (i, chunk) in chunks.enumerate() {
            let mode = match (&all_rows, i == last_chunk) {
                (Some(_), _) => Logits::All,
                (None, true) => Logits::Last,
                (None, false) => Logits::None,
            };
            let position = self.cached.len();
            let weights = self.weights.borrow_dependent();
            forward(
                &self.config,
                weights,
                &mut self.state,
                &mut self.cache,
                &self.cpu,
                chunk,
                position,
                mode,
            );
            self.cached.extend_from_slice(chunk);
            if let Some(rows) = all_rows.as_deref_mut() {
                rows.extend(self.state.logits.chunks_exact(vocab).map(<[f32]>::to_vec));
            }
            let done = self.cached.len() - start;
            if on_chunk.as_mut().is_some_and(|f| f(done).is_break()) {
                break;
            }
        }
        Ok(())
    }

    /// Logits of every position of `tokens`, computed from an empty context.
    pub(crate) fn logits(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>, Error> {
        self.check_tokens(tokens)?;
        self.reset();
        let mut rows = Vec::with_capacity(tokens.len());
        let result = self.feed(tokens, Some(&mut rows), None);
        result.map(|()| rows)
    }

    /// The L2-normalized final hidden state at the last of `tokens`, computed from an empty
    /// context (last-token pooling; the cache is overwritten and forgotten).
    pub(crate) fn last_token_embedding(&mut self, tokens: &[u32]) -> Result<Vec<f32>, Error> {
        self.check_tokens(tokens)?;
        let limit = self.cache.capacity();
        if tokens.len() > limit {
            return Err(Error::ContextFull {
                needed: tokens.len(),
                limit,
            });
        }
        self.reset();
        Ok(last_token_embedding(
            &self.config,
            self.weights.borrow_dependent(),
            &mut self.state,
            &mut self.cache,
            &self.cpu,
            tokens,
        ))
    }

    /// Generates after `prompt`, reusing the longest prefix already computed: in the cache, or
    /// in the KV store (see `kv_store`). `on_reading` follows the prefill of the rest
    /// ([`PrefillProgress`]) and can stop it (nothing is generated then, and the stop reason is
    /// `Cancelled`). `on_token` sees every generated id (a final end-of-turn id included) and
    /// can stop generation.
    /// `started` is when the caller received the request (for time to first token). With a
    /// `constraint`, every token is one it allows, and generation ends when it allows none
    /// after a complete answer (a model without stop ids).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn generate(
        &mut self,
        prompt: &[u32],
        options: &ChatOptions,
        stop_ids: &[u32],
        started: Instant,
        mut constraint: Option<&mut Constraint<'_>>,
        on_reading: &mut dyn FnMut(PrefillProgress) -> ControlFlow<()>,
        on_token: &mut dyn FnMut(u32) -> ControlFlow<()>,
    ) -> Result<(Vec<u32>, GenerationStats), Error> {
        self.check_tokens(prompt)?;
        options.sampling.validate()?;
        let limit = self.cache.capacity();
        if prompt.len() > limit {
            return Err(Error::ContextFull {
                needed: prompt.len(),
                limit,
            });
        }
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len(),
            prefilled_tokens: 0,
            prefill_secs: 0.0,
            ttft_secs: 0.0,
            generated_tokens: 0,
            decode_secs: 0.0,
            stop_reason: StopReason::MaxTokens,
            draft_passes: 0,
            drafted_tokens: 0,
            accepted_drafts: 0,
        };
        if options.max_tokens == 0 {
            return Ok((Vec::new(), stats));
        }

        // Prefill what was not already computed; the last prompt token always runs, since its
        // logits choose the first new token.
        let last = prompt.len() - 1;
        let reuse = (self.store).prepare(
            &mut self.cache,
            &mut self.cached,
            &prompt[..last],
            self.origin,
        );
        stats.prefilled_tokens = prompt.len() - reuse;
        let prefill_start = Instant::now();
        let total = prompt.len() - reuse;
        let mut read = |done| on_reading(PrefillProgress { done, total });
        let mut stopped = read(0).is_break();
        if !stopped {
            self.feed(
                &prompt[reuse..],
                None,
                Some(&mut |done| {
                    let flow = read(done);
                    stopped = flow.is_break();
                    flow
                }),
            )?;
        }
        stats.prefill_secs = prefill_start.elapsed().as_secs_f64();
        if stopped {
            // Only what was read before the stop ran (and stays cached for the next turn).
            stats.prefilled_tokens = self.cached.len() - reuse;
            stats.stop_reason = StopReason::Cancelled;
            return Ok((Vec::new(), stats));
        }
        tracing::debug!(
            reused = reuse,
            prefilled = prompt.len() - reuse,
            "prefill done"
        );

        let mut drafter = Drafter::new(options.speculative);
        let mut rng = Rng::new(options.sampling.seed);
        let mut history = prompt.to_vec(); // what the repetition penalty and the drafts read
        let mut generated = Vec::new();
        let mut first_token_at = None;
        // The drafts of the last pass (none after a plain step) and that pass's logits: row i
        // chooses the token drafts[i] guessed; the last row, the token after every draft.
        let mut drafts: Vec<u32> = Vec::new();
        let mut rows: Vec<Vec<f32>> = Vec::new();
        'decode: loop {
            // Where plain decoding would be: the cache without this pass's drafts.
            let position = self.cached.len() - drafts.len();
            let mut next = 0;
            #[allow(clippy::needless_range_loop)] // i indexes the rows, drafts and positions
            for i in 0..=drafts.len() {
                let logits = match drafts.is_empty() {
                    true => &mut self.state.logits[..],
                    false => &mut rows[i][..],
                };
                // The same context and random numbers as plain decoding at this position.
                let token = match constraint.as_deref_mut() {
                    None => sample(logits, &history, &options.sampling, &mut rng),
                    Some(c) => {
                        // Past the constraint's bounds of work, the answer ends with its error.
                        let chosen =
                            sample_allowed(logits, &history, &options.sampling, &mut rng, c)
                                .inspect_err(|_| self.cached.truncate(position + i))?;
                        match chosen {
                            Some(token) => {
                                c.accept(token);
                                token
                            }
                            None => {
                                self.cached.truncate(position + i);
                                if !c.is_complete() {
                                    return Err(Error::ResponseFormat {
                                        reason: "no token of the model's vocabulary continues the \
                                             answer; use another model or a simpler schema"
                                            .into(),
                                    });
                                }
                                stats.stop_reason = StopReason::EndOfTurn;
                                break 'decode;
                            }
                        }
                    }
                };
                let now = Instant::now();
                first_token_at.get_or_insert_with(|| {
                    stats.ttft_secs = now.duration_since(started).as_secs_f64();
                    now
                });
                generated.push(token);
                history.push(token);
                let stop = if on_token(token).is_break() {
                    Some(StopReason::Cancelled)
                } else if stop_ids.contains(&token) {
                    Some(StopReason::EndOfTurn)
                } else if generated.len() >= options.max_tokens {
                    Some(StopReason::MaxTokens)
                } else if position + i >= limit {
                    Some(StopReason::ContextFull)
                } else {
                    None
                };
                // The cache keeps what plain decoding would have fed: the drafts kept so far.
                if let Some(reason) = stop {
                    self.cached.truncate(position + i);
                    stats.stop_reason = reason;
                    break 'decode;
                }
                if drafts.get(i) != Some(&token) {
                    self.cached.truncate(position + i);
                    next = token;
                    break;
                }
                stats.accepted_drafts += 1;
            }
            drafter.pass_ended(drafts.len(), self.cached.len() - position);
            // The next pass: the new token and the drafts that fit the cache and max_tokens.
            let room =
                (limit - self.cached.len() - 1).min(options.max_tokens - generated.len() - 1);
            drafts = drafter.next(&history, room);
            if drafts.is_empty() {
                self.feed(&[next], None, None)?;
            } else {
                stats.draft_passes += 1;
                stats.drafted_tokens += drafts.len();
                rows.clear();
                let tokens: Vec<u32> = std::iter::once(next)
                    .chain(drafts.iter().copied())
                    .collect();
                self.feed(&tokens, Some(&mut rows), None)?;
            }
        }
        stats.generated_tokens = generated.len();
        stats.decode_secs = first_token_at.map_or(0.0, |t| t.elapsed().as_secs_f64());
        Ok((generated, stats))
    }
}
