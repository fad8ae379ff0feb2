//! The remote server area: where it is, its key (kept in `remote.json`, 0600, in the config
//! folder; never sent to the UI), testing the connection, and forgetting it. Choosing one of
//! its models goes through `select_model` with `backend: "remote"`.

use hearth_backends::remote::{self, RemoteConfig};
use serde::Serialize;
use tauri::State;

use super::blocking;
use crate::error::{CommandError, CommandResult};
use crate::state::AppState;

/// The saved remote server as the UI sees it: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
pub struct RemoteServer {
    /// `http://host:port` (or https).
    pub url: String,
    /// `host:port`, to name the server in plain sentences.
    pub host: String,
    /// The model last chosen on it.
    pub model: Option<String>,
    /// Whether a key is saved.
    pub has_key: bool,
}

impl RemoteServer {
    fn of(config: &RemoteConfig) -> Self {
        let host = remote::openai::parse_base_url(&config.base_url)
            .map(|b| b.host_port)
            .unwrap_or_else(|_| config.base_url.clone());
        Self {
            url: config.base_url.clone(),
            host,
            model: config.model.clone(),
            has_key: config.api_key.is_some(),
        }
    }
}

/// The saved remote server, or None when none is set.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn remote_server(state: State<'_, AppState>) -> CommandResult<Option<RemoteServer>> {
    let dir = state.paths.config_dir.clone();
    blocking(move || Ok(RemoteConfig::load(&dir)?.as_ref().map(RemoteServer::of))).await
}

/// Save the server at `url`. `api_key`: None keeps the saved key (for the same server), `""`
/// removes it. `model`: None keeps the saved choice.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn save_remote_server(
    state: State<'_, AppState>,
    url: String,
    api_key: Option<String>,
    model: Option<String>,
) -> CommandResult<RemoteServer> {
    let dir = state.paths.config_dir.clone();
    blocking(move || {
        let saved = RemoteConfig::load(&dir)?;
        let config = RemoteConfig::edited(saved.as_ref(), &url, api_key.as_deref(), model)?;
        config.save(&dir)?;
        Ok(RemoteServer::of(&config))
    })
    .await
}

/// Ask the server at `url` for its models (with `api_key`, or the saved key for the same
/// server when None): their ids, or what went wrong in plain words.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn test_remote_server(
    state: State<'_, AppState>,
    url: String,
    api_key: Option<String>,
) -> CommandResult<Vec<String>> {
    let dir = state.paths.config_dir.clone();
    blocking(move || {
        let saved = RemoteConfig::load(&dir)?;
        let config = RemoteConfig::edited(saved.as_ref(), &url, api_key.as_deref(), None)?;
        Ok(remote::test_connection(&config.base_url, config.api_key)?)
    })
    .await
}

/// Delete the saved server and its key. A remote model in use is closed, so the next answer
/// comes from this computer again.
#[tauri::command]
#[tracing::instrument(skip_all)]
pub async fn forget_remote_server(state: State<'_, AppState>) -> CommandResult<()> {
    let state = state.inner().clone();
    blocking(move || {
        let mut slot = state.model.try_lock().map_err(|_| {
            CommandError::new(
                "busy",
                "An answer is being written. Stop it or wait, then forget the server.",
            )
        })?;
        RemoteConfig::forget(&state.paths.config_dir)?;
        if slot
            .as_ref()
            .is_some_and(|m| m.kind().leaves_this_computer())
        {
            *slot = None;
        }
        Ok(())
    })
    .await
}
