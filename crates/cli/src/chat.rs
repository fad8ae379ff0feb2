//! `hearth chat`: an interactive conversation in the terminal, streaming each answer.

use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::process::ExitCode;

use hearth_engine::{ChatMessage, Error, Role, StopReason};

use crate::model_args::{describe_stats, ModelArgs, SamplingArgs};

/// Chat with a model in the terminal (type /reset to start over, /exit or Ctrl-D to leave).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// A system message that starts the conversation.
    #[arg(long)]
    system: Option<String>,
    /// Ask the model to reason before answering (models with a thinking switch).
    #[arg(long, conflicts_with = "no_think")]
    think: bool,
    /// Ask the model to answer without reasoning first.
    #[arg(long)]
    no_think: bool,
    /// Print timings after each answer.
    #[arg(long)]
    stats: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut model = args.model.load()?;
    if !model.info().has_chat_template {
        anyhow::bail!(
            "the model in {} has no chat template, so it cannot chat; try `hearth run --raw`",
            args.model.model.display()
        );
    }
    let thinking = match (args.think, args.no_think) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let options = args.sampling.options(thinking);
    let start: Vec<ChatMessage> = args
        .system
        .iter()
        .map(|s| ChatMessage::new(Role::System, s.clone()))
        .collect();
    let mut messages = start.clone();
    eprintln!(
        "hearth: chatting with {} ({} context tokens). /reset starts over, /exit or Ctrl-D leaves.",
        model.info().name,
        model.info().context_length
    );
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        print!("> ");
        std::io::stdout().flush()?;
        line.clear();
        if stdin.lock().read_line(&mut line)? == 0 {
            println!();
            return Ok(ExitCode::SUCCESS);
        }
        match line.trim() {
            "" => continue,
            "/exit" | "/quit" => return Ok(ExitCode::SUCCESS),
            "/reset" => {
                messages = start.clone();
                eprintln!("hearth: new conversation");
                continue;
            }
            _ => {}
        }
        messages.push(ChatMessage::new(
            Role::User,
            line.trim_end_matches(['\r', '\n']),
        ));
        let mut answer = String::new();
        let mut stdout = std::io::stdout().lock();
        let result = model.chat(&messages, &options, &mut |piece| {
            answer.push_str(piece);
            let _ = stdout
                .write_all(piece.as_bytes())
                .and_then(|()| stdout.flush());
            ControlFlow::Continue(())
        });
        writeln!(stdout)?;
        drop(stdout);
        match result {
            Ok(stats) => {
                messages.push(ChatMessage::new(Role::Assistant, answer));
                if stats.stop_reason == StopReason::ContextFull {
                    eprintln!(
                        "hearth: the context is full. Type /reset to start a new conversation."
                    );
                }
                if args.stats {
                    eprintln!("{}", describe_stats(&stats));
                }
            }
            Err(err @ Error::ContextFull { .. }) => {
                messages.pop();
                eprintln!("hearth: {err}. Type /reset to start a new conversation.");
            }
            Err(err) => return Err(err.into()),
        }
    }
}
