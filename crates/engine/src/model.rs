//! A loaded model: chat, generation from token ids, and logits, with what the model is
//! ([`ModelInfo`]) and how it runs (threads, kernel level, memory) for display. [`load`] reads
//! the model folder (config, weights, tokenizer, chat template, stop tokens) into one.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use q4nx::ModelConfig;
use serde::{Deserialize, Serialize};

use crate::chat_template::{ChatMessage, ChatTemplate};
use crate::constraint::{Constraint, TokenBytes};
use crate::cpu::CpuContext;
use crate::harmony::ShownText;
use crate::runner::{ChatOptions, GenerationStats, PrefillProgress, Runner};
use crate::tokenizer::TextTokenizer;
use crate::weights_memory::WeightsMemory;
use crate::Error;

mod continuing;
mod load;
mod scoring;

pub use load::{LoadOptions, DEFAULT_CONTEXT_LENGTH};

/// What a loaded model is, for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model folder's name.
    pub name: String,
    /// Architecture family: `"llama"` or `"qwen3"`.
    pub family: String,
    /// Number of weights (a tied head counted once).
    pub parameter_count: usize,
    /// Positions the KV cache holds.
    pub context_length: usize,
    /// `"q4nx"` or `"safetensors"`.
    pub weight_format: String,
    /// Whether the folder has a tokenizer (text in and out), not only token ids.
    pub has_tokenizer: bool,
    /// Whether the folder has a chat template.
    pub has_chat_template: bool,
    /// Where it runs: `"cpu"`.
    pub backend: String,
    /// Which SIMD level the model's kernels run at (e.g. `"avx2"`, `"scalar"`).
    pub kernel: String,
}

/// A model loaded and ready to generate. Generation needs `&mut self`: one conversation at a
/// time per loaded model.
pub struct Model {
    dir: PathBuf,
    info: ModelInfo,
    runner: Runner,
    tokenizer: Option<TextTokenizer>,
    template: Option<ChatTemplate>,
    stop_ids: Vec<u32>,
    weights_memory: WeightsMemory,
    /// What each token writes, computed the first time an answer is constrained.
    token_bytes: OnceLock<TokenBytes>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("dir", &self.dir)
            .field("info", &self.info)
            .field("stop_ids", &self.stop_ids)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// What this model is.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The model's configuration (`config.json`).
    pub fn config(&self) -> &ModelConfig {
        &self.runner.config
    }

    /// Whether this model's attention multiplies in BF16 ([`LoadOptions::bf16_attention`]):
    /// a quantized model whose context asks for it at a level that has it.
    pub fn bf16_attention(&self) -> bool {
        self.info.weight_format == "q4nx" && self.runner.cpu.bf16_attention()
    }

    /// Where attention's AVX-512 f32 kernels broadcast each query or weight value from,
    /// `"register"` or `"memory"`, as set for a benchmark or as the probe chose
    /// (`cpu::attention::broadcast_in_register`); None where those kernels do not run (another
    /// level, or BF16 products).
    pub fn attention_broadcast(&self) -> Option<&'static str> {
        let cpu = &self.runner.cpu;
        let avx512 = crate::cpu::attention::runs_avx512_kernels(cpu.level());
        (avx512 && !self.bf16_attention()).then(|| {
            match crate::cpu::attention::broadcast_in_register(cpu) {
                true => "register",
                false => "memory",
            }
        })
    }

    /// Threads this model's kernels run on (its own pool).
    pub fn threads(&self) -> usize {
        self.runner.cpu.threads()
    }

    /// Of those, the threads taking part now (fewer while other programs keep CPUs busy).
    pub fn active_threads(&self) -> usize {
        self.runner.cpu.pool().active_threads()
    }

    /// Where the weights are: copied into huge pages, or read through the file map.
    pub fn weights_memory(&self) -> WeightsMemory {
        self.weights_memory
    }

    /// Bytes the KV cache occupies (allocated once, for the whole context).
    pub fn kv_cache_bytes(&self) -> usize {
        self.runner.kv_cache_bytes()
    }

    /// The most bytes the KV store keeps ([`LoadOptions::kv_store_bytes`]).
    pub fn kv_store_budget(&self) -> u64 {
        self.runner.kv_store_budget()
    }

    /// Sets the most bytes the KV store keeps, dropping the least recently used sequences
    /// beyond it (0 drops them all and keeps none from now on).
    pub fn set_kv_store_budget(&mut self, bytes: u64) {
        self.runner.set_kv_store_budget(bytes);
    }

    /// Bytes the KV store's kept sequences occupy now.
    pub fn kv_store_bytes(&self) -> u64 {
        self.runner.kv_store_bytes()
    }

    /// Sets whose prompts come from now on (the app's own conversations, one client of a
    /// server): a prompt reuses the computed prefix of an earlier one only when both have
    /// the same origin, so its timing says nothing of another origin's prompts. 0 until set.
    pub fn set_kv_origin(&mut self, origin: crate::KvOrigin) {
        self.runner.set_kv_origin(origin);
    }

    /// The ids that end generation: every eos id and end-of-turn token the model's files declare.
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop_ids
    }

    /// The tokenizer, if the folder has one.
    pub fn tokenizer(&self) -> Option<&TextTokenizer> {
        self.tokenizer.as_ref()
    }

    /// Token ids of `text` as a plain completion prompt (the tokenizer's own special tokens, e.g.
    /// a BOS, are added).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.require_tokenizer()?.encode(text, true)
    }

    /// The chat template rendered for `messages`, with the assistant's turn opened.
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        options: &ChatOptions,
    ) -> Result<String, Error> {
        let template = self
            .template
            .as_ref()
            .ok_or_else(|| Error::NoChatTemplate {
                dir: self.dir.clone(),
            })?;
        template.render(messages, true, options.enable_thinking)
    }

    /// Token ids of `messages` rendered through the chat template (as transformers'
    /// `apply_chat_template(..., add_generation_prompt=True)` tokenizes them), except that a
    /// special token's spelling inside a message is ordinary text ([`TextTokenizer::quote`]):
    /// only the template writes turn markers.
    pub fn tokenize_chat(
        &self,
        messages: &[ChatMessage],
        options: &ChatOptions,
    ) -> Result<Vec<u32>, Error> {
        let tokenizer = self.require_tokenizer()?;
        let text = self.render_chat(&quoted(tokenizer, messages), options)?;
        tokenizer.encode_prompt(&text)
    }

    /// Renders the chat template, prefills, decodes; `on_text` gets each complete UTF-8 piece and
    /// returns `ControlFlow::Break(())` to stop. Stops on every eos / end-of-turn id.
    pub fn chat(
        &mut self,
        messages: &[ChatMessage],
        options: &ChatOptions,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<GenerationStats, Error> {
        let started = Instant::now();
        let prompt = self.tokenize_chat(messages, options)?;
        self.stream_text(&prompt, options, started, &mut keep_reading, on_text)
    }

    /// Generates after the token ids `prompt` (already rendered and tokenized, e.g. by
    /// [`Model::tokenize_chat`]) and streams the decoded text like [`Model::chat`]; the time to
    /// first token counts from this call. `on_reading` follows the prefill of the part of the
    /// prompt not already cached, chunk by chunk, and can stop it.
    pub fn generate_text(
        &mut self,
        prompt: &[u32],
        options: &ChatOptions,
        on_reading: &mut dyn FnMut(PrefillProgress) -> ControlFlow<()>,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<GenerationStats, Error> {
        self.stream_text(prompt, options, Instant::now(), on_reading, on_text)
    }

    /// Continues `text` as plain text (no chat template), streaming like [`Model::chat`].
    pub fn complete(
        &mut self,
        text: &str,
        options: &ChatOptions,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<GenerationStats, Error> {
        let started = Instant::now();
        let prompt = self.tokenize(text)?;
        self.stream_text(&prompt, options, started, &mut keep_reading, on_text)
    }

    /// Generates after `prompt` and streams the decoded text (stop tokens are not shown).
    fn stream_text(
        &mut self,
        prompt: &[u32],
        options: &ChatOptions,
        started: Instant,
        on_reading: &mut dyn FnMut(PrefillProgress) -> ControlFlow<()>,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<GenerationStats, Error> {
        // Field borrows, not `require_tokenizer`: the runner is borrowed mutably below.
        let tokenizer = self.tokenizer.as_ref().ok_or_else(|| Error::NoTokenizer {
            dir: self.dir.clone(),
        })?;
        // A harmony model's channels become `<think>reasoning</think>answer` (see `harmony`).
        let mut stream = ShownText::after(tokenizer, prompt)?;
        let stop_ids = &self.stop_ids;
        let mut constraint = constraint(
            options,
            Some(tokenizer),
            &self.token_bytes,
            stop_ids,
            &self.dir,
        )?;
        let mut failure = None;
        let mut on_token = |token: u32| {
            if stop_ids.contains(&token) {
                return ControlFlow::Continue(());
            }
            match stream.step(token) {
                Ok(Some(text)) => on_text(&text),
                Ok(None) => ControlFlow::Continue(()),
                Err(e) => {
                    failure = Some(e);
                    ControlFlow::Break(())
                }
            }
        };
        let (_, stats) = self.runner.generate(
            prompt,
            options,
            stop_ids,
            started,
            constraint.as_mut(),
            on_reading,
            &mut on_token,
        )?;
        if let Some(e) = failure {
            return Err(e);
        }
        if let Some(tail) = stream.finish() {
            // Closing what an answer cut short left open; stopping changes nothing now.
            let _ = on_text(&tail);
        }
        Ok(stats)
    }

    /// Generates after the token ids `prompt`; `on_token` sees each generated id (a final stop
    /// id included) and returns `ControlFlow::Break(())` to stop.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        options: &ChatOptions,
        on_token: &mut dyn FnMut(u32) -> ControlFlow<()>,
    ) -> Result<(Vec<u32>, GenerationStats), Error> {
        let stop_ids = &self.stop_ids;
        let mut constraint = constraint(
            options,
            self.tokenizer.as_ref(),
            &self.token_bytes,
            stop_ids,
            &self.dir,
        )?;
        self.runner.generate(
            prompt,
            options,
            stop_ids,
            Instant::now(),
            constraint.as_mut(),
            &mut keep_reading,
            on_token,
        )
    }

    /// The logits of every position of `tokens` (one vocabulary-sized row each), computed from
    /// an empty context.
    pub fn logits(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>, Error> {
        self.runner.logits(tokens)
    }

    /// The final hidden state (after the last norm) at the last of `tokens`, L2-normalized,
    /// computed from an empty context without the head: a decoder embedding model's vector
    /// (last-token pooling; see [`crate::DecoderEmbedder`], which makes the tokens).
    pub fn last_token_embedding(&mut self, tokens: &[u32]) -> Result<Vec<f32>, Error> {
        self.runner.last_token_embedding(tokens)
    }

    /// Runs `tokens` after what the context holds (after nothing with `restart`) on the model's
    /// own threads; the logits are left unread. Nothing is sampled and no stop token ends it:
    /// `hearth bench` times decode steps this way, as llama.cpp's bench does.
    pub fn feed(&mut self, tokens: &[u32], restart: bool) -> Result<(), Error> {
        self.runner.check_tokens(tokens)?;
        if restart {
            self.runner.reset();
        }
        self.runner.feed(tokens, None, None)
    }

    /// Runs `tokens` after what the context holds (after nothing with `restart`), computing
    /// with `cpu` (its threads and kernel level) in place of the model's own context, which is
    /// back in place afterwards; the logits are left unread. For benchmarks that alternate two
    /// settings pass by pass in one process (`hearth bench --ab`).
    pub fn feed_with(
        &mut self,
        tokens: &[u32],
        restart: bool,
        cpu: &mut CpuContext,
    ) -> Result<(), Error> {
        std::mem::swap(&mut self.runner.cpu, cpu);
        let result = self.feed(tokens, restart);
        std::mem::swap(&mut self.runner.cpu, cpu);
        result
    }

    pub(crate) fn require_tokenizer(&self) -> Result<&TextTokenizer, Error> {
        self.tokenizer.as_ref().ok_or_else(|| Error::NoTokenizer {
            dir: self.dir.clone(),
        })
    }
}

/// Follows no prefill: for the calls that show no reading progress.
fn keep_reading(_: PrefillProgress) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// The constraint `options.format` puts on an answer, over the tokenizer's vocabulary (its
/// bytes computed once, into `token_bytes`); None for free text.
fn constraint<'m>(
    options: &ChatOptions,
    tokenizer: Option<&TextTokenizer>,
    token_bytes: &'m OnceLock<TokenBytes>,
    stop_ids: &'m [u32],
    dir: &Path,
) -> Result<Option<Constraint<'m>>, Error> {
    let Some(grammar) = options.format.grammar()? else {
        return Ok(None);
    };
    let tokenizer = tokenizer.ok_or_else(|| Error::NoTokenizer {
        dir: dir.to_path_buf(),
    })?;
    let vocab = token_bytes.get_or_init(|| TokenBytes::new(tokenizer));
    Ok(Some(Constraint::new(grammar, vocab, stop_ids)))
}
/// `messages` with every special token's spelling made ordinary text
/// ([`TextTokenizer::quote`]): only the chat template writes turn markers.
fn quoted(tokenizer: &TextTokenizer, messages: &[ChatMessage]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| ChatMessage::new(m.role, tokenizer.quote(&m.content)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::KernelLevel;
    use crate::SamplingParams;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine")
            .join(name)
    }

    #[test]
    fn a_model_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<Model>();
    }

    /// A tiny random Q4NX model (the Q4_1 tile kernels, activation quantization, an f16 cache)
    /// in a temporary folder.
    pub(crate) fn synthetic_q4nx() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let config = serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "intermediate_size": 512,
            "vocab_size": 512,
            "rope_theta": 10000.0,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": false,
            "max_position_embeddings": 256,
            "eos_token_id": 511,
        })
        .to_string();
        let parsed = ModelConfig::from_json(&config).unwrap();
        q4nx::synthetic::write_random_model(dir.path(), &parsed, 7).unwrap();
        std::fs::write(dir.path().join("config.json"), config).unwrap();
        dir
    }

    /// `feed_with` computes with the context it is given (the logits of a model loaded at
    /// that level, bit for bit), continues the cache, and leaves both contexts where they were.
    #[test]
    fn feed_with_computes_with_the_given_context_and_gives_it_back() {
        let q4nx = synthetic_q4nx();
        let mut model = Model::load(q4nx.path(), &LoadOptions::default()).unwrap();
        let own = (model.threads(), model.info().kernel.clone());
        let tokens: Vec<u32> = (0..40u32).map(|i| (i * 7919 + 13) % 511).collect();
        for level in KernelLevel::supported() {
            let mut cpu = CpuContext::new(1, level);
            model.feed_with(&tokens[..30], true, &mut cpu).unwrap();
            model.feed_with(&tokens[30..], false, &mut cpu).unwrap();
            let options = LoadOptions {
                kernel: Some(level),
                threads: Some(1),
                ..LoadOptions::default()
            };
            let mut at_level = Model::load(q4nx.path(), &options).unwrap();
            at_level.runner.feed(&tokens, None, None).unwrap();
            assert_eq!(
                model.runner.last_logits(),
                at_level.runner.last_logits(),
                "{level}: feed_with computes as a model loaded at that level"
            );
            assert_eq!((cpu.threads(), cpu.level()), (1, level));
            assert_eq!((model.threads(), model.info().kernel.clone()), own);
        }
        let mut cpu = CpuContext::new(1, KernelLevel::Scalar);
        let err = model.feed_with(&[600], false, &mut cpu).unwrap_err();
        assert!(
            matches!(err, Error::TokenOutOfRange { token: 600, .. }),
            "{err}"
        );
    }

    /// Speculative decoding verifies drafts in one pass and relies on this: a token's logits do
    /// not depend on how many tokens share its pass. Every kernel computes each token alone (no
    /// sum runs across tokens), so chunks of any size give single steps' logits bit for bit.
    #[test]
    fn batched_passes_equal_single_steps_bit_for_bit() {
        let q4nx = synthetic_q4nx();
        let dirs = [
            fixture("tiny-llama"),
            fixture("tiny-qwen3"),
            fixture("tiny-qwen3-untied"),
            q4nx.path().to_path_buf(),
        ];
        for (dir, level) in dirs
            .iter()
            .flat_map(|d| KernelLevel::supported().into_iter().map(move |l| (d, l)))
        {
            let options = LoadOptions {
                kernel: Some(level),
                ..LoadOptions::default()
            };
            let mut model = Model::load(dir, &options).unwrap();
            let vocab = model.config().vocab_size as u32;
            let tokens: Vec<u32> = (0..100u32).map(|i| (i * 7919 + 13) % vocab).collect();
            let mut steps = Vec::new();
            for &token in &tokens {
                model.runner.feed(&[token], None, None).unwrap();
                steps.push(model.runner.last_logits().to_vec());
            }
            model.runner.reset();
            let mut batched = Vec::new();
            let mut fed = 0;
            for size in [9, 1, 3, 64, 2, 8, 13].into_iter().cycle() {
                let end = (fed + size).min(tokens.len());
                model
                    .runner
                    .feed(&tokens[fed..end], Some(&mut batched), None)
                    .unwrap();
                fed = end;
                if fed == tokens.len() {
                    break;
                }
            }
            for (i, (a, b)) in steps.iter().zip(&batched).enumerate() {
                let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{} {level} position {i}: a batched pass differs",
                    dir.display()
                );
            }
        }
    }

    /// Speculative greedy decoding writes what plain greedy decoding writes, token for token,
    /// and stops the same way: on prompts that repeat (drafts accepted) and that do not, with
    /// and without a repetition penalty, at every stop condition; each run reuses the cache
    /// the other left, so the rewound cache is checked too.
    #[test]
    fn speculative_greedy_equals_plain_greedy() {
        let q4nx = synthetic_q4nx();
        let dirs = [
            fixture("tiny-llama"),
            fixture("tiny-qwen3"),
            fixture("tiny-qwen3-untied"),
            q4nx.path().to_path_buf(),
        ];
        for dir in &dirs {
            let options = LoadOptions {
                context_length: Some(120),
                ..LoadOptions::default()
            };
            let mut model = Model::load(dir, &options).unwrap();
            let vocab = model.config().vocab_size as u32;
            let phrase: Vec<u32> = (0..11u32).map(|i| (i * 31 + 5) % vocab).collect();
            let repeating: Vec<u32> = phrase.iter().cycle().take(30).copied().collect();
            let distinct: Vec<u32> = (0..30u32).map(|i| (i * 7919 + 13) % vocab).collect();
            let mut accepted = 0;
            for prompt in [&repeating, &distinct] {
                for penalty in [1.0, 1.3] {
                    // 1 and 7 tokens; 95 fills the 120-token context; a cancel at the 9th.
                    for (max_tokens, cancel_at) in [(1, 0), (7, 0), (95, 0), (95, 9)] {
                        let mut run = |speculative| {
                            let options = ChatOptions {
                                sampling: SamplingParams {
                                    repetition_penalty: penalty,
                                    ..SamplingParams::greedy()
                                },
                                max_tokens,
                                enable_thinking: None,
                                speculative,
                                format: Default::default(),
                            };
                            let mut seen = 0;
                            let (tokens, stats) = model
                                .generate(prompt, &options, &mut |_| {
                                    seen += 1;
                                    match seen == cancel_at {
                                        true => ControlFlow::Break(()),
                                        false => ControlFlow::Continue(()),
                                    }
                                })
                                .unwrap();
                            (tokens, stats)
                        };
                        let (plain, plain_stats) = run(Some(false));
                        // The default drafts while drafting pays: the same tokens too.
                        assert_eq!(run(None).0, plain);
                        let (fast, fast_stats) = run(Some(true));
                        let case = format!("{} penalty {penalty} max {max_tokens}", dir.display());
                        assert_eq!(fast, plain, "{case}");
                        assert_eq!(fast_stats.stop_reason, plain_stats.stop_reason, "{case}");
                        assert_eq!(fast_stats.generated_tokens, plain.len(), "{case}");
                        assert_eq!(plain_stats.draft_passes, 0, "{case}");
                        assert!(fast_stats.accepted_drafts <= fast_stats.drafted_tokens);
                        accepted += fast_stats.accepted_drafts;
                    }
                }
            }
            assert!(
                accepted > 0,
                "{}: no draft was ever accepted",
                dir.display()
            );
        }
    }

    /// Sampling with drafts writes what sampling without them writes for the same seed, token
    /// for token (each row is sampled with plain decoding's random numbers), on prompts that
    /// repeat, with drafts always tried (`Some(true)`) and while they pay (the default).
    #[test]
    fn speculative_sampling_equals_plain_sampling_per_seed() {
        for name in ["tiny-llama", "tiny-qwen3"] {
            let mut model = Model::load(&fixture(name), &LoadOptions::default()).unwrap();
            let vocab = model.config().vocab_size as u32;
            let phrase: Vec<u32> = (0..9u32).map(|i| (i * 31 + 5) % vocab).collect();
            let prompt: Vec<u32> = phrase.iter().cycle().take(36).copied().collect();
            let mut run = |sampling, speculative| {
                let options = ChatOptions {
                    sampling,
                    max_tokens: 48,
                    enable_thinking: None,
                    speculative,
                    format: Default::default(),
                };
                model
                    .generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))
                    .unwrap()
            };
            let greedy = run(SamplingParams::greedy(), Some(false)).0;
            let (mut accepted, mut sampled) = (0, 0);
            for seed in 0..6 {
                let sampling = SamplingParams {
                    temperature: 0.3,
                    seed,
                    ..SamplingParams::default()
                };
                let (plain, plain_stats) = run(sampling, Some(false));
                sampled += usize::from(plain != greedy);
                for speculative in [Some(true), None] {
                    let (tokens, stats) = run(sampling, speculative);
                    assert_eq!(tokens, plain, "{name} seed {seed} {speculative:?}");
                    assert_eq!(stats.stop_reason, plain_stats.stop_reason);
                    assert_eq!(stats.generated_tokens, tokens.len());
                    assert!(tokens.len() <= 48);
                    accepted += stats.accepted_drafts;
                }
            }
            assert!(accepted > 0, "{name}: no draft was ever accepted");
            assert!(sampled > 0, "{name}: every seed wrote the greedy answer");
        }
    }

    /// Feeding one token at a time through the KV cache gives the logits of one full pass, across
    /// a prefill chunk boundary.
    #[test]
    fn incremental_decoding_equals_full_recomputation() {
        for name in ["tiny-llama", "tiny-qwen3", "tiny-qwen3-untied"] {
            let mut model = Model::load(&fixture(name), &LoadOptions::default()).unwrap();
            let vocab = model.config().vocab_size as u32;
            let tokens: Vec<u32> = (0..100u32).map(|i| (i * 7919 + 13) % vocab).collect();
            let full = model.logits(&tokens).unwrap();
            model.runner.reset();
            for (i, &token) in tokens.iter().enumerate() {
                model.runner.feed(&[token], None, None).unwrap();
                let step = model.runner.last_logits();
                let scale = full[i].iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let diff = step
                    .iter()
                    .zip(&full[i])
                    .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    diff <= 1e-5 * scale,
                    "{name} position {i}: incremental differs by {diff}"
                );
            }
        }
    }

    /// A prompt started from a kept sequence's rows (the KV store, after a switch to another
    /// sequence and back) has a cold run's logits bit for bit, with an f32 and an f16 cache.
    #[test]
    fn a_prompt_started_from_kept_rows_has_a_cold_runs_logits_bit_for_bit() {
        let q4nx = synthetic_q4nx();
        let once = ChatOptions {
            sampling: SamplingParams::greedy(),
            max_tokens: 1,
            speculative: Some(false),
            ..ChatOptions::default()
        };
        let run = |model: &mut Model, prompt: &[u32]| {
            let (_, stats) = model
                .generate(prompt, &once, &mut |_| ControlFlow::Continue(()))
                .unwrap();
            let logits = model.runner.last_logits();
            let bits: Vec<u32> = logits.iter().map(|x| x.to_bits()).collect();
            (stats.prefilled_tokens, bits)
        };
        let a: Vec<u32> = (0..50u32).map(|i| 1 + (i * 7919 + 13) % 500).collect();
        let b: Vec<u32> = (0..40u32).map(|i| 1 + (i * 104_729 + 5) % 500).collect();
        for dir in [fixture("tiny-qwen3"), q4nx.path().to_path_buf()] {
            let mut model = Model::load(&dir, &LoadOptions::default()).unwrap();
            run(&mut model, &a[..45]);
            run(&mut model, &b);
            let (prefilled, warm) = run(&mut model, &a);
            assert_eq!(prefilled, 5, "{dir:?}: A's first 45 positions were kept");
            let nothing_kept = LoadOptions {
                kv_store_bytes: Some(0),
                ..LoadOptions::default()
            };
            let (prefilled, cold) = run(&mut Model::load(&dir, &nothing_kept).unwrap(), &a);
            assert_eq!(prefilled, 50);
            assert!(warm == cold, "{dir:?}: the logits differ from a cold run's");
        }
    }
}
