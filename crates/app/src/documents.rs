//! The user's own files in conversations: the document library (`documents.db` in the data
//! folder, private to the user), files attached to a conversation, and indexing on its own
//! thread. What a turn reads from them to cite is [`crate::grounding`]; what the front end is
//! shown of them is in `views` (re-exported here).
//!
//! Paths come in only from the front end's own pickers (the desktop's native dialog and window
//! drop, the command line's `--file`), never from model output or a web page: nothing here takes
//! a path from text.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use hearth_chat::conversations::Source;
pub use hearth_documents::Document;
use hearth_documents::{
    embed_missing, find_embedding_model, index, DocumentId, FileReport, IndexSettings, Library,
    LibraryError, Outcome, Stage,
};

use crate::error::{Error, ErrorCode, Result};
use crate::lock::lock;

pub mod rerank;
mod views;

pub(crate) use views::file_name;
pub use views::{
    remote_notice, ConversationDocuments, DocumentEvent, DocumentInfo, DocumentSink, FileError,
    IndexProgress, IndexStage, LibraryView, RemoteNotice, ScanLanguage, ScannedPages,
    DOCUMENTS_EVENT,
};

pub use hearth_chat::conversations::MessageSources;
pub use hearth_documents::extract::accepted_extensions;
/// Extraction in a child process: the desktop app calls `child::run_if_asked()` first in `main`.
pub use hearth_documents::extract::child;
/// The engine's sentence-embedding models, as the library runs them (the server answers
/// `/v1/embeddings` with the same).
pub use hearth_documents::{EmbeddingModel, EngineEmbedding};

/// The name of the embedding model Hearth bundles, the default one.
pub const BUNDLED_EMBEDDING_MODEL: &str = "all-MiniLM-L6-v2";

/// An embedding model as loaded for a choice (the installed model's folder; None: the bundled
/// one).
struct LoadedEmbedding {
    choice: Option<PathBuf>,
    /// None: it could not be loaded, so keyword search only.
    model: Option<Arc<EngineEmbedding>>,
}

/// The document library of a running front end: one connection for listing and searching,
/// another opened by each indexing thread (SQLite's WAL lets searches run while it writes).
pub struct Documents {
    path: PathBuf,
    resource_dir: Mutex<Option<PathBuf>>,
    library: Mutex<Option<Library>>,
    /// Where installed models are, to find the embedding model chosen by name.
    models: Option<hearth_hub::Store>,
    /// The embedding model chosen in Settings: an installed model's name and folder; None, the
    /// default: the bundled one.
    chosen: Mutex<Option<(String, PathBuf)>>,
    /// The embedding model loaded, and the choice it was loaded for.
    model: Mutex<Option<LoadedEmbedding>>,
    /// Cancel's flag for the indexing runs going now; each Cancel sets it and puts a fresh one
    /// in its place for the runs that start after.
    cancel: Mutex<Arc<AtomicBool>>,
    /// Indexing runs going now.
    runs: Arc<AtomicUsize>,
    /// Files being indexed now, with the conversation each is for.
    indexing: Arc<Mutex<HashMap<PathBuf, String>>>,
    /// Files that could not be read, by the number their `Failed` event gave, for Keep in
    /// Your files ([`Documents::keep_failed`]); forgotten when the app ends.
    failures: Arc<Failures>,
    /// The languages scans are read in (Settings › Files; `Settings::scan_languages`).
    scan_languages: Mutex<Vec<String>>,
    /// The languages installed for reading scans, listed once (None: no Tesseract).
    installed_scan_languages: std::sync::OnceLock<Option<Vec<ScanLanguage>>>,
    /// The second look at passages: its setting, its model, its measured cost.
    rerank: rerank::Reranking,
}

/// Files that could not be read, by number: what [`Documents::keep_failed`] needs.
#[derive(Default)]
struct Failures {
    paths: Mutex<HashMap<u64, PathBuf>>,
    count: std::sync::atomic::AtomicU64,
}

impl Failures {
    /// The most failures remembered: a folder of broken files does not grow this without end
    /// (the oldest are let go, and Keep then says to attach the file again).
    const MAX: usize = 10_000;

    fn add(&self, path: PathBuf) -> u64 {
        let id = self.count.fetch_add(1, Ordering::Relaxed);
        let mut paths = lock(&self.paths);
        if paths.len() >= Self::MAX {
            let oldest = id.saturating_sub(Self::MAX as u64);
            paths.retain(|&k, _| k > oldest);
        }
        paths.insert(id, path);
        id
    }

    fn take(&self, id: u64) -> Option<PathBuf> {
        lock(&self.paths).remove(&id)
    }
}

pub(crate) fn library_error(error: LibraryError) -> Error {
    Error::new(ErrorCode::Storage, error.to_string())
}

impl Documents {
    /// The library of `home`: `documents.db` in its data folder, beside the conversations, with
    /// its installed models to choose an embedding model from.
    pub fn in_home(home: &crate::Home) -> Self {
        Self {
            models: Some(home.store()),
            ..Self::new(home.documents_db())
        }
    }

    /// The library at `path` (opened at first use, so starting the app reads nothing).
    pub fn new(path: PathBuf) -> Self {
        Self {
            resource_dir: Mutex::new(None),
            library: Mutex::new(None),
            models: None,
            chosen: Mutex::new(None),
            model: Mutex::new(None),
            cancel: Mutex::default(),
            runs: Arc::default(),
            indexing: Arc::default(),
            failures: Arc::default(),
            scan_languages: Mutex::new(vec!["eng".to_owned()]),
            installed_scan_languages: std::sync::OnceLock::new(),
            rerank: rerank::Reranking::new(&path),
            path,
        }
    }

    /// Reads scans in `languages` (Tesseract's names, the most likely first; none: scans are
    /// not read) from the next file indexed on.
    pub fn set_scan_languages(&self, languages: Vec<String>) {
        *lock(&self.scan_languages) = languages;
    }

    /// How files are read now: the defaults, with the scan languages chosen.
    fn index_settings(&self) -> IndexSettings {
        let mut settings = IndexSettings::default();
        settings.extract.ocr.languages = lock(&self.scan_languages).clone();
        settings
    }

    /// The languages scans can be read in here, with their data sizes (None: Tesseract is not
    /// installed); asked of Tesseract once.
    pub fn installed_scan_languages(&self) -> Option<Vec<ScanLanguage>> {
        self.installed_scan_languages
            .get_or_init(|| {
                hearth_documents::extract::available_ocr_languages().map(|languages| {
                    languages
                        .into_iter()
                        .map(|l| ScanLanguage {
                            code: l.code,
                            bytes: l.data_bytes,
                        })
                        .collect()
                })
            })
            .clone()
    }

    /// Where the packaged app's resources are, to find the bundled embedding model there.
    pub fn set_resource_dir(&self, dir: Option<PathBuf>) {
        *lock(&self.resource_dir) = dir;
    }

    /// Runs `work` on the library's listing connection, opening it (0600) first if needed.
    pub fn with_library<T>(&self, work: impl FnOnce(&Library) -> Result<T>) -> Result<T> {
        let mut slot = lock(&self.library);
        if slot.is_none() {
            *slot = Some(self.open()?);
        }
        work(slot.as_ref().expect("opened above"))
    }

    fn open(&self) -> Result<Library> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::new(
                    ErrorCode::Storage,
                    format!("cannot create the folder {} for your document library ({e}); check that it is writable", dir.display()),
                )
            })?;
        }
        Library::open(&self.path).map_err(library_error)
    }

    /// The embedding model: the installed one chosen in Settings, else the bundled one
    /// (`HEARTH_EMBEDDING_MODEL`, the app's resources, an installed Hearth or the source tree);
    /// loaded at first use and again after another choice. None means keyword search only.
    pub fn embedder(&self) -> Option<Arc<EngineEmbedding>> {
        let chosen = lock(&self.chosen).clone().map(|(_, folder)| folder);
        let mut slot = lock(&self.model);
        if let Some(loaded) = slot.as_ref() {
            if loaded.choice == chosen {
                return loaded.model.clone();
            }
        }
        // The model of the choice before is let go first: two could take gigabytes.
        *slot = None;
        let dir = match &chosen {
            Some(dir) => Some(dir.clone()),
            None => {
                let resources = lock(&self.resource_dir).clone();
                find_embedding_model(
                    std::env::var_os("HEARTH_EMBEDDING_MODEL").map(PathBuf::from),
                    resources.as_deref(),
                )
            }
        };
        let model = dir.and_then(|dir| match EngineEmbedding::load(&dir, None) {
            Ok(model) => Some(Arc::new(model)),
            Err(error) => {
                tracing::warn!(
                    "the embedding model in {} could not be loaded ({error}); documents are searched by keyword only",
                    dir.display()
                );
                None
            }
        });
        *slot = Some(LoadedEmbedding {
            choice: chosen,
            model: model.clone(),
        });
        model
    }

    /// Chooses the embedding model by the name of an installed model (None: the bundled one,
    /// the default). Returns whether the choice changed: then the library's passages need the
    /// new model's vectors ([`Documents::continue_indexing`]); each model's vectors are kept
    /// apart, so nothing is mixed and choosing a model again finds its vectors still there.
    pub fn choose_embedding_model(&self, name: Option<&str>) -> Result<bool> {
        let folder = match name {
            None => None,
            Some(name) => {
                let installed = self
                    .models
                    .as_ref()
                    .and_then(|store| store.get(name).ok())
                    .filter(|m| m.folder.join("config.json").is_file())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorCode::NotFound,
                            format!(
                                "The embedding model {name} is not installed. Download it in Models \
                                 (Qwen3-Embedding-0.6B), or choose the one that comes with Hearth."
                            ),
                        )
                    })?;
                Some((installed.name, installed.folder))
            }
        };
        let mut chosen = lock(&self.chosen);
        let changed = *chosen != folder;
        *chosen = folder;
        Ok(changed)
    }

    /// The name of the embedding model chosen: an installed model's, or the bundled one's.
    pub fn embedding_model_name(&self) -> String {
        lock(&self.chosen).as_ref().map_or_else(
            || BUNDLED_EMBEDDING_MODEL.to_owned(),
            |(name, _)| name.clone(),
        )
    }

    /// Installed embedding models (from the catalog: Qwen3-Embedding-0.6B), by name.
    pub fn embedding_choices(&self) -> Vec<String> {
        let Some(store) = &self.models else {
            return Vec::new();
        };
        store
            .list()
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.is_embedding())
            .map(|m| m.name)
            .collect()
    }

    /// Stops every indexing run going now, between two files or two batches of passages:
    /// what they read and embedded is kept, each ends with a `Finished` event, and what is left
    /// waits for the next run. Returns whether any was running.
    pub fn cancel_indexing(&self) -> bool {
        let mut flag = lock(&self.cancel);
        flag.store(true, Ordering::Relaxed);
        *flag = Arc::default();
        self.runs.load(Ordering::Relaxed) > 0
    }

    /// Whether files are being indexed now.
    pub fn is_indexing(&self) -> bool {
        self.runs.load(Ordering::Relaxed) > 0
    }

    /// Cancel's flag for a run starting now, and the count that says one is running.
    fn start_run(&self) -> (Arc<AtomicBool>, RunGuard) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        (
            Arc::clone(&lock(&self.cancel)),
            RunGuard(Arc::clone(&self.runs)),
        )
    }

    /// Embeds, on a thread of its own, every passage of the library that has no vector from
    /// the embedding model yet: what a cancelled or killed run left, or the whole library after
    /// another model was chosen. Keyword search works meanwhile. Progress goes to `events`,
    /// then `Finished`.
    pub fn continue_indexing(self: &Arc<Self>, events: DocumentSink) -> Result<()> {
        let this = Arc::clone(self);
        let (cancel, guard) = self.start_run();
        std::thread::Builder::new()
            .name("hearth-embed".into())
            .spawn(move || {
                let running = guard;
                let Some(embedder) = this.embedder() else {
                    drop(running);
                    events(DocumentEvent::Finished {
                        cancelled: false,
                        unread: Vec::new(),
                    });
                    return;
                };
                let result = this.open().and_then(|library| {
                    embed_missing(
                        &library,
                        &IndexSettings::default(),
                        &*embedder,
                        &mut |p| events(progress_event(&p)),
                        &cancel,
                    )
                    .map_err(library_error)
                });
                if let Err(error) = result {
                    tracing::warn!("indexing stopped: {}", error.message);
                }
                // The run has ended when Finished says so: whoever reads the library then sees it.
                drop(running);
                events(DocumentEvent::Finished {
                    cancelled: cancel.load(Ordering::Relaxed),
                    unread: Vec::new(),
                });
            })
            .map_err(|e| {
                Error::new(
                    ErrorCode::Storage,
                    format!("cannot start indexing ({e}); try again"),
                )
            })?;
        Ok(())
    }

    /// Indexes `paths` and attaches each to `conversation_id`, waiting for it (the command
    /// line). Returns the attached documents; a file that could not be read is an error
    /// naming it.
    pub fn attach_now(
        &self,
        conversation_id: &str,
        paths: &[PathBuf],
        events: &dyn Fn(DocumentEvent),
    ) -> Result<Vec<DocumentInfo>> {
        let documents = self.index_now(paths, events)?;
        self.with_library(|library| {
            for d in &documents {
                library
                    .attach(conversation_id, d.id)
                    .map_err(library_error)?;
            }
            Ok(())
        })?;
        self.attached(conversation_id)
    }

    /// Indexes `paths`, waiting for it, and returns them as the library has them (the command
    /// line's `--file`); a file that could not be read is an error naming it.
    pub fn index_now(
        &self,
        paths: &[PathBuf],
        events: &dyn Fn(DocumentEvent),
    ) -> Result<Vec<Document>> {
        let library = self.open()?;
        let embedder = self.embedder();
        let (documents, failed) = run_index(
            &library,
            &self.index_settings(),
            Target::Library,
            paths,
            embedder,
            events,
            &AtomicBool::new(false),
            &self.failures,
        )?;
        if let Some(message) = failed.into_iter().next() {
            return Err(Error::invalid(message));
        }
        Ok(documents)
    }

    /// Indexes `paths` on a thread of its own and attaches each to `conversation_id` as it is
    /// read; progress and errors go to `events`. Returns at once ([`Documents::attached`] lists
    /// the new files as being indexed).
    pub fn attach(
        self: &Arc<Self>,
        conversation_id: &str,
        paths: Vec<PathBuf>,
        events: DocumentSink,
    ) -> Result<()> {
        let fresh: Vec<PathBuf> = {
            let mut indexing = lock(&self.indexing);
            paths
                .into_iter()
                .filter(|p| {
                    indexing
                        .insert(p.clone(), conversation_id.to_owned())
                        .is_none()
                })
                .collect()
        };
        let this = Arc::clone(self);
        let conversation = conversation_id.to_owned();
        let (cancel, guard) = self.start_run();
        std::thread::Builder::new()
            .name("hearth-index".into())
            .spawn(move || {
                let running = guard;
                let embedder = this.embedder();
                let result = this.open().and_then(|library| {
                    run_index(
                        &library,
                        &this.index_settings(),
                        Target::Conversation(&conversation),
                        &fresh,
                        embedder,
                        &*events,
                        &cancel,
                        &this.failures,
                    )
                });
                let mut unread = Vec::new();
                match result {
                    // A cancelled run reads the files in order and stops: the rest are unread.
                    Ok((documents, failed)) => {
                        if cancel.load(Ordering::Relaxed) {
                            let reached = documents.len() + failed.len();
                            unread = fresh.iter().skip(reached).map(|p| file_name(p)).collect();
                        }
                    }
                    Err(error) => {
                        let name = fresh
                            .iter()
                            .map(|p| file_name(p))
                            .collect::<Vec<_>>()
                            .join(", ");
                        events(DocumentEvent::Failed {
                            error: FileError::from_message(&name, &error.message),
                            name,
                            failure: None,
                        })
                    }
                }
                {
                    let mut indexing = lock(&this.indexing);
                    for path in &fresh {
                        indexing.remove(path);
                    }
                }
                drop(running);
                events(DocumentEvent::Finished {
                    cancelled: cancel.load(Ordering::Relaxed),
                    unread,
                });
            })
            .map_err(|e| {
                Error::new(
                    ErrorCode::Storage,
                    format!("cannot start indexing ({e}); try again"),
                )
            })?;
        Ok(())
    }

    /// Keep in Your files: reads the file of the failure `failure` (a `Failed` event's number)
    /// again on a thread of its own and keeps it in the library with why it could not be read
    /// (a failed file is otherwise let go at once). Its `Indexed` event then carries it; an
    /// unknown or already kept failure is an error saying to attach the file again.
    pub fn keep_failed(self: &Arc<Self>, failure: u64, events: DocumentSink) -> Result<()> {
        let path = self.failures.take(failure).ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                "Hearth no longer knows that file. Attach it again to keep it in Your files.",
            )
        })?;
        let this = Arc::clone(self);
        let (cancel, guard) = self.start_run();
        std::thread::Builder::new()
            .name("hearth-keep".into())
            .spawn(move || {
                let running = guard;
                let result = this.open().and_then(|library| {
                    run_index(
                        &library,
                        &this.index_settings(),
                        Target::Keep,
                        std::slice::from_ref(&path),
                        None,
                        &*events,
                        &cancel,
                        &this.failures,
                    )
                });
                if let Err(error) = result {
                    tracing::warn!(
                        "keeping a file that could not be read failed: {}",
                        error.message
                    );
                }
                drop(running);
                events(DocumentEvent::Finished {
                    cancelled: cancel.load(Ordering::Relaxed),
                    unread: Vec::new(),
                });
            })
            .map_err(|e| {
                Error::new(
                    ErrorCode::Storage,
                    format!("cannot start reading the file again ({e}); try again"),
                )
            })?;
        Ok(())
    }

    /// The files attached to `conversation_id`, then those still being indexed for it. Each
    /// says how many of its passages wait for the embedding model's vectors when that model is
    /// loaded (listing the files does not load it).
    pub fn attached(&self, conversation_id: &str) -> Result<Vec<DocumentInfo>> {
        let indexing = lock(&self.indexing).clone();
        let loaded = lock(&self.model)
            .as_ref()
            .and_then(|loaded| loaded.model.clone());
        let mut list: Vec<DocumentInfo> = self.with_library(|library| {
            let waiting = waiting_by_document(library, loaded.as_deref())?;
            Ok(library
                .attached(conversation_id)
                .map_err(library_error)?
                .iter()
                .map(|d| DocumentInfo {
                    indexing: indexing.contains_key(&d.path),
                    waiting: waiting.get(&d.id).copied().unwrap_or(0),
                    ..DocumentInfo::from(d)
                })
                .collect())
        })?;
        let mut pending: Vec<&PathBuf> = indexing
            .iter()
            .filter(|(_, c)| c.as_str() == conversation_id)
            .map(|(p, _)| p)
            .collect();
        pending.sort();
        for path in pending {
            if !list.iter().any(|d| d.indexing && d.name == file_name(path)) {
                list.push(DocumentInfo {
                    id: 0,
                    name: file_name(path),
                    format: String::new(),
                    title: None,
                    size: std::fs::metadata(path).map_or(0, |m| m.len()),
                    passages: 0,
                    waiting: 0,
                    error: None,
                    indexing: true,
                });
            }
        }
        Ok(list)
    }

    /// Attaches a file already in the library to `conversation_id`.
    pub fn attach_known(&self, conversation_id: &str, id: DocumentId) -> Result<()> {
        self.with_library(|library| {
            let known = library.documents().map_err(library_error)?;
            if !known.iter().any(|d| d.id == id) {
                return Err(Error::new(
                    ErrorCode::NotFound,
                    format!("There is no file {id} in your document library."),
                ));
            }
            library.attach(conversation_id, id).map_err(library_error)
        })
    }

    /// Takes a file off `conversation_id` (it stays in the library).
    pub fn detach(&self, conversation_id: &str, id: DocumentId) -> Result<()> {
        self.with_library(|library| library.detach(conversation_id, id).map_err(library_error))
    }

    /// Every file in the library, the disk it takes, and its embedding model: which, the
    /// others installed, and the passages still waiting for its vectors (this loads it).
    pub fn library(&self) -> Result<LibraryView> {
        let embedder = self.embedder();
        let indexing = lock(&self.indexing).clone();
        self.with_library(|library| {
            let waiting = match &embedder {
                Some(model) => library
                    .count_without_vectors(model.model_id())
                    .map_err(library_error)?,
                None => 0,
            };
            let by_document = waiting_by_document(library, embedder.as_deref())?;
            Ok(LibraryView {
                documents: library
                    .documents()
                    .map_err(library_error)?
                    .iter()
                    .map(|d| DocumentInfo {
                        indexing: indexing.contains_key(&d.path),
                        waiting: by_document.get(&d.id).copied().unwrap_or(0),
                        ..DocumentInfo::from(d)
                    })
                    .collect(),
                disk_bytes: library.disk_use(),
                embedding_model: embedder.as_ref().map(|_| self.embedding_model_name()),
                embedding_choices: self.embedding_choices(),
                waiting,
                indexing: self.is_indexing(),
                scan_languages: self.installed_scan_languages(),
                rerank: Some(self.rerank_status()),
            })
        })
    }

    /// Removes a file from the library: its text, passages and vectors are deleted (SQLite's
    /// secure_delete overwrites them) and it leaves every conversation; the original file is
    /// not touched. The app removes through `App::remove_document`, which also drops the
    /// passages saved with answers.
    pub(crate) fn remove(&self, id: DocumentId) -> Result<LibraryView> {
        self.with_library(|library| {
            let document = library
                .documents()
                .map_err(library_error)?
                .into_iter()
                .find(|d| d.id == id)
                .ok_or_else(|| {
                    Error::new(
                        ErrorCode::NotFound,
                        format!("There is no file {id} in your document library."),
                    )
                })?;
            library.remove(&document.path).map_err(library_error)?;
            Ok(())
        })?;
        self.library()
    }

    /// The documents attached to `conversation_id`, as the library stores them.
    pub fn attached_documents(&self, conversation_id: &str) -> Result<Vec<Document>> {
        self.with_library(|library| library.attached(conversation_id).map_err(library_error))
    }
}

/// Keeps the count of indexing runs while one runs (also when it panics).
struct RunGuard(Arc<AtomicUsize>);

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An indexing progress report as the front end gets it.
fn progress_event(p: &hearth_documents::Progress) -> DocumentEvent {
    DocumentEvent::Progress(IndexProgress {
        document_name: file_name(p.file),
        stage: match p.stage {
            Stage::Reading => IndexStage::Reading,
            Stage::Embedding => IndexStage::Embedding,
        },
        done: p.done,
        total: p.total,
        scanned_pages: p
            .scanned_pages
            .map(|(done, total)| ScannedPages { done, total }),
    })
}

/// What an indexing run is for.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// The library only (the command line's `--file`, waiting for it).
    Library,
    /// The library, each file read attached to this conversation.
    Conversation(&'a str),
    /// A file that could not be read, kept in the library with why (Keep in Your files).
    Keep,
}

/// Indexes `paths` into `library` for `target` until `cancel` is set; returns the files read
/// and the messages of those that failed. Each failure is also sent as a `Failed` event with a
/// number in `failures`, and let go from the library unless `target` is [`Target::Keep`]: a
/// file that could not be read stays in Your files only when the user asks.
#[allow(clippy::too_many_arguments)] // each run differs in all of them; a struct would only rename them
fn run_index(
    library: &Library,
    settings: &IndexSettings,
    target: Target,
    paths: &[PathBuf],
    embedder: Option<Arc<EngineEmbedding>>,
    events: &dyn Fn(DocumentEvent),
    cancel: &AtomicBool,
    failures: &Failures,
) -> Result<(Vec<Document>, Vec<String>)> {
    let model = embedder.as_deref().map(|m| m as &dyn EmbeddingModel);
    // Files the user kept with their failure before: attached again, they stay kept.
    let kept: std::collections::HashSet<DocumentId> = library
        .documents()
        .map_err(library_error)?
        .into_iter()
        .filter(|d| d.error.is_some())
        .map(|d| d.id)
        .collect();
    let report = index(
        library,
        paths,
        settings,
        model,
        &mut |p| events(progress_event(&p)),
        cancel,
    )
    .map_err(library_error)?;
    // What a cancel left without vectors, by file: each Indexed event says it (review #10).
    let waiting = waiting_by_document(library, embedder.as_deref())?;
    let info = |document: &Document| DocumentInfo {
        waiting: waiting.get(&document.id).copied().unwrap_or(0),
        ..DocumentInfo::from(document)
    };
    let mut failed = Vec::new();
    let mut read = Vec::new();
    for file in &report.files {
        if let Outcome::Failed(message) = &file.outcome {
            let name = file_name(&file.given);
            if matches!(target, Target::Keep) {
                if let Some(document) = stored(library, file) {
                    events(DocumentEvent::Indexed {
                        document: info(&document),
                    });
                }
                continue;
            }
            let keep = file.document.is_some_and(|id| kept.contains(&id));
            if let Some(document) = stored(library, file).filter(|_| !keep) {
                library.remove(&document.path).map_err(library_error)?;
            }
            events(DocumentEvent::Failed {
                error: match &file.failure {
                    Some(failure) => FileError::coded(failure, message),
                    None => FileError::from_message(&name, message),
                },
                name,
                failure: Some(failures.add(file.given.clone())),
            });
            failed.push(message.clone());
            continue;
        }
        let Some(id) = file.document else { continue };
        if let Target::Conversation(conversation_id) = target {
            library.attach(conversation_id, id).map_err(library_error)?;
        }
        if let Some(document) = stored(library, file) {
            events(DocumentEvent::Indexed {
                document: info(&document),
            });
            read.push(document);
        }
    }
    Ok((read, failed))
}

/// Passages without `model`'s vectors, by document (none without a model: then nothing waits
/// for one).
fn waiting_by_document(
    library: &Library,
    model: Option<&EngineEmbedding>,
) -> Result<std::collections::BTreeMap<DocumentId, usize>> {
    match model {
        Some(model) => library
            .count_without_vectors_by_document(model.model_id())
            .map_err(library_error),
        None => Ok(Default::default()),
    }
}

/// The library's document of a file an indexing run reached.
fn stored(library: &Library, file: &FileReport) -> Option<Document> {
    let id = file.document?;
    library.document(&file.given).ok().flatten().or_else(|| {
        library
            .documents()
            .ok()
            .and_then(|all| all.into_iter().find(|d| d.id == id))
    })
}
