//! `hearth logits`: the model's logits at every position of a token sequence, for checking a port
//! or a backend against a reference.

use std::io::Write;
use std::process::ExitCode;

use crate::model_args::{finish_output, parse_tokens, ModelArgs};

/// Print the logits of every prompt position.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Token ids, e.g. `1,2,3`.
    #[arg(long, value_name = "IDS")]
    tokens: String,
    /// Print `{"logits": [[...], ...]}`: one vocabulary-sized row per position.
    #[arg(long)]
    json: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let tokens = parse_tokens(&args.tokens)?;
    let mut model = args.model.load()?;
    let logits = model.logits(&tokens)?;
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer(&mut out, &serde_json::json!({ "logits": logits }))
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        logits.iter().enumerate().try_for_each(|(position, row)| {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
            let top: Vec<String> = order
                .iter()
                .take(5)
                .map(|&i| format!("{i}:{:.4}", row[i]))
                .collect();
            writeln!(
                out,
                "position {position} (token {}): top {}",
                tokens[position],
                top.join(" ")
            )
        })
    };
    finish_output(written)
}
