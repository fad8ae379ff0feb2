//! An imitation of FastFlowLM's `flm`, for Hearth's tests only.
//!
//! It behaves as the notes on FastFlowLM (`fastflowlm-integration.md`, §9) describe the real
//! one, as far as Hearth can see from outside: the verbs `version`, `--version`, `validate`, `list`,
//! `port`, `pull` and `serve` with their exit codes and exact lines; the environment variables
//! `FLM_CONFIG_PATH`, `FLM_MODEL_PATH`, `FLM_SERVE_PORT` and `FLM_DISABLE_UPDATE_CHECK`; the
//! start-up lines of `serve` (the socket listens before the model loads); exact-path routes;
//! SSE chunks with a final usage chunk and `[DONE]`; errors as HTTP 200 bodies; one job at a
//! time; the connection closed after every response; and the silent fallback to `llama3.2:1b`
//! for a model name it does not know. Answers come from Hearth's CPU engine on the model
//! folder the catalog names, so they are real text.
//!
//! `FLM_IMITATION_VERSION` chooses the release imitated (default 1.0.6; 0.9.45 for the 0.9.x
//! line, where the two differ: see [`setup::Release`]). Faults are chosen with
//! `FLM_IMITATION_FAULT` (see [`setup::Fault`]), and `FLM_IMITATION_DELAY_SECS` sets how long
//! `slow-start` waits (default 30).
//!
//! `FLM_IMITATION_DEVICE` names a file that stands for the NPU device: a lock on it is the one
//! open amdxdna allows, and each release holds it as [`device`] describes (1.0.8's start-up
//! open, 1.0.9's `busy`).
//!
//! Modules: [`args`] (the command line), [`catalog`] (model_list.json), [`device`] (who holds
//! the NPU), [`verbs`] (the short
//! verbs), [`serve`] (start-up), [`http`] (routes and framing), [`chat`] (chat completions),
//! [`prompt_cache`] (when the KV cache is reused).
//!
//! Shortcuts, honestly: no NPU, no downloads (`pull` of a missing model fails), and the
//! `llama3.2:1b` fallback answers with the model already loaded when the catalog has no
//! `llama3.2:1b` entry (the real one would download it); the answer is labelled `llama3.2:1b`
//! either way, which is what a client can see.

mod args;
mod asr;
mod catalog;
mod chat;
mod device;
mod http;
mod prompt_cache;
mod serve;
mod setup;
mod verbs;
mod vision;

use catalog::Catalog;
use setup::{Fault, Release};

/// The tag the real server falls back to for an unknown model name.
const FALLBACK_TAG: &str = "llama3.2:1b";
/// The port FastFlowLM uses when none is given.
const DEFAULT_PORT: u16 = 52625;

fn main() {
    let release = Release::from_env();
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if !device::open_at_start(&release, raw.first().map(String::as_str)) {
        std::process::exit(1);
    }
    let args = match args::parse_args(&raw) {
        Ok(a) if a.backend.is_some() && !release.is_1_0() => {
            eprintln!("Error: unrecognised option '--backend'");
            std::process::exit(1);
        }
        Ok(a) => a,
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
    };
    if args.help {
        println!("FastFlowLM imitation (tests only)\nUsage: flm <command> [model_tag] [options]");
        std::process::exit(1);
    }
    if args.version {
        println!("FLM v{}", release.version);
        std::process::exit(1);
    }
    let Some(command) = args.positional.first().cloned() else {
        eprintln!("Error: Command is required");
        std::process::exit(1);
    };
    let catalog = match Catalog::find_and_read(&release) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let fault = Fault::from_env();
    let code = match command.as_str() {
        "version" => verbs::version(&release, &args),
        "port" => verbs::port(&args),
        "validate" => verbs::validate(&release, args.json, fault),
        "list" => verbs::list(&catalog, &args),
        "pull" => verbs::pull(&catalog, &args),
        "serve" => serve::serve(release, catalog, &args, fault),
        "run" | "remove" | "check" | "bench" => match args.positional.get(1) {
            Some(tag) if catalog.is_tag(tag) => {
                eprintln!("Error: the imitation does not implement `{command}`");
                1
            }
            tag => {
                verbs::model_not_found(tag.map_or("", String::as_str));
                1
            }
        },
        other => {
            eprintln!("Error: Invalid command: {other}");
            1
        }
    };
    std::process::exit(code);
}
