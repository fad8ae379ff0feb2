//! The commands the UI calls, one module per area. Each parses its arguments, calls one
//! function of `hearth_app`, and maps the error. A new command goes into `generate_handler!`
//! in lib.rs and into [`names::COMMANDS`]; a test then says what else to update (the
//! capability file, `npm run bindings`).

pub mod chat;
pub mod conversations;
pub mod documents;
pub mod files;
pub mod models;
pub mod names;
pub mod npu;
pub mod pictures;
pub mod read_aloud;
pub mod remote;
pub mod session;
pub mod settings;
pub mod share;
pub mod voice;

use crate::error::{internal, CommandResult};

/// Run blocking work (disk, model) off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> CommandResult<T> + Send + 'static,
) -> CommandResult<T> {
    tauri::async_runtime::spawn_blocking(work)
        .await
        .map_err(internal)?
}

/// Sends a value on a Channel; a window that stopped listening is only logged.
pub(crate) fn send<T: tauri::ipc::IpcResponse>(channel: &tauri::ipc::Channel<T>, value: T) {
    if let Err(error) = channel.send(value) {
        tracing::warn!("the window stopped listening: {error}");
    }
}
