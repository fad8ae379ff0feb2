//! The optional JSON files of a model folder (`tokenizer_config.json`, `generation_config.json`),
//! read by the model loader and the chat template alike.

use std::path::Path;

use crate::Error;

/// Parses an optional JSON file: `Ok(None)` when absent, an error naming the file when malformed.
pub(crate) fn read_json(path: &Path) -> Result<Option<serde_json::Value>, Error> {
    if !path.is_file() {
        return Ok(None);
    }
    let fail = |reason: String| Error::Tokenizer {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| fail(format!("not valid JSON: {e}")))
}
