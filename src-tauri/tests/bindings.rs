//! The web UI's IPC types are generated from the Rust types they mirror (ts-rs), into
//! `ui/src/lib/bindings.ts`; this test fails when that file is not what the Rust types give
//! today. After changing a type that crosses IPC, run `npm run bindings` (this test with
//! `HEARTH_WRITE_BINDINGS=1`, which rewrites the file) and commit the result.

use std::path::Path;

use ts_rs::{Config, TS};

/// Every type a command takes or returns, or an event carries; the types inside them follow.
fn export_all(cfg: &Config) -> Result<(), ts_rs::ExportError> {
    use hearth_desktop::{answer, commands, error, export, npu_model, paths, settings};
    commands::session::AppStatus::export_all(cfg)?;
    paths::LocalModel::export_all(cfg)?;
    settings::Settings::export_all(cfg)?;
    answer::ChatAction::export_all(cfg)?;
    answer::ChatEvent::export_all(cfg)?;
    export::ExportFormat::export_all(cfg)?;
    commands::models::ModelsOverview::export_all(cfg)?;
    commands::models::PullResult::export_all(cfg)?;
    commands::remote::RemoteServer::export_all(cfg)?;
    npu_model::ModelLoading::export_all(cfg)?;
    npu_model::Comparison::export_all(cfg)?;
    error::CommandError::export_all(cfg)?;
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

#[test]
fn the_ui_bindings_are_the_rust_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src/lib/bindings.ts");
    let generated = generate();
    if std::env::var_os("HEARTH_WRITE_BINDINGS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "ui/src/lib/bindings.ts is not what the Rust types give: run `npm run bindings` and \
         commit the result"
    );
}
