//! The one error type of the hub: each variant says what failed, on which file or value, and
//! what the user can do about it.

use std::path::PathBuf;

/// Everything that can go wrong while finding, downloading, verifying or registering a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file system operation failed.
    #[error("hub: could not {action} {path}: {source}")]
    Io {
        /// What was being done ("create", "read", "rename to ...").
        action: String,
        /// The file or folder it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// The network request could not be made or was cut off for good.
    #[error("hub: could not reach {url}: {detail}. Check the network connection (or HF_ENDPOINT), then run the same command again: the download resumes where it stopped")]
    Network {
        /// The URL asked for.
        url: String,
        /// What the HTTP layer said.
        detail: String,
    },

    /// The Hub has no such repository or revision.
    #[error("hub: {repo} (revision {revision}) was not found on {endpoint}. Check the spelling (owner/name); a private or gated repository also needs HF_TOKEN set")]
    RepoNotFound {
        /// The `owner/name` asked for.
        repo: String,
        /// The branch, tag or commit asked for.
        revision: String,
        /// The Hub address used.
        endpoint: String,
    },

    /// The Hub refused access (gated or private repository).
    #[error("hub: access to {repo} was refused (HTTP {status}). If the model is gated, accept its license on the Hub's web page and set HF_TOKEN to a token of yours")]
    AccessDenied {
        /// The `owner/name` asked for.
        repo: String,
        /// The HTTP status returned.
        status: u16,
    },

    /// The Hub answered with a status Hearth cannot continue after.
    #[error("hub: {url} answered HTTP {status}. Try again later; if it persists the repository may have changed")]
    HttpStatus {
        /// The URL asked for.
        url: String,
        /// The HTTP status returned.
        status: u16,
    },

    /// The Hub's answer could not be understood.
    #[error("hub: unexpected answer from {url}: {detail}")]
    BadResponse {
        /// The URL asked for.
        url: String,
        /// What was wrong with it.
        detail: String,
    },

    /// The repository does not hold the files of a model Hearth can run.
    #[error("hub: {repo} does not hold a model Hearth can use: missing {}. It has: {}. Hearth needs config.json, tokenizer.json and the weights as model.q4nx or safetensors", missing.join(", "), if found.is_empty() { "no files".to_string() } else { found.join(", ") })]
    MissingFiles {
        /// The repository or folder looked at.
        repo: String,
        /// The files that were expected and are not there.
        missing: Vec<String>,
        /// The files that are there.
        found: Vec<String>,
    },

    /// Not enough free disk space to start (checked before any byte is written).
    #[error("hub: not enough free disk space in {path}: the download needs {} more, only {} is free. Free some space (or remove a model with `hearth rm`) and try again", crate::human_bytes(*needed), crate::human_bytes(*available))]
    NotEnoughDisk {
        /// The folder the files would go to.
        path: PathBuf,
        /// Bytes still to be written (plus the safety reserve).
        needed: u64,
        /// Bytes free for this user on that file system.
        available: u64,
    },

    /// The disk filled up while writing.
    #[error("hub: the disk is full while writing {path}. Free some space and run the same command again: the download resumes where it stopped")]
    DiskFull {
        /// The file being written.
        path: PathBuf,
    },

    /// A downloaded file does not match the checksum the Hub published for it.
    #[error("hub: {file} is corrupted: its {algorithm} is {actual} but the Hub says {expected}. The broken file was deleted and nothing was registered; run the same command again to download it afresh")]
    ChecksumMismatch {
        /// The file name in the repository.
        file: String,
        /// "sha256" (LFS files) or "git sha1" (small files).
        algorithm: &'static str,
        /// The checksum the Hub published.
        expected: String,
        /// The checksum of the bytes received.
        actual: String,
    },

    /// A model's kernel list (model_info.json) and its kernel files disagree.
    #[error("hub: the NPU kernels of {origin} do not match its kernel list (model_info.json): {detail}. Nothing was registered: the model's publisher has to fix the list or the kernels; until then use another revision or model")]
    KernelMismatch {
        /// The repository or folder.
        origin: String,
        /// Which kernel, and how it differs.
        detail: String,
    },

    /// The Hub's metadata contradicts itself or the bytes received.
    #[error("hub: {file}: {detail}. Nothing was registered; run the same command again")]
    MetadataMismatch {
        /// The file name in the repository.
        file: String,
        /// What disagreed.
        detail: String,
    },

    /// No data arrived for too long, several times in a row.
    #[error("hub: the download of {file} stalled: no data for {secs} s after {attempts} attempts. Check the network connection, then run the same command again: it resumes where it stopped")]
    Stalled {
        /// The file being downloaded.
        file: String,
        /// Seconds without any data.
        secs: u64,
        /// Attempts made.
        attempts: u32,
    },

    /// Offline mode forbids the network access that was needed.
    #[error("hub: offline mode is on, so {what} cannot be downloaded. Connect to the network and run again without --offline (and without HEARTH_OFFLINE / HF_HUB_OFFLINE)")]
    Offline {
        /// What would have been fetched.
        what: String,
    },

    /// Another process is downloading the same model right now.
    #[error("hub: {name} is already being downloaded by another Hearth process. Wait for it to finish, or stop it first")]
    AlreadyDownloading {
        /// The model's name.
        name: String,
    },

    /// No registered model has that name.
    #[error("hub: no installed model is called {name}. `hearth list` shows the installed models")]
    NotInstalled {
        /// The name asked for.
        name: String,
    },

    /// A linked model's GGUF file is not where it was, or is not the file it was (issue 49).
    #[error("hub: {name}: {} was moved or changed since you added it: find it, or remove it (`hearth import --relink {name} FILE`, or `hearth rm {name}`, which deletes only Hearth's small folder, never the file)", file.display())]
    LinkedFileGone {
        /// The model's name.
        name: String,
        /// Where the file was when it was added.
        file: std::path::PathBuf,
    },

    /// The file picked to find a linked model's GGUF again is another model.
    #[error("hub: {} is a different file from the one {name} was added from (its header is not the same), so {name} was left as it was. Pick the file you added, or add this one as a new model", file.display())]
    DifferentFile {
        /// The linked model.
        name: String,
        /// The file picked.
        file: std::path::PathBuf,
    },

    /// The model is not a linked GGUF, so it has no file to find again.
    #[error("hub: {name} is not a linked GGUF file (its files are in Hearth's folder), so there is no file to find for it")]
    NotLinked {
        /// The model's name.
        name: String,
    },

    /// The query is neither a catalog model nor an `owner/repo`.
    #[error("hub: {query} is not a model Hearth knows. Use one of: {} — or any Hugging Face repository as owner/name", known.join(", "))]
    UnknownModel {
        /// What the user typed.
        query: String,
        /// The catalog's ids.
        known: Vec<String>,
    },

    /// The model folder is complete but its weights are not valid.
    #[error("hub: {} is not a valid model: {reason}. Nothing was registered", dir.display())]
    InvalidModel {
        /// The folder checked.
        dir: PathBuf,
        /// What `q4nx` (or the file check) found wrong.
        reason: String,
    },

    /// `import --move` of a folder inside Hearth's own store (a registered model's folder).
    #[error("hub: {} is inside Hearth's model store, and moving its files would empty a model that stays registered. Import it without --move (its files are copied), or remove the old model with `hearth rm` after a copy", dir.display())]
    MoveFromStore {
        /// The folder asked to be moved.
        dir: PathBuf,
    },

    /// The model folder is complete but failed the store's model check (its chat template).
    #[error("hub: {name} was refused and nothing was registered: {reason}")]
    RefusedModel {
        /// The model's name.
        name: String,
        /// Why, from the check.
        reason: String,
    },

    /// A pause or cancel arrived while waiting for the Hub's answer.
    #[error("hub: stopped on request ({request:?}) while waiting for the Hub")]
    Stopped {
        /// What was asked: pause or cancel.
        request: crate::progress::Request,
    },

    /// A GGUF file could not be converted to a Q4NX model.
    #[error("hub: could not import {}: {reason}. Nothing was registered", file.display())]
    Gguf {
        /// The GGUF file.
        file: PathBuf,
        /// What the converter found.
        reason: String,
    },

    /// A name that cannot be a model folder.
    #[error("hub: {name:?} cannot be a model name: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },

    /// A name already used by another installed model.
    #[error("hub: a model called {name} is already installed. Remove it first (`hearth rm {name}`) or choose another name")]
    NameTaken {
        /// The name in use.
        name: String,
    },

    /// `models/<name>` exists but is not a registered model, so it may be the user's.
    #[error("hub: the folder {} already exists and is not a model Hearth installed, so it was left alone. Move it away or choose another name (--name)", path.display())]
    FolderExists {
        /// The name asked for.
        name: String,
        /// The folder in the way.
        path: PathBuf,
    },

    /// The registry file exists but cannot be understood.
    #[error("hub: the model registry {} cannot be read: {detail}. Fix or move the file away; Hearth writes a new one", path.display())]
    Registry {
        /// The registry file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },

    /// The committed catalog is malformed (a build problem, not a user one).
    #[error("hub: the built-in catalog is malformed: {0}")]
    Catalog(String),
}

impl Error {
    /// Wraps an I/O error with the action and path, mapping "no space left" to [`Error::DiskFull`].
    pub(crate) fn io(
        action: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::DiskFull { path },
            _ => Error::Io {
                action: action.into(),
                path,
                source,
            },
        }
    }
}

/// Result with the hub's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
