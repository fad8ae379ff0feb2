//! The remote server: where it is, its key (kept in `remote.json`, 0600, in the config
//! folder; never handed to a front end), testing the connection, and forgetting it. Choosing
//! one of its models is [`App::select_model`] with the remote backend.

use hearth_backends::remote::{self, RemoteConfig};
use serde::Serialize;

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};

/// The saved remote server as a front end sees it: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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

impl App {
    /// The saved remote server, or None when none is set.
    pub fn remote_server(&self) -> Result<Option<RemoteServer>> {
        Ok(RemoteConfig::load(&self.home.config_dir)?
            .as_ref()
            .map(RemoteServer::of))
    }

    /// Saves the server at `url`. `api_key`: None keeps the saved key (for the same server),
    /// `""` removes it. `model`: None keeps the saved choice.
    pub fn save_remote_server(
        &self,
        url: &str,
        api_key: Option<&str>,
        model: Option<String>,
    ) -> Result<RemoteServer> {
        let dir = &self.home.config_dir;
        let saved = RemoteConfig::load(dir)?;
        let config = RemoteConfig::edited(saved.as_ref(), url, api_key, model)?;
        config.save(dir)?;
        Ok(RemoteServer::of(&config))
    }

    /// Asks the server at `url` for its models (with `api_key`, or the saved key for the same
    /// server when None): their ids, or what went wrong in plain words.
    pub fn test_remote_server(&self, url: &str, api_key: Option<&str>) -> Result<Vec<String>> {
        let saved = RemoteConfig::load(&self.home.config_dir)?;
        let config = RemoteConfig::edited(saved.as_ref(), url, api_key, None)?;
        Ok(remote::test_connection(&config.base_url, config.api_key)?)
    }

    /// Deletes the saved server and its key. A remote model in use is closed, so the next
    /// answer comes from this computer again.
    pub fn forget_remote_server(&self) -> Result<()> {
        let mut slot = self.model.try_lock().map_err(|_| {
            Error::new(
                ErrorCode::Busy,
                "An answer is being written. Stop it or wait, then forget the server.",
            )
        })?;
        RemoteConfig::forget(&self.home.config_dir)?;
        if slot
            .as_ref()
            .is_some_and(|m| m.kind().leaves_this_computer())
        {
            *slot = None;
        }
        Ok(())
    }
}
