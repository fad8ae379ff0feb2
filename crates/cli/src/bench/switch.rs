//! `hearth bench --switch`: the time to the first word when a user comes back to a
//! conversation, with the engine's KV store (what was computed for conversations switched away
//! from, kept) and without it.
//!
//! Each turn: conversation A (`--prompt` tokens) is answered, then conversation B (as long, no
//! token in common at the start), then A again with its answer and a new message of
//! [`MESSAGE`] tokens; the time to the first word of that last answer is the measure. The side
//! with the store keeps the model's default budget; the other sets it to 0, as before the store
//! existed (the cache then holds B, and A is read whole). Sides alternate turn by turn (the
//! other first in every other pair), each with tokens of its own, so neither reuses the
//! other's; answers are greedy and [`ANSWER`] tokens long.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use hearth_engine::cpu::{bandwidth, KernelLevel};
use hearth_engine::{ChatOptions, LoadOptions, Model, SamplingParams};

use super::{prompt_tokens, Args};
use crate::busy::BusyLoops;

/// Tokens of the message that comes with the return to A.
const MESSAGE: usize = 16;

/// Tokens of each answer.
const ANSWER: usize = 16;

/// One side's returns to A: the time to the first word, and the tokens read of the prompt.
#[derive(Debug, Default)]
struct Returns {
    first_word_secs: Vec<f64>,
    read: Vec<usize>,
    prompt: usize,
}

/// Loads the model, alternates the two sides, and prints the report.
pub fn run(
    dir: &Path,
    args: &Args,
    threads: usize,
    level: KernelLevel,
) -> anyhow::Result<ExitCode> {
    let prompt = args.prompt.max(1);
    let mut model = Model::load(
        dir,
        &LoadOptions {
            context_length: Some(prompt + 2 * ANSWER + MESSAGE + 8),
            threads: Some(threads),
            fixed_threads: args.fixed_threads,
            map_weights: args.map_weights,
            kernel: Some(level),
            ..LoadOptions::default()
        },
    )
    .with_context(|| format!("could not load the model in {}", dir.display()))?;
    let budget = model.kv_store_budget();
    let busy = BusyLoops::start(args.busy)?;
    let sides = alternate(&mut model, prompt, budget, args.repetitions.max(1));
    drop(busy);
    let [kept, read_whole] = sides?;

    let mut out = std::io::stdout().lock();
    if args.json {
        let side = |r: &Returns| {
            serde_json::json!({
                "first_word_secs": bandwidth::median(&r.first_word_secs),
                "first_word_samples_secs": r.first_word_secs,
                "tokens_read": r.read,
                "prompt_tokens": r.prompt,
            })
        };
        let report = serde_json::json!({
            "switch": {"conversation_tokens": prompt, "message_tokens": MESSAGE,
                       "answer_tokens": ANSWER},
            "threads": threads,
            "kernel_level": level.name(),
            "busy_processes": args.busy,
            "kv_cache_bytes": model.kv_cache_bytes(),
            "kv_store_budget_bytes": budget,
            "repetitions": args.repetitions.max(1),
            "kept": side(&kept),
            "read_whole": side(&read_whole),
        });
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    writeln!(
        out,
        "Back to a conversation of {prompt} tokens after another as long, with a new message \
         of {MESSAGE} tokens ({threads} threads, kernels {level}; {} pairs; KV cache {:.0} MiB, \
         KV store budget {:.0} MiB)",
        args.repetitions.max(1),
        mib(model.kv_cache_bytes() as u64),
        mib(budget),
    )?;
    for (name, side) in [("kept (KV store)", &kept), ("read whole", &read_whole)] {
        let mut read = side.read.clone();
        read.sort_unstable();
        writeln!(
            out,
            "{name:<16} first word {:>7.3} s (median)   read {} of {} prompt tokens",
            bandwidth::median(&side.first_word_secs),
            read[read.len() / 2],
            side.prompt,
        )?;
    }
    writeln!(
        out,
        "The first word comes {:.1}x as soon with the KV store.",
        bandwidth::median(&read_whole.first_word_secs) / bandwidth::median(&kept.first_word_secs)
    )?;
    Ok(ExitCode::SUCCESS)
}

/// A warm-up, then `repetitions` pairs of returns to A: one with the store at `budget`, one
/// with it at 0 (in alternating order).
fn alternate(
    model: &mut Model,
    prompt: usize,
    budget: u64,
    repetitions: usize,
) -> anyhow::Result<[Returns; 2]> {
    let vocab = model.config().vocab_size;
    let greedy = |max_tokens| ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens,
        speculative: Some(false),
        ..ChatOptions::default()
    };
    let answer = |model: &mut Model, tokens: &[u32], max_tokens| {
        model.generate(tokens, &greedy(max_tokens), &mut |_| {
            ControlFlow::Continue(())
        })
    };
    answer(model, &prompt_tokens(64.min(prompt), vocab, 5000), 4)?;
    let mut sides: [Returns; 2] = Default::default();
    for pair in 0..repetitions {
        let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            model.set_kv_store_budget(if side == 0 { budget } else { 0 });
            let seed = 3 * (2 * pair + side) as u64;
            let a = prompt_tokens(prompt, vocab, 6000 + seed);
            let b = prompt_tokens(prompt, vocab, 6001 + seed);
            let (reply, _) = answer(model, &a, ANSWER)?;
            answer(model, &b, ANSWER)?;
            let again = [&a[..], &reply, &prompt_tokens(MESSAGE, vocab, 6002 + seed)].concat();
            let (_, stats) = answer(model, &again, 1)?;
            let returns = &mut sides[side];
            returns.first_word_secs.push(stats.ttft_secs);
            returns.read.push(stats.prefilled_tokens);
            returns.prompt = again.len();
            tracing::info!(pair, side, ?stats, "bench --switch return");
        }
    }
    model.set_kv_store_budget(budget);
    Ok(sides)
}
