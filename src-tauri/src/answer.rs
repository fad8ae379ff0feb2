//! Writing an answer: check the request, make sure a model is loaded, fit the conversation into
//! its context, save the user's message, stream the answer (saving it as it grows), and store a
//! receipt with it.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hearth_engine::{ChatMessage, ChatOptions, SamplingParams, StopReason};
use serde::{Deserialize, Serialize};

use crate::context;
use crate::conversations::{Conversation, Message, MessageState, Receipt, Role};
use crate::error::{CommandError, CommandResult};
use crate::paths::{self, LocalModel};
use crate::session::{LoadedModel, ModelStatus};
use crate::settings::{ConversationSettings, Sampling};
use crate::state::{lock, AppState, BusyGuard, NoticeLevel};

/// The longest message one can send, in characters (a 1 MB paste is refused with this number).
pub const MAX_MESSAGE_CHARS: usize = 100_000;
/// How often the streamed text is saved to disk.
const SAVE_EVERY: Duration = Duration::from_millis(250);
/// How often live numbers are sent to the UI.
const STATS_EVERY: Duration = Duration::from_millis(100);

/// What the user asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
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

/// Live numbers while decoding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveStats {
    /// Answer pieces so far (about one per token).
    pub generated_tokens: usize,
    /// Seconds to the first piece, once it came.
    pub ttft_secs: Option<f64>,
    /// Speed since the first piece.
    pub tokens_per_second: Option<f64>,
    /// Seconds since the request.
    pub elapsed_secs: f64,
}

/// Events on the answer's Channel.
// Each event is built, serialized to the UI once and dropped; `Started` is large only once
// per answer, so boxing its fields would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "lowercase")]
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
    /// The answer failed after it started; what was written so far is saved.
    Error {
        /// Error code.
        code: String,
        /// What happened.
        message: String,
    },
}

impl From<Sampling> for SamplingParams {
    fn from(s: Sampling) -> Self {
        SamplingParams {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repetition_penalty: s.repetition_penalty,
            seed: s.seed,
        }
    }
}

fn options(settings: &ConversationSettings) -> ChatOptions {
    ChatOptions {
        sampling: settings.sampling.clamped().into(),
        max_tokens: settings.max_tokens,
        enable_thinking: settings.enable_thinking,
    }
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

/// Load `entry` into the state (replacing the current model).
pub fn load_model(state: &AppState, entry: &LocalModel) -> CommandResult<ModelStatus> {
    let mut slot = state.model.try_lock().map_err(|_| {
        CommandError::new(
            "busy",
            "The model is busy writing an answer. Stop it or wait, then try again.",
        )
    })?;
    *slot = None; // free the old model's memory first
    match LoadedModel::load(entry, state.device.to_string()) {
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

/// Load the start model if none is loaded yet: the preferred one, else the newest download,
/// else the demo (and say so).
pub fn ensure_model(state: &AppState, preferred: Option<&str>) -> CommandResult<()> {
    if lock(&state.model).is_some() {
        return Ok(());
    }
    let models = paths::local_models(&state.paths);
    let Some(entry) = paths::pick_start_model(&models, preferred) else {
        let message = "No model is available: nothing is downloaded and the bundled demo model is missing. Open Models to download one.";
        *lock(&state.model_error) = Some(message.into());
        return Err(CommandError::new("no_model", message));
    };
    load_model(state, &entry)?;
    if entry.is_demo {
        state.notify(
            NoticeLevel::Info,
            "No model is downloaded yet, so Hearth opened its tiny demo model. It only shows how the app works: it knows a little about Rust and is often wrong. Open Models to download a real one.",
        );
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

fn stop_words(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndOfTurn => "end of turn",
        StopReason::MaxTokens => "length limit",
        StopReason::Cancelled => "stopped",
        StopReason::ContextFull => "context full",
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Run `action` on a conversation, sending events to `emit`. Errors before the answer starts
/// are returned (nothing is saved); errors after are sent as an `Error` event, with the text
/// written so far saved.
pub fn run(
    state: &AppState,
    _busy: BusyGuard,
    conversation_id: &str,
    action: ChatAction,
    preferred_model: Option<&str>,
    emit: &dyn Fn(ChatEvent),
) -> CommandResult<()> {
    let conversation = lock(&state.store).get(conversation_id)?;
    let plan = plan(&conversation, &action)?;
    ensure_model(state, preferred_model)?;

    let mut guard = lock(&state.model);
    let loaded = guard.as_mut().ok_or_else(|| {
        CommandError::new(
            "no_model",
            "No model is loaded. Pick one in the model list.",
        )
    })?;
    let mut opts = options(&conversation.settings);
    let limit = loaded.model.info().context_length;
    let reserve = context::answer_reserve(opts.max_tokens, limit);
    let fitted = {
        let model = &loaded.model;
        let opts_ref = &opts;
        context::fit(plan.messages, limit, reserve, &mut |m| {
            model
                .tokenize_chat(m, opts_ref)
                .map(|t| t.len())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| CommandError::new("context", e.to_string()))?
    };
    opts.max_tokens = opts
        .max_tokens
        .min(limit.saturating_sub(fitted.prompt_tokens))
        .max(1);

    // Save the turn before generating, so a crash keeps the user's message.
    let (user_message, assistant_message) = {
        let store = lock(&state.store);
        match &action {
            ChatAction::Send { .. } => {}
            ChatAction::Regenerate => store.drop_trailing_answers(conversation_id)?,
            ChatAction::Edit { message_id, .. } => {
                store.truncate_from(conversation_id, *message_id)?
            }
        }
        let user = match &plan.new_user_text {
            Some(text) => Some(store.add_message(
                conversation_id,
                Role::User,
                text,
                MessageState::Complete,
            )?),
            None => None,
        };
        let answer = store.add_message(
            conversation_id,
            Role::Assistant,
            "",
            MessageState::Streaming,
        )?;
        (user, answer)
    };
    emit(ChatEvent::Started {
        user_message,
        assistant_message: assistant_message.clone(),
        prompt_tokens: fitted.prompt_tokens,
        context_limit: limit,
        trimmed_messages: fitted.trimmed,
        model: loaded.status(),
    });

    let started = Instant::now();
    let mut text = String::new();
    let mut pieces = 0usize;
    let mut first: Option<Instant> = None;
    let mut last_save = Instant::now();
    let mut last_stats = Instant::now() - STATS_EVERY;
    let cancel = &state.cancel;
    let store = &state.store;
    let answer_id = assistant_message.id;
    let live = |pieces: usize, first: Option<Instant>| {
        let now = Instant::now();
        LiveStats {
            generated_tokens: pieces,
            ttft_secs: first.map(|f| (f - started).as_secs_f64()),
            tokens_per_second: first.and_then(|f| {
                let secs = (now - f).as_secs_f64();
                (pieces > 1 && secs > 0.0).then(|| (pieces - 1) as f64 / secs)
            }),
            elapsed_secs: (now - started).as_secs_f64(),
        }
    };
    // Power readings about once a second while the answer is written, integrated into joules for
    // prefill and decode apart. The sensors ioctl wakes the NPU, so it is used only when the NPU
    // writes the answer.
    let telemetry = npu::Telemetry::start_with(
        &crate::commands::npu::system_root(),
        npu::TelemetryOptions {
            sensors_ioctl: loaded.backend_label().starts_with("npu"),
            ..Default::default()
        },
    );
    let result = loaded
        .model
        .chat(&fitted.messages, &opts, &mut |piece: &str| {
            if cancel.load(Ordering::Acquire) {
                return ControlFlow::Break(());
            }
            if first.is_none() {
                telemetry.mark_phase(npu::Phase::Decode);
            }
            first.get_or_insert_with(Instant::now);
            pieces += 1;
            text.push_str(piece);
            emit(ChatEvent::Token {
                text: piece.to_string(),
            });
            if last_stats.elapsed() >= STATS_EVERY {
                last_stats = Instant::now();
                emit(ChatEvent::Stats(live(pieces, first)));
            }
            if last_save.elapsed() >= SAVE_EVERY {
                last_save = Instant::now();
                if let Err(error) = lock(store).save_partial(answer_id, &text) {
                    tracing::warn!("saving the answer so far failed: {error}");
                }
            }
            if cancel.load(Ordering::Acquire) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });

    match result {
        Ok(stats) => {
            let energy = telemetry.finish(stats.prompt_tokens, stats.generated_tokens);
            let receipt = Receipt {
                model_name: loaded.entry.name.clone(),
                model_sha256: loaded.sha256(),
                backend: loaded.backend_label(),
                device: loaded.device().to_string(),
                prompt_tokens: stats.prompt_tokens,
                generated_tokens: stats.generated_tokens,
                ttft_secs: stats.ttft_secs,
                decode_secs: stats.decode_secs,
                tokens_per_second: stats.decode_tokens_per_sec().unwrap_or(0.0),
                stop_reason: stop_words(stats.stop_reason).to_string(),
                trimmed_messages: fitted.trimmed,
                finished_at: unix_now(),
                energy: Some(energy),
            };
            let final_state = if stats.stop_reason == StopReason::Cancelled {
                MessageState::Stopped
            } else {
                MessageState::Complete
            };
            let message =
                lock(&state.store).finish_message(answer_id, &text, final_state, Some(&receipt))?;
            emit(ChatEvent::Done { message });
            Ok(())
        }
        Err(error) => {
            tracing::warn!("answer failed: {error}");
            let _ = lock(&state.store).finish_message(answer_id, &text, MessageState::Error, None);
            emit(ChatEvent::Error {
                code: "model".into(),
                message: format!(
                    "The model stopped with an error: {error}. What it wrote so far is saved."
                ),
            });
            Ok(())
        }
    }
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
