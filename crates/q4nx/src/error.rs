//! The one error type of the crate. Every variant names the file and, where there is one, the
//! tensor, and says what was expected and what was found.

use std::path::PathBuf;

/// What went wrong while reading, validating or writing a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused a read or write.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The system error.
        source: std::io::Error,
    },
    /// The folder holds no weights file we know.
    #[error(
        "{}: no model weights found (looked for model.q4nx, gguf-link.json, \
         model.safetensors and model.safetensors.index.json); check that the model finished downloading",
        dir.display()
    )]
    NoWeights {
        /// The model folder.
        dir: PathBuf,
    },
    /// The file is shorter than its own header says it must be.
    #[error(
        "{}: file is truncated: {detail}; the file is damaged or incomplete, download or \
         convert it again",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// What was cut off.
        detail: String,
    },
    /// The JSON header of a safetensors/Q4NX file does not parse or has the wrong structure.
    #[error("{}: malformed header: {detail}", path.display())]
    MalformedHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the JSON position or the entry.
        detail: String,
    },
    /// A tensor has a dtype name the safetensors format does not define.
    #[error("{}: tensor {tensor}: unknown dtype {dtype:?}", path.display())]
    UnknownDtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The dtype as written in the header.
        dtype: String,
    },
    /// A tensor's data offsets are inconsistent with the file or with other tensors.
    #[error("{}: tensor {tensor}: {detail}", path.display())]
    BadOffsets {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Expected vs found.
        detail: String,
    },
    /// A tensor the model needs is not in the file.
    #[error(
        "{}: missing tensor {tensor}; the file does not match config.json or is incomplete",
        path.display()
    )]
    MissingTensor {
        /// The file (or folder for sharded weights).
        path: PathBuf,
        /// The missing tensor.
        tensor: String,
    },
    /// A tensor exists but has the wrong dtype, shape or tile count for the config.
    #[error("{}: tensor {tensor}: expected {expected}, found {found}", path.display())]
    WrongTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What config.json implies.
        expected: String,
        /// What the file holds.
        found: String,
    },
    /// config.json is missing, malformed, or describes a model we cannot run.
    #[error("{}: {detail}", path.display())]
    Config {
        /// The config file (or `config.json` when parsed from text).
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// model.safetensors.index.json is malformed or points at missing files.
    #[error("{}: {detail}", path.display())]
    ShardIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A GGUF file is malformed or holds something Hearth cannot convert.
    #[error("{}: {detail}", path.display())]
    Gguf {
        /// The GGUF file.
        path: PathBuf,
        /// What is wrong and, where there is one, what to do.
        detail: String,
    },
    /// A linked model's GGUF file is not where it was when it was added.
    #[error(
        "{} was moved or changed since you added it (it is not there any more): find it, or \
         remove it",
        path.display()
    )]
    LinkedFileMissing {
        /// The GGUF file the link names.
        path: PathBuf,
    },
    /// A linked model's GGUF file is there but is not the file that was added (other size,
    /// modification time or header).
    #[error(
        "{} was moved or changed since you added it ({detail}): find it, or remove it",
        path.display()
    )]
    LinkedFileChanged {
        /// The GGUF file the link names.
        path: PathBuf,
        /// What differs.
        detail: String,
    },
    /// A linked model's `gguf-link.json` is damaged.
    #[error(
        "{}: this model's link to its GGUF file is damaged ({detail}); remove the model and \
         add the file again",
        path.display()
    )]
    BadLink {
        /// The link file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A conversion cannot proceed (unsupported tensor, existing output, bad option).
    #[error("convert: {detail}")]
    Convert {
        /// What is wrong and what to do.
        detail: String,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
