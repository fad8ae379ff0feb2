//! `hearth run`: answer one prompt and exit, streaming the answer to stdout.

use std::io::Write;
use std::ops::ControlFlow;
use std::process::ExitCode;

use hearth_engine::{ChatMessage, Role};

use crate::model_args::{describe_stats, ModelArgs, SamplingArgs};

/// Answer one prompt, streaming the answer.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// What to ask.
    prompt: String,
    /// A system message to put before the prompt.
    #[arg(long)]
    system: Option<String>,
    /// Continue the text as it is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// Ask the model to reason before answering (models with a thinking switch).
    #[arg(long, conflicts_with = "no_think")]
    think: bool,
    /// Ask the model to answer without reasoning first.
    #[arg(long)]
    no_think: bool,
    /// Do not print timings on stderr.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut model = args.model.load()?;
    let thinking = match (args.think, args.no_think) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let options = args.sampling.options(thinking);
    let mut stdout = std::io::stdout().lock();
    let mut write_failed = None;
    let mut on_text = |piece: &str| match stdout
        .write_all(piece.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            write_failed = Some(e);
            ControlFlow::Break(())
        }
    };
    let use_template = !args.raw && model.info().has_chat_template;
    if !args.raw && !use_template {
        eprintln!("hearth: this model has no chat template; continuing the prompt as plain text");
    }
    let stats = if use_template {
        let mut messages = Vec::new();
        if let Some(system) = args.system {
            messages.push(ChatMessage::new(Role::System, system));
        }
        messages.push(ChatMessage::new(Role::User, args.prompt));
        model.chat(&messages, &options, &mut on_text)?
    } else {
        model.complete(&args.prompt, &options, &mut on_text)?
    };
    if let Some(e) = write_failed {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    let _ = writeln!(stdout).and_then(|()| stdout.flush());
    if !args.quiet {
        eprintln!("{}", describe_stats(&stats));
    }
    Ok(ExitCode::SUCCESS)
}
