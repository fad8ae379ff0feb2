//! `hearth tokenize`: the token ids of a text, as the model's tokenizer splits it. Special
//! tokens written in the text (`<|im_start|>`) become their ids, as Hugging Face and llama.cpp
//! parse them; the tokenizer's own additions (a BOS) are added when the model asks for them.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use hearth_engine::TextTokenizer;

use crate::model_args::{finish_output, ModelArgs};

/// Print the token ids of a text.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// The text to tokenize.
    #[arg(long)]
    text: String,
    /// Print `{"ids": [...], "pieces": [...]}` (pieces as the vocabulary spells them).
    #[arg(long)]
    json: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let local = args.model.resolve()?;
    let path = local.path.join("tokenizer.json");
    let tokenizer = TextTokenizer::from_file(&path)
        .with_context(|| format!("{} has no usable tokenizer", local.path.display()))?;
    let ids = tokenizer.encode(&args.text, true)?;
    let pieces: Vec<String> = ids
        .iter()
        .map(|&id| tokenizer.id_to_token(id).unwrap_or_default())
        .collect();
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        writeln!(
            out,
            "{}",
            serde_json::json!({ "ids": ids, "pieces": pieces })
        )
    } else {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "{}", ids.join(" "))
            .and_then(|()| writeln!(out, "{} tokens: {}", pieces.len(), pieces.join(" | ")))
    };
    finish_output(written)
}
