//! The remote server: where it is, its key (kept in `remote.json`, 0600, in the config
//! folder; never handed to a front end), testing the connection (its models, with which see
//! pictures), the user's "sees pictures" marks, and forgetting it. Choosing one of its models
//! is [`App::select_model`] with the remote backend.

use hearth_backends::remote::{self, RemoteConfig, ServerModel};
use hearth_chat::{Availability, BackendKind};
use serde::Serialize;

use crate::app::App;
use crate::error::{Error, ErrorCode, Result};
use crate::home::Home;
use crate::session::Session;

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
    /// The models the user switched to "sees pictures" (adding to what the server says).
    pub sees_pictures: Vec<String>,
}

impl RemoteServer {
    fn of(config: &RemoteConfig) -> Self {
        Self {
            url: config.base_url.clone(),
            host: host_of(config),
            model: config.model.clone(),
            has_key: config.api_key.is_some(),
            sees_pictures: config.sees_pictures.clone(),
        }
    }
}

/// `host:port` of the server in `config`.
fn host_of(config: &RemoteConfig) -> String {
    remote::openai::parse_base_url(&config.base_url)
        .map(|b| b.host_port)
        .unwrap_or_else(|_| config.base_url.clone())
}

/// A model the remote server offers, as the settings and the model picker show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RemoteModel {
    /// Its id on the server.
    pub name: String,
    /// Whether the server itself says it sees pictures (Ollama's capabilities): the user's
    /// switch adds to this and cannot take it away.
    pub server_sees: bool,
    /// Where it runs: on the remote server, with whether it sees pictures (the server's word
    /// or the user's mark), as for the models on this computer.
    pub backend: Availability,
}

impl RemoteModel {
    fn of(model: ServerModel, config: &RemoteConfig) -> Self {
        let marked = config.marked_seeing(&model.id);
        Self {
            backend: Availability::usable(BackendKind::Remote)
                .seeing(model.sees_pictures || marked),
            server_sees: model.sees_pictures,
            name: model.id,
        }
    }
}

/// The remote server a front end connects to ([`crate::Session::connect_remote`]): the one at
/// `url` when given, else the one saved in `home`'s config folder; None when neither. `api_key`
/// is a key the front end holds itself (e.g. from an environment variable): it replaces the
/// saved key; without it, a saved server keeps its saved key and `url` is asked with none.
pub fn server(
    home: &Home,
    url: Option<&str>,
    api_key: Option<&str>,
) -> Result<Option<RemoteConfig>> {
    let config = match url {
        Some(url) => Some(RemoteConfig::new(url)?),
        None => RemoteConfig::load(&home.config_dir)?,
    };
    Ok(config.map(|config| match api_key {
        Some(key) => config.with_key(key),
        None => config,
    }))
}

impl App {
    /// The saved remote server, or None when none is set.
    pub fn remote_server(&self) -> Result<Option<RemoteServer>> {
        Ok(RemoteConfig::load(&self.home.config_dir)?
            .as_ref()
            .map(RemoteServer::of))
    }

    /// Saves the server at `url` in one write. `api_key`: None keeps the saved key (for the
    /// same server), `""` removes it. `model`: None keeps the saved choice. `sees_pictures`:
    /// the models the user switched to "sees pictures" (None keeps the saved ones, for the
    /// same server). A model of this server in use whose switch changed is opened again, so
    /// it takes pictures (or not) from the next message on.
    pub fn save_remote_server(
        &self,
        url: &str,
        api_key: Option<&str>,
        model: Option<String>,
        sees_pictures: Option<Vec<String>>,
    ) -> Result<RemoteServer> {
        let dir = &self.home.config_dir;
        let saved = RemoteConfig::load(dir)?;
        let mut config = RemoteConfig::edited(saved.as_ref(), url, api_key, model)?;
        if let Some(marks) = sees_pictures {
            config.sees_pictures.clear();
            for model in marks.iter().filter(|m| !m.trim().is_empty()) {
                config.mark_seeing(model, true);
            }
        }
        config.save(dir)?;
        self.reopen_if_marked_differently(saved.as_ref(), &config);
        Ok(RemoteServer::of(&config))
    }

    /// Opens the remote model in use again when `config` marks it differently from `saved`
    /// (on the same server). While an answer is being written it is left as it is: the
    /// change then counts from the next time it is opened.
    fn reopen_if_marked_differently(&self, saved: Option<&RemoteConfig>, config: &RemoteConfig) {
        let Ok(mut slot) = self.model.try_lock() else {
            tracing::info!("an answer is being written: the sees-pictures switch counts from the next time the model is opened");
            return;
        };
        let Some(status) = slot.as_ref().map(Session::status) else {
            return;
        };
        let changed = saved.is_some_and(|s| s.marked_seeing(&status.name))
            != config.marked_seeing(&status.name);
        if status.backend_kind != BackendKind::Remote
            || status.device != host_of(config)
            || !changed
        {
            return;
        }
        match Session::connect_remote(config, &status.name) {
            Ok(session) => {
                tracing::info!(model = %status.name, sees_pictures = session.sees_pictures(), "opened the remote model again for its sees-pictures switch");
                self.install(&mut slot, session);
            }
            // The model in use stays as it was; the switch counts when it is next opened.
            Err(error) => tracing::warn!("could not open {} again: {error}", status.name),
        }
    }

    /// Asks the server at `url` for its models (with `api_key`, or the saved key for the same
    /// server when None), with which see pictures (the server's word, or the saved switch for
    /// the same server), or says what went wrong in plain words.
    pub fn test_remote_server(&self, url: &str, api_key: Option<&str>) -> Result<Vec<RemoteModel>> {
        let saved = RemoteConfig::load(&self.home.config_dir)?;
        let config = RemoteConfig::edited(saved.as_ref(), url, api_key, None)?;
        let models = remote::test_connection(&config.base_url, config.api_key.clone())?;
        Ok(models
            .into_iter()
            .map(|m| RemoteModel::of(m, &config))
            .collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn home(config_dir: &std::path::Path) -> Home {
        Home {
            data_dir: "data".into(),
            config_dir: config_dir.to_owned(),
            state_dir: "state".into(),
            builtin: None,
            system_root: "/".into(),
        }
    }

    #[test]
    fn a_given_address_is_used_with_only_the_given_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = home(dir.path());
        RemoteConfig::new("http://saved:8000")
            .unwrap()
            .with_key("saved-key")
            .save(dir.path())
            .unwrap();
        let given = server(&home, Some("http://given:9000/v1"), None)
            .unwrap()
            .unwrap();
        assert_eq!(given.base_url, "http://given:9000");
        assert!(
            given.api_key.is_none(),
            "the saved key is not sent to another server"
        );
        let keyed = server(&home, Some("http://given:9000"), Some("k"))
            .unwrap()
            .unwrap();
        assert!(keyed.api_key.is_some());
    }

    #[test]
    fn without_an_address_the_saved_server_is_used_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = home(dir.path());
        assert!(server(&home, None, None).unwrap().is_none());
        RemoteConfig::new("http://saved:8000")
            .unwrap()
            .with_key("saved-key")
            .save(dir.path())
            .unwrap();
        let saved = server(&home, None, None).unwrap().unwrap();
        assert_eq!(saved.base_url, "http://saved:8000");
        assert!(saved.api_key.is_some());
        assert!(server(&home, Some("not a url"), None).is_err());
    }
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod switch_tests;
