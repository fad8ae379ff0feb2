//! One turn of a conversation: check the request, make sure a model is open, plan what the
//! model sees, save the user's message and an empty answer, run the shared answer loop
//! (`hearth_chat::answer`: fit, stream, stop strings, power, receipt; called, with the power
//! rule, through [`crate::ask`] as the unsaved turn calls it) while saving the answer as it
//! grows, and store how it ended with its receipt.
//!
//! On the NPU, a FastFlowLM that fails before writing anything hands the answer to the
//! processor at once (a `Fallback` event says why). When it crashes in the middle, the partial
//! answer is kept, marked; whether FastFlowLM is restarted or left stopped after crashes is
//! the NPU backend's own rule (`hearth_backends::npu`), and a backend that refuses the next
//! answer falls back the same way.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use hearth_chat::conversations::{Conversation, ConversationSummary, Message, MessageState, Role};
use hearth_chat::{AnswerError, AnswerEvent, BackendError, BackendKind, Input, LiveStats};
use hearth_chat::{ChatMessage, Picture, PrefillProgress};
use serde::{Deserialize, Serialize};

use crate::app::{App, BusyGuard};
use crate::ask::Question;
use crate::error::{Error, ErrorCode, Result};
use crate::loading::Progress;
use crate::lock::lock;
use crate::pictures::PictureUpload;
use crate::session::{ModelStatus, OpenOptions, Session};

/// The longest message one can send, in characters (a 1 MB paste is refused with this number).
pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// How often the streamed text is saved to disk.
const SAVE_EVERY: Duration = Duration::from_millis(250);

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ChatAction {
    /// A new message.
    Send {
        /// Its text.
        content: String,
        /// The pictures given with it (checked again here: `crate::pictures`), in order.
        #[serde(default)]
        pictures: Vec<PictureUpload>,
    },
    /// Write the last answer again.
    Regenerate,
    /// Replace a message of the user with a new version (the old one keeps what followed
    /// it), then answer.
    Edit {
        /// The user message to replace.
        message_id: i64,
        /// Its new text.
        content: String,
    },
    /// Write on at the end of an answer that was cut short (at the length limit, or stopped):
    /// the conversation's last message. The same answer grows in place; where the model's
    /// backend cannot do that (a server, FastFlowLM), it is refused with the code `unsupported`
    /// and the detail `continueInPlace`, and the front end asks for a new answer instead.
    Continue {
        /// The answer to write on.
        message_id: i64,
    },
}

/// Events of an answer, in order: `Started`, then `Token`s and `Stats`, then `Done` or
/// `Error` (a `Fallback` may come before `Started` or in the middle).
// Each event is built, serialized to the UI once and dropped; `Started` is large only once
// per answer, so boxing its fields would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ChatEvent {
    /// The user's message is saved and the answer begins.
    Started {
        /// The conversation's line of the list now (a first message names it; it is the most
        /// recently changed), so the front end need not list the conversations again.
        conversation: ConversationSummary,
        /// The saved user message (None when regenerating).
        user_message: Option<Message>,
        /// The (empty) answer being written.
        assistant_message: Message,
        /// Tokens of the prompt after trimming.
        prompt_tokens: usize,
        /// The model's context length.
        context_limit: usize,
        /// Oldest messages left out.
        trimmed_messages: usize,
        /// The model answering.
        model: ModelStatus,
    },
    /// The passages of the attached files the model was given, by the number it cites them
    /// with (after `Started`; empty when none matched the question; each used as `Given`),
    /// and again before `Done` or `Error` as they are saved: one entry per page or section,
    /// with how the answer used it (`crate::citations`). Only with attached files.
    Sources {
        /// The sources, saved with the answer.
        sources: Vec<hearth_chat::conversations::Source>,
    },
    /// How much of the prompt the model has read, before the first `Token`: at 0, then after
    /// each chunk of the prefill. Only from the processor; the NPU and remote servers do not
    /// tell, so none comes from them.
    Reading(PrefillProgress),
    /// A piece of the answer.
    Token {
        /// Text to append.
        text: String,
    },
    /// Live numbers.
    Stats(LiveStats),
    /// The answer is finished and saved, receipt included.
    Done {
        /// The stored answer.
        message: Message,
    },
    /// The NPU could not answer and the model now runs on the processor, this answer too.
    Fallback {
        /// What happened, in plain words.
        reason: String,
        /// Where answers run now.
        backend: BackendKind,
        /// The model as it runs now.
        model: ModelStatus,
    },
    /// The answer failed after it started; what was written so far is saved.
    Error {
        /// Error code.
        code: ErrorCode,
        /// What happened.
        message: String,
    },
}

/// Checks a message's text: not blank, at most [`MAX_MESSAGE_CHARS`] characters.
pub fn validate_text(content: &str) -> Result<()> {
    if content.trim().is_empty() {
        return Err(Error::invalid(
            "The message is empty. Type something first.",
        ));
    }
    let chars = content.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(Error::invalid(format!(
            "The message is {chars} characters long; Hearth can send at most {MAX_MESSAGE_CHARS} at once. Shorten it or send it in parts."
        )));
    }
    Ok(())
}

/// The conversation as the model should see it after an action, and what to save.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// The messages the model reads: the system prompt, the kept turns, the new message (or,
    /// continuing, the cut answer last).
    pub messages: Vec<ChatMessage>,
    /// The user's new message to save (None when regenerating or continuing).
    pub new_user_text: Option<String>,
    /// Continuing: the answer written on, and its text so far.
    pub continued: Option<(i64, String)>,
    /// The saved messages whose pictures go with them: (place in `messages`, message id). An
    /// edited question keeps the pictures of the message it replaces.
    pub pictured: Vec<(usize, i64)>,
}

/// What the model sees after `action` on `conversation`: empty turns and failed answers are
/// left out; a regenerate answers the last user message again; an edit replaces a message of
/// the user and drops what followed it; a continue reads everything, the cut answer last.
pub fn plan(conversation: &Conversation, action: &ChatAction) -> Result<Plan> {
    let keep_until = match action {
        ChatAction::Send { content, .. } => {
            validate_text(content)?;
            conversation.messages.len()
        }
        ChatAction::Regenerate => {
            let last_user = conversation
                .messages
                .iter()
                .rposition(|m| m.role == Role::User)
                .ok_or_else(|| {
                    Error::invalid("There is no message to answer yet. Type one first.")
                })?;
            last_user + 1
        }
        ChatAction::Edit {
            message_id,
            content,
        } => {
            validate_text(content)?;
            conversation
                .messages
                .iter()
                .position(|m| m.id == *message_id && m.role == Role::User)
                .ok_or_else(|| {
                    Error::new(
                        ErrorCode::NotFound,
                        format!("There is no message {message_id} of yours in this conversation to edit."),
                    )
                })?
        }
        ChatAction::Continue { message_id } => {
            let last = conversation.messages.last().filter(|m| {
                m.id == *message_id
                    && m.role == Role::Assistant
                    && m.state != MessageState::Error
                    && !m.content.trim().is_empty()
            });
            if last.is_none() {
                return Err(Error::invalid(
                    "Only the last answer of a conversation, cut short, can be continued.",
                ));
            }
            conversation.messages.len()
        }
    };
    let mut messages = Vec::new();
    let mut pictured = Vec::new();
    let system = conversation.settings.system_prompt.trim();
    if !system.is_empty() {
        messages.push(ChatMessage::new(hearth_chat::Role::System, system));
    }
    for m in &conversation.messages[..keep_until] {
        if m.content.trim().is_empty() || m.state == MessageState::Error {
            continue;
        }
        let role = match m.role {
            Role::User => hearth_chat::Role::User,
            Role::Assistant => hearth_chat::Role::Assistant,
        };
        if !m.pictures.is_empty() {
            pictured.push((messages.len(), m.id));
        }
        messages.push(ChatMessage::new(role, m.content.clone()));
    }
    let new_user_text = match action {
        ChatAction::Send { content, .. } | ChatAction::Edit { content, .. } => {
            if let ChatAction::Edit { message_id, .. } = action {
                let edited = conversation.messages.iter().find(|m| m.id == *message_id);
                if edited.is_some_and(|m| !m.pictures.is_empty()) {
                    pictured.push((messages.len(), *message_id));
                }
            }
            messages.push(ChatMessage::new(hearth_chat::Role::User, content.clone()));
            Some(content.clone())
        }
        ChatAction::Regenerate | ChatAction::Continue { .. } => None,
    };
    let continued = match action {
        ChatAction::Continue { message_id } => conversation
            .messages
            .last()
            .map(|m| (*message_id, m.content.clone())),
        _ => None,
    };
    Ok(Plan {
        messages,
        new_user_text,
        continued,
        pictured,
    })
}

impl App {
    /// Runs `action` on the conversation `conversation_id`, sending events to `emit`; the
    /// start model is opened first when none is (reporting to `progress`). Errors before the
    /// answer starts are returned (nothing is saved); errors after are sent as an `Error`
    /// event, with the text written so far saved.
    pub fn answer(
        &self,
        _busy: BusyGuard,
        conversation_id: &str,
        action: ChatAction,
        progress: &Progress,
        emit: &dyn Fn(ChatEvent),
    ) -> Result<()> {
        let conversation = lock(&self.store).get(conversation_id)?;
        let mut plan = plan(&conversation, &action)?;
        self.ensure_model(progress)?;

        let mut guard = lock(&self.model);
        let loaded = guard.as_mut().ok_or_else(|| {
            Error::new(
                ErrorCode::NoModel,
                "No model is open. Pick one in the model list.",
            )
        })?;
        if plan.continued.is_some() && !loaded.continues_answers() {
            return Err(Error::new(
                ErrorCode::Unsupported,
                "This model cannot write on inside its cut answer (it runs on a server or the \
                 NPU); ask it to go on in a new answer.",
            )
            .detail("continueInPlace", &[]));
        }
        let new_pictures = give_pictures(self, loaded, &mut plan, &action)?;
        let grounding = self.ground_turn(
            conversation_id,
            loaded,
            &conversation.settings.chat_options(),
            &plan.messages,
        )?;
        let messages = match &grounding {
            Some(g) => crate::grounding::grounded(plan.messages.clone(), g),
            None => plan.messages.clone(),
        };
        let continuing = plan.continued.is_some();
        let mut turn = Turn {
            // A continued answer keeps the sources it was first given.
            sources: grounding.map(|g| g.sources).filter(|_| !continuing),
            app: self,
            conversation_id,
            action: &action,
            new_user_text: plan.new_user_text.as_deref(),
            new_pictures: &new_pictures,
            answer_id: plan.continued.as_ref().map(|(id, _)| *id),
            prefix: plan.continued.map(|(_, text)| text).unwrap_or_default(),
            started: false,
            text: String::new(),
            start_error: None,
        };
        let question = Question {
            input: if continuing {
                Input::Continue(messages)
            } else {
                Input::Chat(messages)
            },
            options: conversation.settings.chat_options(),
            stops: Vec::new(),
            trim_to_fit: true,
        };
        let mut result = turn.write(loaded, question.clone(), emit);
        let nothing_written = turn.text.is_empty()
            && !matches!(&result, Err(AnswerError::Failed { text, .. }) if !text.is_empty());
        if let Some(reason) = npu_failure(loaded, &result).filter(|_| nothing_written) {
            let entry = loaded
                .entry
                .clone()
                .expect("a model on the NPU is a local model");
            *guard = None; // stops FastFlowLM and frees the NPU before the CPU loads the model
            let options = OpenOptions {
                threads: *lock(&self.cpu_threads),
                ..OpenOptions::default()
            };
            let cpu = Session::open(&self.home, &entry, BackendKind::Cpu, options).map_err(|error| {
                Error::new(
                    ErrorCode::Model,
                    format!("The NPU could not answer ({reason}), and opening \"{}\" on the processor failed too: {error}", entry.name),
                )
            })?;
            tracing::warn!("npu: moving {} to the processor: {reason}", entry.name);
            emit(ChatEvent::Fallback {
                reason: format!(
                    "The NPU could not answer: {reason} Hearth answered on the processor instead; choose the NPU again in the model list to retry it."
                ),
                backend: BackendKind::Cpu,
                model: cpu.status(),
            });
            let loaded = guard.insert(cpu);
            result = turn.write(loaded, question, emit);
        }
        turn.finish(result, emit)
    }
}

/// Gives the plan's messages their pictures when the model sees them: the saved ones read back,
/// the new ones (sent with a `Send`) checked for the model's side and returned to be saved. A
/// model that does not see gets the words only; new pictures for it are refused before anything
/// is saved.
fn give_pictures(
    app: &App,
    loaded: &Session,
    plan: &mut Plan,
    action: &ChatAction,
) -> Result<Vec<Picture>> {
    let uploads = match action {
        ChatAction::Send { pictures, .. } => pictures.as_slice(),
        _ => &[],
    };
    let sees = loaded.sees_pictures();
    if !uploads.is_empty() && !sees {
        return Err(Error::new(
            ErrorCode::Unsupported,
            format!(
                "{} does not see pictures, so it cannot look at yours. Choose a model marked \
                 \"sees pictures\", or let Hearth read the text in the picture instead.",
                loaded.status().name
            ),
        )
        .detail("seesNoPictures", &[("model", loaded.status().name)]));
    }
    let new = crate::pictures::uploads(uploads, loaded.picture_side())?;
    if !sees {
        return Ok(new);
    }
    let store = lock(&app.store);
    for &(at, message_id) in &plan.pictured {
        if let Some(message) = plan.messages.get_mut(at) {
            message.pictures = store.pictures(message_id)?;
        }
    }
    if let (false, Some(last)) = (new.is_empty(), plan.messages.last_mut()) {
        last.pictures.clone_from(&new);
    }
    Ok(new)
}

/// Why an answer on the NPU failed, when FastFlowLM (not the conversation) was the cause.
fn npu_failure(
    loaded: &Session,
    result: &std::result::Result<hearth_chat::Answer, AnswerError>,
) -> Option<String> {
    if loaded.kind() != BackendKind::Npu {
        return None;
    }
    match result {
        Err(AnswerError::Failed {
            error: error @ BackendError::Failed { .. },
            ..
        })
        | Err(AnswerError::NotStarted(hearth_chat::context::FitError::Backend(
            error @ BackendError::Failed { .. },
        ))) => Some(error.to_string()),
        _ => None,
    }
}

/// One answer being written into a conversation: the saved turn and the text so far. A second
/// attempt (on the processor after the NPU failed) writes into the same answer.
struct Turn<'a> {
    app: &'a App,
    conversation_id: &'a str,
    action: &'a ChatAction,
    new_user_text: Option<&'a str>,
    /// The pictures sent with the new message, saved with it.
    new_pictures: &'a [Picture],
    answer_id: Option<i64>,
    /// The text the answer had before this turn: empty, or the cut answer being continued.
    prefix: String,
    /// Whether the front end was told the answer started (once per turn).
    started: bool,
    /// The answer's whole text so far: the prefix, then what this turn wrote.
    text: String,
    start_error: Option<Error>,
    /// The passages of attached files given to the model (None: no files attached).
    sources: Option<Vec<hearth_chat::conversations::Source>>,
}

impl Turn<'_> {
    /// Streams one attempt from `loaded`, saving the turn when it starts (once) and the text
    /// as it grows.
    // The error is the answer loop's own (it carries the partial text), returned once per answer.
    #[allow(clippy::result_large_err)]
    fn write(
        &mut self,
        loaded: &mut Session,
        question: Question,
        emit: &dyn Fn(ChatEvent),
    ) -> std::result::Result<hearth_chat::Answer, AnswerError> {
        let status = loaded.status();
        let app = self.app;
        let mut last_save = Instant::now();
        let mut save_failed = false;
        self.text.clone_from(&self.prefix);
        crate::ask::stream(&app.home, loaded, question, &mut |event| {
            match event {
                AnswerEvent::Started(start) => {
                    let saved = match self.answer_id {
                        Some(id) if self.started => lock(&app.store)
                            .save_partial(id, &self.prefix)
                            .map(|()| None)
                            .map_err(Error::from),
                        Some(id) => continued_turn(app, self.conversation_id, id).map(Some),
                        None => save_turn(
                            app,
                            self.conversation_id,
                            self.action,
                            self.new_user_text,
                            self.new_pictures,
                        )
                        .map(Some),
                    };
                    match saved {
                        Ok(Some(saved)) => {
                            self.started = true;
                            self.answer_id = Some(saved.assistant_message.id);
                            emit(ChatEvent::Started {
                                conversation: saved.conversation,
                                user_message: saved.user_message,
                                assistant_message: saved.assistant_message,
                                prompt_tokens: start.prompt_tokens.tokens,
                                context_limit: start.context_limit.unwrap_or(status.context_length),
                                trimmed_messages: start.trimmed_messages,
                                model: status.clone(),
                            });
                            if let Some(sources) = &self.sources {
                                emit(ChatEvent::Sources {
                                    sources: sources.clone(),
                                });
                            }
                        }
                        Ok(None) => {}
                        Err(error) => {
                            self.start_error = Some(error);
                            return ControlFlow::Break(());
                        }
                    }
                }
                AnswerEvent::Text(piece) => {
                    self.text.push_str(&piece);
                    emit(ChatEvent::Token { text: piece });
                    if last_save.elapsed() >= SAVE_EVERY {
                        last_save = Instant::now();
                        let saved = self
                            .answer_id
                            .map(|id| lock(&app.store).save_partial(id, &self.text));
                        if let Some(Err(error)) = saved {
                            // Keep answering: the text is on screen and the final save may work.
                            if !save_failed {
                                tracing::warn!("saving the answer so far failed: {error}");
                            }
                            save_failed = true;
                        }
                    }
                }
                AnswerEvent::Reading(progress) => emit(ChatEvent::Reading(progress)),
                AnswerEvent::Stats(live) => emit(ChatEvent::Stats(live)),
            }
            if app.stop_requested() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// Saves how the answer ended and tells the front end.
    fn finish(
        mut self,
        result: std::result::Result<hearth_chat::Answer, AnswerError>,
        emit: &dyn Fn(ChatEvent),
    ) -> Result<()> {
        if let Some(error) = self.start_error {
            return Err(error);
        }
        let store = &self.app.store;
        let answer_id = match (&result, self.answer_id) {
            (_, Some(id)) => id,
            (Err(AnswerError::NotStarted(error)), None) => {
                return Err(Error::new(ErrorCode::Context, error.to_string()))
            }
            (_, None) => {
                return Err(Error::new(
                    ErrorCode::Model,
                    "The model did not start answering. Try again.",
                ))
            }
        };
        // How the answer used its passages, told from its whole text (a continued answer's
        // saved sources are sorted again).
        let given = match self.sources.take() {
            Some(given) => given,
            None if !self.prefix.is_empty() => lock(store).message_sources(answer_id)?,
            None => Vec::new(),
        };
        if !given.is_empty() {
            let written = match &result {
                Ok(answer) => format!("{}{}", self.prefix, answer.text),
                Err(AnswerError::Failed { text, .. }) => format!("{}{text}", self.prefix),
                Err(AnswerError::NotStarted(_)) => self.prefix.clone(),
            };
            let sources = crate::citations::sort_sources(&written, &given);
            if let Err(error) = lock(store).save_sources(answer_id, &sources) {
                tracing::warn!("saving the answer's sources failed: {error}");
            }
            emit(ChatEvent::Sources { sources });
        }
        match result {
            Ok(answer) => {
                let final_state = if answer.stop == hearth_chat::AnswerStop::Cancelled {
                    MessageState::Stopped
                } else {
                    MessageState::Complete
                };
                let message = lock(store).finish_message(
                    answer_id,
                    &(self.prefix + &answer.text),
                    final_state,
                    Some(&answer.receipt),
                )?;
                emit(ChatEvent::Done { message });
                Ok(())
            }
            Err(AnswerError::Failed { text, error }) => {
                tracing::warn!("answer failed: {error}");
                let text = self.prefix + &text;
                let _ = lock(store).finish_message(answer_id, &text, MessageState::Error, None);
                emit(ChatEvent::Error {
                    code: ErrorCode::from(&error),
                    message: format!(
                        "The answer stopped with an error: {error}. What was written so far is saved."
                    ),
                });
                Ok(())
            }
            Err(AnswerError::NotStarted(error)) => {
                // A continued answer that could not start stays as it was.
                if self.prefix.is_empty() {
                    let _ = lock(store).finish_message(answer_id, "", MessageState::Error, None);
                }
                Err(Error::new(ErrorCode::Context, error.to_string()))
            }
        }
    }
}

/// What saving the start of a turn gives.
struct SavedTurn {
    conversation: ConversationSummary,
    user_message: Option<Message>,
    assistant_message: Message,
}

/// Saves the turn an answer begins: the user's new message (unless regenerating) and an empty
/// answer being written; an edit saves a new version of the message (the old one keeps what
/// followed it), a regenerate keeps the answers it replaces as earlier versions of the new one.
fn save_turn(
    app: &App,
    conversation_id: &str,
    action: &ChatAction,
    new_user_text: Option<&str>,
    new_pictures: &[Picture],
) -> Result<SavedTurn> {
    let store = lock(&app.store);
    let earlier = match action {
        ChatAction::Regenerate => store.take_trailing_answers(conversation_id)?,
        ChatAction::Send { .. } | ChatAction::Edit { .. } | ChatAction::Continue { .. } => {
            Vec::new()
        }
    };
    let user_message = match (action, new_user_text) {
        (ChatAction::Edit { message_id, .. }, Some(text)) => {
            Some(store.edit_message(conversation_id, *message_id, text)?)
        }
        (_, Some(text)) => {
            let message =
                store.add_message(conversation_id, Role::User, text, MessageState::Complete)?;
            if !new_pictures.is_empty() {
                store.add_pictures(message.id, new_pictures)?;
            }
            Some(message)
        }
        (_, None) => None,
    };
    let assistant_message = store.add_message(
        conversation_id,
        Role::Assistant,
        "",
        MessageState::Streaming,
    )?;
    store.keep_versions(assistant_message.id, &earlier)?;
    let saved = store.get(conversation_id)?;
    // The user message as saved, with what it says of its pictures.
    let user_message = user_message.map(|sent| {
        saved
            .messages
            .iter()
            .find(|m| m.id == sent.id)
            .cloned()
            .unwrap_or(sent)
    });
    Ok(SavedTurn {
        conversation: summary(&saved),
        user_message,
        assistant_message,
    })
}

/// The turn of a continued answer: nothing new is saved; the answer, as it stands, is what
/// the front end sees start.
fn continued_turn(app: &App, conversation_id: &str, answer_id: i64) -> Result<SavedTurn> {
    let saved = lock(&app.store).get(conversation_id)?;
    let assistant_message = saved
        .messages
        .iter()
        .find(|m| m.id == answer_id)
        .cloned()
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                "The answer to continue no longer exists. It may have been deleted.",
            )
        })?;
    Ok(SavedTurn {
        conversation: summary(&saved),
        user_message: None,
        assistant_message,
    })
}

/// A conversation's line of the list as a turn leaves it.
fn summary(conversation: &Conversation) -> ConversationSummary {
    ConversationSummary {
        message_count: conversation.messages.len(),
        id: conversation.id.clone(),
        title: conversation.title.clone(),
        created_at: conversation.created_at,
        updated_at: conversation.updated_at,
        snippet: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_huge_messages_are_refused_plainly() {
        assert_eq!(
            validate_text("  \n").unwrap_err().code,
            ErrorCode::InvalidInput
        );
        let huge = "x".repeat(1 << 20);
        let e = validate_text(&huge).unwrap_err();
        assert!(e.message.contains("1048576 characters"), "{}", e.message);
        assert!(validate_text("hello").is_ok());
    }

    #[test]
    fn actions_parse_from_the_ui_shape() {
        let a: ChatAction = serde_json::from_value(
            serde_json::json!({"kind": "edit", "message_id": 3, "content": "x"}),
        )
        .unwrap();
        assert_eq!(
            a,
            ChatAction::Edit {
                message_id: 3,
                content: "x".into()
            }
        );
        assert!(
            serde_json::from_value::<ChatAction>(serde_json::json!({"kind": "explode"})).is_err()
        );
    }

    #[test]
    fn events_have_the_ui_shape() {
        let e = serde_json::to_value(ChatEvent::Token { text: "hi".into() }).unwrap();
        assert_eq!(
            e,
            serde_json::json!({"event": "token", "data": {"text": "hi"}})
        );
        let e = serde_json::to_value(ChatEvent::Error {
            code: ErrorCode::Cut,
            message: "m".into(),
        })
        .unwrap();
        assert_eq!(e["data"]["code"], "cut", "codes are snake_case words");
    }
}
