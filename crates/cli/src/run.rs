//! `hearth run`: answer one prompt and exit, streaming the answer to stdout (or, with `--json`,
//! printing one object at the end), through the app's unsaved turn (`hearth_app::ask`). With
//! `--file`, the answer is grounded in those files as the app grounds a conversation's, and
//! their numbered sources are printed after it. With `--image`, pictures go with the prompt
//! (checked by `hearth_chat::picture`), to a model that sees them.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use hearth_app::ask::{ask, Question};
use hearth_chat::picture::{check_picture, DEFAULT_LONGEST_SIDE, MAX_PICTURES, MAX_PICTURE_BYTES};
use hearth_chat::{AnswerEvent, ChatMessage, Input, Picture, Role};
use serde::Serialize;

use crate::model_args::{describe_receipt, BackendArgs, ModelArgs, SamplingArgs};
use crate::progress::StatusLine;
use crate::terminal::safe;

/// Answer one prompt, streaming the answer.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// What to ask.
    prompt: String,
    /// A system message to put before the prompt.
    #[arg(long)]
    system: Option<String>,
    /// Answer from this file (repeatable; PDF, Word, OpenDocument, EPUB, HTML, Markdown, text
    /// or code): it is indexed into Hearth's document library, the model is given its best
    /// passages and cites them, and the sources are listed after the answer.
    #[arg(long = "file", value_name = "PATH", conflicts_with = "raw")]
    files: Vec<PathBuf>,
    /// Give the model this picture with the prompt (repeatable, up to 4; PNG, JPEG or WebP, at most
    /// 20 MB and 40 megapixels, downscaled to 1,536 pixels on its longest side): for a model
    /// that sees pictures (FastFlowLM's vision models, or a remote one that sees).
    #[arg(long = "image", value_name = "FILE", conflicts_with = "raw")]
    images: Vec<PathBuf>,
    /// Continue the text as it is, without the chat template.
    #[arg(long)]
    raw: bool,
    /// Ask the model to reason before answering (models with a thinking switch).
    #[arg(long, conflicts_with = "no_think")]
    think: bool,
    /// Ask the model to answer without reasoning first.
    #[arg(long)]
    no_think: bool,
    /// Stop the answer before this text (repeatable).
    #[arg(long, value_name = "TEXT")]
    stop: Vec<String>,
    /// Print one JSON object at the end instead of streaming the text.
    #[arg(long)]
    json: bool,
    /// Do not print timings on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Run on the NPU even a model FastFlowLM is known to fail with (`hearth list` says which
    /// and why), to test a new FastFlowLM or kernel pack.
    #[arg(long)]
    npu_anyway: bool,
}

/// What `hearth run --json` prints.
#[derive(Serialize)]
struct RunReport<'a> {
    text: &'a str,
    backend: hearth_chat::BackendKind,
    device: &'a str,
    model: &'a str,
    prompt_tokens: usize,
    generated_tokens: usize,
    counts_exact: bool,
    ttft_secs: f64,
    decode_tokens_per_s: f64,
    stop_reason: hearth_chat::AnswerStop,
    receipt: &'a hearth_chat::Receipt,
    /// The passages of `--file` the model was given, by the number it cites them with.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    sources: &'a [hearth_app::documents::Source],
}

/// The pictures in `paths`, each read and checked (format, size, pixels) and downscaled for
/// the model; an error names the file and says what was wrong with it.
pub(crate) fn pictures(paths: &[PathBuf]) -> anyhow::Result<Vec<Picture>> {
    if paths.len() > MAX_PICTURES {
        anyhow::bail!(
            "{} pictures were given with --image; a message takes at most {MAX_PICTURES}: give {MAX_PICTURES} or fewer, and ask about the others in another run",
            paths.len()
        );
    }
    paths
        .iter()
        .map(|path| {
            let shown = path.display().to_string();
            let shown = safe(&shown);
            let len = std::fs::metadata(path)
                .map_err(|e| anyhow::anyhow!("cannot read the picture {shown}: {e}"))?
                .len();
            if len > MAX_PICTURE_BYTES as u64 {
                anyhow::bail!(
                    "the picture {shown} is {:.1} MB; Hearth takes pictures up to {} MB",
                    len as f64 / (1024.0 * 1024.0),
                    MAX_PICTURE_BYTES / (1024 * 1024)
                );
            }
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read the picture {shown}: {e}"))?;
            check_picture(&bytes, DEFAULT_LONGEST_SIDE)
                .map_err(|e| anyhow::anyhow!("the picture {shown}: {e}"))
        })
        .collect()
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // A picture that cannot go is said before a model is loaded (onto the NPU, that takes a while).
    let pictures = pictures(&args.images)?;
    let mut session = if args.npu_anyway {
        args.backend.open_npu_anyway(&args.model)?
    } else {
        args.backend.open_session(&args.model, false)?
    };
    let thinking = match (args.think, args.no_think) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let input = if args.raw {
        Input::Raw(args.prompt)
    } else {
        let system = args.system.map(|s| ChatMessage::new(Role::System, s));
        let user = ChatMessage::new(Role::User, args.prompt).with_pictures(pictures);
        Input::Chat(system.into_iter().chain([user]).collect())
    };
    let question = Question {
        input,
        options: args.sampling.options(thinking),
        stops: args.stop,
        trim_to_fit: false,
    };
    let home = crate::model_args::home()?;
    let files = if args.files.is_empty() {
        None
    } else {
        let files = crate::files::index(&home, &args.files, args.quiet)?;
        crate::files::tell_remote(&session);
        Some(files)
    };
    let mut stdout = std::io::stdout().lock();
    let mut write_failed = None;
    let streaming = !args.json;
    let mut status = StatusLine::new();
    let mut show = |event: AnswerEvent| match event {
        AnswerEvent::Started(start) if streaming && start.backend.kind.leaves_this_computer() => {
            eprintln!(
                "hearth: this question is sent to {} ({}); it leaves this computer.",
                safe(&start.backend.device),
                safe(&start.backend.label)
            );
            ControlFlow::Continue(())
        }
        AnswerEvent::Reading(progress) if streaming => {
            if let Some(text) = crate::progress::reading(progress) {
                status.redraw(&text);
            }
            ControlFlow::Continue(())
        }
        AnswerEvent::Text(piece) if streaming => {
            status.clear();
            match stdout
                .write_all(safe(&piece).as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    write_failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        }
        _ => ControlFlow::Continue(()),
    };
    let asked = ask(&home, &mut session, question, files.as_ref(), &mut show)?;
    let (result, sources) = (asked.answer, asked.sources);
    status.clear();
    let answer = match result {
        Ok(answer) => answer,
        Err(hearth_chat::AnswerError::Failed { text, error }) => {
            if streaming {
                let _ = writeln!(stdout);
            } else if !text.is_empty() {
                println!("{}", safe(&text));
            }
            anyhow::bail!(
                "the answer stopped early: {error} (the text above is what was written before)"
            );
        }
        Err(error) => return Err(error.into()),
    };
    if let Some(e) = write_failed {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let receipt = &answer.receipt;
    if args.json {
        let report = RunReport {
            text: &answer.text,
            backend: receipt.backend_kind,
            device: &receipt.device,
            model: &receipt.model_name,
            prompt_tokens: receipt.prompt_tokens,
            generated_tokens: receipt.generated_tokens,
            counts_exact: receipt.counts_exact,
            ttft_secs: receipt.ttft_secs,
            decode_tokens_per_s: receipt.tokens_per_second,
            stop_reason: answer.stop,
            receipt,
            sources: &sources,
        };
        writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let _ = writeln!(stdout).and_then(|()| stdout.flush());
    crate::files::print_sources(&mut stdout, &sources);
    if !args.quiet {
        eprintln!("{}", safe(&describe_receipt(receipt)));
    }
    Ok(ExitCode::SUCCESS)
}
