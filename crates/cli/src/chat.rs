//! `hearth chat`: an interactive conversation in the terminal, streaming each answer. It is
//! saved in the app's conversation list, as the desktop app saves its own (through
//! `hearth_app`'s turn: the same store, the same plan, the NPU's fallback to the processor), so
//! it shows there afterwards; `--no-save` keeps it in memory only and answers through the app's
//! unsaved turn (`hearth_app::ask`: the same grounding and power rule). When the conversation
//! outgrows the context, the oldest turns are left out (and it says so). With `--file`, the
//! files are attached to the conversation as the app attaches them, each answer is grounded in
//! them, and its numbered sources are printed after it. `/image FILE` gives a picture (checked
//! by `hearth_chat::picture`) with the next message, for a model that sees pictures.

use std::cell::RefCell;
use std::io::{BufRead, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use hearth_app::ask::{ask, Files, Question};
use hearth_app::pictures::PictureUpload;
use hearth_app::turn::{ChatAction, ChatEvent};
use hearth_app::{App, Home, Session};
use hearth_chat::picture::{base64, MAX_PICTURES};
use hearth_chat::{AnswerError, AnswerEvent, ConversationSettings, Input, Receipt};
use hearth_chat::{ChatMessage, ChatOptions, Picture, Role};

use crate::model_args::{describe_receipt, BackendArgs, ModelArgs, SamplingArgs};
use crate::progress::StatusLine;
use crate::terminal::safe;

/// Chat with a model in the terminal (type /image FILE to give a picture with your next
/// message, /reset to start over, /exit or Ctrl-D to leave).
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
    /// Keep the conversation in memory only. By default it is saved with the app's
    /// conversations (in Hearth's data folder) and shows in the app's list.
    #[arg(long)]
    no_save: bool,
    /// Answer from this file (repeatable; PDF, Word, OpenDocument, EPUB, HTML, Markdown, text
    /// or code): it is indexed into Hearth's document library and attached to the
    /// conversation; each answer cites its passages, listed after the answer.
    #[arg(long = "file", value_name = "PATH")]
    files: Vec<PathBuf>,
}

/// Runs the verb.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let session = args.backend.open_session(&args.model, false)?;
    let thinking = match (args.think, args.no_think) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    let options = args.sampling.options(thinking);
    let info = session.backend.info().clone();
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
    let mut chat = if args.no_save {
        let home = crate::model_args::home()?;
        let files = if args.files.is_empty() {
            None
        } else {
            let files = crate::files::index(&home, &args.files, false)?;
            crate::files::tell_remote(&session);
            Some(files)
        };
        Chat::Unsaved(Box::new(Unsaved::new(
            home,
            session,
            args.system,
            options,
            files,
        )))
    } else {
        if args.sampling.speculative.is_some() {
            eprintln!(
                "hearth: --speculative applies with --no-save; a saved conversation decodes as \
                 the app does"
            );
        }
        let settings = ConversationSettings {
            system_prompt: args.system.unwrap_or_default(),
            sampling: options.sampling,
            max_tokens: options.max_tokens,
            enable_thinking: thinking,
        };
        Chat::Saved(Box::new(Saved::open(session, settings, args.files)?))
    };
    let stdin = std::io::stdin();
    let mut line = String::new();
    // `/image FILE`: pictures for the next message, with their files' names.
    let mut pictures: Vec<(String, Picture)> = Vec::new();
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
                chat.reset();
                pictures.clear();
                eprintln!("hearth: new conversation");
                continue;
            }
            command if command == "/image" || command.starts_with("/image ") => {
                attach(command["/image".len()..].trim(), &mut pictures);
                continue;
            }
            _ => {}
        }
        let text = line.trim_end_matches(['\r', '\n']);
        if let Some(receipt) = chat.ask(text, std::mem::take(&mut pictures))? {
            if args.stats {
                eprintln!("{}", safe(&describe_receipt(&receipt)));
            }
        }
    }
}

/// The conversation, saved with the app's or kept in memory.
enum Chat {
    // Both boxed: each is large (the app's state; a session with Hearth's folders), and one
    // lives for the whole chat.
    Saved(Box<Saved>),
    Unsaved(Box<Unsaved>),
}

impl Chat {
    /// Answers `text`, streaming the answer to stdout; the answer's receipt, None when it
    /// failed (the reason is already printed).
    fn ask(
        &mut self,
        text: &str,
        pictures: Vec<(String, Picture)>,
    ) -> anyhow::Result<Option<Receipt>> {
        match self {
            Chat::Saved(saved) => saved.ask(text, pictures),
            Chat::Unsaved(unsaved) => unsaved.ask(text, pictures),
        }
    }

    /// Starts a new conversation (a saved one keeps the one before in the list).
    fn reset(&mut self) {
        match self {
            Chat::Saved(saved) => saved.conversation = None,
            Chat::Unsaved(unsaved) => unsaved.messages = unsaved.start.clone(),
        }
    }
}

/// A conversation saved through the app's core, created at its first message.
struct Saved {
    app: App,
    settings: ConversationSettings,
    conversation: Option<String>,
    /// `--file`: attached to each conversation it starts.
    files: Vec<PathBuf>,
}

impl Saved {
    /// The app's state in Hearth's folders, with `session` as its model; `files` are indexed
    /// now, so a file that cannot be read stops here, before any question.
    fn open(
        session: Session,
        settings: ConversationSettings,
        files: Vec<PathBuf>,
    ) -> anyhow::Result<Saved> {
        let app = App::open(crate::model_args::home()?)?;
        app.use_session(session)?;
        for notice in app.take_notices() {
            eprintln!("hearth: {}", safe(&notice.message));
        }
        if !files.is_empty() {
            app.documents()
                .index_now(&files, &|event| crate::files::report(&event, false))?;
        }
        Ok(Saved {
            app,
            settings,
            conversation: None,
            files,
        })
    }

    /// A new conversation with the files attached; with a model on a remote server, the user
    /// is told that passages go there (giving `--file` is their consent).
    fn start(&self) -> anyhow::Result<String> {
        let id = self.app.create_conversation(&self.settings)?.id;
        if !self.files.is_empty() {
            self.app.documents().attach_now(&id, &self.files, &|_| {})?;
            if let Some(notice) = self.app.remote_documents_notice(&id)? {
                eprintln!("hearth: {}", safe(&notice.message));
                self.app.accept_remote_documents(&id)?;
            }
        }
        Ok(id)
    }

    fn ask(
        &mut self,
        text: &str,
        pictures: Vec<(String, Picture)>,
    ) -> anyhow::Result<Option<Receipt>> {
        let id = match &self.conversation {
            Some(id) => id.clone(),
            None => {
                let id = self.start()?;
                self.conversation.insert(id).clone()
            }
        };
        let busy = self.app.begin_answer()?;
        let receipt = RefCell::new(None);
        let failure = RefCell::new(None);
        let sources = RefCell::new(Vec::new());
        let status = RefCell::new(StatusLine::new());
        let progress = hearth_app::npu::logged_progress();
        let action = ChatAction::Send {
            content: text.to_owned(),
            pictures: pictures
                .into_iter()
                .map(|(name, p)| PictureUpload {
                    name,
                    data: base64(&p.bytes),
                })
                .collect(),
        };
        let result = self
            .app
            .answer(busy, &id, action, &progress, &|event| match event {
                ChatEvent::Started {
                    trimmed_messages, ..
                } => say_trimmed(trimmed_messages),
                ChatEvent::Reading(progress) => {
                    if let Some(text) = crate::progress::reading(progress) {
                        status.borrow_mut().redraw(&text);
                    }
                }
                ChatEvent::Token { text } => {
                    status.borrow_mut().clear();
                    print_piece(&text);
                }
                ChatEvent::Sources { sources: given } => *sources.borrow_mut() = given,
                ChatEvent::Fallback { reason, .. } => eprintln!("\nhearth: {}", safe(&reason)),
                ChatEvent::Done { message } => *receipt.borrow_mut() = message.receipt,
                ChatEvent::Error { message, .. } => *failure.borrow_mut() = Some(message),
                // Live numbers and the like are for the app's window.
                _ => {}
            });
        status.borrow_mut().clear();
        println!();
        if let Err(error) = result {
            eprintln!("hearth: {}", safe(&error.message));
            return Ok(None);
        }
        crate::files::print_sources(&mut std::io::stdout(), &sources.into_inner());
        if let Some(message) = failure.into_inner() {
            eprintln!("hearth: the answer stopped early: {}", safe(&message));
        }
        Ok(receipt.into_inner())
    }
}

/// A conversation in memory only (`--no-save`), answered by the app's unsaved turn
/// (`hearth_app::ask`).
struct Unsaved {
    home: Home,
    session: Session,
    options: ChatOptions,
    /// The system message it starts with, if any.
    start: Vec<ChatMessage>,
    messages: Vec<ChatMessage>,
    /// `--file`, indexed.
    files: Option<Files>,
}

impl Unsaved {
    fn new(
        home: Home,
        session: Session,
        system: Option<String>,
        options: ChatOptions,
        files: Option<Files>,
    ) -> Unsaved {
        let start: Vec<ChatMessage> = system
            .into_iter()
            .map(|s| ChatMessage::new(Role::System, s))
            .collect();
        Unsaved {
            home,
            session,
            options,
            messages: start.clone(),
            start,
            files,
        }
    }

    fn ask(
        &mut self,
        text: &str,
        pictures: Vec<(String, Picture)>,
    ) -> anyhow::Result<Option<Receipt>> {
        let pictures = pictures.into_iter().map(|(_, p)| p).collect();
        self.messages
            .push(ChatMessage::new(Role::User, text).with_pictures(pictures));
        let question = Question {
            input: Input::Chat(self.messages.clone()),
            options: self.options.clone(),
            stops: Vec::new(),
            trim_to_fit: true,
        };
        let mut status = StatusLine::new();
        let files = self.files.as_ref();
        let asked = ask(
            &self.home,
            &mut self.session,
            question,
            files,
            &mut |event| {
                match event {
                    AnswerEvent::Started(start) => say_trimmed(start.trimmed_messages),
                    AnswerEvent::Reading(progress) => {
                        if let Some(text) = crate::progress::reading(progress) {
                            status.redraw(&text);
                        }
                    }
                    AnswerEvent::Text(piece) => {
                        status.clear();
                        print_piece(&piece);
                    }
                    _ => {}
                }
                ControlFlow::Continue(())
            },
        );
        status.clear();
        println!();
        let asked = match asked {
            Ok(asked) => asked,
            Err(error) => {
                self.messages.pop();
                eprintln!("hearth: {}", safe(&error.message));
                return Ok(None);
            }
        };
        match asked.answer {
            Ok(answer) => {
                crate::files::print_sources(&mut std::io::stdout(), &asked.sources);
                self.messages
                    .push(ChatMessage::new(Role::Assistant, answer.text));
                Ok(Some(answer.receipt))
            }
            Err(AnswerError::Failed { text, error }) => {
                eprintln!(
                    "hearth: the answer stopped early: {}",
                    safe(&error.to_string())
                );
                if !text.is_empty() {
                    // Keep what was written, so the conversation stays as the user saw it.
                    self.messages.push(ChatMessage::new(Role::Assistant, text));
                }
                Ok(None)
            }
            Err(error) => {
                self.messages.pop();
                eprintln!("hearth: {}", safe(&error.to_string()));
                Ok(None)
            }
        }
    }
}

/// `/image FILE`: checks the picture in `path` and keeps it for the next message, saying so
/// (or why not).
fn attach(path: &str, pictures: &mut Vec<(String, Picture)>) {
    if path.is_empty() {
        eprintln!("hearth: /image FILE gives the picture in FILE with your next message");
        return;
    }
    if pictures.len() >= MAX_PICTURES {
        eprintln!(
            "hearth: a message takes at most {MAX_PICTURES} pictures, and {MAX_PICTURES} already wait for your next one: send it, then give this picture with the message after"
        );
        return;
    }
    match crate::run::pictures(&[PathBuf::from(path)]) {
        Ok(checked) => {
            for picture in checked {
                eprintln!(
                    "hearth: {} ({} x {}) goes with your next message",
                    safe(path),
                    picture.width,
                    picture.height
                );
                pictures.push((path.to_owned(), picture));
            }
        }
        Err(error) => eprintln!("hearth: {}", safe(&error.to_string())),
    }
}

fn say_trimmed(trimmed_messages: usize) {
    if trimmed_messages > 0 {
        eprintln!(
            "hearth: the conversation is longer than the model can read; its {trimmed_messages} \
             oldest messages are left out of this answer."
        );
    }
}

/// Writes a piece of the answer as it comes. A closed stdout must not stop the answer (it is
/// still saved), so write errors are ignored here.
fn print_piece(piece: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(safe(piece).as_bytes())
        .and_then(|()| stdout.flush());
}
