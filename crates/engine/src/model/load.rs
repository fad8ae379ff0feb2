//! Loading a model folder into a [`Model`]: what loading may ask ([`LoadOptions`]) and the
//! checks a folder passes first. q4nx checks the config and the weights' shapes; here the
//! context length is checked against what the model was trained for and the KV cache limit,
//! the kernel level against this CPU, and the tokenizer against the vocabulary; and the stop
//! ids are gathered from every file that declares one.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use q4nx::{ModelConfig, WeightFormat, Weights};
use serde::{Deserialize, Serialize};

use super::{Model, ModelInfo};
use crate::chat_template::ChatTemplate;
use crate::cpu::{pool, CpuContext, KernelLevel, ThreadPool};
use crate::json_file::read_json;
use crate::kv_cache::KvPrecision;
use crate::runner::{LoadedWeights, Runner};
use crate::tokenizer::TextTokenizer;
use crate::transformer::TransformerWeights;
use crate::weights_memory;
use crate::Error;

/// Context length used when [`LoadOptions::context_length`] is unset (capped by the model's
/// `max_position_embeddings`).
pub const DEFAULT_CONTEXT_LENGTH: usize = 4096;

/// End-of-turn markers of common chat formats; a model stops on one when its chat template
/// writes it and its vocabulary has it.
const END_OF_TURN_MARKERS: [&str; 4] = ["<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"];

/// Phi-3's stop tokens (Phi-3.5-mini, Phi-4-mini).
const PHI3_STOPS: [&str; 3] = ["<|end|>", "<|assistant|>", "<|endoftext|>"];

/// How to load a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadOptions {
    /// Positions the KV cache holds (prompt plus answer). By default,
    /// min(4096, the model's `max_position_embeddings`).
    pub context_length: Option<usize>,
    /// Threads for the CPU kernels, in a pool this model owns. By default, one per physical
    /// core.
    pub threads: Option<usize>,
    /// Keep every thread at work even while other programs keep CPUs busy (by default fewer
    /// take part then, see `cpu::contention`); for benchmarks that measure the difference.
    pub fixed_threads: bool,
    /// Read the weights through the file's memory map even when a copy in huge pages would fit
    /// (by default they are copied then, see `weights_memory`); for benchmarks that measure
    /// the difference.
    pub map_weights: bool,
    /// SIMD level of every CPU kernel of this model (matmuls, attention); the
    /// caller reads any override (`--kernel`, `HEARTH_KERNEL`) and passes it here. By default,
    /// the best level this CPU supports.
    pub kernel: Option<KernelLevel>,
    /// Whether attention over a quantized model's cache multiplies in BF16 with f32 sums
    /// (where the level has BF16 dot products; a dense model is always exact). By default, where
    /// that is faster than f32 on this CPU (`cpu::peak::bf16_dot_pays`); for benchmarks and
    /// fidelity checks.
    pub bf16_attention: Option<bool>,
    /// Bytes of memory for the keys and values of sequences the model ran before (the KV
    /// store: conversations switched away from, kept so that coming back prefills only what
    /// changed; see `kv_store`). 0 keeps none. By default, four times the KV cache (four full
    /// contexts), at most a quarter of the memory available when the model loads; nothing is
    /// allocated until a sequence is kept.
    pub kv_store_bytes: Option<u64>,
}

impl Model {
    /// Loads the model in `dir`: `config.json`, `model.q4nx` or safetensors, and (optional)
    /// `tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`, `generation_config.json`.
    pub fn load(dir: &Path, options: &LoadOptions) -> Result<Model, Error> {
        let started = Instant::now();
        if !dir.is_dir() {
            return Err(Error::invalid_model(
                dir,
                "the folder does not exist; check the path or download the model again",
            ));
        }
        let load_error = |source| Error::Load {
            dir: dir.to_path_buf(),
            source,
        };
        // q4nx checks the shape facts the forward pass relies on (sizes, head groups, RoPE).
        let config = ModelConfig::from_path(&dir.join("config.json")).map_err(load_error)?;
        let mut weights = Weights::open(dir).map_err(load_error)?;
        q4nx::validate(&weights, &config).map_err(load_error)?;
        weights_memory::check_fits(weights.data_bytes(), weights_memory::installed_memory())
            .map_err(|reason| Error::invalid_model(dir, reason))?;
        let memory = weights_memory::place(
            &mut weights,
            options.map_weights,
            weights_memory::available_memory(),
        );
        // A quantized model keeps its KV cache as f16; a dense one keeps f32 and computes
        // exactly as the reference (see `kv_cache`).
        let (weight_format, kv_precision) = match weights.format() {
            WeightFormat::Q4nx => ("q4nx", KvPrecision::F16),
            // llama.cpp keeps a GGUF model's KV cache as f16 too.
            WeightFormat::Gguf => ("gguf", KvPrecision::F16),
            WeightFormat::Safetensors => ("safetensors", KvPrecision::F32),
        };
        let weights =
            LoadedWeights::try_new(weights, |w| TransformerWeights::load(w, &config, dir))?;
        let parameter_count = weights
            .borrow_dependent()
            .parameter_count(config.tie_word_embeddings);

        let context_length = context_length(&config, options)?;
        let cpu = cpu_context(dir, options)?;
        let tokenizer = read_tokenizer(dir, &config)?;
        let tokenizer_config = read_json(&dir.join("tokenizer_config.json"))?;
        let template = ChatTemplate::from_dir(dir, tokenizer_config.as_ref())?;
        let generation_config = read_json(&dir.join("generation_config.json"))?;
        let stop_ids = stop_ids(
            &config,
            tokenizer.as_ref(),
            tokenizer_config.as_ref(),
            generation_config.as_ref(),
            template.as_ref(),
        );

        let info = ModelInfo {
            name: dir.file_name().map_or_else(
                || dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            family: config.family.name().to_owned(),
            parameter_count,
            context_length,
            weight_format: weight_format.to_owned(),
            has_tokenizer: tokenizer.is_some(),
            has_chat_template: template.is_some(),
            backend: "cpu".to_owned(),
            kernel: cpu.level().name().to_owned(),
        };
        tracing::info!(
            model = %info.name, format = weight_format, context_length, ?stop_ids,
            weights = memory.name(), threads = cpu.threads(), kernel = %cpu.level(), secs = started.elapsed().as_secs_f64(), "model loaded"
        );
        Ok(Model {
            dir: dir.to_path_buf(),
            info,
            runner: Runner::new(
                config,
                weights,
                cpu,
                context_length,
                kv_precision,
                options.kv_store_bytes,
            )?,
            tokenizer,
            template,
            stop_ids,
            weights_memory: memory,
            token_bytes: OnceLock::new(),
        })
    }
}

/// The model's own pool and kernel level, as `options` ask (an unsupported level is an error).
fn cpu_context(dir: &Path, options: &LoadOptions) -> Result<CpuContext, Error> {
    let threads = options.threads.unwrap_or_else(pool::physical_cores).max(1);
    let level = match options.kernel {
        Some(level) if !level.is_supported() => {
            let supported: Vec<&str> = KernelLevel::supported()
                .into_iter()
                .map(KernelLevel::name)
                .collect();
            return Err(Error::invalid_model(
                dir,
                format!(
                    "this CPU cannot run the {level} kernels; choose one of: {}",
                    supported.join(", ")
                ),
            ));
        }
        Some(level) => level,
        None => KernelLevel::detect(),
    };
    let pool = if options.fixed_threads {
        ThreadPool::fixed(threads)
    } else {
        ThreadPool::new(threads)
    };
    let mut cpu = CpuContext::with_pool(pool, level);
    if let Some(bf16) = options.bf16_attention {
        cpu.set_bf16_attention(bf16);
    }
    Ok(cpu)
}

/// The most memory the KV cache of one model may take (64 GiB): a context needing more is
/// refused with a plain message instead of aborting on allocation.
pub const MAX_KV_CACHE_BYTES: u64 = 64 << 30;

fn context_length(c: &ModelConfig, options: &LoadOptions) -> Result<usize, Error> {
    let trained = if c.max_position_embeddings > 0 {
        c.max_position_embeddings
    } else {
        DEFAULT_CONTEXT_LENGTH
    };
    let length = options
        .context_length
        .unwrap_or(DEFAULT_CONTEXT_LENGTH.min(trained));
    if length == 0 {
        return Err(Error::InvalidLoadOption {
            reason: "a context length of 0 cannot hold a prompt; use at least 1".into(),
        });
    }
    if length > trained {
        return Err(Error::InvalidLoadOption {
            reason: format!(
                "a context length of {length} is more than this model was trained for \
                 (max_position_embeddings = {trained}); use {trained} or less"
            ),
        });
    }
    // Keys and values (and LFM2's convolution state) at most 4 bytes per element (f32).
    let per_position = crate::kv_cache::bytes_per_position(c, KvPrecision::F32);
    let bytes = per_position.saturating_mul(length as u64);
    if bytes > MAX_KV_CACHE_BYTES {
        let fits = (MAX_KV_CACHE_BYTES / per_position.max(1)).max(1);
        return Err(Error::InvalidLoadOption {
            reason: format!(
                "a context length of {length} needs a {} GiB KV cache, more than the {} GiB \
                 limit; use {fits} or less",
                bytes >> 30,
                MAX_KV_CACHE_BYTES >> 30
            ),
        });
    }
    Ok(length)
}

fn read_tokenizer(dir: &Path, c: &ModelConfig) -> Result<Option<TextTokenizer>, Error> {
    let path = dir.join("tokenizer.json");
    if !path.is_file() {
        return Ok(None);
    }
    let tokenizer = TextTokenizer::from_file(&path)?;
    if tokenizer.vocab_size() > c.vocab_size {
        return Err(Error::invalid_model(
            dir,
            format!(
                "tokenizer.json has {} tokens but config.json's vocab_size is {}: \
                 the files belong to different models",
                tokenizer.vocab_size(),
                c.vocab_size
            ),
        ));
    }
    Ok(Some(tokenizer))
}

/// Every stop id the files declare: config.json's eos ids, generation_config.json's eos ids,
/// tokenizer_config.json's eos token, and the end-of-turn marker the chat template writes.
fn stop_ids(
    config: &ModelConfig,
    tokenizer: Option<&TextTokenizer>,
    tokenizer_config: Option<&serde_json::Value>,
    generation_config: Option<&serde_json::Value>,
    template: Option<&ChatTemplate>,
) -> Vec<u32> {
    let mut ids = config.eos_token_ids.clone();
    match generation_config.and_then(|g| g.get("eos_token_id")) {
        Some(serde_json::Value::Number(n)) => ids.extend(n.as_u64().map(|v| v as u32)),
        Some(serde_json::Value::Array(list)) => {
            ids.extend(list.iter().filter_map(|v| v.as_u64()).map(|v| v as u32));
        }
        _ => {}
    }
    if let Some(tokenizer) = tokenizer {
        let eos = tokenizer_config.and_then(|c| c.get("eos_token"));
        let eos_text = match eos {
            Some(serde_json::Value::String(s)) => Some(s.as_str()),
            Some(serde_json::Value::Object(o)) => o.get("content").and_then(|c| c.as_str()),
            _ => None,
        };
        ids.extend(eos_text.and_then(|t| tokenizer.token_to_id(t)));
        // Phi-3 ends its turn with <|end|> but may run on into <|assistant|> or
        // <|endoftext|> (Phi-3.5's generation_config lists all three); a folder without that
        // file (a GGUF's import) must stop on them too.
        if config.family == q4nx::Family::Phi3 {
            for marker in PHI3_STOPS {
                ids.extend(tokenizer.token_to_id(marker));
            }
        }
        // A harmony model (gpt-oss) ends its answer with <|return|> or a tool call with
        // <|call|>; its <|end|> only ends one message (the reasoning), so it must not stop.
        let harmony = crate::harmony::HarmonyTokens::find(tokenizer);
        ids.extend(harmony.iter().flat_map(|h| h.stop_ids()));
        if let Some(template) = template {
            for marker in END_OF_TURN_MARKERS {
                if template.source.contains(marker) {
                    ids.extend(tokenizer.token_to_id(marker));
                }
            }
        }
        if let Some(harmony) = harmony {
            ids.retain(|&id| id != harmony.end);
        }
    }
    ids.retain(|&id| (id as usize) < config.vocab_size);
    ids.sort_unstable();
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine")
            .join(name)
    }

    /// Each model owns its pool: loading a second one with other threads leaves the first as
    /// it was, and both compute the same logits (a row block or a KV head is never split).
    #[test]
    fn two_models_keep_their_own_thread_counts() {
        let load = |threads| {
            let options = LoadOptions {
                threads: Some(threads),
                ..LoadOptions::default()
            };
            Model::load(&fixture("tiny-qwen3"), &options).unwrap()
        };
        let mut one = load(1);
        let mut three = load(3);
        assert_eq!((one.threads(), three.threads()), (1, 3));
        let tokens = [1, 5, 9, 200, 7];
        assert_eq!(one.logits(&tokens).unwrap(), three.logits(&tokens).unwrap());
        drop(three);
        assert_eq!(
            one.threads(),
            1,
            "dropping the other model leaves this pool alone"
        );
    }

    /// The level asked for is the level the model reports; on the dense fixtures (f32 cache,
    /// plain-row matmuls) only attention depends on it, and every level gives the scalar
    /// level's logits bit for bit.
    #[test]
    fn the_kernel_level_asked_for_reaches_the_model() {
        let tokens = [3, 1, 4, 1, 5, 9, 2, 6];
        let load = |level| {
            let options = LoadOptions {
                kernel: Some(level),
                ..LoadOptions::default()
            };
            Model::load(&fixture("tiny-llama"), &options).unwrap()
        };
        let mut scalar = load(KernelLevel::Scalar);
        assert_eq!(scalar.info().kernel, "scalar");
        let expected = scalar.logits(&tokens).unwrap();
        for level in KernelLevel::supported() {
            let mut model = load(level);
            assert_eq!(model.info().kernel, level.name());
            assert_eq!(model.logits(&tokens).unwrap(), expected, "{level}");
        }
    }

    #[test]
    fn an_unsupported_kernel_level_is_refused_by_name() {
        let Some(level) = KernelLevel::ALL.into_iter().find(|l| !l.is_supported()) else {
            return; // this CPU runs every level
        };
        let options = LoadOptions {
            kernel: Some(level),
            ..LoadOptions::default()
        };
        let err = Model::load(&fixture("tiny-llama"), &options).unwrap_err();
        assert!(err.to_string().contains(level.name()), "{err}");
    }
}
