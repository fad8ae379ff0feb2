//! `hearth logits`: the model's logits at every position of a token sequence, for checking a port
//! or a backend against a reference.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use hearth_engine::{LoadOptions, Model};

use crate::model_args::{finish_output, parse_tokens, ModelArgs};

/// Print the logits of every prompt position (or the perplexity of the sequence).
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["tokens", "text"])))]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    /// Token ids, e.g. `1,2,3`.
    #[arg(long, value_name = "IDS")]
    tokens: Option<String>,
    /// Text, tokenized with the model's tokenizer (as a plain prompt, no chat template).
    #[arg(long)]
    text: Option<String>,
    /// Print `{"logits": [[...], ...], "tokens": [...]}`: one vocabulary-sized row per position.
    #[arg(long)]
    json: bool,
    /// Print only how well the model predicts the sequence: mean negative log-likelihood of each
    /// token after the first (nats) and its exponential, the perplexity.
    #[arg(long)]
    perplexity: bool,
    /// Write the logits to FILE instead, as raw little-endian f32, one vocabulary-sized row per
    /// position (what `bench/fidelity.py` reads; JSON of thousands of rows is gigabytes).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "perplexity"])]
    f32: Option<std::path::PathBuf>,
}

/// Loads `model`'s folder straight into Hearth's engine, with the folder named in the error: no
/// backend and no app in between, since `logits` and `generate` check the engine itself.
pub fn load_engine(model: &ModelArgs) -> anyhow::Result<Model> {
    let local = model.resolve()?;
    let options = LoadOptions {
        context_length: model.context,
        threads: model.threads,
        kernel: model.kernel,
        ..LoadOptions::default()
    };
    Model::load(&local.path, &options)
        .with_context(|| format!("could not load the model in {}", local.path.display()))
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut model = load_engine(&args.model)?;
    let tokens = match (&args.tokens, &args.text) {
        (Some(ids), _) => parse_tokens(ids)?,
        (None, Some(text)) => model.tokenize(text)?,
        (None, None) => unreachable!("clap requires --tokens or --text"),
    };
    let logits = model.logits(&tokens)?;
    if let Some(path) = &args.f32 {
        write_f32(path, &logits)
            .with_context(|| format!("could not write the logits to {}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    let written = if args.perplexity {
        let nll = mean_nll(&logits, &tokens)
            .ok_or_else(|| anyhow::anyhow!("perplexity needs at least two tokens"))?;
        let report = serde_json::json!({
            "tokens": tokens.len(), "mean_nll": nll, "perplexity": nll.exp()
        });
        if args.json {
            writeln!(out, "{report}")
        } else {
            writeln!(
                out,
                "{} tokens, mean NLL {nll:.4} nats, perplexity {:.3}",
                tokens.len(),
                nll.exp()
            )
        }
    } else if args.json {
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({ "logits": logits, "tokens": tokens }),
        )
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

/// `rows` as raw little-endian f32, row after row.
fn write_f32(path: &std::path::Path, rows: &[Vec<f32>]) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for row in rows {
        let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
        file.write_all(&bytes)?;
    }
    file.flush()
}

/// Mean over positions `i` of `-log softmax(logits[i])[tokens[i + 1]]`, in f64; `None` for fewer
/// than two tokens.
fn mean_nll(logits: &[Vec<f32>], tokens: &[u32]) -> Option<f64> {
    let terms: Vec<f64> = logits
        .iter()
        .zip(&tokens[1.min(tokens.len())..])
        .map(|(row, &next)| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
            let sum: f64 = row.iter().map(|&l| (l as f64 - max).exp()).sum();
            max + sum.ln() - row[next as usize] as f64
        })
        .collect();
    (!terms.is_empty()).then(|| terms.iter().sum::<f64>() / terms.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_logits_have_the_vocabulary_as_perplexity() {
        let logits = vec![vec![0.0f32; 4]; 3];
        let nll = mean_nll(&logits, &[0, 1, 2]).unwrap();
        assert!((nll.exp() - 4.0).abs() < 1e-9);
        assert!(mean_nll(&logits[..1], &[0]).is_none());
    }

    #[test]
    fn f32_output_is_the_rows_in_order_little_endian() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logits.f32");
        write_f32(&path, &[vec![1.0, -2.5], vec![0.25, 3.0]]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let values: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values, [1.0, -2.5, 0.25, 3.0]);
    }
}
