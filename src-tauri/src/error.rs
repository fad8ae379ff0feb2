//! The one error type commands return to the UI: a stable `code` and a `message` for people.

use serde::Serialize;

/// An error as the UI receives it: `{ "code": "...", "message": "..." }`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[derive(ts_rs::TS)]
pub struct CommandError {
    /// Stable, machine-readable kind (`busy`, `not_found`, `invalid_input`, `model`, `storage`, ...).
    pub code: &'static str,
    /// What happened and what the user can do, in plain words.
    pub message: String,
}

impl CommandError {
    /// An error with the given code and message.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The request itself was wrong (empty text, too long, bad value).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_input", message)
    }
}

impl From<hearth_chat::conversations::StoreError> for CommandError {
    fn from(error: hearth_chat::conversations::StoreError) -> Self {
        use hearth_chat::conversations::StoreError;
        match error {
            StoreError::NotFound { .. } => Self::new("not_found", error.to_string()),
            other => Self::new("storage", other.to_string()),
        }
    }
}

impl From<hearth_chat::BackendError> for CommandError {
    /// The backend's code (`connection`, `auth`, `model_not_found`, ...) and its plain message.
    fn from(error: hearth_chat::BackendError) -> Self {
        Self::new(error.code(), error.to_string())
    }
}

impl From<hearth_backends::remote::RemoteConfigError> for CommandError {
    fn from(error: hearth_backends::remote::RemoteConfigError) -> Self {
        use hearth_backends::remote::RemoteConfigError;
        match error {
            RemoteConfigError::BadUrl(message) => Self::invalid(message),
            other => Self::new("storage", other.to_string()),
        }
    }
}

/// Result of a command.
pub type CommandResult<T> = Result<T, CommandError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_code_and_message() {
        let error = CommandError::new("busy", "An answer is already being written.");
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "busy", "message": "An answer is already being written."}),
            "the UI reads exactly these two fields"
        );
    }
}
