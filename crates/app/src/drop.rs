//! Files dropped on the window, classified once for every front end: a model to import,
//! documents to attach, a picture, or neither, with why in plain words.
//!
//! The paths come from the window system and stay here, under a single-use token; the front
//! end gets a [`Dropped`] (the kind, the names, what is left out and why, the token) and acts by
//! token ([`crate::App::attach_dropped`], [`crate::App::import_dropped`]), never by path.
//!
//! A drop gets one action. Documents come first: attaching is quick and undone in a click,
//! where an import converts gigabytes, so a model picked up with some documents is left for a
//! drop of its own. Then a model, one at a time. Pictures are recognised so that reading them
//! can be built on this, but Hearth does not read them yet. Whatever is not acted on is listed
//! in [`Dropped::left`] with its [`LeftOut`] reason.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::documents::file_name;
use crate::error::{Error, ErrorCode, Result};
use crate::lock::lock;

/// The window event that carries a [`Dropped`].
pub const DROP_EVENT: &str = "dropped";

/// Picture extensions (lowercase): recognised, not read yet.
const PICTURE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "gif", "bmp", "tif", "tiff", "heic", "heif", "avif",
];

/// What a drop is, as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum DropKind {
    /// A model to import: a `.gguf` file, or a folder holding a model.
    Model,
    /// Files Hearth reads, to attach to the open conversation.
    Documents,
    /// Pictures, which Hearth does not read yet.
    Picture,
    /// Nothing Hearth can use (or nothing at all).
    Neither,
}

/// Why a dropped file or folder is not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum LeftOut {
    /// A model dropped with documents: the documents are attached; drop the model on its own
    /// to import it.
    ModelWithDocuments,
    /// A second model: one is imported at a time.
    AnotherModel,
    /// A picture: Hearth does not read pictures yet.
    Picture,
    /// A folder that holds no model: Hearth reads files, not folders.
    Folder,
    /// A file of a kind Hearth does not read.
    Unknown,
}

/// A dropped file or folder that is not acted on, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LeftFile {
    /// Its name, without its folder.
    pub name: String,
    /// Why it is left.
    pub why: LeftOut,
}

/// A drop as the front end sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Dropped {
    /// What the drop is.
    pub kind: DropKind,
    /// The names of the files acted on (the model, the documents, the pictures), without
    /// their folders.
    pub names: Vec<String>,
    /// What the drop also held that is not acted on, and why.
    pub left: Vec<LeftFile>,
    /// What is done and what is not, in plain words (English; the desktop says it from its
    /// catalog, by `kind`, `names` and `left`).
    pub reason: String,
    /// Names the model or the documents for the one action taken on them (single-use); None
    /// for a picture or nothing usable.
    pub token: Option<String>,
}

/// A drop sorted into what it is, with the paths to act on.
#[derive(Debug, PartialEq)]
struct Sorted {
    kind: DropKind,
    acted: Vec<PathBuf>,
    left: Vec<LeftFile>,
}

/// Sorts dropped `paths` (see the module doc for the order of preference).
fn sort(paths: &[PathBuf]) -> Sorted {
    let (mut models, mut documents, mut pictures, mut other) = (vec![], vec![], vec![], vec![]);
    for path in paths {
        if is_model(path) {
            models.push(path.clone());
        } else if path.is_dir() {
            other.push(LeftFile {
                name: file_name(path),
                why: LeftOut::Folder,
            });
        } else if hearth_documents::Format::from_path(path).is_some() {
            documents.push(path.clone());
        } else if has_extension(path, PICTURE_EXTENSIONS) {
            pictures.push(path.clone());
        } else {
            other.push(LeftFile {
                name: file_name(path),
                why: LeftOut::Unknown,
            });
        }
    }
    let left_as = |paths: &[PathBuf], why: LeftOut| -> Vec<LeftFile> {
        paths
            .iter()
            .map(|p| LeftFile {
                name: file_name(p),
                why,
            })
            .collect()
    };
    let (kind, acted, mut left) = if !documents.is_empty() {
        let mut left = left_as(&models, LeftOut::ModelWithDocuments);
        left.extend(left_as(&pictures, LeftOut::Picture));
        (DropKind::Documents, documents, left)
    } else if let Some((model, more)) = models.split_first() {
        let mut left = left_as(more, LeftOut::AnotherModel);
        left.extend(left_as(&pictures, LeftOut::Picture));
        (DropKind::Model, vec![model.clone()], left)
    } else if !pictures.is_empty() {
        (DropKind::Picture, pictures, Vec::new())
    } else {
        (DropKind::Neither, Vec::new(), Vec::new())
    };
    left.extend(other);
    Sorted { kind, acted, left }
}

/// A `.gguf` file, or a folder holding a model (its `config.json`, or a `.gguf` file). The
/// import checks the files themselves and says plainly when they are not a model.
fn is_model(path: &Path) -> bool {
    if path.is_dir() {
        if path.join("config.json").is_file() {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            return false;
        };
        return entries
            .filter_map(|e| e.ok())
            .any(|e| e.path().is_file() && has_extension(&e.path(), &["gguf"]));
    }
    has_extension(path, &["gguf"])
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.contains(&e.to_ascii_lowercase().as_str()))
}

/// What is done with a drop and what is not, in plain words.
fn reason(kind: DropKind, names: &[String], left: &[LeftFile]) -> String {
    let mut out = match kind {
        DropKind::Model => format!("{} is imported as a model.", names.join(", ")),
        DropKind::Documents => format!(
            "{} attached to the conversation.",
            match names {
                [one] => format!("{one} is"),
                _ => format!("{} are", names.join(", ")),
            }
        ),
        DropKind::Picture => format!(
            "Hearth does not read pictures yet, so {} {} not attached.",
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" }
        ),
        DropKind::Neither if left.is_empty() => "Nothing was dropped.".to_string(),
        DropKind::Neither => "Hearth can use none of the dropped files: it reads documents \
                              (PDF, Word, text and the like) and imports models (.gguf files or \
                              model folders)."
            .to_string(),
    };
    for file in left {
        let why = match file.why {
            LeftOut::ModelWithDocuments => "is not imported: drop a model on its own to import it",
            LeftOut::AnotherModel => "is not imported: drop one model at a time",
            LeftOut::Picture => "is not attached: Hearth does not read pictures yet",
            LeftOut::Folder => "is a folder without a model: drop the files in it instead",
            LeftOut::Unknown => "is not a kind of file Hearth reads",
        };
        out.push_str(&format!(" {} {why}.", file.name));
    }
    out
}

/// Drops waiting for the front end to act on them, by token.
#[derive(Default)]
pub struct Drops {
    waiting: Mutex<HashMap<String, (DropKind, Vec<PathBuf>)>>,
    /// Drops so far, to make each token new.
    count: AtomicU64,
}

impl Drops {
    /// Classifies a drop of `paths` (from the window system, never from the web view) and
    /// keeps the paths to act on under a new token.
    pub fn register(&self, paths: &[PathBuf]) -> Dropped {
        let Sorted { kind, acted, left } = sort(paths);
        let names: Vec<String> = acted.iter().map(|p| file_name(p)).collect();
        let token = matches!(kind, DropKind::Model | DropKind::Documents).then(|| {
            let token = format!("drop-{}", self.count.fetch_add(1, Ordering::Relaxed));
            lock(&self.waiting).insert(token.clone(), (kind, acted));
            token
        });
        Dropped {
            reason: reason(kind, &names, &left),
            kind,
            names,
            left,
            token,
        }
    }

    /// The paths of the drop `token`, once, when it is a drop of `kind`; a token used, never
    /// given or of another kind is an error.
    pub fn take(&self, token: &str, kind: DropKind) -> Result<Vec<PathBuf>> {
        let mut waiting = lock(&self.waiting);
        match waiting.get(token) {
            Some((held, _)) if *held == kind => {
                Ok(waiting.remove(token).map(|(_, p)| p).unwrap_or_default())
            }
            Some((held, _)) => Err(Error::invalid(format!(
                "That drop holds {}, not {}. Drop the files again.",
                what(*held),
                what(kind)
            ))),
            None => Err(Error::new(
                ErrorCode::NotFound,
                "Those dropped files were already used or are no longer known. Drop them again.",
            )),
        }
    }
}

fn what(kind: DropKind) -> &'static str {
    match kind {
        DropKind::Model => "a model",
        DropKind::Documents => "documents",
        DropKind::Picture => "pictures",
        DropKind::Neither => "nothing Hearth uses",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder with `files` (a name ending in `/` is a folder), and their paths.
    fn dropped(files: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>) {
        let dir = tempfile::tempdir().unwrap();
        let paths = files
            .iter()
            .map(|name| {
                let path = dir.path().join(name.trim_end_matches('/'));
                if name.ends_with('/') {
                    std::fs::create_dir_all(&path).unwrap();
                } else {
                    std::fs::write(&path, b"x").unwrap();
                }
                path
            })
            .collect();
        (dir, paths)
    }

    fn left(sorted: &Sorted) -> Vec<(String, LeftOut)> {
        sorted
            .left
            .iter()
            .map(|f| (f.name.clone(), f.why))
            .collect()
    }

    #[test]
    fn a_gguf_file_is_a_model() {
        let (_dir, paths) = dropped(&["Qwen3-0.6B.Q4_1.GGUF"]);
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Model);
        assert_eq!(sorted.acted, paths);
        assert!(sorted.left.is_empty());
    }

    #[test]
    fn a_folder_holding_a_model_is_a_model() {
        let (dir, paths) = dropped(&["SmolLM2/", "LlamaFolder/"]);
        std::fs::write(dir.path().join("SmolLM2/config.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("LlamaFolder/llama.gguf"), b"GGUF").unwrap();
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Model);
        assert_eq!(sorted.acted, paths[..1]);
        assert_eq!(
            left(&sorted),
            [("LlamaFolder".to_string(), LeftOut::AnotherModel)],
            "one model is imported at a time"
        );
    }

    #[test]
    fn a_folder_without_a_model_is_neither() {
        let (dir, paths) = dropped(&["holiday/"]);
        std::fs::write(dir.path().join("holiday/notes.md"), b"#").unwrap();
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Neither);
        assert_eq!(left(&sorted), [("holiday".to_string(), LeftOut::Folder)]);
    }

    #[test]
    fn files_hearth_reads_are_documents() {
        let (_dir, paths) = dropped(&["contract.PDF", "notes.md", "main.rs"]);
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Documents);
        assert_eq!(sorted.acted, paths);
    }

    #[test]
    fn a_mixed_drop_attaches_the_documents_and_says_the_model_is_not_imported() {
        let (_dir, paths) = dropped(&["qwen.gguf", "report.pdf", "photo.jpg", "song.mp3"]);
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Documents);
        assert_eq!(sorted.acted, paths[1..2]);
        assert_eq!(
            left(&sorted),
            [
                ("qwen.gguf".to_string(), LeftOut::ModelWithDocuments),
                ("photo.jpg".to_string(), LeftOut::Picture),
                ("song.mp3".to_string(), LeftOut::Unknown),
            ]
        );
        let names = vec!["report.pdf".to_string()];
        let said = reason(sorted.kind, &names, &sorted.left);
        assert!(said.starts_with("report.pdf is attached"), "{said}");
        assert!(
            said.contains("qwen.gguf is not imported: drop a model on its own"),
            "{said}"
        );
    }

    #[test]
    fn pictures_are_recognised_and_not_read_yet() {
        let (_dir, paths) = dropped(&["cat.png", "dog.webp"]);
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Picture);
        assert_eq!(sorted.acted, paths);
        let said = reason(sorted.kind, &["cat.png".into()], &[]);
        assert!(said.contains("does not read pictures yet"), "{said}");
    }

    #[test]
    fn unknown_files_and_an_empty_drop_are_neither() {
        let (_dir, paths) = dropped(&["setup.exe", "README"]);
        let sorted = sort(&paths);
        assert_eq!(sorted.kind, DropKind::Neither);
        assert_eq!(
            left(&sorted),
            [
                ("setup.exe".to_string(), LeftOut::Unknown),
                ("README".to_string(), LeftOut::Unknown)
            ]
        );
        let empty = sort(&[]);
        assert_eq!(empty.kind, DropKind::Neither);
        assert_eq!(reason(empty.kind, &[], &empty.left), "Nothing was dropped.");
    }

    #[test]
    fn a_token_gives_its_paths_once_and_only_for_its_kind() {
        let (_dir, paths) = dropped(&["notes.md"]);
        let drops = Drops::default();
        let drop = drops.register(&paths);
        assert_eq!(drop.kind, DropKind::Documents);
        assert_eq!(drop.names, ["notes.md"]);
        let token = drop.token.expect("documents are kept under a token");
        let wrong = drops.take(&token, DropKind::Model).unwrap_err();
        assert_eq!(wrong.code, ErrorCode::InvalidInput, "{}", wrong.message);
        assert_eq!(drops.take(&token, DropKind::Documents).unwrap(), paths);
        let again = drops.take(&token, DropKind::Documents).unwrap_err();
        assert_eq!(again.code, ErrorCode::NotFound);
    }

    #[test]
    fn pictures_and_unusable_drops_keep_nothing() {
        let (_dir, paths) = dropped(&["cat.png", "song.mp3"]);
        let drops = Drops::default();
        assert_eq!(drops.register(&paths[..1]).token, None);
        assert_eq!(drops.register(&paths[1..]).token, None);
        assert!(lock(&drops.waiting).is_empty());
    }
}
