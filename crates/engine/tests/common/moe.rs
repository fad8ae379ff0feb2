//! What the mixture-of-experts tests share: every position's logits decoded one token at a
//! time, and the opt-in speed run on random weights in a real model's shape.

use std::ops::ControlFlow;

use hearth_engine::{ChatOptions, LoadOptions, Model, SamplingParams};

/// Every position's logits one token at a time: each prompt extends the one before by a
/// token, so every pass after the first decodes one token on the cached rest.
pub fn decoded_logits(model: &mut Model, tokens: &[u32]) -> Vec<Vec<f32>> {
    let prompts: Vec<Vec<u32>> = (1..=tokens.len()).map(|n| tokens[..n].to_vec()).collect();
    let vocab: Vec<u32> = (0..model.config().vocab_size as u32).collect();
    model
        .last_logits_of(&prompts, &vocab, &mut |_| ControlFlow::Continue(()))
        .expect("scores")
}

/// Writes a model of random weights for `config` (config.json's text), loads it with
/// `HEARTH_THREADS` threads (else the default), and prints prefill and decode speed of three
/// runs from an empty context, decode also as GB/s of `per_token`, the bytes a decoded token
/// reads.
pub fn decode_speed(name: &str, config: &str, per_token: f64) {
    let dir = tempfile::tempdir().unwrap();
    let parsed = q4nx::ModelConfig::from_json(config).unwrap();
    q4nx::synthetic::write_random_model(dir.path(), &parsed, 1).unwrap();
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let threads = std::env::var("HEARTH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok());
    let options = LoadOptions {
        threads,
        context_length: Some(512),
        ..LoadOptions::default()
    };
    let mut model = Model::load(dir.path(), &options).expect("model loads");
    let prompt: Vec<u32> = (0..128).map(|i| 1000 + i * 997 % 100_000).collect();
    let options = ChatOptions {
        sampling: SamplingParams::greedy(),
        max_tokens: 64,
        enable_thinking: None,
        speculative: Some(false),
        format: Default::default(),
    };
    for run in 0..3 {
        // From an empty context each run.
        model.logits(&[1]).unwrap();
        let (_, stats) = model
            .generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))
            .expect("generate");
        let decode = stats.generated_tokens as f64 / stats.decode_secs;
        eprintln!(
            "{name} run {run}, {} threads: prefill {:.1} tok/s ({} tokens), decode {decode:.2} \
             tok/s = {:.2} GB/s of the {:.0} MB a token reads",
            model.threads(),
            stats.prefilled_tokens as f64 / stats.prefill_secs,
            stats.prefilled_tokens,
            decode * per_token / 1e9,
            per_token / 1e6
        );
    }
}
