//! `hearth chat`: an interactive conversation in the terminal, streaming each answer. When the
//! conversation outgrows the context, the oldest turns are left out (and it says so).

use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::process::ExitCode;

use hearth_chat::{AnswerError, AnswerEvent, AnswerRequest, Input};
use hearth_engine::{ChatMessage, Role};

use crate::model_args::{describe_receipt, BackendArgs, ModelArgs, SamplingArgs};
use crate::terminal::safe;

/// Chat with a model in the terminal (type /reset to start over, /exit or Ctrl-D to leave).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    backend: BackendArgs,
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
    /// Print where each answer ran and its timings.
    #[arg(long)]
    stats: bool,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut backend = args.backend.open(&args.model)?;
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
    let info = backend.info().clone();
    let context = info
        .context_length
        .map_or_else(String::new, |n| format!(", {n} context tokens"));
    eprintln!(
        "hearth: chatting with {} on {}{context}. /reset starts over, /exit or Ctrl-D leaves.",
        safe(&info.model),
        info.kind.place()
    );
    if info.kind.leaves_this_computer() {
        eprintln!(
            "hearth: your messages are sent to {}; they leave this computer.",
            safe(&info.device)
        );
    }
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
        let sensors = hearth_backends::Sensors::new("/");
        let request = AnswerRequest {
            input: Input::Chat(messages.clone()),
            options: options.clone(),
            stops: Vec::new(),
            // Power is read on this computer while it computes (not for a remote server).
            power: (!info.kind.leaves_this_computer())
                .then_some(&sensors as &dyn hearth_chat::PowerMeter),
            trim_to_fit: true,
        };
        let mut stdout = std::io::stdout().lock();
        let result = hearth_chat::answer(backend.as_mut(), request, &mut |event| {
            match event {
                AnswerEvent::Started(start) if start.trimmed_messages > 0 => eprintln!(
                    "hearth: the conversation is longer than the model can read; its {} oldest \
                     messages are left out of this answer.",
                    start.trimmed_messages
                ),
                AnswerEvent::Text(piece) => {
                    let _ = stdout
                        .write_all(safe(&piece).as_bytes())
                        .and_then(|()| stdout.flush());
                }
                _ => {}
            }
            ControlFlow::Continue(())
        });
        writeln!(stdout)?;
        drop(stdout);
        match result {
            Ok(answer) => {
                messages.push(ChatMessage::new(Role::Assistant, answer.text));
                if args.stats {
                    eprintln!("{}", safe(&describe_receipt(&answer.receipt)));
                }
            }
            Err(AnswerError::Failed { text, error }) => {
                eprintln!(
                    "hearth: the answer stopped early: {}",
                    safe(&error.to_string())
                );
                if !text.is_empty() {
                    // Keep what was written, so the conversation stays as the user saw it.
                    messages.push(ChatMessage::new(Role::Assistant, text));
                }
            }
            Err(error) => {
                messages.pop();
                eprintln!("hearth: {}", safe(&error.to_string()));
            }
        }
    }
}
