//! The workspace's dependency rule (docs/ARCHITECTURE.md): each crate may depend only on the
//! crates its arrow allows. This reads every `Cargo.toml` of the workspace and fails on an arrow
//! that is not drawn, or on a crate the rule does not list yet. It lives here because it must run
//! in `cargo test --workspace`, and the hub has no other reason to know the workspace's layout.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Which Hearth crates each crate may use, by package name.
const ALLOWED: &[(&str, &[&str])] = &[
    // DESIGN draws desktop -> app. The server too, for one reason: the switch "Let other apps
    // on this computer use Hearth" runs `hearth_server::Sharing` in-process over the app's model
    // (the server depends on app, so app cannot hold the switch itself).
    ("hearth-desktop", &["hearth-app", "hearth-server"]),
    // DESIGN draws cli -> app, server (q4nx for convert, engine for bench). The model and
    // backend choice and `hearth chat`'s saving go through app; the other arrows are here until
    // the remaining verbs (list, pull, import, doctor, selftest, search, the remote key) do too.
    (
        "hearth-cli",
        &[
            "hearth-app",
            "hearth-backends",
            "hearth-chat",
            "hearth-documents",
            "hearth-engine",
            "hearth-hub",
            "hearth-npu",
            "hearth-server",
            "q4nx",
        ],
    ),
    // DESIGN draws server -> app: the desktop app's switch serves `hearth_app::App`'s model.
    // The other arrows are here until the server takes the backend, answer-loop and engine
    // types it names (Backend, Input, ChatOptions, the OpenAI wire types) through app.
    (
        "hearth-server",
        &[
            "hearth-app",
            "hearth-backends",
            "hearth-chat",
            "hearth-engine",
        ],
    ),
    // DESIGN draws app -> chat, backends, documents, hub, npu. The engine arrow is here until
    // chat and backends pass on the engine types in their own APIs (ChatMessage, LoadOptions,
    // SamplingParams) and the chat template check.
    (
        "hearth-app",
        &[
            "hearth-backends",
            "hearth-chat",
            "hearth-documents",
            "hearth-engine",
            "hearth-hub",
            "hearth-npu",
        ],
    ),
    (
        "hearth-backends",
        &["hearth-chat", "hearth-engine", "hearth-npu"],
    ),
    ("hearth-chat", &["hearth-engine"]),
    ("hearth-documents", &["hearth-engine"]),
    ("hearth-engine", &["q4nx"]),
    ("hearth-hub", &["q4nx"]),
    ("hearth-npu", &[]),
    ("q4nx", &[]),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every manifest of the workspace: `crates/*/Cargo.toml` and `src-tauri/Cargo.toml`.
fn manifests() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut out: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .map(|entry| entry.unwrap().path().join("Cargo.toml"))
        .filter(|path| path.is_file())
        .collect();
    out.push(root.join("src-tauri/Cargo.toml"));
    out.sort();
    out
}

/// A manifest's package name and the package names of its `[dependencies]` (plain and
/// per-target), read line by line: enough for the one-line entries the workspace writes.
fn package_and_dependencies(text: &str) -> (String, Vec<String>) {
    let mut name = None;
    let mut deps = Vec::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if section == "package" && key == "name" {
            name = Some(value.trim_matches('"').to_owned());
        }
        let dependencies = section == "dependencies"
            || (section.starts_with("target.") && section.ends_with(".dependencies"));
        if dependencies && !key.starts_with('#') {
            // `alias = { package = "real-name", ... }` depends on real-name.
            let package = renamed_package(value).unwrap_or(key.split('.').next().unwrap_or(key));
            deps.push(package.to_owned());
        }
    }
    (name.expect("every manifest names its package"), deps)
}

/// `real-name` in `{ package = "real-name", ... }`.
fn renamed_package(value: &str) -> Option<&str> {
    let inline = value.strip_prefix('{')?;
    inline.split(',').find_map(|field| {
        let (key, value) = field.split_once('=')?;
        (key.trim() == "package").then(|| value.trim().trim_matches(['"', '}', ' ']))
    })
}

#[test]
fn every_crate_depends_only_on_the_crates_its_arrow_allows() {
    let known: BTreeSet<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    let mut violations = Vec::new();
    for manifest in manifests() {
        let text = std::fs::read_to_string(&manifest).unwrap();
        let (package, deps) = package_and_dependencies(&text);
        let Some((_, allowed)) = ALLOWED.iter().find(|(name, _)| *name == package) else {
            violations.push(format!(
                "{package} ({}) is not in the dependency rule: add its arrow to \
                 docs/ARCHITECTURE.md and to ALLOWED in this test",
                manifest.display()
            ));
            continue;
        };
        for dep in deps.iter().filter(|d| known.contains(d.as_str())) {
            if !allowed.contains(&dep.as_str()) {
                violations.push(format!(
                    "{package} depends on {dep}, which its arrow does not allow \
                     (allowed: {allowed:?})"
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the crates break the dependency rule of docs/ARCHITECTURE.md:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_rule_reads_this_workspace() {
    let packages: Vec<String> = manifests()
        .iter()
        .map(|m| package_and_dependencies(&std::fs::read_to_string(m).unwrap()).0)
        .collect();
    for expected in ["q4nx", "hearth-engine", "hearth-hub", "hearth-desktop"] {
        assert!(
            packages.iter().any(|p| p == expected),
            "{expected} is found among {packages:?}"
        );
    }
}

#[test]
fn manifests_are_parsed_for_packages_aliases_and_targets() {
    let (name, deps) = package_and_dependencies(
        r#"
[package]
name = "hearth-x"

[dependencies]
q4nx = { path = "../q4nx" }
engine = { package = "hearth-engine", path = "../engine" }
ureq = { version = "3", features = ["package-x"] }
serde.workspace = true

[target.'cfg(unix)'.dependencies]
hearth-hub = { path = "../hub" }

[dev-dependencies]
hearth-npu = { path = "../npu" }
"#,
    );
    assert_eq!(name, "hearth-x");
    assert_eq!(
        deps,
        ["q4nx", "hearth-engine", "ureq", "serde", "hearth-hub"]
    );
}
