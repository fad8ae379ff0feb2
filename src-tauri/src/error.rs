//! The one error commands return to the UI: the app's [`hearth_app::Error`], which serializes
//! as `{ "code", "message", "detail", "params" }` with the code a snake_case word (the UI
//! translates by code, detail and params; the message is the English text).

pub use hearth_app::{Error as CommandError, ErrorCode};

/// Result of a command.
pub type CommandResult<T> = Result<T, CommandError>;

/// The error of a command whose work panicked or was cancelled by the runtime.
pub fn internal(error: impl std::fmt::Display) -> CommandError {
    CommandError::new(
        ErrorCode::Internal,
        format!(
            "Hearth hit an internal error ({error}). Try again; if it repeats, restart the app."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_as_code_and_message() {
        let error = CommandError::new(ErrorCode::Busy, "An answer is already being written.");
        let json = serde_json::to_value(&error).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "busy", "message": "An answer is already being written.", "detail": null, "params": {}}),
            "the UI reads exactly these fields"
        );
    }
}
