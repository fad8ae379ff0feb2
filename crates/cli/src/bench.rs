//! `hearth bench`: how fast the CPU engine prefills and decodes, against this machine's own
//! memory read bandwidth measured in the same run (decoding reads every weight once per token,
//! so bandwidth is its ceiling).
//!
//! In the manner of llama-bench: a warm-up, then `--repetitions` runs of a `--prompt`-token
//! prefill followed by `--generate` decoded tokens; medians are reported. The read bandwidth is
//! measured 5 times before and 5 times after the runs. `--shape` benchmarks a
//! random-weight Q4NX model of a known shape, generated once and cached under
//! `$XDG_CACHE_HOME/hearth/bench/` (by default `~/.cache/hearth/bench/`).

use std::fs;
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use hearth_engine::cpu::{bandwidth, pool, KernelLevel};
use hearth_engine::{ChatOptions, LoadOptions, Model, SamplingParams};
use q4nx::container::{encode_header, EntryToWrite};
use q4nx::layout::{expected_tensors, Role};
use q4nx::{Dtype, ModelConfig, Tensor, Weights};

/// Measure prefill and decode speed against the machine's memory bandwidth.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model folder to benchmark.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "shape",
        conflicts_with = "shape"
    )]
    model: Option<PathBuf>,
    /// Benchmark a random-weight Q4NX model of this shape instead (generated once, cached):
    /// `minicpm5-2b`, or `tiny` for a quick check.
    #[arg(long, value_name = "NAME")]
    shape: Option<String>,
    /// CPU threads [default: one per physical core].
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Prompt tokens prefilled per repetition.
    #[arg(long, default_value_t = 512)]
    prompt: usize,
    /// Tokens decoded per repetition, after the prompt.
    #[arg(long, default_value_t = 128)]
    generate: usize,
    /// Timed repetitions (after one warm-up); medians are reported.
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// Kernel level to force: scalar, avx2, avx512bw, avx512vnni [default: the best available].
    #[arg(long, value_name = "LEVEL")]
    kernel: Option<String>,
    /// Bytes of the bandwidth probe's buffer, in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    probe_mib: usize,
}

/// The shapes `--shape` knows: MiniCPM5-2B as published, and a tiny one for quick checks.
fn shape_config(name: &str) -> anyhow::Result<serde_json::Value> {
    let (hidden, layers, heads, kv_heads, head_dim, inter, vocab) = match name {
        "minicpm5-2b" => (2048, 42, 16, 2, 128, 6144, 130_560),
        "tiny" => (256, 2, 4, 2, 64, 512, 1024),
        other => bail!("unknown --shape {other:?}: use minicpm5-2b or tiny"),
    };
    Ok(serde_json::json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "rope_theta": 5_000_000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false,
        "max_position_embeddings": 32768,
        "hidden_act": "silu",
        "bos_token_id": 0,
        // A random model could stop at any id: stop only on the last one, which the bench's
        // prompts never contain and greedy decoding of these weights is unlikely to pick.
        "eos_token_id": vocab - 1,
        "torch_dtype": "bfloat16",
    }))
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if let Some(name) = &args.kernel {
        let level = KernelLevel::from_name(name).with_context(|| {
            format!("unknown --kernel {name:?}: use scalar, avx2, avx512bw or avx512vnni")
        })?;
        if !level.select() {
            bail!(
                "this CPU cannot run the {level} kernels; supported: {:?}",
                KernelLevel::supported()
            );
        }
    }
    let threads = args.threads.unwrap_or_else(pool::physical_cores).max(1);
    pool::set_global_threads(threads);
    let dir = match (&args.model, &args.shape) {
        (Some(dir), _) => dir.clone(),
        (None, Some(shape)) => cached_random_model(shape)?,
        (None, None) => bail!("give --model DIR or --shape NAME"),
    };

    // Bandwidth before and after the runs (the median of both, so a machine whose speed drifts
    // is compared with itself), each time outside the peak-memory figure.
    let probe = || bandwidth::measure_read_bandwidth(&pool::global(), args.probe_mib << 20, 5);
    let mut bandwidth_samples = probe().samples_gbps;
    let peak_reset = reset_peak_rss();

    let footprint = Footprint::of(&dir)?;
    // The first-token figure is for a cached model, as a user who opens Hearth again has; a
    // cold start adds reading the file from disk (reported separately).
    let page_cache_secs = read_into_page_cache(&footprint.file)?;
    let load_start = Instant::now();
    let context = args.prompt + args.generate + 8;
    let mut model = Model::load(
        &dir,
        &LoadOptions {
            context_length: Some(context),
            threads: Some(threads),
        },
    )
    .with_context(|| format!("could not load the model in {}", dir.display()))?;
    let load_secs = load_start.elapsed().as_secs_f64();
    let vocab = model.config().vocab_size;
    let greedy = ChatOptions {
        sampling: SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        },
        max_tokens: 1,
        enable_thinking: None,
    };

    // First token of a short prompt right after loading: what a user waits for.
    let (_, first) = model.generate(&prompt_tokens(8, vocab, 1000), &greedy, &mut |_| {
        ControlFlow::Continue(())
    })?;
    let first_token_secs = load_secs + first.ttft_secs;

    // Warm-up: a shorter run through both paths.
    let warm = ChatOptions {
        max_tokens: 4.min(args.generate + 1),
        ..greedy.clone()
    };
    model.generate(
        &prompt_tokens(args.prompt.min(64), vocab, 1001),
        &warm,
        &mut |_| ControlFlow::Continue(()),
    )?;

    let timed = ChatOptions {
        max_tokens: args.generate + 1,
        ..greedy
    };
    let (mut prefill, mut decode) = (Vec::new(), Vec::new());
    for rep in 0..args.repetitions.max(1) {
        // A different first token each time, so no prefix is reused from the cache.
        let prompt = prompt_tokens(args.prompt, vocab, rep as u64);
        let (_, stats) = model.generate(&prompt, &timed, &mut |_| ControlFlow::Continue(()))?;
        prefill.push(stats.prompt_tokens as f64 / stats.prefill_secs);
        if stats.generated_tokens > 1 && stats.decode_secs > 0.0 {
            decode.push((stats.generated_tokens - 1) as f64 / stats.decode_secs);
        }
        tracing::info!(rep, ?stats, "bench repetition");
    }
    let peak = peak_rss_bytes();
    let kv_cache_bytes = model.kv_cache_bytes();
    drop(model);
    bandwidth_samples.extend(probe().samples_gbps);
    let bandwidth_gbps = bandwidth::median(&bandwidth_samples);

    let decode_tps = bandwidth::median(&decode);
    let prefill_tps = bandwidth::median(&prefill);
    let roofline = decode_tps * footprint.weight_bytes_per_token as f64 / (bandwidth_gbps * 1e9);

    let report = serde_json::json!({
        "model": dir.display().to_string(),
        "shape": args.shape,
        "threads": threads,
        "kernel_level": KernelLevel::selected().name(),
        "prompt_tokens": args.prompt,
        "generated_tokens": args.generate,
        "repetitions": args.repetitions.max(1),
        "prefill_tokens_per_s": prefill_tps,
        "decode_tokens_per_s": decode_tps,
        "prefill_samples": prefill,
        "decode_samples": decode,
        "weight_bytes_per_token": footprint.weight_bytes_per_token,
        "measured_read_bandwidth_gbps": bandwidth_gbps,
        "bandwidth_samples_gbps": bandwidth_samples,
        "decode_bandwidth_gbps": decode_tps * footprint.weight_bytes_per_token as f64 / 1e9,
        "roofline_fraction": roofline,
        "model_file_bytes": footprint.file_bytes,
        "kv_cache_bytes": kv_cache_bytes,
        "peak_memory_bytes": peak,
        "peak_memory_is_exact": peak_reset,
        "load_secs": load_secs,
        "first_token_secs": first_token_secs,
        "page_cache_read_secs": page_cache_secs,
        "total_secs": started.elapsed().as_secs_f64(),
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let mib = |b: Option<u64>| {
            b.map_or_else(
                || "unknown".to_owned(),
                |b| format!("{:.0} MiB", b as f64 / 1048576.0),
            )
        };
        writeln!(out, "model            {}", dir.display())?;
        writeln!(
            out,
            "threads          {threads}   kernels {}",
            KernelLevel::selected()
        )?;
        writeln!(
            out,
            "read bandwidth   {bandwidth_gbps:.2} GB/s (median of {} before and after, {} MiB buffer)",
            bandwidth_samples.len(),
            args.probe_mib
        )?;
        writeln!(
            out,
            "prefill          {prefill_tps:.2} tok/s ({} tokens, median of {})",
            args.prompt,
            prefill.len()
        )?;
        writeln!(
            out,
            "decode           {decode_tps:.2} tok/s ({} tokens, median of {})",
            args.generate,
            decode.len()
        )?;
        writeln!(
            out,
            "weights/token    {:.3} GB -> {:.2} GB/s = {:.0}% of measured bandwidth",
            footprint.weight_bytes_per_token as f64 / 1e9,
            decode_tps * footprint.weight_bytes_per_token as f64 / 1e9,
            roofline * 100.0
        )?;
        writeln!(
            out,
            "peak memory      {} (model file {:.0} MiB)",
            mib(peak),
            footprint.file_bytes as f64 / 1048576.0
        )?;
        writeln!(
            out,
            "load {load_secs:.2} s, first token {first_token_secs:.2} s after start of load \
             (file read into the page cache first, in {page_cache_secs:.2} s)"
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `len` token ids, deterministic per `seed`, avoiding 0 (bos) and the last id (eos).
fn prompt_tokens(len: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (1 + state % (vocab as u64 - 2)) as u32
        })
        .collect()
}

/// What one decode step reads, and how big the model is.
struct Footprint {
    /// Every linear weight's stored bytes plus one embedding row and the norms.
    weight_bytes_per_token: usize,
    file: PathBuf,
    file_bytes: u64,
}

impl Footprint {
    fn of(dir: &Path) -> anyhow::Result<Footprint> {
        let config = ModelConfig::from_path(&dir.join("config.json"))?;
        let weights = Weights::open(dir)?;
        let mut bytes = 0usize;
        for name in weights.names() {
            bytes += match weights.get(name)? {
                Tensor::Q4_1(m) | Tensor::Q8(m) => m.bytes.len(),
                Tensor::Dense(d) if name == "model.embed_tokens.weight" => {
                    d.bytes.len() / config.vocab_size
                }
                Tensor::Dense(d) => d.bytes.len(),
            };
        }
        if config.tie_word_embeddings && !weights.names().contains(&"lm_head.weight") {
            bytes += config.vocab_size * config.hidden_size * 2;
        }
        let file_bytes = fs::metadata(weights.path()).map(|m| m.len()).unwrap_or(0);
        Ok(Footprint {
            weight_bytes_per_token: bytes,
            file: weights.path().to_path_buf(),
            file_bytes,
        })
    }
}

/// Reads `file` once (into the OS page cache) and returns how long that took.
fn read_into_page_cache(file: &Path) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut reader = std::io::BufReader::with_capacity(
        1 << 20,
        fs::File::open(file).with_context(|| format!("could not open {}", file.display()))?,
    );
    std::io::copy(&mut reader, &mut std::io::sink())
        .with_context(|| format!("could not read {}", file.display()))?;
    Ok(start.elapsed().as_secs_f64())
}

/// Resets the kernel's peak-RSS counter of this process (so the probe's buffer does not count).
fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Peak resident memory of this process (`VmHWM`), if the system reports it.
fn peak_rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The folder of the cached random model of `shape`, generating it first if needed.
fn cached_random_model(shape: &str) -> anyhow::Result<PathBuf> {
    let config_json = shape_config(shape)?;
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("cannot find a cache folder: set XDG_CACHE_HOME or HOME")?;
    let dir = cache.join("hearth").join("bench").join(shape);
    let config_text = serde_json::to_string_pretty(&config_json)?;
    let complete = fs::read_to_string(dir.join("config.json")).is_ok_and(|t| t == config_text)
        && dir.join("model.q4nx").is_file();
    if !complete {
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let config = ModelConfig::from_json(&config_text)?;
        eprintln!(
            "generating a random {shape} model in {} (once)",
            dir.display()
        );
        let partial = dir.join("model.q4nx.partial");
        write_random_q4nx(&partial, &config)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        fs::rename(&partial, dir.join("model.q4nx"))?;
        fs::write(dir.join("config.json"), &config_text)?;
    }
    Ok(dir)
}

/// Writes a Q4NX file with every tensor `config` implies: random Q4_1 tiles whose weights
/// `q * d + m` are centred with a spread of about `1 / sqrt(K)` (so activations stay finite
/// through all layers), a random BF16 embedding and all-ones norms.
fn write_random_q4nx(path: &Path, config: &ModelConfig) -> anyhow::Result<()> {
    let tensors = expected_tensors(config);
    let entries: Vec<EntryToWrite> = tensors
        .iter()
        .map(|t| match t.role {
            Role::Linear => {
                let (n, k) = (t.shape[0], q4nx::layout::padded_cols(t.shape[1]));
                EntryToWrite {
                    name: t.name.clone(),
                    dtype: Dtype::I8,
                    shape: vec![n / 32 * (k / 256), 5120],
                }
            }
            Role::Embedding | Role::Norm => EntryToWrite {
                name: t.name.clone(),
                dtype: Dtype::Bf16,
                shape: t.shape.clone(),
            },
        })
        .collect();
    let mut file = BufWriter::with_capacity(1 << 22, fs::File::create(path)?);
    file.write_all(&encode_header(&entries, &Default::default()))?;
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let bf16 = |v: f32| ((v.to_bits() + 0x8000) >> 16) as u16;
    for t in &tensors {
        match t.role {
            Role::Norm => {
                for _ in 0..t.shape[0] {
                    file.write_all(&bf16(1.0).to_le_bytes())?;
                }
            }
            Role::Embedding => {
                let mut row = vec![0u8; t.shape[1] * 2];
                for _ in 0..t.shape[0] {
                    for pair in row.chunks_exact_mut(2) {
                        let v = (rng.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                        pair.copy_from_slice(&bf16(v * 0.1).to_le_bytes());
                    }
                    file.write_all(&row)?;
                }
            }
            Role::Linear => {
                let (n, k) = (t.shape[0], q4nx::layout::padded_cols(t.shape[1]));
                // Uniform codes 0..15 have a standard deviation of 4.6.
                let step = 1.0 / (4.6 * (t.shape[1] as f32).sqrt());
                let mut tile = vec![0u8; 5120];
                for _ in 0..n / 32 * (k / 256) {
                    for j in 0..256 {
                        let d =
                            step * (0.75 + 0.5 * (rng.next() >> 40) as f32 / (1u64 << 24) as f32);
                        let d = f32::from_bits(u32::from(bf16(d)) << 16);
                        tile[2 * j..2 * j + 2].copy_from_slice(&bf16(d).to_le_bytes());
                        tile[512 + 2 * j..514 + 2 * j]
                            .copy_from_slice(&bf16(-7.5 * d).to_le_bytes());
                    }
                    for chunk in tile[1024..].chunks_exact_mut(8) {
                        chunk.copy_from_slice(&rng.next().to_le_bytes());
                    }
                    file.write_all(&tile)?;
                }
            }
        }
    }
    file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    Ok(())
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_avoid_bos_and_eos_and_differ_per_seed() {
        let a = prompt_tokens(512, 1000, 0);
        assert!(a.iter().all(|t| (1..999).contains(t)));
        assert_ne!(a[0], prompt_tokens(512, 1000, 1)[0]);
    }

    #[test]
    fn tiny_random_model_loads_validates_and_generates() {
        let dir = std::env::temp_dir().join(format!("hearth-bench-test-{}", std::process::id()));
        let config = ModelConfig::from_json(&shape_config("tiny").unwrap().to_string()).unwrap();
        fs::create_dir_all(&dir).unwrap();
        write_random_q4nx(&dir.join("model.q4nx"), &config).unwrap();
        fs::write(
            dir.join("config.json"),
            shape_config("tiny").unwrap().to_string(),
        )
        .unwrap();
        let weights = Weights::open(&dir).unwrap();
        q4nx::validate(&weights, &config).expect("random model is a valid Q4NX model");
        let footprint = Footprint::of(&dir).unwrap();
        assert!(footprint.weight_bytes_per_token > 0);
        let mut model = Model::load(&dir, &LoadOptions::default()).unwrap();
        let options = ChatOptions {
            max_tokens: 3,
            ..ChatOptions::default()
        };
        let (_, stats) = model
            .generate(&prompt_tokens(16, 1024, 3), &options, &mut |_| {
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(stats.prompt_tokens, 16);
        fs::remove_dir_all(&dir).unwrap();
    }
}
