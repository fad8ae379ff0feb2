//! Whether a linked model's GGUF file is still the file it was added from (issue 49), as the
//! model list shows it: a stat of the path recorded in the registry ([`LinkedFile`]), never a
//! read. The header hash is checked when the engine opens the file.

use std::path::PathBuf;

use serde::Serialize;

use crate::registry::LinkedFile;

/// Whether a linked model's GGUF file is still the one it was added from, as far as a stat can
/// tell (the header hash is checked when the engine opens it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum LinkState {
    /// The file is where it was, with the same size and modification time.
    Ready,
    /// Nothing (or no regular file) is at its path any more: moved or deleted (`ollama rm`).
    Missing,
    /// A file is there, but its size or modification time is not the one recorded.
    Changed,
}

/// A linked model's GGUF file and whether it can be read, as the model list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LinkStatus {
    /// Where the file was when it was added.
    pub file: PathBuf,
    /// Whether it is still there and the same.
    pub state: LinkState,
}

impl LinkStatus {
    /// Whether the model can be opened (its file is there and unchanged).
    pub fn is_ready(&self) -> bool {
        self.state == LinkState::Ready
    }
}

impl LinkedFile {
    /// Whether the file is still there and the same (size and modification time; no read).
    pub fn state(&self) -> LinkState {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.is_file() => {
                if meta.len() == self.size && modified_ns(&meta) == self.modified_ns {
                    LinkState::Ready
                } else {
                    LinkState::Changed
                }
            }
            _ => LinkState::Missing,
        }
    }

    /// The status the model list shows.
    pub fn status(&self) -> LinkStatus {
        LinkStatus {
            file: self.path.clone(),
            state: self.state(),
        }
    }
}

/// A file's modification time in nanoseconds since the Unix epoch, as `q4nx`'s link records
/// it (negative before 1970).
fn modified_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}
