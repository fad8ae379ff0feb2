//! The commands the UI calls, one module per area. Each parses its arguments, calls one function
//! of the app or a crate, and maps the error to `CommandError`. A new command goes into
//! `generate_handler!` in lib.rs and into [`names::COMMANDS`]; a test then says what else to
//! update (the capability file, `npm run bindings`).

pub mod chat;
pub mod conversations;
pub mod models;
pub mod names;
pub mod npu;
pub mod remote;
pub mod session;
pub mod settings;

use crate::error::CommandError;

/// Run blocking work (disk, model) off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CommandError> + Send + 'static,
) -> Result<T, CommandError> {
    tauri::async_runtime::spawn_blocking(work)
        .await
        .map_err(|e| CommandError::new("internal", format!("Hearth hit an internal error ({e}). Try again; if it repeats, restart the app.")))?
}
