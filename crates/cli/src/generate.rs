//! `hearth generate`: continue a sequence of token ids, for checking a port or a backend against
//! a reference (works without a tokenizer). The model is loaded straight into the engine
//! ([`crate::logits::load_engine`]).

use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

use crate::model_args::{describe_stats, finish_output, parse_tokens, ModelArgs, SamplingArgs};

/// Generate token ids after the given ones.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Prompt token ids, e.g. `1,2,3`.
    #[arg(long, value_name = "IDS")]
    tokens: String,
    /// Print `{"tokens": [generated ids], "prompt_tokens", "prefill_secs", "ttft_secs",
    /// "generated_tokens", "decode_secs", "stop_reason"}`.
    #[arg(long)]
    json: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let prompt = parse_tokens(&args.tokens)?;
    let mut model = crate::logits::load_engine(&args.model)?;
    let options = args.sampling.options(None);
    let (tokens, stats) = model.generate(&prompt, &options, &mut |_| ControlFlow::Continue(()))?;
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        let mut value = serde_json::to_value(&stats)?;
        value["tokens"] = serde_json::json!(tokens);
        serde_json::to_writer(&mut out, &value)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
        let text = match model.tokenizer() {
            Some(tokenizer) => format!("{}\n", tokenizer.decode(&tokens, false)?),
            None => String::new(),
        };
        eprintln!("{}", describe_stats(&stats));
        write!(out, "{}\n{text}", ids.join(","))
    };
    finish_output(written)
}
