//! `hearth`: the headless face of Hearth. Each verb lives in its own module with an `Args`
//! struct and a `run` function; `main` only parses and dispatches.

use clap::{Parser, Subcommand};

mod bench;
mod bounds;
mod busy;
mod chat;
mod convert;
mod doctor;
mod files;
mod generate;
mod import;
mod list;
mod logits;
mod model_args;
mod progress;
mod pull;
mod report;
mod rm;
mod run;
mod search;
mod selftest;
mod serve;
mod terminal;
mod tokenize;
mod transcribe;

#[derive(Parser)]
#[command(
    name = "hearth",
    version,
    about = "Private, offline chat on your own machine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure prefill and decode speed against this machine's memory bandwidth (--json)
    Bench(bench::Args),
    /// Chat with a model in the terminal, streaming each answer
    Chat(chat::Args),
    /// Convert a Hugging Face model folder (safetensors) to a Q4NX model folder
    Convert(convert::Args),
    /// Check whether the NPU can run models here, and explain what to fix (--report FILE for testers)
    Doctor(doctor::Args),
    /// Generate token ids after given ones (checks a port against this engine; --json)
    Generate(generate::Args),
    /// Register a local model: a GGUF file (converted to Q4NX) or a Q4NX/safetensors folder
    Import(import::Args),
    /// List installed models (--json for scripts, --catalog for models to download)
    List(list::Args),
    /// Print a model's logits at every position of a token sequence (--json)
    Logits(logits::Args),
    /// Download a model from the catalog or Hugging Face (owner/name), verify and register it
    Pull(pull::Args),
    /// Remove an installed model and free its disk space
    Rm(rm::Args),
    /// Answer one prompt with a model, streaming the answer
    Run(run::Args),
    /// Search files for the passages that answer a question (indexes them first; --json)
    Search(search::Args),
    /// Compare a backend's answers (the NPU's) with the CPU engine's on fixed prompts
    Selftest(selftest::Args),
    /// Serve models over a local OpenAI- and Ollama-compatible HTTP API (127.0.0.1 only by default)
    Serve(serve::Args),
    /// Print the token ids of a text as a model's tokenizer splits it (--json)
    Tokenize(tokenize::Args),
    /// Write down what is said in a sound file (WAV, FLAC, MP3, Ogg Vorbis), on this computer (--json)
    Transcribe(transcribe::Args),
}

fn main() -> std::process::ExitCode {
    hearth_documents::extract::child::run_if_asked();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
                // Protocol traces of the HTTP and TLS layers include request headers (the
                // HF_TOKEN): those targets never log below info, whatever HEARTH_LOG says.
                .add_directive("ureq=info".parse().expect("valid directive"))
                .add_directive("ureq_proto=info".parse().expect("valid directive"))
                .add_directive("rustls=info".parse().expect("valid directive")),
        )
        .with_writer(std::io::stderr)
        .init();
    match try_main(Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("hearth: {}", terminal::safe(&format!("{err:#}")));
            std::process::ExitCode::from(2)
        }
    }
}

fn try_main(cli: Cli) -> anyhow::Result<std::process::ExitCode> {
    match cli.command {
        Command::Bench(args) => bench::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Import(args) => import::run(args),
        Command::List(args) => list::run(args),
        Command::Logits(args) => logits::run(args),
        Command::Pull(args) => pull::run(args),
        Command::Rm(args) => rm::run(args),
        Command::Run(args) => run::run(args),
        Command::Search(args) => search::run(args),
        Command::Selftest(args) => selftest::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Transcribe(args) => transcribe::run(args),
    }
}
