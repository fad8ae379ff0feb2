//! `hearth convert SRC_DIR OUT_DIR`: a Hugging Face model folder to a Q4NX model folder.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

use crate::progress::StatusLine;

/// Arguments of `hearth convert`.
#[derive(clap::Args)]
pub struct Args {
    /// Hugging Face model folder: config.json plus model.safetensors or sharded safetensors
    /// (BF16, F16 or F32), Llama or Qwen3 family.
    pub src: PathBuf,
    /// Folder to create for the Q4NX model; it must not exist yet (or be empty).
    pub out: PathBuf,
    /// Also write OUT-flm-qwen3: the variant FastFlowLM's Qwen3 engine loads today (KV heads
    /// replicated to 8, unit q/k norms). For a Llama model it does not compute the same
    /// function as the original.
    #[arg(long)]
    pub flm_qwen3: bool,
    /// Threads used for quantization. By default, every core.
    #[arg(long, value_parser = crate::bounds::threads())]
    pub threads: Option<usize>,
}

/// Runs the conversion(s) and prints a summary.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The template is copied as it is: refuse a hostile one before any work.
    let name = args.out.file_name().map_or_else(
        || args.out.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    hearth_engine::check_chat_template(&args.src, &name).with_context(|| {
        format!(
            "{} was not converted; nothing was written",
            args.src.display()
        )
    })?;
    let mut targets = vec![(args.out.clone(), q4nx::Variant::Faithful)];
    if args.flm_qwen3 {
        targets.push((variant_dir(&args.out)?, q4nx::Variant::FlmQwen3));
    }
    for (out, variant) in targets {
        let options = q4nx::ConvertOptions {
            variant,
            threads: args.threads,
        };
        let started = Instant::now();
        let mut bar = Progress::new("converting");
        let report = q4nx::convert(&args.src, &out, &options, &mut |p| bar.update(&p))
            .with_context(|| {
                format!(
                    "could not convert {} to {}; nothing was written there",
                    args.src.display(),
                    out.display()
                )
            })?;
        bar.finish();
        println!(
            "converted {} -> {}: {} tensors, {:.2} B parameters, model.q4nx {:.1} MB, in {:.1} s",
            args.src.display(),
            report.dir.display(),
            report.tensors,
            report.parameters as f64 / 1e9,
            report.q4nx_bytes as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        println!("  copied: {}", report.copied.join(", "));
        for warning in &report.warnings {
            eprintln!("warning: {warning}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `OUT` -> `OUT-flm-qwen3`, beside it.
fn variant_dir(out: &Path) -> anyhow::Result<PathBuf> {
    let name = out
        .file_name()
        .with_context(|| format!("{} is not a folder name", out.display()))?;
    let mut name = name.to_os_string();
    name.push("-flm-qwen3");
    Ok(out.with_file_name(name))
}

/// Progress on stderr: a live line on a terminal, a line every 10% otherwise.
pub(crate) struct Progress {
    label: &'static str,
    status: StatusLine,
    last_tenth: u64,
}

impl Progress {
    /// A progress display whose lines start with `label` ("converting").
    pub(crate) fn new(label: &'static str) -> Self {
        Progress {
            label,
            status: StatusLine::new(),
            last_tenth: 0,
        }
    }

    pub(crate) fn update(&mut self, p: &q4nx::ConvertProgress) {
        let total = p.bytes_total.max(1);
        let percent = p.bytes_done * 100 / total;
        // Small models finish in a blink: only show progress for ones above 100 MB.
        if total < 100_000_000 {
            return;
        }
        if self.status.is_live() {
            self.status.redraw(&format!(
                "{}: {percent:3}%  tensor {}/{}  {}",
                self.label,
                p.tensors_done + 1,
                p.tensors_total,
                p.tensor
            ));
        } else if percent / 10 > self.last_tenth {
            self.last_tenth = percent / 10;
            self.status.line(&format!(
                "{}: {percent}% (tensor {}/{})",
                self.label,
                p.tensors_done + 1,
                p.tensors_total
            ));
        }
    }

    pub(crate) fn finish(&mut self) {
        self.status.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_folder_sits_beside_the_output() {
        assert_eq!(
            variant_dir(Path::new("models/minicpm5")).unwrap(),
            PathBuf::from("models/minicpm5-flm-qwen3")
        );
        assert!(variant_dir(Path::new("/")).is_err());
    }
}
