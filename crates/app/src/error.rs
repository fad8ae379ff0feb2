//! The one error the app's functions return: a stable [`ErrorCode`] a front end can act on,
//! and a message for people that says what failed and what to do. The desktop sends it to the
//! UI as `{ "code", "message", "detail", "params" }`: the UI shows the message in the user's
//! language from its catalog, by `code` (and `detail` with its `params` when the message names a
//! thing); the CLI prints the English message.

use std::collections::BTreeMap;

use serde::Serialize;

use hearth_backends::remote::RemoteConfigError;
use hearth_chat::conversations::StoreError;
use hearth_chat::{BackendError, FailureKind};

/// What kind of failure, for a front end to act on (the UI shows some apart, e.g. `disk_full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ErrorCode {
    /// Another answer or load is running; wait or stop it.
    Busy,
    /// The conversation, message, model or server named does not exist.
    NotFound,
    /// The request itself was wrong (empty text, too long, bad value).
    InvalidInput,
    /// The model could not be opened or failed while answering.
    Model,
    /// No model is available at all.
    NoModel,
    /// The conversation does not fit the model's context.
    Context,
    /// Reading or writing on disk failed.
    Storage,
    /// Hearth itself failed (a bug); try again or restart.
    Internal,
    /// The backend cannot do what was asked.
    Unsupported,
    /// The model could not be loaded onto the NPU.
    Npu,
    /// No network connection.
    Offline,
    /// The download failed on the way.
    Network,
    /// The model's page needs a login or a licence accepted.
    AccessDenied,
    /// Not enough free disk space.
    DiskFull,
    /// A downloaded file is not what it should be.
    Corrupt,
    /// The files are not a model Hearth can open.
    InvalidModel,
    /// The server could not be reached.
    Connection,
    /// The server took too long.
    Timeout,
    /// The server refused the key.
    Auth,
    /// The server does not have the model.
    ModelNotFound,
    /// The answer stopped in the middle (the text so far is kept).
    Cut,
    /// The server's reply could not be read.
    BadReply,
    /// The server answered with another model.
    WrongModel,
    /// The backend is not ready to answer.
    NotReady,
    /// The server failed.
    Server,
}

/// An error with its code and a plain message.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "CommandError"))]
pub struct Error {
    /// Stable, machine-readable kind.
    pub code: ErrorCode,
    /// What happened and what the user can do, in plain words (English).
    pub message: String,
    /// Which message of `code`, when it names a thing: the UI's catalog key is
    /// `error.<code>.<detail>`, filled with `params`. None: the code's own message.
    pub detail: Option<String>,
    /// The things the message names (a model, a repository, sizes), by parameter name.
    pub params: BTreeMap<String, String>,
}

/// Result of an app function.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with the given code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            detail: None,
            params: BTreeMap::new(),
        }
    }

    /// The same error, saying which message of its code it is and what that message names.
    pub fn detail(mut self, detail: &str, params: &[(&str, String)]) -> Self {
        self.detail = Some(detail.to_string());
        self.params = params
            .iter()
            .map(|(name, value)| (name.to_string(), value.clone()))
            .collect();
        self
    }

    /// The request itself was wrong (empty text, too long, bad value).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }
}

impl From<&BackendError> for ErrorCode {
    fn from(error: &BackendError) -> Self {
        match error {
            BackendError::Engine(hearth_chat::EngineError::ContextFull { .. }) => {
                ErrorCode::Context
            }
            BackendError::Engine(_) => ErrorCode::Model,
            BackendError::Unsupported(_) => ErrorCode::Unsupported,
            BackendError::Failed { kind, .. } => match kind {
                FailureKind::Refused | FailureKind::Dns | FailureKind::Tls => ErrorCode::Connection,
                FailureKind::Timeout => ErrorCode::Timeout,
                FailureKind::Auth => ErrorCode::Auth,
                FailureKind::ModelNotFound => ErrorCode::ModelNotFound,
                FailureKind::Busy => ErrorCode::Busy,
                FailureKind::Cut => ErrorCode::Cut,
                FailureKind::BadReply => ErrorCode::BadReply,
                FailureKind::WrongModel => ErrorCode::WrongModel,
                FailureKind::NotReady => ErrorCode::NotReady,
                FailureKind::Server => ErrorCode::Server,
            },
            _ => ErrorCode::Model,
        }
    }
}

impl From<BackendError> for Error {
    fn from(error: BackendError) -> Self {
        Self::new(ErrorCode::from(&error), error.to_string())
    }
}

impl From<&hearth_hub::Error> for ErrorCode {
    fn from(error: &hearth_hub::Error) -> Self {
        use hearth_hub::Error as E;
        match error {
            E::NotInstalled { .. } | E::RepoNotFound { .. } => ErrorCode::NotFound,
            E::Offline { .. } => ErrorCode::Offline,
            E::Network { .. }
            | E::Stalled { .. }
            | E::HttpStatus { .. }
            | E::BadResponse { .. } => ErrorCode::Network,
            E::AccessDenied { .. } => ErrorCode::AccessDenied,
            E::NotEnoughDisk { .. } | E::DiskFull { .. } => ErrorCode::DiskFull,
            E::ChecksumMismatch { .. } | E::MetadataMismatch { .. } => ErrorCode::Corrupt,
            E::AlreadyDownloading { .. } => ErrorCode::Busy,
            E::UnknownModel { .. } | E::InvalidName { .. } | E::NameTaken { .. } => {
                ErrorCode::InvalidInput
            }
            E::MissingFiles { .. } | E::InvalidModel { .. } | E::Gguf { .. } => {
                ErrorCode::InvalidModel
            }
            _ => ErrorCode::Storage,
        }
    }
}

impl From<hearth_hub::Error> for Error {
    fn from(error: hearth_hub::Error) -> Self {
        use hearth_hub::Error as E;
        let plain = Self::new(ErrorCode::from(&error), error.to_string());
        match &error {
            E::NotEnoughDisk {
                needed, available, ..
            } => plain.detail(
                "space",
                &[
                    ("needed", hearth_hub::human_bytes(*needed)),
                    ("available", hearth_hub::human_bytes(*available)),
                ],
            ),
            E::RepoNotFound { repo, .. } => plain.detail("repo", &[("repo", repo.clone())]),
            E::AccessDenied { repo, .. } => plain.detail("repo", &[("repo", repo.clone())]),
            E::NotInstalled { name } => plain.detail("model", &[("name", name.clone())]),
            E::NameTaken { name } => plain.detail("name_taken", &[("name", name.clone())]),
            E::UnknownModel { query, .. } => {
                plain.detail("unknown_model", &[("name", query.clone())])
            }
            E::AlreadyDownloading { name } => {
                plain.detail("downloading", &[("name", name.clone())])
            }
            // The hub's own messages speak to the command line (HF_ENDPOINT, "run the same
            // command again"); the desktop shows these from its catalog, with the same facts.
            E::Network { url, detail } => {
                plain.detail("reach", &[("url", url.clone()), ("reason", detail.clone())])
            }
            E::Stalled { file, secs, .. } => plain.detail(
                "stalled",
                &[("file", file.clone()), ("secs", secs.to_string())],
            ),
            E::DiskFull { path } => plain.detail("full", &[("path", path.display().to_string())]),
            E::ChecksumMismatch { file, .. } | E::MetadataMismatch { file, .. } => {
                plain.detail("damaged", &[("file", file.clone())])
            }
            E::MissingFiles { repo, missing, .. } => plain.detail(
                "missing",
                &[("place", repo.clone()), ("missing", missing.join(", "))],
            ),
            _ => plain,
        }
    }
}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Self {
        match &error {
            StoreError::NotFound { what, .. } => {
                Self::new(ErrorCode::NotFound, error.to_string()).detail(what, &[])
            }
            _ => Self::new(ErrorCode::Storage, error.to_string()),
        }
    }
}

impl From<RemoteConfigError> for Error {
    fn from(error: RemoteConfigError) -> Self {
        match error {
            RemoteConfigError::BadUrl(message) => Self::invalid(message),
            other => Self::new(ErrorCode::Storage, other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn serializes_as_code_and_message() {
        let error = Error::new(ErrorCode::Busy, "An answer is already being written.");
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "busy", "message": "An answer is already being written.", "detail": null, "params": {}}),
            "the UI reads exactly these fields, the code in snake_case"
        );
    }

    #[test]
    fn a_message_that_names_a_thing_carries_it_as_a_parameter() {
        let error = Error::from(hearth_hub::Error::NotInstalled {
            name: "qwen3-4b".into(),
        });
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(json["code"], "not_found");
        assert_eq!(
            json["detail"], "model",
            "the UI's catalog key is error.not_found.model"
        );
        assert_eq!(json["params"], serde_json::json!({"name": "qwen3-4b"}));
        let error = Error::from(hearth_hub::Error::NotEnoughDisk {
            path: "/data".into(),
            needed: 2_000_000_000,
            available: 1_000,
        });
        assert_eq!(error.detail.as_deref(), Some("space"));
        assert_eq!(
            error.params["needed"],
            hearth_hub::human_bytes(2_000_000_000)
        );
    }

    #[test]
    fn hub_errors_keep_their_message_and_get_a_stable_code() {
        let error = Error::from(hearth_hub::Error::NotEnoughDisk {
            path: PathBuf::from("/data"),
            needed: 2_000_000_000,
            available: 1_000,
        });
        assert_eq!(error.code, ErrorCode::DiskFull);
        assert!(
            error.message.contains("not enough free disk space"),
            "{}",
            error.message
        );
        let error = Error::from(hearth_hub::Error::ChecksumMismatch {
            file: "model.q4nx".into(),
            algorithm: "sha256",
            expected: "a".into(),
            actual: "b".into(),
        });
        assert_eq!(
            error.code,
            ErrorCode::Corrupt,
            "the UI shows corrupted downloads apart"
        );
    }

    #[test]
    fn hub_errors_for_the_command_line_carry_their_facts_for_the_desktop() {
        // The review's finding 11: the desktop must not show "HF_ENDPOINT" or "run the same
        // command again"; it shows its catalog's message for the detail, with these params.
        let error = Error::from(hearth_hub::Error::Network {
            url: "https://example.org/model".into(),
            detail: "failed to lookup address information".into(),
        });
        assert!(
            error.message.contains("HF_ENDPOINT"),
            "the CLI keeps its message"
        );
        assert_eq!(error.detail.as_deref(), Some("reach"));
        assert_eq!(error.params["url"], "https://example.org/model");
        assert_eq!(
            error.params["reason"],
            "failed to lookup address information"
        );
        let error = Error::from(hearth_hub::Error::MissingFiles {
            repo: "/home/ana/Downloads".into(),
            missing: vec!["config.json".into(), "tokenizer.json".into()],
            found: vec!["notes.txt".into()],
        });
        assert_eq!(
            (error.code, error.detail.as_deref()),
            (ErrorCode::InvalidModel, Some("missing"))
        );
        assert_eq!(error.params["missing"], "config.json, tokenizer.json");
        for (error, detail) in [
            (
                hearth_hub::Error::Stalled {
                    file: "model.q4nx".into(),
                    secs: 30,
                    attempts: 3,
                },
                "stalled",
            ),
            (
                hearth_hub::Error::DiskFull {
                    path: "/data/model.q4nx".into(),
                },
                "full",
            ),
            (
                hearth_hub::Error::ChecksumMismatch {
                    file: "model.q4nx".into(),
                    algorithm: "sha256",
                    expected: "a".into(),
                    actual: "b".into(),
                },
                "damaged",
            ),
        ] {
            assert_eq!(Error::from(error).detail.as_deref(), Some(detail));
        }
    }

    #[test]
    fn backend_codes_match_the_chat_crates_names() {
        // The server reports `BackendError::code()`; the app's enum must say the same word.
        for error in [
            BackendError::failed(FailureKind::Auth, "no"),
            BackendError::failed(FailureKind::Cut, "cut"),
            BackendError::Unsupported("x".into()),
        ] {
            let code = serde_json::to_value(ErrorCode::from(&error)).unwrap();
            assert_eq!(code, error.code(), "{error}");
        }
    }
}
