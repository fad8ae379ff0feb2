//! `hearth`: the headless face of Hearth. Each verb lives in its own module with an `Args`
//! struct and a `run` function; `main` only parses and dispatches.

use clap::{Parser, Subcommand};

mod convert;
mod doctor;
mod import;
mod list;
mod pull;
mod rm;

#[derive(Parser)]
#[command(name = "hearth", version, about = "Private, offline chat on your own machine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert a Hugging Face model folder (safetensors) to a Q4NX model folder
    Convert(convert::Args),
    /// Check whether the NPU can run models here, and explain what to fix
    Doctor(doctor::Args),
    /// Register a local Q4NX or safetensors model folder (copied into Hearth's store)
    Import(import::Args),
    /// List installed models (--json for scripts, --catalog for models to download)
    List(list::Args),
    /// Download a model from the catalog or Hugging Face (owner/name), verify and register it
    Pull(pull::Args),
    /// Remove an installed model and free its disk space
    Rm(rm::Args),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match try_main(Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("hearth: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn try_main(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    match cli.command {
        Command::Convert(args) => convert::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Import(args) => import::run(args),
        Command::List(args) => list::run(args),
        Command::Pull(args) => pull::run(args),
        Command::Rm(args) => rm::run(args),
    }
}
