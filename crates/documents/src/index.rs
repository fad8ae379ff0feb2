//! Indexing: files in, passages and vectors in the library out.
//!
//! Two stages, so that a file is searchable by keyword as soon as it is read and the slower
//! embedding follows: first every file is read, cut into passages and stored (one transaction
//! per file, which also updates its FTS5 entries); then the passages that have no vector from
//! the embedding model yet are embedded in batches (one transaction per batch).
//!
//! - Progress: `progress` is called before each file and each batch and at the end of each
//!   stage, with done/total (files while reading, passages while embedding).
//! - Cancel: `cancel` is checked between files and between batches; what was committed stays.
//! - Resume: a kill loses at most the file or batch in flight. The next run sees that file's
//!   old size and time (or no row) and reads it again, and embeds what has no vector yet.
//! - Change: a file whose size or modification time differs is hashed; a new sha256 means its
//!   passages (and their vectors) are replaced, the same one only updates the recorded time.
//! - Chatting: indexing holds only the library's own database, and only a file's or a batch's
//!   transaction at a time; run it on its own thread with its own `Library`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

use crate::embedding::EmbeddingModel;
use crate::extract::{extract_with_progress, open_checked, ExtractError, ExtractLimits, Place};
use crate::library::{DocumentId, Failure, FileState, Library, LibraryError, NewPassage};
use crate::passages::{estimate_pieces, split, PassageLimits};

/// How files are read and cut. `Default` gives the extractor's and the splitter's defaults and
/// batches of 16 passages for the embedding model.
#[derive(Debug, Clone)]
pub struct IndexSettings {
    pub extract: ExtractLimits,
    pub passages: PassageLimits,
    /// Passages per call of the embedding model (and per transaction). By default 16.
    pub batch: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        Self {
            extract: ExtractLimits::default(),
            passages: PassageLimits::default(),
            batch: 16,
        }
    }
}

/// What indexing is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading files into passages: `done` of `total` files.
    Reading,
    /// Embedding passages: `done` of `total` passages.
    Embedding,
}

/// A progress report: `done` of `total` in this stage, working on `file`.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    pub stage: Stage,
    pub file: &'a Path,
    pub done: usize,
    pub total: usize,
    /// While `file`'s scanned pages are read by OCR: pages read, of how many (reported before
    /// each page and after the last).
    pub scanned_pages: Option<(usize, usize)>,
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Already in the library as it is on disk.
    Unchanged,
    /// Read now (new or changed): this many passages.
    Indexed { passages: usize },
    /// Could not be read; the message names the file and says what to do.
    Failed(String),
}

/// One file's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileReport {
    /// The path as given.
    pub given: PathBuf,
    /// Its document in the library (none when it could not even be found).
    pub document: Option<DocumentId>,
    pub outcome: Outcome,
    /// When it failed: the failure as a code with parameters and the technical detail, for a
    /// front end to say in the person's language (`ExtractError::code`). A file that could not
    /// even be found has the code "cannot-open".
    pub failure: Option<Failure>,
}

/// What an indexing run did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexReport {
    /// One entry per file read before the run ended (all of them, unless cancelled).
    pub files: Vec<FileReport>,
    /// Passages embedded in this run.
    pub embedded: usize,
    /// Whether `cancel` stopped the run early.
    pub cancelled: bool,
}

/// Indexes `files` into `library` (see the module's notes), with vectors from `embedder` when
/// one is given. A file that cannot be read is reported in its `FileReport` and the others go
/// on; only the library's own failure (disk full, a damaged database) ends the run with an error.
pub fn index(
    library: &Library,
    files: &[PathBuf],
    settings: &IndexSettings,
    embedder: Option<&dyn EmbeddingModel>,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<IndexReport, LibraryError> {
    let mut report = IndexReport::default();
    let count = |word: &str| match embedder {
        Some(embedder) => embedder.pieces(word),
        None => estimate_pieces(word),
    };
    for (done, given) in files.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            report.cancelled = true;
            return Ok(report);
        }
        progress(Progress {
            stage: Stage::Reading,
            file: given,
            done,
            total: files.len(),
            scanned_pages: None,
        });
        let mut pages = |read: usize, of: usize| {
            progress(Progress {
                stage: Stage::Reading,
                file: given,
                done,
                total: files.len(),
                scanned_pages: Some((read, of)),
            })
        };
        match read_one(library, given, settings, &count, &mut pages, cancel)? {
            Some(file) => report.files.push(file),
            None => {
                report.cancelled = true;
                return Ok(report);
            }
        }
    }
    if let Some(last) = files.last() {
        progress(Progress {
            stage: Stage::Reading,
            file: last,
            done: files.len(),
            total: files.len(),
            scanned_pages: None,
        });
    }
    if let Some(embedder) = embedder {
        let documents: Vec<(PathBuf, DocumentId)> = report
            .files
            .iter()
            .filter_map(|file| Some((file.given.clone(), file.document?)))
            .collect();
        report.embedded = embed(library, &documents, settings, embedder, progress, cancel)?;
        report.cancelled = cancel.load(Ordering::Relaxed);
    }
    Ok(report)
}

/// Embeds every passage of `library` that has no vector from `embedder` yet (what a cancelled
/// or killed run left, or the whole library for a model chosen anew), with `progress` and
/// `cancel` as [`index`] has them. Returns the passages embedded.
pub fn embed_missing(
    library: &Library,
    settings: &IndexSettings,
    embedder: &dyn EmbeddingModel,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<usize, LibraryError> {
    let documents: Vec<(PathBuf, DocumentId)> = library
        .documents()?
        .into_iter()
        .filter(|d| d.passages > 0)
        .map(|d| (d.path, d.id))
        .collect();
    embed(library, &documents, settings, embedder, progress, cancel)
}

/// Reads one file into the library unless it is there unchanged; `None` when `cancel` stopped
/// its reading (nothing of it is stored).
fn read_one(
    library: &Library,
    given: &Path,
    settings: &IndexSettings,
    count: &dyn Fn(&str) -> usize,
    pages: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<Option<FileReport>, LibraryError> {
    let failed = |message: String, document, failure: Failure| FileReport {
        given: given.to_path_buf(),
        document,
        outcome: Outcome::Failed(message),
        failure: Some(failure),
    };
    // A failure to find or read the file on disk, which no `ExtractError` describes.
    let cannot_open = |error: &std::io::Error| {
        Failure::of(&ExtractError::Io {
            path: given.to_path_buf(),
            source: std::io::Error::new(error.kind(), error.to_string()),
        })
    };
    let path = match std::fs::canonicalize(given) {
        Ok(path) => path,
        Err(e) => {
            return Ok(Some(failed(
                format!("cannot find {}: {e}", given.display()),
                None,
                cannot_open(&e),
            )))
        }
    };
    // Every check `extract` makes before reading (kind, filesystem, size, extension) comes
    // before the file is hashed, so a pipe, a device, a /proc file or a sparse giant is refused
    // at once rather than read to its end.
    let opened = match open_checked(&path, &settings.extract) {
        Ok(file) => file,
        Err(e) => return Ok(Some(failed(e.to_string(), None, Failure::of(&e)))),
    };
    let meta = match opened.metadata() {
        Ok(meta) => meta,
        Err(e) => {
            return Ok(Some(failed(
                format!("cannot read {}: {e}", given.display()),
                None,
                cannot_open(&e),
            )))
        }
    };
    let size = meta.len();
    let mtime_ns = modified_ns(&meta);
    let known = library.document(&path)?;
    if let Some(document) = &known {
        if document.size == size && document.mtime_ns == mtime_ns {
            return Ok(Some(unchanged(given, document)));
        }
    }
    let sha256 = match sha256_of(opened, settings.extract.max_file_bytes) {
        Ok(sha) => sha,
        Err(e) => {
            return Ok(Some(failed(
                format!("cannot read {}: {e}", given.display()),
                None,
                cannot_open(&e),
            )))
        }
    };
    let file = FileState {
        path: path.clone(),
        size,
        mtime_ns,
        sha256,
    };
    if let Some(document) = &known {
        if document.sha256 == file.sha256 {
            library.touch(document.id, &file)?;
            return Ok(Some(unchanged(given, document)));
        }
    }
    let format_name = crate::extract::Format::from_path(&path)
        .map(|f| f.name())
        .unwrap_or("unknown");
    match extract_with_progress(&path, &settings.extract, cancel, pages) {
        Ok(extracted) => {
            let mut passages = Vec::new();
            for (section_index, section) in extracted.sections.iter().enumerate() {
                for cut in split(&section.text, &settings.passages, count) {
                    passages.push(NewPassage {
                        section: section_index,
                        place: section.place.clone(),
                        char_start: cut.chars.start,
                        char_end: cut.chars.end,
                        text: cut.text.to_string(),
                        from_scan: section.from_scan,
                    });
                }
            }
            let id = library.store(
                &file,
                extracted.format.name(),
                extracted.title.as_deref(),
                &passages,
            )?;
            Ok(Some(FileReport {
                given: given.to_path_buf(),
                document: Some(id),
                outcome: Outcome::Indexed {
                    passages: passages.len(),
                },
                failure: None,
            }))
        }
        Err(ExtractError::Cancelled { .. }) => Ok(None),
        Err(e) => {
            let message = e.to_string();
            let failure = Failure::of(&e);
            let id = library.store_coded_failure(&file, format_name, &message, &failure)?;
            Ok(Some(failed(message, Some(id), failure)))
        }
    }
}

fn unchanged(given: &Path, document: &crate::library::Document) -> FileReport {
    FileReport {
        given: given.to_path_buf(),
        document: Some(document.id),
        outcome: match &document.error {
            Some(error) => Outcome::Failed(error.clone()),
            None => Outcome::Unchanged,
        },
        failure: document.failure.clone(),
    }
}

/// Embeds the passages of `documents` that have no vector from `embedder` yet.
fn embed(
    library: &Library,
    documents: &[(PathBuf, DocumentId)],
    settings: &IndexSettings,
    embedder: &dyn EmbeddingModel,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<usize, LibraryError> {
    let model = embedder.model_id();
    let mut todo = Vec::new();
    for (path, id) in documents {
        let missing = library.passages_without_vectors(*id, model)?;
        if !missing.is_empty() {
            todo.push((path, missing));
        }
    }
    let total: usize = todo.iter().map(|(_, missing)| missing.len()).sum();
    let mut done = 0;
    for (path, missing) in todo {
        for batch in missing.chunks(settings.batch.max(1)) {
            if cancel.load(Ordering::Relaxed) {
                return Ok(done);
            }
            progress(Progress {
                stage: Stage::Embedding,
                file: path,
                done,
                total,
                scanned_pages: None,
            });
            // A passage is embedded with the heading it sits under: "4.3. Good password"
            // says what a passage of bullet points is about.
            let texts: Vec<String> = batch
                .iter()
                .map(|p| match &p.place {
                    Place::Heading(heading) => format!("{heading}\n{}", p.text),
                    _ => p.text.clone(),
                })
                .collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            let vectors = embedder
                .embed(&texts)
                .map_err(|message| LibraryError::Embedding {
                    path: path.clone(),
                    message,
                })?;
            let rows: Vec<(i64, Vec<f32>)> = batch.iter().map(|p| p.id).zip(vectors).collect();
            library.store_vectors(model, &rows)?;
            done += batch.len();
        }
    }
    if total > 0 {
        if let Some((path, _)) = documents.last() {
            progress(Progress {
                stage: Stage::Embedding,
                file: path,
                done,
                total,
                scanned_pages: None,
            });
        }
    }
    Ok(done)
}

fn modified_ns(meta: &std::fs::Metadata) -> i64 {
    use std::os::unix::fs::MetadataExt;
    meta.mtime() * 1_000_000_000 + meta.mtime_nsec()
}

/// The hex sha256 of `file`, read in blocks, at most `max_bytes` of it (a file growing past
/// the limit meanwhile is refused when it is read).
fn sha256_of(file: std::fs::File, max_bytes: u64) -> std::io::Result<String> {
    let mut file = file.take(max_bytes + 1);
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
