//! `hearth import PATH`: register a local model. A Q4NX or safetensors folder is validated and
//! copied; a GGUF file is converted to Q4NX first (the file itself is only read).

use std::path::PathBuf;
use std::process::ExitCode;

use hearth_hub::{human_bytes, GgufImportOptions, ImportOptions};

use crate::convert::Progress;

use crate::terminal::safe;

/// Arguments of `hearth import`.
#[derive(clap::Args)]
pub struct Args {
    /// A GGUF file (Llama family or Qwen3, as llama.cpp, Ollama or LM Studio keep them), or a
    /// model folder: config.json, tokenizer.json, tokenizer_config.json and model.q4nx or
    /// safetensors weights (for example the output of `hearth convert`).
    pub path: PathBuf,
    /// Name to install it under. By default, the folder's name or the file's name without .gguf.
    #[arg(long)]
    pub name: Option<String>,
    /// Move the files of a folder into Hearth's store instead of copying them (a GGUF file is
    /// never moved or changed).
    #[arg(long = "move")]
    pub move_files: bool,
    /// Threads used to convert a GGUF file. By default, every core.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Validates (or converts), copies (or moves) and registers the model.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = crate::list::open_store()?;
    let is_gguf = match hearth_hub::gguf_magic(&args.path) {
        Ok(is_gguf) => is_gguf,
        // A file that cannot be read says so, rather than "not a GGUF file".
        Err(e) if args.path.is_file() => {
            anyhow::bail!(
                "{} cannot be read: {e}",
                safe(&args.path.display().to_string())
            )
        }
        Err(_) => false,
    };
    if is_gguf {
        let options = GgufImportOptions {
            name: args.name,
            threads: args.threads,
        };
        let mut bar = Progress::new("importing");
        let (model, report) = store.import_gguf(&args.path, &options, &mut |p| bar.update(&p))?;
        bar.finish();
        // The architecture and the name come from the file: shown escaped, never obeyed.
        println!(
            "imported {} ({} GGUF{}) as {} ({}, {}) into {}",
            safe(&args.path.display().to_string()),
            safe(&report.architecture),
            report
                .model_name
                .as_deref()
                .map(|n| format!(" \"{}\"", safe(n)))
                .unwrap_or_default(),
            safe(&model.name),
            safe(&model.tag),
            human_bytes(model.size_bytes),
            safe(&model.folder.display().to_string())
        );
        for (how, count) in &report.linear_paths {
            println!("  {count:4} linear weights: {how}");
        }
        if report.scale_rounding_error > 0.0 {
            println!(
                "  rounding the kept blocks' f16 scales to BF16 changed those weights by {:.3}% (relative RMS)",
                report.scale_rounding_error * 100.0
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.path.is_file() {
        anyhow::bail!(
            "{} is a file but not a GGUF file (it does not start with \"GGUF\"); import a GGUF \
             file or a model folder",
            safe(&args.path.display().to_string())
        );
    }
    let options = ImportOptions {
        name: args.name,
        move_files: args.move_files,
    };
    let model = store.import(&args.path, &options)?;
    println!(
        "imported {} ({}, {}) as {} into {}",
        safe(&model.name),
        model.format,
        human_bytes(model.size_bytes),
        safe(&model.tag),
        safe(&model.folder.display().to_string())
    );
    Ok(ExitCode::SUCCESS)
}
