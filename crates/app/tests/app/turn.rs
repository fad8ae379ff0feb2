//! A turn without Tauri: the app on a temporary home with the committed tiny model as its
//! built-in one plans, streams and saves answers to the conversation store.

use std::path::Path;
use std::sync::Mutex;

use hearth_app::turn::{plan, ChatAction, ChatEvent};
use hearth_app::{App, ErrorCode, Home};
use hearth_chat::conversations::{MessageState, Role};
use hearth_chat::ConversationSettings;
use hearth_hub::{BuiltinKind, BuiltinModel};

/// The app with its folders in `dir` and the tiny Llama fixture as its built-in model.
fn app(dir: &Path) -> App {
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: Some(BuiltinModel {
            kind: BuiltinKind::Demo,
            folder: Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/engine/tiny-llama"),
            sha256: None,
        }),
        // No NPU and no power sensors: the model runs on the processor.
        system_root: dir.join("no-system"),
    };
    App::open(home).unwrap()
}

fn short() -> ConversationSettings {
    ConversationSettings {
        max_tokens: 6,
        ..ConversationSettings::default()
    }
}

/// Runs `action` and returns the events it sent.
fn answer(app: &App, id: &str, action: ChatAction) -> Vec<ChatEvent> {
    let events = Mutex::new(Vec::new());
    let progress = hearth_app::npu::logged_progress();
    app.answer(app.begin_answer().unwrap(), id, action, &progress, &|e| {
        events.lock().unwrap().push(e)
    })
    .unwrap();
    events.into_inner().unwrap()
}

#[test]
fn a_message_is_planned_streamed_and_saved_with_its_receipt_and_the_title_comes_with_started() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    let events = answer(
        &app,
        &c.id,
        ChatAction::Send {
            content: "Hello there".into(),
            pictures: Vec::new(),
        },
    );
    let Some(ChatEvent::Started {
        conversation,
        user_message,
        model,
        ..
    }) = events.first()
    else {
        panic!("the first event is Started: {events:?}");
    };
    assert_eq!(
        conversation.title, "Hello there",
        "a first message names the conversation"
    );
    assert_eq!(
        conversation.message_count, 2,
        "the list's line counts the message and the answer begun"
    );
    assert_eq!(user_message.as_ref().unwrap().content, "Hello there");
    assert_eq!(model.builtin, Some(BuiltinKind::Demo));
    assert!(events.iter().any(|e| matches!(e, ChatEvent::Token { .. })));
    let Some(ChatEvent::Done { message }) = events.last() else {
        panic!("the last event is Done: {events:?}");
    };
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Token { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        message.content, streamed,
        "the saved answer is what streamed"
    );

    let saved = app.conversation(&c.id).unwrap();
    assert_eq!(saved.title, "Hello there");
    assert_eq!(saved.messages.len(), 2);
    assert_eq!(saved.messages[0].role, Role::User);
    assert_eq!(saved.messages[1].state, MessageState::Complete);
    let receipt = saved.messages[1].receipt.as_ref().expect("a receipt");
    assert!(receipt.generated_tokens >= 1 && receipt.prompt_tokens > 0);
    assert_eq!(receipt.model_name, "demo");
}

#[test]
fn a_long_message_is_reported_read_before_the_first_token() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    // Over 64 tokens (a chunk of the engine's prefill) and within the fixture's 128.
    let content = "one two three four five six seven eight nine ten ".repeat(2);
    let events = answer(
        &app,
        &c.id,
        ChatAction::Send {
            content,
            pictures: Vec::new(),
        },
    );
    let Some(ChatEvent::Started { prompt_tokens, .. }) = events.first() else {
        panic!("the first event is Started: {events:?}");
    };
    assert!(*prompt_tokens > 64, "two chunks to read: {prompt_tokens}");
    // The first word, or the end when the sampled first token was the end of the answer (the
    // default sampling is random, so a tiny model sometimes ends at once).
    let first_token = events
        .iter()
        .position(|e| matches!(e, ChatEvent::Token { .. } | ChatEvent::Done { .. }))
        .expect("a token or the end");
    let read: Vec<(usize, usize, usize)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            ChatEvent::Reading(p) => Some((i, p.done, p.total)),
            _ => None,
        })
        .collect();
    assert_eq!(
        read.iter()
            .map(|&(_, done, total)| (done, total))
            .collect::<Vec<_>>(),
        [
            (0, *prompt_tokens),
            (64, *prompt_tokens),
            (*prompt_tokens, *prompt_tokens)
        ],
        "read at 0, after the first chunk and at the end: {events:?}"
    );
    assert!(read.iter().all(|&(i, ..)| i < first_token));
    let json = serde_json::to_value(&events[read[1].0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"event": "reading", "data": {"done": 64, "total": prompt_tokens}}),
        "the UI reads it as {{event: 'reading', data: {{done, total}}}}"
    );
}

#[test]
fn a_regenerate_plans_the_same_question_and_keeps_the_first_answer_as_a_version() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    answer(
        &app,
        &c.id,
        ChatAction::Send {
            content: "Hi".into(),
            pictures: Vec::new(),
        },
    );
    let before = app.conversation(&c.id).unwrap();
    let planned = plan(&before, &ChatAction::Regenerate).unwrap();
    assert_eq!(planned.messages.len(), 1, "only the question: {planned:?}");
    assert_eq!(planned.new_user_text, None);

    answer(&app, &c.id, ChatAction::Regenerate);
    let after = app.conversation(&c.id).unwrap();
    assert_eq!(after.messages.len(), 2);
    assert_eq!(after.versions.len(), 1);
    assert_eq!(after.versions[0].content, before.messages[1].content);
}

#[test]
fn a_refused_request_saves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    let progress = hearth_app::npu::logged_progress();
    let error = app
        .answer(
            app.begin_answer().unwrap(),
            &c.id,
            ChatAction::Send {
                content: "   ".into(),
                pictures: Vec::new(),
            },
            &progress,
            &|_| {},
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidInput);
    assert!(app.conversation(&c.id).unwrap().messages.is_empty());
    assert_eq!(
        app.begin_answer().err(),
        None,
        "the busy flag is given back after a refusal"
    );
}

#[test]
fn review_9_continue_writes_on_in_the_same_answer_instead_of_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    answer(
        &app,
        &c.id,
        ChatAction::Send {
            content: "Tell me a long story".into(),
            pictures: Vec::new(),
        },
    );
    let before = app.conversation(&c.id).unwrap();
    let cut = before.messages[1].clone();
    assert!(
        !cut.content.trim().is_empty(),
        "the tiny model wrote something"
    );

    let events = answer(&app, &c.id, ChatAction::Continue { message_id: cut.id });
    let Some(ChatEvent::Started {
        user_message,
        assistant_message,
        ..
    }) = events.first()
    else {
        panic!("the first event is Started: {events:?}");
    };
    assert_eq!(*user_message, None, "no message of the user is added");
    assert_eq!(assistant_message.id, cut.id, "the same answer starts again");
    assert_eq!(
        assistant_message.content, cut.content,
        "with its text so far"
    );
    let written: String = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Token { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();

    let after = app.conversation(&c.id).unwrap();
    assert_eq!(after.messages.len(), 2, "no new turn: {:?}", after.messages);
    assert_eq!(after.messages[1].id, cut.id);
    assert_eq!(
        after.messages[1].content,
        format!("{}{written}", cut.content)
    );
    assert!(
        after.messages[1].content.len() > cut.content.len(),
        "it grew"
    );
    assert_eq!(after.messages[1].state, MessageState::Complete);
}

#[test]
fn review_9_only_the_last_answer_can_be_continued() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&short()).unwrap();
    answer(
        &app,
        &c.id,
        ChatAction::Send {
            content: "Hi".into(),
            pictures: Vec::new(),
        },
    );
    let question = app.conversation(&c.id).unwrap().messages[0].id;
    let progress = hearth_app::npu::logged_progress();
    let error = app
        .answer(
            app.begin_answer().unwrap(),
            &c.id,
            ChatAction::Continue {
                message_id: question,
            },
            &progress,
            &|_| {},
        )
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidInput);
    assert_eq!(app.conversation(&c.id).unwrap().messages.len(), 2);
}
