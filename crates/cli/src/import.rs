//! `hearth import DIR`: validate a local Q4NX or safetensors model folder and register it.

use std::path::PathBuf;
use std::process::ExitCode;

use hearth_hub::{human_bytes, ImportOptions};

use crate::terminal::safe;

/// Arguments of `hearth import`.
#[derive(clap::Args)]
pub struct Args {
    /// Model folder: config.json, tokenizer.json, tokenizer_config.json and model.q4nx or
    /// safetensors weights (for example the output of `hearth convert`).
    pub dir: PathBuf,
    /// Name to install it under. By default, the folder's name.
    #[arg(long)]
    pub name: Option<String>,
    /// Move the files into Hearth's store instead of copying them.
    #[arg(long = "move")]
    pub move_files: bool,
}

/// Validates, copies (or moves) and registers the folder.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = crate::list::open_store()?;
    let options = ImportOptions {
        name: args.name,
        move_files: args.move_files,
    };
    let model = store.import(&args.dir, &options)?;
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
