//! `hearth import PATH`: register a local model. A GGUF file is linked where it lies by
//! default (a small folder in Hearth's store; the file is only read, and removing the model
//! never deletes it); `--copy` converts it into Hearth's own Q4NX copy instead, for a file on a
//! removable disk. A Q4NX or safetensors folder is validated and copied (or moved).
//! `--relink NAME FILE` finds a linked model's file again after it was moved.

use std::path::PathBuf;
use std::process::ExitCode;

use hearth_hub::{human_bytes, GgufImportOptions, ImportOptions};

use crate::convert::Progress;

use crate::terminal::safe;

/// Arguments of `hearth import`.
#[derive(clap::Args)]
pub struct Args {
    /// A GGUF file (as llama.cpp, Ollama or LM Studio keep them), or a model folder:
    /// config.json, tokenizer.json, tokenizer_config.json and model.q4nx or safetensors
    /// weights (for example the output of `hearth convert`).
    pub path: PathBuf,
    /// Name to install it under. By default, the folder's name or the file's name without .gguf.
    #[arg(long)]
    pub name: Option<String>,
    /// Copy a GGUF file into Hearth's folder (converted to Q4NX) instead of linking it where it
    /// lies: for a file on a removable disk. Costs the file's size again in disk. (The app's
    /// setting "Copy models into Hearth's folder" makes this the default.)
    #[arg(long, conflicts_with = "relink")]
    pub copy: bool,
    /// Find the GGUF file of the linked model NAME again (after it was moved): PATH must be the
    /// same model (the same header); the model keeps its name and conversations.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["name", "move_files"])]
    pub relink: Option<String>,
    /// Move the files of a folder into Hearth's store instead of copying them (a GGUF file is
    /// never moved or changed).
    #[arg(long = "move")]
    pub move_files: bool,
    /// Threads used to convert a GGUF file with --copy. By default, every core.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Links (or converts), copies (or moves) and registers the model.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = crate::list::open_store()?;
    let path_text = args.path.display().to_string();
    let shown = safe(&path_text);
    if let Some(name) = &args.relink {
        let model = store.relink(name, &args.path)?;
        println!(
            "{} now reads {} (linked where it lies)",
            safe(&model.name),
            shown
        );
        return Ok(ExitCode::SUCCESS);
    }
    let is_gguf = match hearth_hub::gguf_magic(&args.path) {
        Ok(is_gguf) => is_gguf,
        // A file that cannot be read says so, rather than "not a GGUF file".
        Err(e) if args.path.is_file() => anyhow::bail!("{shown} cannot be read: {e}"),
        Err(_) => false,
    };
    if is_gguf {
        let options = GgufImportOptions {
            name: args.name,
            threads: args.threads,
        };
        // The app's setting "Copy models into Hearth's folder" holds here too.
        if !(args.copy || store.copy_models()) {
            let mut bar = Progress::new("linking");
            let (model, report) = store.link_gguf(&args.path, &options, &mut |p| bar.update(&p))?;
            bar.finish();
            println!(
                "linked {shown} ({} GGUF, {}) as {} ({}): Hearth reads the file where it is and \
                 added {} to {}. Moving or deleting the file makes the model unavailable; \
                 `hearth rm {}` never deletes the file. Use --copy for a file on a removable disk.",
                safe(&report.architecture),
                human_bytes(report.link.bytes),
                safe(&model.name),
                safe(&model.tag),
                human_bytes(report.folder_bytes),
                safe(&model.folder.display().to_string()),
                safe(&model.name),
            );
            return Ok(ExitCode::SUCCESS);
        }
        let mut bar = Progress::new("importing");
        let (model, report) = store.import_gguf(&args.path, &options, &mut |p| bar.update(&p))?;
        bar.finish();
        // The architecture and the name come from the file: shown escaped, never obeyed.
        println!(
            "copied {shown} ({} GGUF{}) as {} ({}, {}) into {}",
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
            "{shown} is a file but not a GGUF file (it does not start with \"GGUF\"); import a \
             GGUF file or a model folder"
        );
    }
    if args.copy {
        anyhow::bail!("{shown} is a folder: --copy is for a GGUF file (a folder is always copied)");
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
