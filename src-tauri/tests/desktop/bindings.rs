//! The web UI's IPC contract is generated from the Rust side, in two files:
//!
//! - `ui/src/lib/bindings.ts`: the types that cross IPC, from the Rust types they mirror
//!   (ts-rs derives, in `hearth_app` behind its `ts` feature);
//! - `ui/src/lib/commands.ts`: the command map: each `#[tauri::command]` of
//!   `src/commands/` with its argument names as Tauri reads them (camelCase keys), their
//!   types and what it returns, and the events the app emits. It is read from the command
//!   functions' own signatures (parsed with `syn`), so it cannot drift from them.
//!
//! These tests fail when a committed file is not what the Rust side gives today. After
//! changing a type or a command, run `npm run bindings` (these tests with
//! `HEARTH_WRITE_BINDINGS=1`, which rewrites the files) and commit the result.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hearth_desktop::commands::names::COMMANDS;

use ts_rs::{Config, TS};

/// Every type a command takes or returns, or an event carries; the types inside them follow.
fn export_all(cfg: &Config) -> Result<(), ts_rs::ExportError> {
    use hearth_app::{export, model_store, models, npu, remote, selection, settings, share, turn};
    selection::AppStatus::export_all(cfg)?;
    models::LocalModel::export_all(cfg)?;
    settings::Settings::export_all(cfg)?;
    turn::ChatAction::export_all(cfg)?;
    turn::ChatEvent::export_all(cfg)?;
    export::ExportFormat::export_all(cfg)?;
    model_store::ModelsOverview::export_all(cfg)?;
    model_store::PullResult::export_all(cfg)?;
    remote::RemoteServer::export_all(cfg)?;
    remote::RemoteModel::export_all(cfg)?;
    share::ShareStatus::export_all(cfg)?;
    npu::ModelLoading::export_all(cfg)?;
    hearth_app::documents::DocumentInfo::export_all(cfg)?;
    hearth_app::documents::LibraryView::export_all(cfg)?;
    hearth_app::documents::ConversationDocuments::export_all(cfg)?;
    hearth_app::documents::DocumentEvent::export_all(cfg)?;
    hearth_app::drop::Dropped::export_all(cfg)?;
    hearth_app::documents::MessageSources::export_all(cfg)?;
    hearth_app::open_file::Opened::export_all(cfg)?;
    hearth_app::read_aloud::ReadAloudEvent::export_all(cfg)?;
    hearth_app::read_aloud::voices::PiperStatus::export_all(cfg)?;
    hearth_app::read_aloud::voices::VoiceDownloaded::export_all(cfg)?;
    hearth_app::voice::VoiceLevel::export_all(cfg)?;
    hearth_app::voice::Listening::export_all(cfg)?;
    hearth_app::voice::VoiceHeard::export_all(cfg)?;
    hearth_app::voice::VoiceStatus::export_all(cfg)?;
    hearth_app::pictures::DraftPicture::export_all(cfg)?;
    hearth_app::pictures::PictureUpload::export_all(cfg)?;
    npu::Comparison::export_all(cfg)?;
    hearth_app::Error::export_all(cfg)?;
    hearth_chat::conversations::Conversation::export_all(cfg)?;
    hearth_chat::conversations::ConversationSummary::export_all(cfg)?;
    hearth_hub::Progress::export_all(cfg)?;
    hearth_hub::FoundModel::export_all(cfg)?;
    hearth_hub::Removed::export_all(cfg)?;
    hearth_npu::Diagnosis::export_all(cfg)?;
    hearth_npu::PowerSample::export_all(cfg)?;
    Ok(())
}

/// The generated declarations as one file: each type once, sorted by name, imports dropped.
fn generate() -> String {
    let dir = tempfile::tempdir().unwrap();
    // Every integer that crosses IPC fits a JavaScript number (sizes, counts, seconds).
    let cfg = Config::new()
        .with_large_int("number")
        .with_out_dir(dir.path());
    export_all(&cfg).expect("the IPC types export");
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = String::from(
        "// Generated from the Rust types by src-tauri/tests/bindings.rs (ts-rs): do not edit.\n\
         // After changing a type that crosses IPC, run `npm run bindings`.\n",
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let body: Vec<&str> = text
            .lines()
            .filter(|l| {
                !l.starts_with("import type") && !l.starts_with("// This file was generated")
            })
            .collect();
        out.push('\n');
        out.push_str(body.join("\n").trim());
        out.push('\n');
    }
    out
}

/// Compares `generated` with the committed `ui/src/lib/<file>`, or writes it there when
/// `HEARTH_WRITE_BINDINGS` is set.
fn check_or_write(file: &str, generated: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ui/src/lib")
        .join(file);
    if std::env::var_os("HEARTH_WRITE_BINDINGS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "ui/src/lib/{file} is not what the Rust side gives: run `npm run bindings` and commit \
         the result"
    );
}

#[test]
fn the_ui_bindings_are_the_rust_types() {
    check_or_write("bindings.ts", &generate());
}

// ---------------------------------------------------------------- the command map

/// One command as the UI invokes it.
struct Command {
    name: String,
    /// (name on the wire, TypeScript type, optional)
    args: Vec<(String, String, bool)>,
    returns: String,
}

/// The Rust type names whose TypeScript declaration carries another name (`#[ts(rename)]`).
const RENAMED: &[(&str, &str)] = &[
    ("Comparison", "BackendComparison"),
    ("Diagnosis", "NpuDiagnosis"),
    ("Error", "CommandError"),
    ("Progress", "PullProgress"),
];

/// Parameters Tauri fills in itself; the UI does not send them.
const INJECTED: &[&str] = &["State", "AppHandle", "Window", "Webview", "WebviewWindow"];

/// `ty` as TypeScript; the declared types it names are added to `named`.
fn ts_type(ty: &syn::Type, named: &mut BTreeSet<String>) -> String {
    match ty {
        syn::Type::Reference(r) => ts_type(&r.elem, named),
        syn::Type::Tuple(t) if t.elems.is_empty() => "null".into(),
        syn::Type::Path(p) => {
            let last = p.path.segments.last().expect("a type path has a segment");
            let ident = last.ident.to_string();
            let inner: Vec<String> = match &last.arguments {
                syn::PathArguments::AngleBracketed(a) => a
                    .args
                    .iter()
                    .filter_map(|arg| match arg {
                        syn::GenericArgument::Type(t) => Some(ts_type(t, named)),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            match ident.as_str() {
                "String" | "str" | "PathBuf" => "string".into(),
                "bool" => "boolean".into(),
                "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize"
                | "f32" | "f64" => "number".into(),
                "Option" => format!("{} | null", inner[0]),
                "Vec" if inner[0].contains(' ') => format!("({})[]", inner[0]),
                "Vec" => format!("{}[]", inner[0]),
                "Result" | "CommandResult" => inner[0].clone(),
                "Channel" => format!("Channel<{}>", inner[0]),
                _ => {
                    let name = RENAMED
                        .iter()
                        .find(|(rust, _)| *rust == ident)
                        .map_or(ident.clone(), |(_, ts)| ts.to_string());
                    named.insert(name.clone());
                    name
                }
            }
        }
        _ => panic!(
            "the command map cannot write a command's type: use a named type, Option, Vec or ()"
        ),
    }
}

/// `snake_case` as Tauri names a command argument on the wire: `camelCase`.
fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for ch in name.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// Whether `ty` is a parameter Tauri injects.
fn injected(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| INJECTED.contains(&s.ident.to_string().as_str())),
        syn::Type::Reference(r) => injected(&r.elem),
        _ => false,
    }
}

/// Every `#[tauri::command]` function in the modules `src/commands/mod.rs` declares.
fn commands(named: &mut BTreeSet<String>) -> Vec<Command> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands");
    let root = syn::parse_file(&std::fs::read_to_string(dir.join("mod.rs")).unwrap())
        .expect("src/commands/mod.rs parses");
    let files: Vec<PathBuf> = root
        .items
        .iter()
        .filter_map(|item| match item {
            syn::Item::Mod(m) => Some(dir.join(format!("{}.rs", m.ident))),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        for item in parsed.items {
            let syn::Item::Fn(f) = item else { continue };
            let is_command = f.attrs.iter().any(|a| {
                let path = a.path();
                path.segments.len() == 2
                    && path.segments[0].ident == "tauri"
                    && path.segments[1].ident == "command"
            });
            if !is_command {
                continue;
            }
            let mut args = Vec::new();
            for input in &f.sig.inputs {
                let syn::FnArg::Typed(arg) = input else {
                    continue;
                };
                if injected(&arg.ty) {
                    continue;
                }
                let syn::Pat::Ident(name) = &*arg.pat else {
                    panic!(
                        "{}: an argument of {} is not a plain name",
                        file.display(),
                        f.sig.ident
                    )
                };
                let optional = matches!(&*arg.ty, syn::Type::Path(p)
                    if p.path.segments.last().is_some_and(|s| s.ident == "Option"));
                args.push((
                    camel(&name.ident.to_string()),
                    ts_type(&arg.ty, named),
                    optional,
                ));
            }
            let returns = match &f.sig.output {
                syn::ReturnType::Default => "null".into(),
                syn::ReturnType::Type(_, ty) => ts_type(ty, named),
            };
            out.push(Command {
                name: f.sig.ident.to_string(),
                args,
                returns,
            });
        }
    }
    out
}

/// The events the app emits to the window, with the type each carries.
const EVENTS: &[(&str, &str)] = &[
    (hearth_app::npu::LOADING_EVENT, "ModelLoading"),
    (hearth_app::documents::DOCUMENTS_EVENT, "DocumentEvent"),
    (hearth_app::drop::DROP_EVENT, "Dropped"),
    (hearth_app::read_aloud::READ_ALOUD_EVENT, "ReadAloudEvent"),
];

/// `ui/src/lib/commands.ts`: the command map, in the order of `names::COMMANDS`.
fn generate_command_map(bindings: &str) -> String {
    let mut named = BTreeSet::new();
    let mut found = commands(&mut named);
    let listed: BTreeSet<&str> = COMMANDS.iter().copied().collect();
    let defined: BTreeSet<&str> = found.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        defined, listed,
        "the #[tauri::command] functions in src/commands/ vs src/commands/names.rs"
    );
    found.sort_by_key(|c| COMMANDS.iter().position(|n| *n == c.name));
    for (_, ty) in EVENTS {
        named.insert(ty.to_string());
    }
    for name in &named {
        assert!(
            bindings.contains(&format!("export type {name} ")),
            "the command map names {name}, which bindings.ts does not declare: export it in \
             export_all (or add its ts rename to RENAMED)"
        );
    }
    let mut out = String::from(
        "// Generated from the #[tauri::command] functions in src-tauri/src/commands/ by\n\
         // src-tauri/tests/bindings.rs: do not edit. After changing a command, run `npm run bindings`.\n\
         import type { Channel } from '@tauri-apps/api/core';\n",
    );
    out.push_str("import type {\n");
    for name in &named {
        out.push_str(&format!("  {name},\n"));
    }
    out.push_str("} from './bindings';\n\n");
    out.push_str(
        "/** Each command the UI can invoke: its arguments as Tauri reads them (camelCase keys;\n \
         * an optional one may be left out) and what it returns. Errors are `CommandError`s. */\n\
         export interface Commands {\n",
    );
    for c in &found {
        let args = if c.args.is_empty() {
            "Record<string, never>".to_string()
        } else {
            let fields: Vec<String> = c
                .args
                .iter()
                .map(|(name, ty, optional)| {
                    format!("{name}{}: {ty}", if *optional { "?" } else { "" })
                })
                .collect();
            format!("{{ {} }}", fields.join("; "))
        };
        out.push_str(&format!(
            "  {}: {{ args: {args}; returns: {} }};\n",
            c.name, c.returns
        ));
    }
    out.push_str("}\n\n/** A command's name. */\nexport type CommandName = keyof Commands;\n\n");
    out.push_str("/** The events the app emits to the window, by name, with what each carries. */\nexport interface Events {\n");
    for (name, ty) in EVENTS {
        out.push_str(&format!("  '{name}': {ty};\n"));
    }
    out.push_str("}\n");
    out
}

#[test]
fn the_ui_command_map_is_the_commands() {
    check_or_write("commands.ts", &generate_command_map(&generate()));
}
