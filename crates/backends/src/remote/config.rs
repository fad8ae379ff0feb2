//! Where the remote server is and how to reach it, saved as `remote.json` in a folder the caller
//! names (the app and the CLI pass `$XDG_CONFIG_HOME/hearth`).
//!
//! The file may hold an API key, so it is written for its owner only: mode 0600 from the moment
//! it is created, written to a temporary file, synced and renamed over the old one (a crash
//! leaves the old file or the new one, never half of one). A file found readable by others is
//! narrowed back to 0600, with a warning in the log. The key never appears in `Debug` output.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::openai::{parse_base_url, ApiKey};

/// The file's name inside the config folder.
pub const REMOTE_CONFIG_FILE: &str = "remote.json";

/// The only permission bits the file may have: read and write for its owner.
const PRIVATE_MODE: u32 = 0o600;

/// A remote OpenAI-compatible server the user chose.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteConfig {
    /// `http://host:port` (or https), without `/v1`: see [`RemoteConfig::new`].
    pub base_url: String,
    /// The model last chosen from the server's list, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The API key, when the server needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKey>,
    /// A `tokenizer.json` of the server's model, when the user has one: prompts and answers are
    /// then counted with it instead of estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    /// The server's models the user marked "sees pictures" (for servers that do not say so
    /// themselves, as Ollama's `/api/show` does): pictures are sent to these only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sees_pictures: Vec<String>,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .field("tokenizer", &self.tokenizer)
            .field("sees_pictures", &self.sees_pictures)
            .finish()
    }
}

/// What can go wrong with the remote server's settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteConfigError {
    /// The address cannot be used; the message says why and what to type.
    #[error("{0}")]
    BadUrl(String),
    /// The file could not be read or written.
    #[error("remote server settings: cannot {action} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "rename").
        action: &'static str,
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error(
        "remote server settings: {path} is damaged ({source}); set the server again in Settings \
         or delete the file"
    )]
    Parse {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

impl RemoteConfig {
    /// Settings for the server at `base_url`: http or https only; a trailing `/` or `/v1` is
    /// dropped so either form can be pasted.
    pub fn new(base_url: &str) -> Result<RemoteConfig, RemoteConfigError> {
        let base = parse_base_url(base_url).map_err(RemoteConfigError::BadUrl)?;
        Ok(RemoteConfig {
            base_url: base.url,
            model: None,
            api_key: None,
            tokenizer: None,
            sees_pictures: Vec::new(),
        })
    }

    /// Whether the user marked `model` as one that sees pictures.
    pub fn marked_seeing(&self, model: &str) -> bool {
        self.sees_pictures.iter().any(|m| m == model)
    }

    /// Marks `model` as one that sees pictures (`sees`) or not.
    pub fn mark_seeing(&mut self, model: &str, sees: bool) {
        self.sees_pictures.retain(|m| m != model);
        if sees {
            self.sees_pictures.push(model.to_owned());
        }
    }

    /// The same settings with the API key `key` (none when it is empty or blank).
    pub fn with_key(mut self, key: &str) -> RemoteConfig {
        self.api_key = ApiKey::new(key);
        self
    }

    /// The settings after the user edits them: the server at `url`, with `key` as typed
    /// (None keeps the key of `saved`, an empty one removes it) and `model` (None keeps the
    /// saved choice). What is kept from `saved` (key, model, tokenizer) is kept only when `url`
    /// names the same server (host and port): a key is never sent to a server it was not
    /// typed for.
    pub fn edited(
        saved: Option<&RemoteConfig>,
        url: &str,
        key: Option<&str>,
        model: Option<String>,
    ) -> Result<RemoteConfig, RemoteConfigError> {
        let base = parse_base_url(url).map_err(RemoteConfigError::BadUrl)?;
        let same_server = saved.filter(|s| {
            parse_base_url(&s.base_url).is_ok_and(|old| old.host_port == base.host_port)
        });
        let mut config = RemoteConfig::new(url)?;
        config.api_key = match key {
            Some(typed) => ApiKey::new(typed),
            None => same_server.and_then(|s| s.api_key.clone()),
        };
        config.model = model
            .filter(|m| !m.trim().is_empty())
            .or_else(|| same_server.and_then(|s| s.model.clone()));
        config.tokenizer = same_server.and_then(|s| s.tokenizer.clone());
        config.sees_pictures = same_server
            .map(|s| s.sees_pictures.clone())
            .unwrap_or_default();
        Ok(config)
    }

    /// Deletes the settings from `config_dir` (the key with them); true when there were some.
    pub fn forget(config_dir: &Path) -> Result<bool, RemoteConfigError> {
        let path = Self::path_in(config_dir);
        match fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "forgot the remote server settings");
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(RemoteConfigError::Io {
                action: "delete",
                path,
                source,
            }),
        }
    }

    /// Where the settings live inside `config_dir`.
    pub fn path_in(config_dir: &Path) -> PathBuf {
        config_dir.join(REMOTE_CONFIG_FILE)
    }

    /// Reads the settings from `config_dir`; None when no server was set. A file readable by
    /// others is narrowed to 0600 first (with a warning in the log).
    pub fn load(config_dir: &Path) -> Result<Option<RemoteConfig>, RemoteConfigError> {
        let path = Self::path_in(config_dir);
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RemoteConfigError::Io {
                    action: "read",
                    path,
                    source,
                })
            }
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the remote server settings (which may hold an API key) were readable by \
                 others; making them private (0600)"
            );
            fs::set_permissions(&path, fs::Permissions::from_mode(PRIVATE_MODE)).map_err(
                |source| RemoteConfigError::Io {
                    action: "make private",
                    path: path.clone(),
                    source,
                },
            )?;
        }
        let text = fs::read_to_string(&path).map_err(|source| RemoteConfigError::Io {
            action: "read",
            path: path.clone(),
            source,
        })?;
        let mut config: RemoteConfig = serde_json::from_str(&text)
            .map_err(|source| RemoteConfigError::Parse { path, source })?;
        // A hand-edited address is held to the same rules as a typed one.
        config.base_url = parse_base_url(&config.base_url)
            .map_err(RemoteConfigError::BadUrl)?
            .url;
        Ok(Some(config))
    }

    /// Writes the settings to `config_dir` (created if missing), readable by the owner only.
    pub fn save(&self, config_dir: &Path) -> Result<(), RemoteConfigError> {
        let io = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source: std::io::Error| RemoteConfigError::Io {
                action,
                path,
                source,
            }
        };
        fs::create_dir_all(config_dir).map_err(io("create", config_dir))?;
        let path = Self::path_in(config_dir);
        let temp = config_dir.join(format!(".{REMOTE_CONFIG_FILE}.{}.tmp", std::process::id()));
        let mut text = serde_json::to_string_pretty(self).expect("plain fields serialize");
        text.push('\n');
        let written = (|| {
            let _ = fs::remove_file(&temp);
            // 0600 at creation: the key is never in a file others could read, even briefly.
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(PRIVATE_MODE)
                .open(&temp)
                .map_err(io("create", &temp))?;
            // A umask cannot widen it, but a file created by an odd filesystem might be wider.
            file.set_permissions(fs::Permissions::from_mode(PRIVATE_MODE))
                .map_err(io("make private", &temp))?;
            file.write_all(text.as_bytes())
                .map_err(io("write", &temp))?;
            file.sync_all().map_err(io("sync", &temp))?;
            fs::rename(&temp, &path).map_err(io("rename", &temp))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written?;
        // The rename is durable once the folder is synced.
        if let Ok(dir) = fs::File::open(config_dir) {
            let _ = dir.sync_all();
        }
        let mode = fs::metadata(&path)
            .map_err(io("check", &path))?
            .permissions()
            .mode()
            & 0o777;
        if mode != PRIVATE_MODE {
            fs::set_permissions(&path, fs::Permissions::from_mode(PRIVATE_MODE))
                .map_err(io("make private", &path))?;
        }
        tracing::info!(path = %path.display(), base_url = %self.base_url, "saved the remote server settings");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn addresses_are_normalized_and_checked() {
        assert_eq!(
            RemoteConfig::new("http://gpu-box:8000/v1")
                .unwrap()
                .base_url,
            "http://gpu-box:8000"
        );
        let e = RemoteConfig::new("gopher://x").unwrap_err();
        assert!(e.to_string().contains("http://"), "{e}");
    }

    #[test]
    fn saved_file_is_private_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().join("hearth");
        let mut config = RemoteConfig::new("http://10.0.0.5:8000/")
            .unwrap()
            .with_key(" sk-SECRET \n");
        config.model = Some("qwen".into());
        config.save(&config_dir).unwrap();
        let path = RemoteConfig::path_in(&config_dir);
        assert_eq!(mode(&path), 0o600, "the key file must be owner-only");
        let loaded = RemoteConfig::load(&config_dir).unwrap().unwrap();
        assert_eq!(loaded, config);
        assert_eq!(loaded.api_key.as_ref().unwrap().expose(), "sk-SECRET");
        // Saved again over the old one: still private, no temporary file left.
        loaded.save(&config_dir).unwrap();
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = fs::read_dir(&config_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [REMOTE_CONFIG_FILE]);
    }

    #[test]
    fn a_file_readable_by_others_is_made_private() {
        let dir = tempfile::tempdir().unwrap();
        let config = RemoteConfig::new("http://h:1").unwrap().with_key("k");
        config.save(dir.path()).unwrap();
        let path = RemoteConfig::path_in(dir.path());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let loaded = RemoteConfig::load(dir.path()).unwrap().unwrap();
        assert_eq!(loaded, config);
        assert_eq!(mode(&path), 0o600);
    }

    #[test]
    fn missing_file_is_no_server() {
        let dir = tempfile::tempdir().unwrap();
        assert!(RemoteConfig::load(dir.path()).unwrap().is_none());
    }

    #[test]
    fn damaged_file_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = RemoteConfig::path_in(dir.path());
        fs::write(&path, "{not json").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let e = RemoteConfig::load(dir.path()).unwrap_err();
        assert!(e.to_string().contains("delete the file"), "{e}");
    }

    #[test]
    fn an_edit_without_a_key_keeps_the_saved_one_for_the_same_server_only() {
        let mut saved = RemoteConfig::new("http://gpu-box:8000")
            .unwrap()
            .with_key("sk-1");
        saved.model = Some("qwen".into());
        let kept =
            RemoteConfig::edited(Some(&saved), "http://gpu-box:8000/v1", None, None).unwrap();
        assert_eq!(kept, saved, "same server, nothing typed: everything kept");
        let other =
            RemoteConfig::edited(Some(&saved), "http://elsewhere:8000", None, None).unwrap();
        assert!(
            other.api_key.is_none(),
            "a key must not follow the user to another server"
        );
        assert!(other.model.is_none());
        let removed =
            RemoteConfig::edited(Some(&saved), "http://gpu-box:8000", Some(""), None).unwrap();
        assert!(removed.api_key.is_none(), "an empty key removes it");
        let replaced = RemoteConfig::edited(
            Some(&saved),
            "http://gpu-box:8000",
            Some(" sk-2 "),
            Some("llama".into()),
        )
        .unwrap();
        assert_eq!(replaced.api_key.unwrap().expose(), "sk-2");
        assert_eq!(replaced.model.as_deref(), Some("llama"));
        let e = RemoteConfig::edited(None, "ftp://x", None, None).unwrap_err();
        assert!(matches!(e, RemoteConfigError::BadUrl(_)), "{e}");
    }

    #[test]
    fn forgetting_deletes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        RemoteConfig::new("http://h:1")
            .unwrap()
            .with_key("k")
            .save(dir.path())
            .unwrap();
        assert!(RemoteConfig::forget(dir.path()).unwrap());
        assert!(RemoteConfig::load(dir.path()).unwrap().is_none());
        assert!(
            !RemoteConfig::forget(dir.path()).unwrap(),
            "nothing left to forget"
        );
    }

    #[test]
    fn debug_hides_the_key() {
        let config = RemoteConfig::new("http://h:1")
            .unwrap()
            .with_key("sk-SECRET");
        let shown = format!("{config:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("<hidden>"), "{shown}");
    }
}
