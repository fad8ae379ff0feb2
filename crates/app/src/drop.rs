//! Files dropped on the window (or a folder picked), classified once for every front end: a
//! model to import, documents to attach (a folder of them too), or neither, with why in plain
//! words.
//!
//! The paths come from the window system and stay here, under a single-use token; the front
//! end gets a [`Dropped`] (the kind, the names, what is left out and why, what each folder gave,
//! the token) and acts by token ([`crate::App::attach_dropped`], [`crate::App::import_dropped`]),
//! never by path.
//!
//! A drop gets one action. Documents come first: attaching is quick and undone in a click,
//! where an import converts gigabytes, so a model picked up with some documents is left for a
//! drop of its own. Then a model, one at a time. A folder is a model when it holds one (its
//! `config.json` or a `.gguf` file); any other folder is looked through for the documents in it
//! ([`folder::walk`], bounded in files, depth, bytes and entries, links kept inside it).
//! Pictures are documents: their text is read through OCR (or refused plainly where no OCR
//! language is installed) until models that see pictures get them. Whatever is not acted on is
//! listed in [`Dropped::left`] with its [`LeftOut`] reason.

pub mod folder;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::documents::file_name;
use crate::error::{Error, ErrorCode, Result};
use crate::lock::lock;
use folder::{FolderLimits, FolderReport};

/// The window event that carries a [`Dropped`].
pub const DROP_EVENT: &str = "dropped";

/// Picture extensions (lowercase): attached as documents, their text read through OCR.
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
    /// Files Hearth reads (documents and pictures, loose or in folders), to attach to the open
    /// conversation.
    Documents,
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
    /// A folder that holds neither a model nor any file Hearth reads.
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
    /// The names of what is acted on (the model; the documents and the folders they came
    /// from), without their folders.
    pub names: Vec<String>,
    /// What the drop also held that is not acted on, and why.
    pub left: Vec<LeftFile>,
    /// Each folder of documents: the files it gave, and those skipped and why.
    pub folders: Vec<FolderReport>,
    /// What is done and what is not, in plain words (English; the desktop says it from its
    /// catalog, by `kind`, `names`, `left` and `folders`).
    pub reason: String,
    /// Names the model or the documents for the one action taken on them (single-use); None
    /// when nothing is usable.
    pub token: Option<String>,
}

/// A drop sorted into what it is, with the paths to act on.
#[derive(Debug, PartialEq)]
struct Sorted {
    kind: DropKind,
    acted: Vec<PathBuf>,
    /// The names of what is acted on: files, and folders by their own name.
    names: Vec<String>,
    left: Vec<LeftFile>,
    folders: Vec<FolderReport>,
}

/// Sorts dropped `paths` (see the module doc for the order of preference), looking into each
/// folder of documents within `limits` (each folder has its own).
fn sort(paths: &[PathBuf], limits: &FolderLimits) -> Sorted {
    let (mut models, mut documents, mut names, mut other) = (vec![], vec![], vec![], vec![]);
    let mut folders = Vec::new();
    for path in paths {
        if is_model(path) {
            models.push(path.clone());
        } else if path.is_dir() {
            let (files, report) = folder::walk(path, limits);
            if files.is_empty() {
                other.push(LeftFile {
                    name: file_name(path),
                    why: LeftOut::Folder,
                });
            } else {
                names.push(file_name(path));
                documents.extend(files);
            }
            folders.push(report);
        } else if folder::is_document(path) {
            names.push(file_name(path));
            documents.push(path.clone());
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
    let (kind, acted, names, mut left) = if !documents.is_empty() {
        let left = left_as(&models, LeftOut::ModelWithDocuments);
        (DropKind::Documents, documents, names, left)
    } else if let Some((model, more)) = models.split_first() {
        let left = left_as(more, LeftOut::AnotherModel);
        (
            DropKind::Model,
            vec![model.clone()],
            vec![file_name(model)],
            left,
        )
    } else {
        (DropKind::Neither, Vec::new(), Vec::new(), Vec::new())
    };
    left.extend(other);
    Sorted {
        kind,
        acted,
        names,
        left,
        folders,
    }
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
        // Bounded like a folder of documents: a model folder names its weights near the top.
        return entries
            .take(FolderLimits::default().max_entries)
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
fn reason(kind: DropKind, names: &[String], left: &[LeftFile], folders: &[FolderReport]) -> String {
    let mut out = match kind {
        DropKind::Model => format!("{} is imported as a model.", names.join(", ")),
        DropKind::Documents => format!(
            "{} attached to the conversation.",
            match names {
                [one] => format!("{one} is"),
                _ => format!("{} are", names.join(", ")),
            }
        ),
        DropKind::Neither if left.is_empty() => "Nothing was dropped.".to_string(),
        DropKind::Neither => "Hearth can use none of the dropped files: it reads documents \
                              (PDF, Word, text, pictures of pages and the like) and imports \
                              models (.gguf files or model folders)."
            .to_string(),
    };
    for report in folders {
        out.push(' ');
        out.push_str(&folder_sentence(report));
    }
    for file in left {
        let why = match file.why {
            LeftOut::ModelWithDocuments => "is not imported: drop a model on its own to import it",
            LeftOut::AnotherModel => "is not imported: drop one model at a time",
            LeftOut::Folder => "is a folder holding no model and no file Hearth reads",
            LeftOut::Unknown => "is not a kind of file Hearth reads",
        };
        out.push_str(&format!(" {} {why}.", file.name));
    }
    out
}

/// "Tax papers: 12 files attached; 3 skipped: 2 are not documents Hearth reads, 1 is too
/// large."
fn folder_sentence(report: &FolderReport) -> String {
    use folder::{CutWhy, Skip};
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut out = format!(
        "{}: {} attached",
        report.name,
        plural(report.files, "file", "files")
    );
    let total: usize = report.skipped.iter().map(|s| s.count).sum();
    if total > 0 {
        let reasons: Vec<String> = report
            .skipped
            .iter()
            .map(|s| {
                let (one, many) = match s.why {
                    Skip::NotDocument => (
                        "is not a document Hearth reads",
                        "are not documents Hearth reads",
                    ),
                    Skip::TooLarge => ("is too large", "are too large"),
                    Skip::Hidden => ("is hidden", "are hidden"),
                    Skip::LinkOutside => {
                        ("is a link out of the folder", "are links out of the folder")
                    }
                    Skip::Repeated => ("is there twice", "are there twice"),
                    Skip::Unreadable => ("could not be opened", "could not be opened"),
                    Skip::NotAFile => ("is not a file", "are not files"),
                };
                format!("{} {}", s.count, if s.count == 1 { one } else { many })
            })
            .collect();
        out.push_str(&format!("; {total} skipped: {}", reasons.join(", ")));
    }
    for cut in &report.cuts {
        out.push_str(&match cut.why {
            CutWhy::Files => format!("; only the first {} files are taken", cut.limit),
            CutWhy::Depth => format!("; folders more than {} deep are left", cut.limit),
            CutWhy::Bytes => format!("; only the first {} MiB are taken", cut.limit >> 20),
            CutWhy::Entries => format!(
                "; it holds more than {} entries, so only those were looked at",
                cut.limit
            ),
        });
    }
    out.push('.');
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
        let Sorted {
            kind,
            acted,
            names,
            left,
            folders,
        } = sort(paths, &FolderLimits::default());
        let token = matches!(kind, DropKind::Model | DropKind::Documents).then(|| {
            let token = format!("drop-{}", self.count.fetch_add(1, Ordering::Relaxed));
            lock(&self.waiting).insert(token.clone(), (kind, acted));
            token
        });
        Dropped {
            reason: reason(kind, &names, &left, &folders),
            kind,
            names,
            left,
            folders,
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
        DropKind::Neither => "nothing Hearth uses",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use folder::{CutWhy, Skip};

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

    fn sorted(paths: &[PathBuf]) -> Sorted {
        sort(paths, &FolderLimits::default())
    }

    fn left(sorted: &Sorted) -> Vec<(String, LeftOut)> {
        sorted
            .left
            .iter()
            .map(|f| (f.name.clone(), f.why))
            .collect()
    }

    fn said(sorted: &Sorted) -> String {
        reason(sorted.kind, &sorted.names, &sorted.left, &sorted.folders)
    }

    #[test]
    fn a_gguf_file_is_a_model() {
        let (_dir, paths) = dropped(&["Qwen3-0.6B.Q4_1.GGUF"]);
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Model);
        assert_eq!(sorted.acted, paths);
        assert!(sorted.left.is_empty());
    }

    #[test]
    fn a_folder_holding_a_model_is_a_model() {
        let (dir, paths) = dropped(&["SmolLM2/", "LlamaFolder/"]);
        std::fs::write(dir.path().join("SmolLM2/config.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("LlamaFolder/llama.gguf"), b"GGUF").unwrap();
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Model);
        assert_eq!(sorted.acted, paths[..1]);
        assert_eq!(
            left(&sorted),
            [("LlamaFolder".to_string(), LeftOut::AnotherModel)],
            "one model is imported at a time"
        );
    }

    #[test]
    fn a_folder_of_documents_attaches_the_files_inside_and_says_what_was_skipped() {
        let (dir, paths) = dropped(&["Tax papers/"]);
        for name in [
            "2023/receipt.pdf",
            "notes.md",
            "letter.docx",
            "setup.exe",
            "a.zip",
        ] {
            let path = dir.path().join("Tax papers").join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
        let sorted = sorted(&paths);
        assert_eq!(
            sorted.kind,
            DropKind::Documents,
            "not a model: no name rule"
        );
        assert_eq!(sorted.acted.len(), 3);
        assert_eq!(sorted.names, ["Tax papers"]);
        assert_eq!(sorted.folders.len(), 1);
        assert_eq!(sorted.folders[0].files, 3);
        let said = said(&sorted);
        assert_eq!(
            said,
            "Tax papers is attached to the conversation. Tax papers: 3 files attached; 2 \
             skipped: 2 are not documents Hearth reads."
        );
    }

    #[test]
    fn a_folder_with_nothing_hearth_reads_is_left_and_said() {
        let (dir, paths) = dropped(&["holiday/"]);
        std::fs::write(dir.path().join("holiday/song.mp3"), b"ID3").unwrap();
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Neither);
        assert_eq!(left(&sorted), [("holiday".to_string(), LeftOut::Folder)]);
        assert_eq!(sorted.folders[0].skipped[0].why, Skip::NotDocument);
    }

    #[test]
    fn files_hearth_reads_and_pictures_are_documents() {
        let (_dir, paths) = dropped(&["contract.PDF", "notes.md", "main.rs", "scan.jpg"]);
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Documents);
        assert_eq!(sorted.acted, paths, "a picture is read through OCR");
    }

    #[test]
    fn a_mixed_drop_attaches_the_documents_and_folders_and_says_the_model_is_not_imported() {
        let (dir, paths) = dropped(&[
            "qwen.gguf",
            "report.pdf",
            "photo.jpg",
            "song.mp3",
            "letters/",
        ]);
        std::fs::write(dir.path().join("letters/one.txt"), b"x").unwrap();
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Documents);
        assert_eq!(
            sorted.acted,
            [
                paths[1].clone(),
                paths[2].clone(),
                dir.path().join("letters/one.txt")
            ]
        );
        assert_eq!(sorted.names, ["report.pdf", "photo.jpg", "letters"]);
        assert_eq!(
            left(&sorted),
            [
                ("qwen.gguf".to_string(), LeftOut::ModelWithDocuments),
                ("song.mp3".to_string(), LeftOut::Unknown),
            ]
        );
        let said = said(&sorted);
        assert!(
            said.starts_with("report.pdf, photo.jpg, letters are attached"),
            "{said}"
        );
        assert!(
            said.contains("qwen.gguf is not imported: drop a model on its own"),
            "{said}"
        );
    }

    #[test]
    fn unknown_files_and_an_empty_drop_are_neither() {
        let (_dir, paths) = dropped(&["setup.exe", "README"]);
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Neither);
        assert_eq!(
            left(&sorted),
            [
                ("setup.exe".to_string(), LeftOut::Unknown),
                ("README".to_string(), LeftOut::Unknown)
            ]
        );
        let empty = sort(&[], &FolderLimits::default());
        assert_eq!(empty.kind, DropKind::Neither);
        assert_eq!(said(&empty), "Nothing was dropped.");
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_with_a_link_loop_is_taken_once_and_the_drop_goes_on() {
        let (dir, paths) = dropped(&["loop/", "other.md"]);
        std::fs::write(dir.path().join("loop/a.txt"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("loop"), dir.path().join("loop/me")).unwrap();
        let sorted = sorted(&paths);
        assert_eq!(sorted.kind, DropKind::Documents);
        assert_eq!(
            sorted.acted,
            [dir.path().join("loop/a.txt"), paths[1].clone()],
            "nothing else of the drop is lost"
        );
        assert_eq!(sorted.folders[0].skipped[0].why, Skip::Repeated);
    }

    #[test]
    fn a_folder_cut_by_a_bound_says_so() {
        let (dir, paths) = dropped(&["many/"]);
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("many/{i}.txt")), b"x").unwrap();
        }
        let sorted = sort(
            &paths,
            &FolderLimits {
                max_files: 3,
                ..FolderLimits::default()
            },
        );
        assert_eq!(sorted.acted.len(), 3);
        assert_eq!(sorted.folders[0].cuts[0].why, CutWhy::Files);
        let said = said(&sorted);
        assert!(said.contains("only the first 3 files are taken"), "{said}");
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
    fn unusable_drops_keep_nothing() {
        let (_dir, paths) = dropped(&["song.mp3", "empty/"]);
        let drops = Drops::default();
        assert_eq!(drops.register(&paths).token, None);
        assert!(lock(&drops.waiting).is_empty());
    }
}
