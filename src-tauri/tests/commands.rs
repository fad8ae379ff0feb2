//! The command names have one home, `src/commands/names.rs`; these tests hold the other places
//! that must agree with it: the capability file grants exactly those commands, each is
//! registered with `generate_handler!`, and the web UI calls each and no other.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{build_app, invoke, private_home};
use hearth_desktop::commands::names::COMMANDS;
use serde_json::{json, Value};

fn listed() -> BTreeSet<String> {
    COMMANDS.iter().map(|c| c.to_string()).collect()
}

#[test]
fn the_capability_file_grants_exactly_the_commands() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("capabilities/default.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let granted: BTreeSet<String> = file["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        // Plugins' permissions are named `plugin:permission`; the app's own are `allow-<name>`.
        .filter_map(|p| p.strip_prefix("allow-"))
        .map(|p| p.replace('-', "_"))
        .collect();
    assert_eq!(
        granted,
        listed(),
        "capabilities/default.json vs src/commands/names.rs"
    );
}

#[test]
fn every_command_is_registered() {
    private_home(&[]);
    let app = build_app(tempfile::tempdir().unwrap(), None);
    let unknown = invoke(&app, "no_such_command", json!({}))
        .unwrap_err()
        .to_string();
    let not_found = unknown.replace("no_such_command", "");
    for command in COMMANDS {
        // Without arguments most commands refuse; what matters is that they exist.
        if let Err(error) = invoke(&app, command, json!({})) {
            let error = error.to_string().replace(command, "");
            assert_ne!(
                error, not_found,
                "{command} is not in generate_handler! (lib.rs)"
            );
        }
    }
}

/// The command names the UI's code invokes.
fn called_by_the_ui() -> BTreeSet<String> {
    fn walk(dir: &Path, found: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
                continue;
            }
            let name = path.to_string_lossy();
            let is_source = name.ends_with(".ts") || name.ends_with(".svelte");
            if !is_source || name.ends_with(".test.ts") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // `call('name'` in api.ts (the one module that invokes).
            for piece in text.split("call(").skip(1) {
                if let Some(rest) = piece.trim_start().strip_prefix('\'') {
                    // Plugins' commands (`plugin:dialog|open`) are granted as plugin permissions.
                    match rest.find('\'') {
                        Some(end) if !rest[..end].starts_with("plugin:") => {
                            found.insert(rest[..end].to_string());
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    let mut found = BTreeSet::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src"),
        &mut found,
    );
    found
}

/// Commands no part of the UI calls: the end-to-end test's stand-in for what WebDriver cannot
/// do (an OS drop), refused unless the app runs under that test.
const END_TO_END_ONLY: &[&str] = &["test_drop"];

#[test]
fn the_ui_calls_every_command_and_no_other() {
    let mut called = called_by_the_ui();
    let e2e =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/run.mjs"))
            .unwrap();
    for command in END_TO_END_ONLY {
        assert!(
            e2e.contains(&format!("invoke('{command}'")),
            "{command} is kept for the end-to-end test, which no longer calls it: remove it"
        );
        called.insert(command.to_string());
    }
    let listed = listed();
    let unknown: Vec<_> = called.difference(&listed).collect();
    assert!(
        unknown.is_empty(),
        "the UI calls commands that do not exist: {unknown:?}"
    );
    let unused: Vec<_> = listed.difference(&called).collect();
    assert!(
        unused.is_empty(),
        "commands no part of the UI calls (remove them, or the grant): {unused:?}"
    );
}
