//! `hearth bench --ab VARIANT`: two settings of one switch, alternated decode step by decode
//! step in one process.
//!
//! On a shared host the speed drifts by tens of percent within minutes, so two runs one after
//! the other compare two moments as much as two settings. Here each pair of steps runs A then
//! B (B then A in every other pair, so neither always follows the other), at neighbouring
//! positions of the same context, and the claim is the median of the per-pair ratios: drift
//! slower than a step cancels out. Each repetition forgets the context and prefills `--prompt`
//! tokens (untimed), then runs `--generate` pairs of one-token steps (no sampling: the tokens
//! are fixed, so both sides compute the same thing).
//!
//! The variants are switches that exist as settings of a model's [`CpuContext`]: the kernel
//! level (both sides on one pool, its level set before each step) and the thread count (a pool
//! per side). Speculative decoding is not a per-step switch (a draft pass is several tokens);
//! `--repeat-task` measures it.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use hearth_engine::cpu::{bandwidth, CpuContext, KernelLevel, ThreadPool, BATCH};
use hearth_engine::{LoadOptions, Model};

use super::{kernel_level, prompt_tokens, Args};
use crate::busy::BusyLoops;

/// The two settings `--ab` alternates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `kernel=A,B`: two kernel levels, on the same threads.
    Kernel([KernelLevel; 2]),
    /// `threads=A,B`: two thread counts, at the same kernel level.
    Threads([usize; 2]),
    /// `attention=A,B`: attention's products in BF16 (`bf16`) or f32 (`f32`), on the same
    /// threads and level (a quantized model's; a dense model's attention is exact either way).
    Attention([bool; 2]),
    /// `broadcast=A,B`: attention's AVX-512 f32 kernels broadcasting each query or weight
    /// value into a `register` or from `memory`; the same sums either way (which is faster
    /// differs by core, and a probe picks it when a model loads).
    Broadcast([bool; 2]),
    /// `batch=A,B`: tokens per pass of a prefill's 4-bit matmuls over their tiles,
    /// [`hearth_engine::cpu::BATCH`] (the interleaved-batch kernel, where the level has it) or
    /// 8; the same bits either way.
    Batch([usize; 2]),
}

impl Variant {
    /// Parses `kernel=A,B`, `threads=A,B`, `attention=A,B`, `broadcast=A,B` or `batch=A,B`;
    /// an error says what is accepted.
    pub fn parse(text: &str) -> anyhow::Result<Variant> {
        let usage = "use kernel=A,B (e.g. kernel=avx512vnni,avx2), threads=A,B (e.g. \
                     threads=1,2), attention=A,B (bf16 or f32), broadcast=A,B (register or \
                     memory) or batch=A,B (32 or 8)";
        let Some((switch, values)) = text.split_once('=') else {
            bail!("--ab {text:?}: {usage}");
        };
        let values: Vec<&str> = values.split(',').map(str::trim).collect();
        let [a, b] = values[..] else {
            bail!("--ab {text:?} needs exactly two settings: {usage}");
        };
        match switch.trim() {
            "kernel" => Ok(Variant::Kernel([
                kernel_level(Some(a))?,
                kernel_level(Some(b))?,
            ])),
            "threads" => {
                let count = |v: &str| match v.parse::<usize>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(anyhow::anyhow!(
                        "--ab {text:?}: {v:?} is not a thread count (a whole number from 1)"
                    )),
                };
                Ok(Variant::Threads([count(a)?, count(b)?]))
            }
            "attention" => {
                let bf16 = |v: &str| match v {
                    "bf16" => Ok(true),
                    "f32" => Ok(false),
                    _ => Err(anyhow::anyhow!(
                        "--ab {text:?}: {v:?} is not bf16 or f32 (attention's products)"
                    )),
                };
                Ok(Variant::Attention([bf16(a)?, bf16(b)?]))
            }
            "broadcast" => {
                let in_register = |v: &str| match v {
                    "register" => Ok(true),
                    "memory" => Ok(false),
                    _ => Err(anyhow::anyhow!(
                        "--ab {text:?}: {v:?} is not register or memory (where attention's \
                         kernels broadcast a value from)"
                    )),
                };
                Ok(Variant::Broadcast([in_register(a)?, in_register(b)?]))
            }
            "batch" => {
                let tokens = |v: &str| match v.parse::<usize>() {
                    Ok(n) if n == BATCH || n == 8 => Ok(n),
                    _ => Err(anyhow::anyhow!(
                        "--ab {text:?}: {v:?} is not {BATCH} or 8 (tokens per pass of the \
                         prefill's matmuls)"
                    )),
                };
                Ok(Variant::Batch([tokens(a)?, tokens(b)?]))
            }
            other => bail!("--ab {text:?}: unknown switch {other:?}: {usage}"),
        }
    }

    /// The switch's name, as `--ab` spells it.
    fn switch(self) -> &'static str {
        match self {
            Variant::Kernel(_) => "kernel",
            Variant::Threads(_) => "threads",
            Variant::Attention(_) => "attention",
            Variant::Broadcast(_) => "broadcast",
            Variant::Batch(_) => "batch",
        }
    }

    /// Each side's setting, as `--ab` spells it.
    fn sides(self) -> [String; 2] {
        match self {
            Variant::Kernel(levels) => levels.map(|l| l.name().to_owned()),
            Variant::Threads(counts) => counts.map(|n| n.to_string()),
            Variant::Attention(bf16) => bf16.map(|b| if b { "bf16" } else { "f32" }.to_owned()),
            Variant::Broadcast(in_register) => {
                in_register.map(|r| if r { "register" } else { "memory" }.to_owned())
            }
            Variant::Batch(tokens) => tokens.map(|n| n.to_string()),
        }
    }
}

/// The contexts the two sides compute with: a pool per side (`threads=`), or one pool for
/// both sides whose setting is switched before each step (the others).
struct Contexts {
    cpus: Vec<CpuContext>,
    variant: Variant,
}

impl Contexts {
    fn new(variant: Variant, threads: usize, level: KernelLevel, fixed: bool) -> Contexts {
        let pool = |threads| match fixed {
            true => ThreadPool::fixed(threads),
            false => ThreadPool::new(threads),
        };
        let cpus = match variant {
            Variant::Kernel(levels) => vec![CpuContext::with_pool(pool(threads), levels[0])],
            Variant::Threads(counts) => counts
                .iter()
                .map(|&n| CpuContext::with_pool(pool(n), level))
                .collect(),
            Variant::Attention(_) | Variant::Broadcast(_) | Variant::Batch(_) => {
                vec![CpuContext::with_pool(pool(threads), level)]
            }
        };
        Contexts { cpus, variant }
    }

    /// The context of side `side` (0 for A, 1 for B), set up for it.
    fn side(&mut self, side: usize) -> &mut CpuContext {
        if let Variant::Threads(_) = self.variant {
            return &mut self.cpus[side];
        }
        let cpu = &mut self.cpus[0];
        match self.variant {
            Variant::Kernel(levels) => cpu.set_level(levels[side]),
            Variant::Attention(bf16) => cpu.set_bf16_attention(bf16[side]),
            Variant::Broadcast(in_register) => cpu.set_broadcast_in_register(in_register[side]),
            Variant::Batch(tokens) => cpu.set_interleaved_batches(tokens[side] == BATCH),
            Variant::Threads(_) => unreachable!("a pool per side, returned above"),
        }
        cpu
    }
}

/// Step times of both sides, pair by pair, in seconds.
#[derive(Debug, Default)]
struct Pairs {
    a: Vec<f64>,
    b: Vec<f64>,
}

impl Pairs {
    /// How many times as fast A is as B, pair by pair: B's time over A's.
    fn ratios(&self) -> Vec<f64> {
        self.a.iter().zip(&self.b).map(|(a, b)| b / a).collect()
    }
}

/// Loads the model, runs the alternating steps, and prints the report.
pub fn run(
    dir: &Path,
    args: &Args,
    variant: Variant,
    threads: usize,
    level: KernelLevel,
) -> anyhow::Result<ExitCode> {
    let steps = args.generate.max(1);
    let mut model = Model::load(
        dir,
        &LoadOptions {
            context_length: Some(args.prompt + 2 * steps + 8),
            // The model's own pool stays idle: every pass runs on the sides' contexts.
            threads: Some(1),
            fixed_threads: args.fixed_threads,
            map_weights: args.map_weights,
            kernel: Some(level),
            ..LoadOptions::default()
        },
    )
    .with_context(|| format!("could not load the model in {}", dir.display()))?;
    let mut contexts = Contexts::new(variant, threads, level, args.fixed_threads);
    let busy = BusyLoops::start(args.busy)?;
    let pairs = if args.ab_prefill {
        alternate_prefills(
            &mut model,
            &mut contexts,
            args.prompt,
            args.repetitions.max(1),
        )
    } else {
        alternate(
            &mut model,
            &mut contexts,
            args.prompt,
            steps,
            args.repetitions.max(1),
        )
    };
    drop(busy);
    let pairs = pairs?;

    let mut out = std::io::stdout().lock();
    if args.json {
        let report = json(variant, args, threads, level, &pairs);
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write_table(variant, args, threads, level, &pairs, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A warm-up, then `repetitions` times: a `prompt`-token prefill from an empty context and
/// `steps` pairs of one-token steps, A and B alternating, each timed.
fn alternate(
    model: &mut Model,
    contexts: &mut Contexts,
    prompt: usize,
    steps: usize,
    repetitions: usize,
) -> anyhow::Result<Pairs> {
    let vocab = model.config().vocab_size;
    // Warm-up: a short prefill and a few steps on each side, untimed.
    let warm = prompt_tokens(prompt.clamp(1, 64), vocab, 1001);
    model.feed_with(&warm, true, contexts.side(0))?;
    for (i, &token) in prompt_tokens(8, vocab, 1002).iter().enumerate() {
        model.feed_with(&[token], false, contexts.side(i % 2))?;
    }

    let mut pairs = Pairs::default();
    for rep in 0..repetitions {
        let prompt = prompt_tokens(prompt.max(1), vocab, rep as u64);
        model.feed_with(&prompt, true, contexts.side(0))?;
        let tokens = prompt_tokens(2 * steps, vocab, 2000 + rep as u64);
        for (pair, tokens) in tokens.chunks_exact(2).enumerate() {
            let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
            let mut secs = [0.0; 2];
            for (&side, &token) in order.iter().zip(tokens) {
                let cpu = contexts.side(side);
                let start = Instant::now();
                model.feed_with(&[token], false, cpu)?;
                secs[side] = start.elapsed().as_secs_f64();
            }
            pairs.a.push(secs[0]);
            pairs.b.push(secs[1]);
        }
        tracing::info!(rep, pairs = pairs.a.len(), "bench --ab repetition");
    }
    Ok(pairs)
}

/// `--ab-prefill`: a warm-up, then `repetitions` pairs of `prompt`-token prefills from an empty
/// context, A and B alternating (B first in every other pair), each timed whole.
fn alternate_prefills(
    model: &mut Model,
    contexts: &mut Contexts,
    prompt: usize,
    repetitions: usize,
) -> anyhow::Result<Pairs> {
    let vocab = model.config().vocab_size;
    let tokens = prompt_tokens(prompt.max(1), vocab, 7);
    for side in [0, 1] {
        model.feed_with(&tokens[..tokens.len().min(64)], true, contexts.side(side))?;
    }
    let mut pairs = Pairs::default();
    for pair in 0..repetitions {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut secs = [0.0; 2];
        for side in order {
            let cpu = contexts.side(side);
            let start = Instant::now();
            model.feed_with(&tokens, true, cpu)?;
            secs[side] = start.elapsed().as_secs_f64();
        }
        pairs.a.push(secs[0]);
        pairs.b.push(secs[1]);
        tracing::info!(pair, "bench --ab --ab-prefill pair");
    }
    Ok(pairs)
}

/// The JSON object `--ab --json` prints.
fn json(
    variant: Variant,
    args: &Args,
    threads: usize,
    level: KernelLevel,
    pairs: &Pairs,
) -> serde_json::Value {
    let ms = |secs: &[f64]| secs.iter().map(|s| s * 1e3).collect::<Vec<_>>();
    let [a, b] = variant.sides();
    serde_json::json!({
        "ab": variant.switch(),
        "timed": if args.ab_prefill { "prefill" } else { "decode step" },
        "a": a,
        "b": b,
        "threads": threads,
        "kernel_level": level.name(),
        "busy_processes": args.busy,
        "prompt_tokens": args.prompt,
        "pairs": pairs.a.len(),
        "repetitions": args.repetitions.max(1),
        "a_step_ms": bandwidth::median(&ms(&pairs.a)),
        "b_step_ms": bandwidth::median(&ms(&pairs.b)),
        "a_speed_over_b": bandwidth::median(&pairs.ratios()),
        "a_samples_ms": ms(&pairs.a),
        "b_samples_ms": ms(&pairs.b),
    })
}

/// The report for people.
fn write_table(
    variant: Variant,
    args: &Args,
    threads: usize,
    level: KernelLevel,
    pairs: &Pairs,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let [a, b] = variant.sides();
    let switch = variant.switch();
    let (a_ms, b_ms) = (
        bandwidth::median(&pairs.a) * 1e3,
        bandwidth::median(&pairs.b) * 1e3,
    );
    let ratios = pairs.ratios();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let quartile = |q: usize| sorted[(sorted.len() - 1) * q / 4];
    let threads = match threads {
        1 => "1 thread".to_owned(),
        n => format!("{n} threads"),
    };
    let mut setting = match variant {
        Variant::Kernel(_) => threads,
        Variant::Threads(_) => format!("kernels {level}"),
        Variant::Attention(_) | Variant::Broadcast(_) | Variant::Batch(_) => {
            format!("{threads}, kernels {level}")
        }
    };
    if args.busy > 0 {
        setting += &format!(", {} busy processes beside", args.busy);
    }
    let unit = if args.ab_prefill {
        writeln!(
            out,
            "{switch}={a} against {switch}={b}, alternated prefill by prefill ({setting}; {} \
             pairs of {}-token prefills)",
            pairs.a.len(),
            args.prompt,
        )?;
        "prefill"
    } else {
        writeln!(
            out,
            "{switch}={a} against {switch}={b}, alternated step by step ({setting}; {} pairs \
             after {}-token prompts, {} repetitions)",
            pairs.a.len(),
            args.prompt,
            args.repetitions.max(1)
        )?;
        "step"
    };
    writeln!(out, "A {switch}={a:<12} {a_ms:.2} ms per {unit} (median)")?;
    writeln!(out, "B {switch}={b:<12} {b_ms:.2} ms per {unit} (median)")?;
    writeln!(
        out,
        "A is {:.3}x as fast as B (median of per-pair ratios; quartiles {:.3} to {:.3})",
        bandwidth::median(&ratios),
        quartile(1),
        quartile(3)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_and_name_their_sides() {
        let v = Variant::parse("kernel=scalar,scalar").unwrap();
        assert_eq!(v, Variant::Kernel([KernelLevel::Scalar; 2]));
        assert_eq!(v.sides(), ["scalar", "scalar"]);
        let v = Variant::parse("threads=1, 2").unwrap();
        assert_eq!(v, Variant::Threads([1, 2]));
        assert_eq!(
            (v.switch(), v.sides()),
            ("threads", ["1".into(), "2".into()])
        );
        let v = Variant::parse("attention=bf16,f32").unwrap();
        assert_eq!(v, Variant::Attention([true, false]));
        assert_eq!(v.sides(), ["bf16", "f32"]);
        let v = Variant::parse("broadcast=register,memory").unwrap();
        assert_eq!(v, Variant::Broadcast([true, false]));
        assert_eq!(v.sides(), ["register", "memory"]);
        let v = Variant::parse("batch=32,8").unwrap();
        assert_eq!(v, Variant::Batch([32, 8]));
        assert_eq!(
            (v.switch(), v.sides()),
            ("batch", ["32".into(), "8".into()])
        );
    }

    #[test]
    fn bad_variants_say_what_is_accepted() {
        for (text, says) in [
            ("kernel", "kernel=A,B"),
            ("kernel=avx2", "exactly two"),
            ("threads=0,2", "\"0\" is not a thread count"),
            ("speed=1,2", "unknown switch \"speed\""),
            ("kernel=sse9,avx2", "sse9"),
            ("attention=fp8,f32", "\"fp8\" is not bf16 or f32"),
            ("batch=16,8", "\"16\" is not 32 or 8"),
            (
                "broadcast=stack,memory",
                "\"stack\" is not register or memory",
            ),
        ] {
            let err = format!("{:#}", Variant::parse(text).unwrap_err());
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    /// Both variants on the tiny random shape: every pair timed, on both sides.
    #[test]
    fn alternating_steps_time_every_pair_on_both_sides() {
        let dir = tempfile::tempdir().unwrap();
        let config_json = super::super::shape_config("tiny").unwrap().to_string();
        let config = q4nx::ModelConfig::from_json(&config_json).unwrap();
        q4nx::synthetic::write_random_model(dir.path(), &config, 1).unwrap();
        std::fs::write(dir.path().join("config.json"), config_json).unwrap();
        let options = LoadOptions {
            context_length: Some(64),
            threads: Some(1),
            ..LoadOptions::default()
        };
        let mut model = Model::load(dir.path(), &options).unwrap();
        let level = KernelLevel::detect();
        for variant in [
            Variant::Kernel([KernelLevel::Scalar, level]),
            Variant::Threads([1, 2]),
            Variant::Attention([true, false]),
            Variant::Batch([BATCH, 8]),
        ] {
            let mut contexts = Contexts::new(variant, 2, level, false);
            let pairs = alternate(&mut model, &mut contexts, 16, 5, 2).unwrap();
            assert_eq!((pairs.a.len(), pairs.b.len()), (10, 10), "{variant:?}");
            assert!(pairs.ratios().iter().all(|r| r.is_finite() && *r > 0.0));
            let prefills = alternate_prefills(&mut model, &mut contexts, 20, 3).unwrap();
            assert_eq!((prefills.a.len(), prefills.b.len()), (3, 3), "{variant:?}");
        }
    }

    #[test]
    fn ratios_are_b_over_a_pair_by_pair() {
        let pairs = Pairs {
            a: vec![1.0, 2.0],
            b: vec![2.0, 3.0],
        };
        assert_eq!(pairs.ratios(), [2.0, 1.5]);
    }
}
