//! Options shared by the verbs that run a model (`chat`, `run`, `logits`, `generate`): which
//! model folder, how to load it, how to sample, and how token ids are written on the command line.

use std::path::PathBuf;

use anyhow::Context;
use hearth_engine::{ChatOptions, LoadOptions, Model, SamplingParams};

/// Which model to load and how.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Model folder: config.json, model.q4nx or *.safetensors, and usually tokenizer.json.
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Context length in tokens (prompt plus answer) [default: min(4096, the model's maximum)].
    #[arg(long, value_name = "TOKENS")]
    pub context: Option<usize>,
    /// CPU threads for the matrix kernels [default: one per core].
    #[arg(long)]
    pub threads: Option<usize>,
}

impl ModelArgs {
    /// Loads the model, with the folder named in the error.
    pub fn load(&self) -> anyhow::Result<Model> {
        let options = LoadOptions {
            context_length: self.context,
            threads: self.threads,
        };
        Model::load(&self.model, &options)
            .with_context(|| format!("could not load the model in {}", self.model.display()))
    }
}

/// How tokens are chosen and how many.
#[derive(clap::Args, Debug)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 always takes the most likely token.
    #[arg(long, default_value_t = SamplingParams::default().temperature)]
    pub temperature: f32,
    /// Sample among the K most likely tokens only (0: all).
    #[arg(long, default_value_t = SamplingParams::default().top_k)]
    pub top_k: usize,
    /// Sample among the most likely tokens whose probabilities add up to P.
    #[arg(long, default_value_t = SamplingParams::default().top_p)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one.
    #[arg(long, default_value_t = SamplingParams::default().min_p)]
    pub min_p: f32,
    /// Penalize tokens already in the conversation (1: off).
    #[arg(long, default_value_t = SamplingParams::default().repetition_penalty)]
    pub repetition_penalty: f32,
    /// Random seed: the same seed and settings give the same answer.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop after this many generated tokens.
    #[arg(long, default_value_t = ChatOptions::default().max_tokens)]
    pub max_tokens: usize,
}

impl SamplingArgs {
    /// The engine's options; `enable_thinking` is passed to the chat template when set.
    pub fn options(&self, enable_thinking: Option<bool>) -> ChatOptions {
        ChatOptions {
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                seed: self.seed,
            },
            max_tokens: self.max_tokens,
            enable_thinking,
        }
    }
}

/// Parses token ids written as `1,2,3` (commas and/or spaces).
pub fn parse_tokens(text: &str) -> anyhow::Result<Vec<u32>> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<u32>().with_context(|| {
                format!("--tokens: {part:?} is not a token id (write ids like 1,2,3)")
            })
        })
        .collect()
}

/// Ends a verb that wrote to stdout: a closed pipe (`hearth logits ... | head`) is a normal end.
pub fn finish_output(result: std::io::Result<()>) -> anyhow::Result<std::process::ExitCode> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(std::process::ExitCode::SUCCESS),
    }
}

/// One line of timings for people, on stderr.
pub fn describe_stats(stats: &hearth_engine::GenerationStats) -> String {
    let rate = stats
        .decode_tokens_per_sec()
        .map_or_else(String::new, |r| format!(", {r:.1} tok/s"));
    format!(
        "{} prompt tokens in {:.2} s, first token after {:.2} s, {} tokens in {:.2} s{rate} ({:?})",
        stats.prompt_tokens,
        stats.prefill_secs,
        stats.ttft_secs,
        stats.generated_tokens,
        stats.decode_secs,
        stats.stop_reason
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_with_commas_or_spaces() {
        assert_eq!(parse_tokens("1,2, 3 4").unwrap(), [1, 2, 3, 4]);
        assert!(parse_tokens("").unwrap().is_empty());
    }

    #[test]
    fn a_bad_token_says_which() {
        let err = parse_tokens("1,x").unwrap_err().to_string();
        assert!(err.contains("\"x\""), "{err}");
    }
}
