//! The workspace's dependency rule (docs/ARCHITECTURE.md, "Code map"): each crate may depend
//! only on the crates its arrow allows. This reads every `Cargo.toml` of the workspace and fails
//! on an arrow that is not drawn, or on a crate the rule does not list yet. It also reads the
//! server's and the CLI's sources and fails when they reach a model around the app (the one
//! door): the server names neither the engine nor a backend, the CLI no backend, and the engine
//! only in the verbs that check the engine itself ([`ENGINE_VERBS`]). It lives here because it
//! must run in `cargo test --workspace`, and the hub has no other reason to know the workspace's
//! layout.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Which Hearth crates each crate may use, by package name.
const ALLOWED: &[(&str, &[&str])] = &[
    // The desktop hosts the local API in-process when the switch "Let other apps on this
    // computer use Hearth" is on (`hearth_server::Sharing` over the app's model).
    ("hearth-desktop", &["hearth-app", "hearth-server"]),
    // The house draws cli -> app, server, q4nx (convert) and engine (bench, logits, generate,
    // tokenize). The other arrows are the crates' own APIs the CLI prints or drives:
    (
        "hearth-cli",
        &[
            "hearth-app",
            "hearth-server",
            "hearth-engine",
            "q4nx",
            // The answer loop's words the app's turns speak (ChatMessage, AnswerEvent, Receipt),
            // as the server's arrow to chat has it.
            "hearth-chat",
            // `hearth search` runs the library's own index and search with their options
            // (ranking, limit, embedding model) and prints its hits and places.
            "hearth-documents",
            // list, pull, import and rm print the store's and the catalog's records and take
            // pull options (--revision, --offline, --name) the app's Models area does not.
            "hearth-hub",
            // `hearth doctor` prints the NPU's own findings (checks, contexts, sensors) and reads
            // power under `--root`.
            "hearth-npu",
        ],
    ),
    (
        "hearth-server",
        &["hearth-app", "hearth-chat", "hearth-wire"],
    ),
    (
        "hearth-app",
        &[
            "hearth-backends",
            "hearth-chat",
            "hearth-documents",
            "hearth-hub",
            "hearth-npu",
            // Transcription: the speech model found in the home folder, run on this machine.
            "hearth-speech",
        ],
    ),
    (
        "hearth-backends",
        &["hearth-chat", "hearth-engine", "hearth-npu", "hearth-wire"],
    ),
    // hearth-sqlite: how Hearth opens its private SQLite databases (the conversations, the
    // document library), used by the two crates that keep one.
    ("hearth-chat", &["hearth-engine", "hearth-sqlite"]),
    ("hearth-documents", &["hearth-engine", "hearth-sqlite"]),
    // Audio decoding and resampling, and transcription over the engine's Whisper.
    ("hearth-speech", &["hearth-engine"]),
    ("hearth-engine", &["q4nx"]),
    ("hearth-hub", &["q4nx"]),
    ("hearth-npu", &[]),
    ("hearth-sqlite", &[]),
    ("hearth-wire", &[]),
    ("q4nx", &[]),
];

/// The CLI's files that may name `hearth_engine`: the verbs that check the engine itself by
/// token ids and kernels (a file, or a folder ending in `/`), relative to `crates/cli/src/`.
const ENGINE_VERBS: &[&str] = &[
    "bench.rs",
    "bench/",
    // `logits` and `generate` load a folder straight into the engine (`load_engine` here).
    "logits.rs",
    "generate.rs",
    "tokenize.rs",
    // The chat template check before a conversion.
    "convert.rs",
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

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The lines (1-based) of `source` whose code names the crate `name` (`hearth_engine`): as a
/// whole word, outside `//` comment lines, so a doc line may still say where a thing lives.
fn lines_naming(source: &str, name: &str) -> Vec<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    source
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| {
            line.match_indices(name).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + name.len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            })
        })
        .map(|(index, _)| index + 1)
        .collect()
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
fn the_server_and_the_cli_reach_models_only_through_the_app() {
    let root = workspace_root();
    let cli = root.join("crates/cli/src");
    for verb in ENGINE_VERBS {
        assert!(
            cli.join(verb).exists(),
            "ENGINE_VERBS lists crates/cli/src/{verb}, which does not exist: update the list"
        );
    }
    let engine_verb = |path: &Path| {
        let relative = path
            .strip_prefix(&cli)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        ENGINE_VERBS
            .iter()
            .any(|verb| match verb.strip_suffix('/') {
                Some(folder) => relative.starts_with(&format!("{folder}/")),
                None => relative == *verb,
            })
    };
    let mut violations = Vec::new();
    let mut check = |path: &Path, name: &str, why: &str| {
        let lines = lines_naming(&std::fs::read_to_string(path).unwrap(), name);
        if !lines.is_empty() {
            let file = path.strip_prefix(&root).unwrap_or(path).display();
            violations.push(format!("{file} names {name} (lines {lines:?}): {why}"));
        }
    };
    const DOOR: &str = "open and answer with models through hearth_app instead (Session::open, \
        Session::connect_remote, hearth_app::ask, hearth_app::npu, hearth_app::remote), and name \
        the answer loop's types from hearth_chat";
    for file in rust_files(&root.join("crates/server/src")) {
        check(&file, "hearth_engine", DOOR);
        check(&file, "hearth_backends", DOOR);
    }
    for file in rust_files(&cli) {
        check(&file, "hearth_backends", DOOR);
        if !engine_verb(&file) {
            check(
                &file,
                "hearth_engine",
                &format!("only the engine-level verbs ({ENGINE_VERBS:?}) name the engine; {DOOR}"),
            );
        }
    }
    assert!(
        violations.is_empty(),
        "front ends go around the app, the one door of docs/ARCHITECTURE.md:\n{}",
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

#[test]
fn a_crate_is_named_by_code_not_by_comments_or_longer_words() {
    let source = "//! Loads through hearth_engine's Model.\n\
                  use hearth_engine::Model;\n\
                  let x = my_hearth_engine_copy;\n\
                  /// hearth_engine::LoadOptions\n\
                  fn f(o: hearth_engine::LoadOptions) {}\n";
    assert_eq!(lines_naming(source, "hearth_engine"), [2, 5]);
}
