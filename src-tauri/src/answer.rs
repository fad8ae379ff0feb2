//! Writing an answer in a conversation: check the request, make sure a model is loaded, save
//! the user's message, run the shared answer loop (`hearth_chat::answer`: fit, stream, stop
//! strings, power, receipt) while saving the answer as it grows, and store its receipt.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hearth_chat::conversations::{Conversation, Message, MessageState, Role};
use hearth_backends::remote::RemoteConfig;
use hearth_chat::{AnswerError, AnswerEvent, AnswerRequest, BackendKind, Input, LiveStats};
use hearth_engine::ChatMessage;
use hearth_hub::BuiltinKind;
use serde::{Deserialize, Serialize};

use crate::error::{CommandError, CommandResult};
use crate::paths::{self, LocalModel};
use crate::session::{LoadedModel, ModelStatus};
use crate::state::{lock, AppState, BusyGuard, NoticeLevel};

/// The longest message one can send, in characters (a 1 MB paste is refused with this number).
pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// How often the streamed text is saved to disk.
const SAVE_EVERY: Duration = Duration::from_millis(250);
/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[derive(ts_rs::TS)]
pub enum ChatAction {
    /// A new message.
    Send {
        /// Its text.
        content: String,
    },
    /// Write the last answer again.
    Regenerate,
    /// Replace a message of the user (and drop everything after it), then answer.
    Edit {
        /// The user message to replace.
        message_id: i64,
        /// Its new text.
        content: String,
    },
}

/// Events on the answer's Channel.
// Each event is built, serialized to the UI once and dropped; `Started` is large only once
// per answer, so boxing its fields would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "lowercase")]
#[derive(ts_rs::TS)]
pub enum ChatEvent {
    /// The user's message is saved and the answer begins.
    Started {
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
    /// The NPU failed and the model now runs on the processor (this answer too, when the NPU
    /// had written nothing of it).
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
        code: String,
        /// What happened.
        message: String,
    },
}

/// Claim the right to write an answer (one at a time).
pub fn begin(state: &AppState) -> CommandResult<BusyGuard> {
    state.begin_answer().ok_or_else(|| {
        CommandError::new(
            "busy",
            "An answer is already being written. Wait for it, or press Stop first.",
        )
    })
}

/// Check a message's text.
pub fn validate_text(content: &str) -> CommandResult<()> {
    if content.trim().is_empty() {
        return Err(CommandError::invalid(
            "The message is empty. Type something first.",
        ));
    }
    let chars = content.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(CommandError::invalid(format!(
            "The message is {chars} characters long; Hearth can send at most {MAX_MESSAGE_CHARS} at once. Shorten it or send it in parts."
        )));
    }
    Ok(())
}

/// The local model called `name` (the registry's, or the demo).
pub fn local_model(state: &AppState, name: &str) -> CommandResult<LocalModel> {
    paths::local_models(&state.paths)
        .into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| {
            CommandError::new(
                "not_found",
                format!("There is no model called \"{name}\" on this computer. Open Models to see which ones are."),
            )
        })
}

/// The model slot, to replace what it holds; refused while an answer is being written.
pub fn claim_model(
    state: &AppState,
) -> CommandResult<std::sync::MutexGuard<'_, Option<LoadedModel>>> {
    state.model.try_lock().map_err(|_| {
        CommandError::new(
            "busy",
            "The model is busy writing an answer. Stop it or wait, then try again.",
        )
    })
}

/// Load `entry` into the state (replacing the current model).
pub fn load_model(state: &AppState, entry: &LocalModel) -> CommandResult<ModelStatus> {
    let mut slot = claim_model(state)?;
    *slot = None; // free the old model's memory first
    let threads = *lock(&state.cpu_threads);
    match LoadedModel::load(entry, threads) {
        Ok(loaded) => {
            let status = loaded.status();
            tracing::info!("loaded model {} from {}", entry.name, entry.path.display());
            *slot = Some(loaded);
            *lock(&state.model_error) = None;
            Ok(status)
        }
        Err(error) => {
            let message = format!(
                "Hearth could not open the model \"{}\": {error}",
                entry.name
            );
            *lock(&state.model_error) = Some(message.clone());
            Err(CommandError::new("model", message))
        }
    }
}

/// Open `model` on the saved remote server and put it in the state in place of the current
/// model; the choice is saved with the server's settings.
pub fn load_remote_model(state: &AppState, model: &str) -> CommandResult<ModelStatus> {
    let config_dir = &state.paths.config_dir;
    let mut config = RemoteConfig::load(config_dir)?.ok_or_else(|| {
        CommandError::new(
            "not_found",
            "No remote server is set. Add one in Settings, under Remote server.",
        )
    })?;
    let mut slot = claim_model(state)?;
    let loaded = LoadedModel::connect_remote(&config, model)?;
    let status = loaded.status();
    tracing::info!("answers now come from {model} on {}", config.base_url);
    *slot = Some(loaded);
    *lock(&state.model_error) = None;
    if config.model.as_deref() != Some(model) {
        config.model = Some(model.to_owned());
        config.save(config_dir)?;
    }
    Ok(status)
}

/// Load the start model if none is loaded yet: the registry's default, else the first
/// registered model, else the built-in model (and say what it is).
pub fn ensure_model(state: &AppState) -> CommandResult<()> {
    if lock(&state.model).is_some() {
        return Ok(());
    }
    let models = paths::local_models(&state.paths);
    let Some(entry) = paths::pick_start_model(&models) else {
        let message = "No model is available: nothing is downloaded and the model that comes with Hearth is missing. Open Models to download one.";
        *lock(&state.model_error) = Some(message.into());
        return Err(CommandError::new("no_model", message));
    };
    load_model(state, &entry)?;
    let notice = match entry.builtin {
        _ if models.len() > 1 => None,
        Some(BuiltinKind::Starter) => Some(
            "No model is downloaded yet, so Hearth opened SmolLM2-135M, the very small assistant that comes with it. It answers offline but makes many mistakes. Open Models to download a bigger one for good answers.",
        ),
        Some(BuiltinKind::Demo) => Some(
            "No model is downloaded yet, so Hearth opened its tiny demo model. It only shows how the app works: it knows a little about Rust and is often wrong. Open Models to download a real one.",
        ),
        None => None,
    };
    if let Some(message) = notice {
        state.notify(NoticeLevel::Info, message);
    }
    Ok(())
}

/// The conversation as the model should see it after `action`, and what to save.
struct Plan {
    messages: Vec<ChatMessage>,
    new_user_text: Option<String>,
}

fn plan(conversation: &Conversation, action: &ChatAction) -> CommandResult<Plan> {
    let keep_until = match action {
        ChatAction::Send { content } => {
            validate_text(content)?;
            conversation.messages.len()
        }
        ChatAction::Regenerate => {
            let last_user = conversation
                .messages
                .iter()
                .rposition(|m| m.role == Role::User)
                .ok_or_else(|| {
                    CommandError::invalid("There is no message to answer yet. Type one first.")
                })?;
            last_user + 1
        }
        ChatAction::Edit {
            message_id,
            content,
        } => {
            validate_text(content)?;
            let at = conversation
                .messages
                .iter()
                .position(|m| m.id == *message_id && m.role == Role::User)
                .ok_or_else(|| CommandError::new("not_found", format!("There is no message {message_id} of yours in this conversation to edit.")))?;
            at
        }
    };
    let mut messages = Vec::new();
    let system = conversation.settings.system_prompt.trim();
    if !system.is_empty() {
        messages.push(ChatMessage::new(hearth_engine::Role::System, system));
    }
    for m in &conversation.messages[..keep_until] {
        if m.content.trim().is_empty() || m.state == MessageState::Error {
            continue;
        }
        let role = match m.role {
            Role::User => hearth_engine::Role::User,
            Role::Assistant => hearth_engine::Role::Assistant,
        };
        messages.push(ChatMessage::new(role, m.content.clone()));
    }
    let new_user_text = match action {
        ChatAction::Send { content } | ChatAction::Edit { content, .. } => {
            messages.push(ChatMessage::new(hearth_engine::Role::User, content.clone()));
            Some(content.clone())
        }
        ChatAction::Regenerate => None,
    };
    Ok(Plan {
        messages,
        new_user_text,
    })
}

/// Run `action` on a conversation, sending events to `emit`. Errors before the answer starts
/// are returned (nothing is saved); errors after are sent as an `Error` event, with the text
/// written so far saved.
///
/// On the NPU, a FastFlowLM that fails before writing anything hands the answer to the
/// processor at once (a `Fallback` event says why); one that crashes in the middle keeps the
/// partial answer, marked, and is restarted; a second crash in a row moves the model to the
/// processor for the next answers.
pub fn run(
    state: &AppState,
    _busy: BusyGuard,
    conversation_id: &str,
    action: ChatAction,
    emit: &dyn Fn(ChatEvent),
) -> CommandResult<()> {
    let conversation = lock(&state.store).get(conversation_id)?;
    let plan = plan(&conversation, &action)?;
    ensure_model(state)?;

    let mut guard = lock(&state.model);
    let loaded = guard.as_mut().ok_or_else(|| {
        CommandError::new(
            "no_model",
            "No model is loaded. Pick one in the model list.",
        )
    })?;
    let mut turn = Turn {
        state,
        conversation_id,
        action: &action,
        new_user_text: plan.new_user_text.as_deref(),
        answer_id: None,
        text: String::new(),
        start_error: None,
    };
    let sensors = hearth_backends::Sensors::new(&state.paths.system_root);
    let request = || AnswerRequest {
        input: Input::Chat(plan.messages.clone()),
        options: conversation.settings.chat_options(),
        stops: Vec::new(),
        power: Some(&sensors),
        trim_to_fit: true,
    };
    let mut result = turn.write(loaded, request(), emit);
    if loaded.kind() == BackendKind::Npu {
        let failure = npu_failure(&result);
        loaded.npu_failures = if failure.is_some() {
            loaded.npu_failures + 1
        } else {
            0
        };
        let nothing_written = turn.text.is_empty()
            && !matches!(&result, Err(AnswerError::Failed { text, .. }) if !text.is_empty());
        if let Some(reason) = failure.filter(|_| nothing_written || loaded.npu_failures >= 2) {
            let entry = loaded
                .entry
                .clone()
                .expect("a model on the NPU is a local model");
            *guard = None; // stops FastFlowLM and frees the NPU before the CPU loads the model
            let threads = *lock(&state.cpu_threads);
            let cpu = LoadedModel::load(&entry, threads).map_err(|error| {
                CommandError::new(
                    "model",
                    format!("The NPU could not answer ({reason}), and opening \"{}\" on the processor failed too: {error}", entry.name),
                )
            })?;
            let status = cpu.status();
            let loaded = guard.insert(cpu);
            tracing::warn!("npu: moving {} to the processor: {reason}", entry.name);
            emit(ChatEvent::Fallback {
                reason: if nothing_written {
                    format!("The NPU could not answer: {reason} Hearth answered on the processor instead.")
                } else {
                    format!("The NPU stopped twice in the middle of an answer: {reason} Hearth keeps this model on the processor from now on; choose the NPU again in the model list to retry it.")
                },
                backend: BackendKind::Cpu,
                model: status,
            });
            if nothing_written {
                result = turn.write(loaded, request(), emit);
            }
        }
    }
    turn.finish(result, emit)
}

/// Why an answer on the NPU failed, when FastFlowLM (not the conversation) was the cause.
fn npu_failure(result: &Result<hearth_chat::Answer, AnswerError>) -> Option<String> {
    match result {
        Err(AnswerError::Failed {
            error: error @ hearth_chat::BackendError::Failed { .. },
            ..
        })
        | Err(AnswerError::NotStarted(hearth_chat::context::FitError::Backend(
            error @ hearth_chat::BackendError::Failed { .. },
        ))) => Some(error.to_string()),
        _ => None,
    }
}

/// One answer being written into a conversation: the saved turn and the text so far. A second
/// attempt (on the processor after the NPU failed) writes into the same answer.
struct Turn<'a> {
    state: &'a AppState,
    conversation_id: &'a str,
    action: &'a ChatAction,
    new_user_text: Option<&'a str>,
    answer_id: Option<i64>,
    text: String,
    start_error: Option<CommandError>,
}

impl Turn<'_> {
    /// Streams one attempt from `loaded`, saving the turn when it starts (once) and the text
    /// as it grows.
    // The error is the answer loop's own (it carries the partial text), returned once per answer.
    #[allow(clippy::result_large_err)]
    fn write(
        &mut self,
        loaded: &mut LoadedModel,
        request: AnswerRequest<'_>,
        emit: &dyn Fn(ChatEvent),
    ) -> Result<hearth_chat::Answer, AnswerError> {
        let status = loaded.status();
        let state = self.state;
        let mut last_save = Instant::now();
        let mut save_failed = false;
        self.text.clear();
        hearth_chat::answer(loaded.backend.as_mut(), request, &mut |event| {
            match event {
                AnswerEvent::Started(start) => {
                    let assistant_message = match self.answer_id {
                        Some(id) => lock(&state.store)
                            .save_partial(id, "")
                            .map(|()| None)
                            .map_err(CommandError::from),
                        None => {
                            save_turn(state, self.conversation_id, self.action, self.new_user_text)
                                .map(Some)
                        }
                    };
                    match assistant_message {
                        Ok(Some((user_message, assistant_message))) => {
                            self.answer_id = Some(assistant_message.id);
                            emit(ChatEvent::Started {
                                user_message,
                                assistant_message,
                                prompt_tokens: start.prompt_tokens.tokens,
                                context_limit: start.context_limit.unwrap_or(status.context_length),
                                trimmed_messages: start.trimmed_messages,
                                model: status.clone(),
                            });
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
                            .map(|id| lock(&state.store).save_partial(id, &self.text));
                        if let Some(Err(error)) = saved {
                            // Keep answering: the text is on screen and the final save may work.
                            if !save_failed {
                                tracing::warn!("saving the answer so far failed: {error}");
                            }
                            save_failed = true;
                        }
                    }
                }
                AnswerEvent::Stats(live) => emit(ChatEvent::Stats(live)),
            }
            if state.cancel.load(Ordering::Acquire) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
    }

    /// Saves how the answer ended and tells the UI.
    fn finish(
        self,
        result: Result<hearth_chat::Answer, AnswerError>,
        emit: &dyn Fn(ChatEvent),
    ) -> CommandResult<()> {
        if let Some(error) = self.start_error {
            return Err(error);
        }
        let state = self.state;
        let answer_id = match (&result, self.answer_id) {
            (_, Some(id)) => id,
            (Err(AnswerError::NotStarted(error)), None) => {
                return Err(CommandError::new("context", error.to_string()))
            }
            (_, None) => {
                return Err(CommandError::new(
                    "model",
                    "The model did not start answering. Try again.",
                ))
            }
        };
        match result {
            Ok(answer) => {
                let final_state = if answer.stop == hearth_chat::AnswerStop::Cancelled {
                    MessageState::Stopped
                } else {
                    MessageState::Complete
                };
                let message = lock(&state.store).finish_message(
                    answer_id,
                    &answer.text,
                    final_state,
                    Some(&answer.receipt),
                )?;
                emit(ChatEvent::Done { message });
                Ok(())
            }
            Err(AnswerError::Failed { text, error }) => {
                tracing::warn!("answer failed: {error}");
                let _ =
                    lock(&state.store).finish_message(answer_id, &text, MessageState::Error, None);
                emit(ChatEvent::Error {
                    code: error.code().into(),
                    message: format!(
                        "The answer stopped with an error: {error}. What was written so far is saved."
                    ),
                });
                Ok(())
            }
            Err(AnswerError::NotStarted(error)) => {
                let _ = lock(&state.store).finish_message(answer_id, "", MessageState::Error, None);
                Err(CommandError::new("context", error.to_string()))
            }
        }
    }
}

/// Saves the turn an answer begins: the user's new message (unless regenerating) and an empty
/// answer being written; an edit first drops what it replaces, a regenerate keeps the answers
/// it replaces as earlier versions of the new one.
fn save_turn(
    state: &AppState,
    conversation_id: &str,
    action: &ChatAction,
    new_user_text: Option<&str>,
) -> CommandResult<(Option<Message>, Message)> {
    let store = lock(&state.store);
    let earlier = match action {
        ChatAction::Send { .. } => Vec::new(),
        ChatAction::Regenerate => store.take_trailing_answers(conversation_id)?,
        ChatAction::Edit { message_id, .. } => {
            store.truncate_from(conversation_id, *message_id)?;
            Vec::new()
        }
    };
    let user = match new_user_text {
        Some(text) => {
            Some(store.add_message(conversation_id, Role::User, text, MessageState::Complete)?)
        }
        None => None,
    };
    let answer = store.add_message(
        conversation_id,
        Role::Assistant,
        "",
        MessageState::Streaming,
    )?;
    store.keep_versions(answer.id, &earlier)?;
    Ok((user, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_huge_messages_are_refused_plainly() {
        assert_eq!(validate_text("  \n").unwrap_err().code, "invalid_input");
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
    }
}
