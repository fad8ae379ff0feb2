//! `hearth bench`: how fast the CPU engine prefills and decodes, against this machine's own
//! memory read bandwidth measured in the same run (decoding reads every weight once per token,
//! so bandwidth is its ceiling).
//!
//! In the manner of llama-bench: a warm-up, then `--repetitions` runs of a `--prompt`-token
//! prefill followed by `--generate` single-token decode steps; medians are reported. The steps
//! feed fixed tokens, with nothing sampled and no stop token, so every repetition decodes its
//! full length (a real model's greedy answer to a random prompt often ends at once), as
//! `bench/compare_llama_cpp.py` times llama.cpp. The read bandwidth and
//! the arithmetic peak (f32 and int8 multiply-adds per second, the ceiling of prefill) are
//! measured 5 times before and 5 times after the runs. `--ab` instead alternates two settings
//! of one switch decode step by decode step in one process (see [`ab`]). `--shape` benchmarks a
//! random-weight Q4NX model of a known shape, generated once and cached under
//! `$XDG_CACHE_HOME/hearth/bench/` (by default `~/.cache/hearth/bench/`).

use std::fs;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use hearth_engine::cpu::peak::{self, ArithmeticPeak};
use hearth_engine::cpu::{bandwidth, pool, KernelLevel, ThreadPool};
use hearth_engine::{
    ChatMessage, ChatOptions, LoadOptions, Model, ResponseFormat, Role, SamplingParams,
    WeightsMemory,
};
use q4nx::layout::linear_shape;
use q4nx::tile::GROUP;
use q4nx::{ModelConfig, Tensor, Weights};

use crate::busy::{self, BusyLoops};

mod ab;
mod switch;

/// Measure prefill and decode speed against the machine's memory bandwidth.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model folder to benchmark, or a GGUF file: linked (read where it lies, on its own
    /// blocks) into a folder under the bench cache first.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present_any = ["shape", "busy_loop"],
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
    /// Keep every thread at work even while other programs keep CPUs busy (by default fewer
    /// take part then), to measure what adapting gains.
    #[arg(long)]
    fixed_threads: bool,
    /// Read the weights through the file's memory map, not a copy in huge pages (the default
    /// when it fits in memory), to measure what the copy gains.
    #[arg(long)]
    map_weights: bool,
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
    /// Also time two chat tasks with speculative decoding off, on, and as by default (while
    /// drafts pay): one that repeats text (a paragraph, then "rewrite it with one change") and
    /// one that does not. Needs a model with a tokenizer and a chat template (random shapes
    /// have neither).
    #[arg(long)]
    repeat_task: bool,
    /// Temperature of the `--repeat-task` answers: 0 is greedy; above 0 the other sampling
    /// settings keep their defaults and repetition R is seeded with R. Either way every
    /// answer must be the plain one token for token.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "T",
        requires = "repeat_task"
    )]
    task_temperature: f32,
    /// Bytes of the bandwidth probe's buffer, in MiB.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    probe_mib: usize,
    /// Busy-looping processes to run beside the model (another program keeping N cores busy);
    /// started before the model loads, stopped after its runs (the bandwidth probes run
    /// without them).
    #[arg(long, default_value_t = 0, value_name = "N")]
    busy: usize,
    /// Alternate two settings of one switch decode step by decode step in one process, and
    /// report each side's median step time and the median of the per-pair ratios:
    /// `kernel=A,B` (kernel levels, e.g. `kernel=avx512vnni,avx2`), `threads=A,B`,
    /// `attention=A,B` (bf16 or f32), `broadcast=A,B` (register or memory: where attention's
    /// AVX-512 f32 kernels broadcast each value from) or `batch=A,B` (32 or 8 tokens per pass
    /// of the prefill's 4-bit matmuls; with `--ab-prefill`). Each repetition prefills
    /// `--prompt` tokens, then runs `--generate` pairs of steps.
    #[arg(long, value_name = "VARIANT", conflicts_with = "repeat_task")]
    ab: Option<String>,
    /// With `--ab`: alternate whole prefills of `--prompt` tokens from an empty context instead
    /// of decode steps (`--repetitions` pairs).
    #[arg(long, requires = "ab")]
    ab_prefill: bool,
    /// Attention's products for a quantized model: bf16 (BF16 dot products with f32 sums,
    /// where the level has them) or f32 (exact) [default: bf16 where it is faster here].
    #[arg(long, value_name = "PRODUCTS")]
    attention: Option<String>,
    /// Time the first word on coming back to a conversation of `--prompt` tokens after another
    /// as long, with the KV store (what was computed for conversations switched away from,
    /// kept) and without it, alternating (`--repetitions` pairs; see `bench/switch.rs`).
    #[arg(long, conflicts_with_all = ["ab", "repeat_task"])]
    switch: bool,
    /// Be one of those busy processes (what `--busy` starts).
    #[arg(long, hide = true)]
    busy_loop: bool,
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

/// Runs the verb: bandwidth before, the model's runs, bandwidth after, then the report.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.busy_loop {
        busy::busy_loop();
    }
    let started = Instant::now();
    let level = kernel_level(args.kernel.as_deref())?;
    let threads = args.threads.unwrap_or_else(pool::physical_cores).max(1);
    let variant = args.ab.as_deref().map(ab::Variant::parse).transpose()?;
    let dir = match (&args.model, &args.shape) {
        (Some(file), _) if file.is_file() => linked_gguf(file)?,
        (Some(dir), _) => dir.clone(),
        (None, Some(shape)) => cached_random_model(shape)?,
        (None, None) => bail!("give --model DIR or --shape NAME"),
    };
    if args.switch {
        return switch::run(&dir, &args, threads, level);
    }
    if let Some(variant) = variant {
        return ab::run(&dir, &args, variant, threads, level);
    }

    // Bandwidth before and after the runs (the median of both, so a machine whose speed drifts
    // is compared with itself), each time outside the peak-memory figure. The probe has a pool
    // of the model's size; it sleeps while the model runs.
    let probe_pool = ThreadPool::fixed(threads);
    let probe = || bandwidth::measure_read_bandwidth(&probe_pool, args.probe_mib << 20, 5);
    let mut bandwidth_samples = probe().samples_gbps;
    let peak_before = peak::measure_peak(&probe_pool, 5);
    let peak_reset = reset_peak_rss();

    let footprint = Footprint::of(&dir)?;
    // The first-token figure is for a cached model, as a user who opens Hearth again has; a
    // cold start adds reading the file from disk (reported separately).
    let page_cache_secs = read_into_page_cache(&footprint.file)?;
    let busy = BusyLoops::start(args.busy)?;
    let runs = time_model(&dir, &args, threads, level);
    drop(busy);
    let runs = runs?;
    bandwidth_samples.extend(probe().samples_gbps);
    let peak = peak_before.merge(peak::measure_peak(&probe_pool, 5));

    let summary = Summary {
        dir,
        threads,
        level,
        bandwidth_gbps: bandwidth::median(&bandwidth_samples),
        bandwidth_samples,
        peak,
        peak_reset,
        footprint,
        page_cache_secs,
        l3_cache_bytes: bandwidth::l3_cache_bytes(),
        runs,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = summary.json(&args, started.elapsed().as_secs_f64());
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        summary.write_table(&args, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--attention`: Some(true) for bf16, Some(false) for f32, None for the default.
fn bf16_attention(products: Option<&str>) -> anyhow::Result<Option<bool>> {
    match products {
        None => Ok(None),
        Some("bf16") => Ok(Some(true)),
        Some("f32") => Ok(Some(false)),
        Some(other) => bail!("--attention {other:?}: use bf16 or f32"),
    }
}

/// The `--kernel` level, or the best this CPU has; an error names what it can run instead.
fn kernel_level(name: Option<&str>) -> anyhow::Result<KernelLevel> {
    let level = match name {
        Some(name) => KernelLevel::parse(name).context("--kernel")?,
        None => KernelLevel::detect(),
    };
    if !level.is_supported() {
        bail!(
            "this CPU cannot run the {level} kernels; supported: {:?}",
            KernelLevel::supported()
        );
    }
    Ok(level)
}

/// What the model's runs measured.
struct Runs {
    load_secs: f64,
    /// Load plus the first token of a short prompt.
    first_token_secs: f64,
    /// Tokens per second of each timed repetition.
    prefill: Vec<f64>,
    decode: Vec<f64>,
    /// Threads taking part at the end of each timed repetition.
    active_threads: Vec<usize>,
    kv_cache_bytes: usize,
    /// Whether attention's products were BF16 (else f32).
    bf16_attention: bool,
    /// Where attention's AVX-512 f32 kernels broadcast a value from
    /// (`Model::attention_broadcast`).
    attention_broadcast: Option<&'static str>,
    weights_memory: WeightsMemory,
    peak_memory: Option<u64>,
    /// With `--repeat-task`: the task that repeats text, then the one that does not.
    tasks: Vec<TaskRuns>,
}

/// The chat tasks of `--repeat-task`: a name and the user's message.
const TASKS: [(&str, &str); 2] = [
    (
        "repeat",
        "Here is a paragraph:\n\nThe lighthouse stood at the end of a narrow spit of rock, \
         white paint peeling in long strips from its tower. Every evening the keeper climbed the \
         one hundred and twelve steps, trimmed the wick, polished the great lens and watched \
         the beam sweep across the water. Ships passed far out on the horizon, and none of them \
         knew his name, but each of them turned a little to the north when they saw the light.\n\n\
         Rewrite this paragraph with one change: the keeper is a woman.",
    ),
    (
        "free",
        "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    ),
];

/// One task's runs with speculative decoding off, on, and as by default.
struct TaskRuns {
    name: &'static str,
    /// Decode tokens per second of each repetition: plain, drafting wherever a draft is found,
    /// and drafting while it pays (the default).
    plain: Vec<f64>,
    speculative: Vec<f64>,
    default: Vec<f64>,
    /// Summed over the speculative repetitions (drafting wherever it can).
    decoded: usize,
    drafted: usize,
    accepted: usize,
    /// Drafted tokens summed over the default's repetitions.
    default_drafted: usize,
    /// Whether every answer had the plain answer's tokens.
    same_tokens: bool,
}

impl TaskRuns {
    fn acceptance(&self) -> f64 {
        self.accepted as f64 / self.drafted.max(1) as f64
    }

    /// Decoded tokens per forward pass: each pass yields its accepted drafts and one token more.
    fn tokens_per_pass(&self) -> f64 {
        self.decoded as f64 / (self.decoded - self.accepted).max(1) as f64
    }

    /// The object of `--json`'s `tasks`.
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "task": self.name,
            "plain_decode_tokens_per_s": bandwidth::median(&self.plain),
            "speculative_decode_tokens_per_s": bandwidth::median(&self.speculative),
            "default_decode_tokens_per_s": bandwidth::median(&self.default),
            "plain_samples": self.plain,
            "speculative_samples": self.speculative,
            "default_samples": self.default,
            "drafted_tokens": self.drafted,
            "accepted_drafts": self.accepted,
            "acceptance_rate": self.acceptance(),
            "tokens_per_pass": self.tokens_per_pass(),
            "default_drafted_tokens": self.default_drafted,
            "same_tokens": self.same_tokens,
        })
    }
}

/// Loads the model, times its first token, warms up, then runs the timed repetitions.
fn time_model(dir: &Path, args: &Args, threads: usize, level: KernelLevel) -> anyhow::Result<Runs> {
    let load_start = Instant::now();
    // The chat tasks' prompts are a few hundred tokens.
    let task_prompt = if args.repeat_task { 512 } else { 0 };
    let context = args.prompt.max(task_prompt) + args.generate + 8;
    let mut model = Model::load(
        dir,
        &LoadOptions {
            context_length: Some(context),
            threads: Some(threads),
            fixed_threads: args.fixed_threads,
            map_weights: args.map_weights,
            kernel: Some(level),
            bf16_attention: bf16_attention(args.attention.as_deref())?,
            ..LoadOptions::default()
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
        // The decode figure is one token per pass; `--repeat-task` measures speculation.
        speculative: Some(false),
        format: ResponseFormat::Text,
    };

    // First token of a short prompt right after loading: what a user waits for.
    let (_, first) = model.generate(&prompt_tokens(8, vocab, 1000), &greedy, &mut |_| {
        ControlFlow::Continue(())
    })?;
    let first_token_secs = load_secs + first.ttft_secs;

    // Warm-up: a shorter run through both paths.
    let warm = ChatOptions {
        max_tokens: 4.min(args.generate + 1),
        ..greedy
    };
    model.generate(
        &prompt_tokens(args.prompt.min(64), vocab, 1001),
        &warm,
        &mut |_| ControlFlow::Continue(()),
    )?;

    let (mut prefill, mut decode, mut active_threads) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..args.repetitions.max(1) {
        // A different first token each time, so no prefix is reused from the cache.
        let prompt = prompt_tokens(args.prompt, vocab, rep as u64);
        let start = Instant::now();
        model.feed(&prompt, true)?;
        let prefill_secs = start.elapsed().as_secs_f64();
        let steps = prompt_tokens(args.generate, vocab, 2000 + rep as u64);
        let start = Instant::now();
        for &token in &steps {
            model.feed(&[token], false)?;
        }
        let decode_secs = start.elapsed().as_secs_f64();
        prefill.push(prompt.len() as f64 / prefill_secs);
        if !steps.is_empty() {
            decode.push(steps.len() as f64 / decode_secs);
        }
        active_threads.push(model.active_threads());
        tracing::info!(rep, prefill_secs, decode_secs, "bench repetition");
    }
    let mut tasks = Vec::new();
    if args.repeat_task {
        for (name, message) in TASKS {
            tasks.push(time_task(&mut model, name, message, args)?);
        }
    }
    Ok(Runs {
        load_secs,
        first_token_secs,
        prefill,
        decode,
        active_threads,
        kv_cache_bytes: model.kv_cache_bytes(),
        bf16_attention: model.bf16_attention(),
        attention_broadcast: model.attention_broadcast(),
        weights_memory: model.weights_memory(),
        peak_memory: peak_rss_bytes(),
        tasks,
    })
}

/// Answers `message` `--repetitions` times with speculative decoding off, on, then as by
/// default, at `--task-temperature`.
fn time_task(
    model: &mut Model,
    name: &'static str,
    message: &str,
    args: &Args,
) -> anyhow::Result<TaskRuns> {
    let options = |speculative: Option<bool>, rep: usize| ChatOptions {
        sampling: SamplingParams {
            temperature: args.task_temperature,
            seed: rep as u64,
            ..SamplingParams::default()
        },
        max_tokens: args.generate + 1,
        enable_thinking: None,
        speculative,
        format: ResponseFormat::Text,
    };
    let messages = [ChatMessage::new(Role::User, message)];
    let prompt = model
        .tokenize_chat(&messages, &options(Some(false), 0))
        .context("--repeat-task needs a model with a tokenizer and a chat template")?;
    let mut runs = TaskRuns {
        name,
        plain: Vec::new(),
        speculative: Vec::new(),
        default: Vec::new(),
        decoded: 0,
        drafted: 0,
        accepted: 0,
        default_drafted: 0,
        same_tokens: true,
    };
    for rep in 0..args.repetitions.max(1) {
        let mut answer = |speculative| {
            model.generate(&prompt, &options(speculative, rep), &mut |_| {
                ControlFlow::Continue(())
            })
        };
        let (plain, stats) = answer(Some(false))?;
        runs.plain.extend(stats.decode_tokens_per_sec());
        let (fast, stats) = answer(Some(true))?;
        runs.speculative.extend(stats.decode_tokens_per_sec());
        runs.decoded += stats.generated_tokens.saturating_sub(1);
        runs.drafted += stats.drafted_tokens;
        runs.accepted += stats.accepted_drafts;
        tracing::info!(rep, name, ?stats, "bench task repetition, drafting");
        let (default, stats) = answer(None)?;
        runs.default.extend(stats.decode_tokens_per_sec());
        runs.default_drafted += stats.drafted_tokens;
        runs.same_tokens &= fast == plain && default == plain;
        tracing::info!(rep, name, ?stats, "bench task repetition, by default");
    }
    Ok(runs)
}

/// Everything one bench run found, for the JSON report or the table.
struct Summary {
    dir: PathBuf,
    threads: usize,
    level: KernelLevel,
    bandwidth_gbps: f64,
    bandwidth_samples: Vec<f64>,
    /// f32 and int8 multiply-adds per second, measured with the bandwidth.
    peak: ArithmeticPeak,
    /// Whether the peak-memory counter could be reset after the first probe.
    peak_reset: bool,
    footprint: Footprint,
    page_cache_secs: f64,
    /// This CPU's L3 cache, where Linux reports it ([`bandwidth::l3_cache_bytes`]).
    l3_cache_bytes: Option<u64>,
    runs: Runs,
}

impl Summary {
    fn decode_tps(&self) -> f64 {
        bandwidth::median(&self.runs.decode)
    }

    fn prefill_tps(&self) -> f64 {
        bandwidth::median(&self.runs.prefill)
    }

    /// Bytes a decode step reads per second, in GB/s.
    fn decode_bandwidth_gbps(&self) -> f64 {
        self.decode_tps() * self.footprint.weight_bytes_per_token as f64 / 1e9
    }

    /// The decode's share of the measured read bandwidth.
    fn roofline(&self) -> f64 {
        self.decode_bandwidth_gbps() / self.bandwidth_gbps
    }

    /// Bytes of the KV cache a decode step reads, averaged over the timed steps (at positions
    /// `prompt..prompt + generate`): beside the weights, what a step streams from memory.
    fn kv_bytes_per_decode_token(&self, args: &Args) -> f64 {
        let mean_position = args.prompt as f64 + args.generate as f64 / 2.0;
        mean_position * self.footprint.kv_bytes_per_position as f64
    }

    /// The decode's share of the measured read bandwidth, counting the KV cache's bytes too.
    fn roofline_with_kv(&self, args: &Args) -> f64 {
        let bytes =
            self.footprint.weight_bytes_per_token as f64 + self.kv_bytes_per_decode_token(args);
        self.decode_tps() * bytes / 1e9 / self.bandwidth_gbps
    }

    /// Prefill's matmul multiply-adds per second, in 10^9 (those of the measured prompt).
    fn prefill_matmul_gmacs(&self) -> f64 {
        self.prefill_tps() * self.footprint.matmul_macs_per_token as f64 / 1e9
    }

    /// The prefill matmuls' share of the int8 peak (they are int8 dot products).
    fn prefill_matmul_fraction(&self) -> Option<f64> {
        let int8 = self.peak.int8.as_ref()?;
        Some(self.prefill_matmul_gmacs() / int8.gmacs)
    }

    /// The fastest prefill of `tokens` tokens the peaks allow, in tokens per second: its
    /// matmuls at the int8 peak plus its attention at the peak of its products (f32, or BF16
    /// dot products), nothing else.
    fn prefill_ceiling_tps(&self, tokens: usize) -> Option<f64> {
        let int8 = self.peak.int8.as_ref()?;
        let products = match self.runs.bf16_attention {
            true => self.peak.bf16.as_ref()?,
            false => self.peak.f32.as_ref()?,
        };
        let matmul = (tokens * self.footprint.matmul_macs_per_token) as f64 / (int8.gmacs * 1e9);
        let attention = self.footprint.attention_macs(tokens) / (products.gmacs * 1e9);
        Some(tokens as f64 / (matmul + attention))
    }

    /// The JSON object `--json` prints (the comparison script and the README read it).
    fn json(&self, args: &Args, total_secs: f64) -> serde_json::Value {
        let runs = &self.runs;
        let mut json = serde_json::json!({
            "model": self.dir.display().to_string(),
            "shape": args.shape,
            "threads": self.threads,
            "fixed_threads": args.fixed_threads,
            "active_threads_samples": runs.active_threads,
            "busy_processes": args.busy,
            "kernel_level": self.level.name(),
            "attention_products": if runs.bf16_attention { "bf16" } else { "f32" },
            "prompt_tokens": args.prompt,
            "generated_tokens": args.generate,
            "repetitions": args.repetitions.max(1),
            "prefill_tokens_per_s": self.prefill_tps(),
            "decode_tokens_per_s": self.decode_tps(),
            "prefill_samples": runs.prefill,
            "decode_samples": runs.decode,
            "weight_bytes_per_token": self.footprint.weight_bytes_per_token,
            "measured_read_bandwidth_gbps": self.bandwidth_gbps,
            "bandwidth_samples_gbps": self.bandwidth_samples,
            "decode_bandwidth_gbps": self.decode_bandwidth_gbps(),
            "roofline_fraction": self.roofline(),
            "kv_cache_bytes_per_decode_token": self.kv_bytes_per_decode_token(args),
            "roofline_fraction_with_kv_cache": self.roofline_with_kv(args),
            "l3_cache_bytes": self.l3_cache_bytes,
            "arithmetic_peak": self.peak,
            "prefill_matmul_macs_per_token": self.footprint.matmul_macs_per_token,
            "prefill_attention_macs": self.footprint.attention_macs(args.prompt),
            "prefill_matmul_gmacs": self.prefill_matmul_gmacs(),
            "prefill_matmul_fraction_of_int8_peak": self.prefill_matmul_fraction(),
            "prefill_ceiling_tokens_per_s": self.prefill_ceiling_tps(args.prompt),
            "prefill_4096_ceiling_tokens_per_s": self.prefill_ceiling_tps(CEILING_PROMPT),
            "model_file_bytes": self.footprint.file_bytes,
            "kv_cache_bytes": runs.kv_cache_bytes,
            "weights_memory": runs.weights_memory,
            "peak_memory_bytes": runs.peak_memory,
            "peak_memory_is_exact": self.peak_reset,
            "load_secs": runs.load_secs,
            "first_token_secs": runs.first_token_secs,
            "page_cache_read_secs": self.page_cache_secs,
            "total_secs": total_secs,
            "task_temperature": args.task_temperature,
            "tasks": runs.tasks.iter().map(TaskRuns::json).collect::<Vec<_>>(),
        });
        // Past what one `json!` expands within the recursion limit.
        json["attention_broadcast"] = runs.attention_broadcast.into();
        json
    }

    /// The table for people.
    fn write_table(&self, args: &Args, out: &mut impl Write) -> std::io::Result<()> {
        let mib = |b: Option<u64>| {
            b.map_or_else(
                || "unknown".to_owned(),
                |b| format!("{:.0} MiB", b as f64 / 1048576.0),
            )
        };
        let (runs, footprint) = (&self.runs, &self.footprint);
        writeln!(out, "model            {}", self.dir.display())?;
        let taking_part = if args.fixed_threads {
            "all, fixed".to_owned()
        } else {
            format!("{:?} at the end of each run", runs.active_threads)
        };
        let broadcast = match runs.attention_broadcast {
            Some(from) => format!(" (attention broadcast: {from})"),
            None => String::new(),
        };
        writeln!(
            out,
            "threads          {} (taking part: {taking_part})   kernels {}{broadcast}   busy \
             processes {}",
            self.threads, self.level, args.busy
        )?;
        writeln!(
            out,
            "read bandwidth   {:.2} GB/s (median of {} before and after, {} MiB buffer)",
            self.bandwidth_gbps,
            self.bandwidth_samples.len(),
            args.probe_mib
        )?;
        writeln!(
            out,
            "prefill          {:.2} tok/s ({} tokens, median of {})",
            self.prefill_tps(),
            args.prompt,
            runs.prefill.len()
        )?;
        writeln!(
            out,
            "decode           {:.2} tok/s ({} tokens, median of {})",
            self.decode_tps(),
            args.generate,
            runs.decode.len()
        )?;
        writeln!(
            out,
            "weights/token    {:.3} GB -> {:.2} GB/s = {:.0}% of measured bandwidth",
            footprint.weight_bytes_per_token as f64 / 1e9,
            self.decode_bandwidth_gbps(),
            self.roofline() * 100.0
        )?;
        writeln!(
            out,
            "and KV cache     {:.3} GB/token (mean over the decoded positions) -> {:.0}% of \
             measured bandwidth with the weights",
            self.kv_bytes_per_decode_token(args) / 1e9,
            self.roofline_with_kv(args) * 100.0
        )?;
        if let Some(l3) = self
            .l3_cache_bytes
            .filter(|&l3| footprint.weight_bytes_per_token as u64 <= l3)
        {
            writeln!(
                out,
                "                 the weights fit in this CPU's {:.0} MiB L3 cache: steps can \
                 read part of them from it, faster than memory, so these shares can pass 100%",
                l3 as f64 / 1048576.0
            )?;
        }
        self.write_peak(args, out)?;
        writeln!(
            out,
            "peak memory      {} (model file {:.0} MiB, weights in {})",
            mib(runs.peak_memory),
            footprint.file_bytes as f64 / 1048576.0,
            runs.weights_memory.name()
        )?;
        writeln!(
            out,
            "load {:.2} s, first token {:.2} s after start of load \
             (file read into the page cache first, in {:.2} s)",
            runs.load_secs, runs.first_token_secs, self.page_cache_secs
        )?;
        for t in &runs.tasks {
            let [plain, fast, default] =
                [&t.plain, &t.speculative, &t.default].map(|runs| bandwidth::median(runs));
            writeln!(
                out,
                "{:<6} task      plain {plain:.2} tok/s, drafting {fast:.2} tok/s ({:.2}x; \
                 {:.0}% of {} drafts accepted, {:.2} tokens per pass), by default {default:.2} \
                 tok/s ({:.2}x); same tokens: {}",
                t.name,
                fast / plain,
                t.acceptance() * 100.0,
                t.drafted,
                t.tokens_per_pass(),
                default / plain,
                if t.same_tokens { "yes" } else { "NO" }
            )?;
        }
        Ok(())
    }
}

impl Summary {
    /// The arithmetic peak lines of the table: the peaks, then prefill against them.
    fn write_peak(&self, args: &Args, out: &mut impl Write) -> std::io::Result<()> {
        let rate = |rate: &Option<peak::PeakRate>| match rate {
            Some(r) => format!(
                "{:.1} G/s ({}, median of {})",
                r.gmacs,
                r.instruction,
                r.samples_gmacs.len()
            ),
            None => "not measured (no SIMD for it)".to_owned(),
        };
        writeln!(out, "peak f32 mul-add  {}", rate(&self.peak.f32))?;
        writeln!(out, "peak int8 mul-add {}", rate(&self.peak.int8))?;
        if self.peak.bf16.is_some() {
            writeln!(out, "peak bf16 mul-add {}", rate(&self.peak.bf16))?;
        }
        let macs = self.footprint.matmul_macs_per_token;
        match self.prefill_matmul_fraction() {
            Some(fraction) => writeln!(
                out,
                "prefill matmuls  {:.3} G mul-adds/token -> {:.1} G/s = {:.0}% of the int8 peak",
                macs as f64 / 1e9,
                self.prefill_matmul_gmacs(),
                fraction * 100.0
            )?,
            None => writeln!(
                out,
                "prefill matmuls  {:.3} G mul-adds/token",
                macs as f64 / 1e9
            )?,
        }
        if let (Some(here), Some(long)) = (
            self.prefill_ceiling_tps(args.prompt),
            self.prefill_ceiling_tps(CEILING_PROMPT),
        ) {
            writeln!(
                out,
                "prefill ceiling  {here:.1} tok/s at {} tokens (measured: {:.0}% of it), \
                 {long:.1} tok/s at {CEILING_PROMPT} (matmuls at the int8 peak, attention at \
                 the {} peak)",
                args.prompt,
                self.prefill_tps() / here * 100.0,
                if self.runs.bf16_attention {
                    "bf16"
                } else {
                    "f32"
                }
            )?;
        }
        Ok(())
    }
}

/// The prompt length whose prefill ceiling the report always gives: MiniCPM5-2B's default
/// context.
const CEILING_PROMPT: usize = 4096;

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

/// What one decode step reads, what a prefill computes, and how big the model is.
struct Footprint {
    /// Every linear weight's bytes that a kernel reads (its stored bytes without the padding)
    /// plus one embedding row and the norms.
    weight_bytes_per_token: usize,
    /// Multiply-adds of the layers' matmuls per prompt token (N x K of each, from the model's
    /// shapes); the output head runs once per prefill and is left out.
    matmul_macs_per_token: usize,
    /// Layers x query heads x head dimension: attention's multiply-adds per (query, position)
    /// pair, over the scores and the weighted sum of values each.
    attention_macs_per_pair: usize,
    /// Bytes of keys and values one position holds in the KV cache (all layers; f16 for a
    /// quantized model, f32 for a dense one): what a decode step reads per position before it.
    kv_bytes_per_position: usize,
    file: PathBuf,
    file_bytes: u64,
}

impl Footprint {
    fn of(dir: &Path) -> anyhow::Result<Footprint> {
        let config = ModelConfig::from_path(&dir.join("config.json"))?;
        let weights = Weights::open(dir)?;
        let mut bytes = 0usize;
        let matmul_macs_per_token = weights
            .names()
            .into_iter()
            .filter(|name| *name != "lm_head.weight")
            .filter_map(|name| linear_shape(&config, name))
            .map(|[n, k]| n * k)
            .sum();
        for name in weights.names() {
            bytes += match weights.get(name)? {
                // The kernels read only the groups that hold real columns, not the padding
                // of K to whole tiles (a quarter of SmolLM2-135M's tiles).
                Tensor::Q4_1(m) | Tensor::Q8(m) => {
                    let k = linear_shape(&config, name).map_or(m.cols, |[_, k]| k);
                    m.bytes.len() / (m.cols / GROUP) * k.div_ceil(GROUP)
                }
                Tensor::Dense(d) if name == "model.embed_tokens.weight" => {
                    d.bytes.len() / config.vocab_size
                }
                Tensor::Dense(d) => d.bytes.len(),
                Tensor::Gguf(m) if name == "model.embed_tokens.weight" => m.row_bytes(),
                Tensor::Gguf(m) => m.bytes.len(),
            };
        }
        if config.tie_word_embeddings && !weights.names().contains(&"lm_head.weight") {
            // The head is the embedding: all of it, in its own blocks for a linked GGUF.
            bytes += match weights.get("model.embed_tokens.weight")? {
                Tensor::Gguf(m) => m.bytes.len(),
                _ => config.vocab_size * config.hidden_size * 2,
            };
        }
        let file_bytes = fs::metadata(weights.path()).map(|m| m.len()).unwrap_or(0);
        let kv_value_bytes = match weights.format() {
            q4nx::WeightFormat::Q4nx | q4nx::WeightFormat::Gguf => 2,
            q4nx::WeightFormat::Safetensors => 4,
        };
        Ok(Footprint {
            weight_bytes_per_token: bytes,
            matmul_macs_per_token,
            attention_macs_per_pair: config.num_hidden_layers
                * config.num_attention_heads
                * config.head_dim,
            kv_bytes_per_position: config.num_hidden_layers
                * config.num_key_value_heads
                * config.head_dim
                * 2
                * kv_value_bytes,
            file: weights.path().to_path_buf(),
            file_bytes,
        })
    }
}

impl Footprint {
    /// Attention's multiply-adds in a prefill of `tokens` tokens from an empty context: query
    /// `i` scores positions `0..=i` and sums their values, `head_dim` products each.
    fn attention_macs(&self, tokens: usize) -> f64 {
        let pairs = tokens as f64 * (tokens as f64 + 1.0) / 2.0;
        2.0 * pairs * self.attention_macs_per_pair as f64
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

/// A link folder for the GGUF `file` (`q4nx::gguf::link_gguf`: the engine reads the file's own
/// blocks where it lies), written afresh under the bench cache's `linked/` on every run.
fn linked_gguf(file: &Path) -> anyhow::Result<PathBuf> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let dir = bench_cache()?.join("linked").join(stem);
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    q4nx::gguf::link_gguf(file, &dir, &mut |_| {})
        .with_context(|| format!("could not link {} for the bench", file.display()))?;
    Ok(dir)
}

/// The bench's cache folder: `$XDG_CACHE_HOME/hearth/bench`, by default `~/.cache/hearth/bench`.
fn bench_cache() -> anyhow::Result<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("cannot find a cache folder: set XDG_CACHE_HOME or HOME")?;
    Ok(cache.join("hearth").join("bench"))
}

/// The seed of every random model the bench writes (the same shape gives the same model).
const RANDOM_MODEL_SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// The folder of the cached random model of `shape`, generating it first if needed.
fn cached_random_model(shape: &str) -> anyhow::Result<PathBuf> {
    let config_json = shape_config(shape)?;
    let dir = bench_cache()?.join(shape);
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
        q4nx::synthetic::write_random_model(&dir, &config, RANDOM_MODEL_SEED)?;
        fs::write(dir.join("config.json"), &config_text)?;
    }
    Ok(dir)
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
        q4nx::synthetic::write_random_model(&dir, &config, RANDOM_MODEL_SEED).unwrap();
        fs::write(
            dir.join("config.json"),
            shape_config("tiny").unwrap().to_string(),
        )
        .unwrap();
        let weights = Weights::open(&dir).unwrap();
        q4nx::validate(&weights, &config).expect("random model is a valid Q4NX model");
        let footprint = Footprint::of(&dir).unwrap();
        assert!(footprint.weight_bytes_per_token > 0);
        // Per layer: q and o 256 x 256, k and v 128 x 256, gate and up 512 x 256, down
        // 256 x 512; two layers; the head left out.
        assert_eq!(footprint.matmul_macs_per_token, 2 * 589_824);
        // 4 tokens: 10 (query, position) pairs x 2 layers x 4 heads x 64 x 2 products.
        assert_eq!(footprint.attention_macs(4), 10.0 * 2.0 * 4.0 * 64.0 * 2.0);
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
