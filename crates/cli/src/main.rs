//! `hearth`: the headless face of Hearth. Each verb lives in its own module with an `Args`
//! struct and a `run` function; `main` only parses and dispatches.

use clap::{Parser, Subcommand};

mod convert;
mod doctor;

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
    }
}
