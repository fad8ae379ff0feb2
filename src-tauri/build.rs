//! Tauri build step. Hearth's own commands (`src/commands/names.rs`) are declared here so the
//! capability file can grant exactly the ones the UI uses (each becomes an `allow-<command>`
//! permission).

include!("src/commands/names.rs");

fn main() {
    // `cargo build`/`cargo test` of the workspace must work before the UI is built: Tauri's
    // context macro needs the frontend folder to exist. Put a page there that says what to do;
    // `tauri build` replaces it with the real UI (beforeBuildCommand).
    let dist = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/dist");
    if !dist.join("index.html").exists() {
        std::fs::create_dir_all(&dist).expect("create ui/dist");
        std::fs::write(
            dist.join("index.html"),
            "<!doctype html><meta charset=utf-8><title>Hearth</title><p>The Hearth UI was not built. Run <code>npm run app</code>.</p>\n",
        )
        .expect("write ui/dist/index.html");
    }
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(COMMANDS)),
    )
    .expect("tauri build step failed");
}
