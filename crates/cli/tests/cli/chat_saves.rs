//! `hearth chat` saves its conversations with the app's (the same database, through the app's
//! core), so they show in the app's list afterwards; `--no-save` saves nothing. Run on the tiny
//! Qwen3 fixture with every Hearth folder in a temporary directory.

use crate::common;

use std::path::{Path, PathBuf};

use hearth_app::{App, Home};
use hearth_chat::conversations::Role;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

/// Runs `hearth chat` on the fixture with `extra` arguments, typing `stdin`.
fn chat(dir: &Path, extra: &[&str], stdin: &str) {
    let model = fixture("tiny-qwen3");
    let mut command = common::hearth(dir);
    command
        .args([
            "chat",
            "--model",
            model.to_str().unwrap(),
            "--max-tokens",
            "4",
        ])
        .args(extra);
    let out = common::run_typing(&mut command, stdin);
    assert!(
        out.status.success(),
        "hearth chat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The app's state over the same folders, as the desktop app opens it.
fn app(dir: &Path) -> App {
    App::open(Home {
        data_dir: dir.join("data/hearth"),
        config_dir: dir.join("config/hearth"),
        state_dir: dir.join("state/hearth"),
        builtin: None,
        system_root: dir.join("no-npu"),
    })
    .expect("the app opens the conversations hearth chat saved")
}

#[test]
fn chat_saves_each_conversation_where_the_app_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    chat(dir.path(), &[], "Hi!\nAgain\n/reset\nA new one\n/exit\n");

    let app = app(dir.path());
    let listed = app.list_conversations("").unwrap();
    assert_eq!(listed.len(), 2, "/reset starts a second conversation");
    let conversations: Vec<_> = listed
        .iter()
        .map(|c| app.conversation(&c.id).unwrap())
        .collect();
    let starting = |text: &str| {
        conversations
            .iter()
            .find(|c| c.messages.first().is_some_and(|m| m.content == text))
            .unwrap_or_else(|| panic!("a conversation starts with {text:?}"))
    };
    let first = starting("Hi!");
    let roles: Vec<Role> = first.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    assert_eq!(first.messages[0].content, "Hi!");
    assert_eq!(first.messages[2].content, "Again");
    let answer = &first.messages[1];
    let receipt = answer
        .receipt
        .as_ref()
        .expect("a saved answer has its receipt");
    assert_eq!(receipt.model_name, "tiny-qwen3");
    assert_eq!(starting("A new one").messages.len(), 2);
}

#[test]
fn no_save_leaves_the_conversation_list_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    chat(dir.path(), &["--no-save"], "Hi!\n/exit\n");
    let app = app(dir.path());
    assert!(app.list_conversations("").unwrap().is_empty());
}

#[test]
fn a_chat_with_no_message_saves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    chat(dir.path(), &[], "/exit\n");
    assert!(app(dir.path()).list_conversations("").unwrap().is_empty());
}
