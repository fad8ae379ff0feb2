//! What the front end is shown of the user's files: the library, a conversation's files, the
//! remote notice, why a file could not be read ([`FileError`]: a code the front end says in
//! its language, its parameters, and the technical detail kept apart), and the events of
//! indexing. Plain data, serialized for the desktop's IPC (and its TypeScript bindings);
//! `Documents` builds them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use hearth_documents::library::Failure;
use hearth_documents::Document;
use serde::Serialize;

/// A file in the library or attached to a conversation, as the front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DocumentInfo {
    /// Its id in the library (0 while its first indexing has not stored it yet).
    pub id: i64,
    /// The file's name, without its folder.
    pub name: String,
    /// What kind of file: "pdf", "docx", "text", ...
    pub format: String,
    /// Its title, when the file names one.
    pub title: Option<String>,
    /// Bytes of the original file.
    pub size: u64,
    /// Passages indexed (0 while indexing, or when it could not be read).
    pub passages: usize,
    /// Of those, passages with no vector from the embedding model yet (a cancel, or another
    /// model chosen): found by keyword only until indexing continues.
    pub waiting: usize,
    /// Why it could not be read (kept in the library only when the user asked).
    pub error: Option<FileError>,
    /// Whether it is being indexed now.
    pub indexing: bool,
}

/// The library as the front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LibraryView {
    /// Every file indexed.
    pub documents: Vec<DocumentInfo>,
    /// Bytes the library's database takes on disk.
    pub disk_bytes: u64,
    /// The model that finds passages by meaning: an installed model's name, or the bundled
    /// all-MiniLM-L6-v2's (None: none could be loaded, so files are found by keyword only).
    pub embedding_model: Option<String>,
    /// Installed embedding models the user may choose instead of the bundled one, by name.
    pub embedding_choices: Vec<String>,
    /// Passages that have no vector from that model yet: found by keyword only until indexing
    /// continues (`Documents::continue_indexing`).
    pub waiting: usize,
    /// Whether files are being indexed now.
    pub indexing: bool,
    /// The languages scans can be read in here (Tesseract's installed language data), for
    /// Settings › Files; None: Tesseract is not installed, so scans are not read.
    pub scan_languages: Option<Vec<ScanLanguage>>,
    /// The second look at passages (Settings › Files): the setting, the model, its measured
    /// cost here.
    #[cfg_attr(feature = "ts", ts(optional))]
    pub rerank: Option<super::rerank::RerankStatus>,
}

/// A language scans can be read in: Tesseract's name for it and what its data takes on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ScanLanguage {
    /// Tesseract's name: "eng", "deu", "chi_sim"…
    pub code: String,
    /// Bytes of its data file.
    pub bytes: u64,
}

/// A conversation's files as the front end shows them above the message box.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConversationDocuments {
    /// The attached files, then those still being indexed for it.
    pub documents: Vec<DocumentInfo>,
    /// What to tell the user before the first answer when the model in use is on a remote
    /// server and they have not accepted that passages go there (None: nothing to tell).
    pub remote_notice: Option<RemoteNotice>,
}

/// The notice that passages of the attached files will be sent to a remote server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RemoteNotice {
    /// The server the passages would go to.
    pub server: String,
    /// The notice in English; the desktop says it from its catalog, naming `server`.
    pub message: String,
}

/// How the indexing of the user's files goes, sent to the front end (a drop on the window is
/// sent on its own event, as a `Dropped`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", content = "data", rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum DocumentEvent {
    /// How far indexing is.
    Progress(IndexProgress),
    /// A file is indexed (or its error is stored with it).
    Indexed {
        /// The file as the library has it now.
        document: DocumentInfo,
    },
    /// A file could not be indexed. It is not kept in the library unless the user asks
    /// (`Documents::keep_failed` with `failure`).
    Failed {
        /// The file's name.
        name: String,
        /// Why, by code, with the technical detail apart.
        error: FileError,
        /// Names this failure for Keep in Your files (None: nothing to keep, e.g. the run
        /// itself failed).
        #[cfg_attr(feature = "ts", ts(type = "number | null"))]
        failure: Option<u64>,
    },
    /// An indexing run ended: every file and passage it reached is kept.
    Finished {
        /// Whether Cancel stopped it early (what it did not reach waits for the next run).
        cancelled: bool,
        /// Files it was given that it never read (only when cancelled), by name: attach them
        /// again to read them.
        unread: Vec<String>,
    },
}

/// Why a file could not be read, as the front end says it: a stable `code` it translates
/// (filling in `params`), and the technical `detail` (the parser's words, the path) that it
/// shows only under Details. `message` is the whole English sentence (the command line's, and
/// the words for a code a front end does not know).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FileError {
    /// What went wrong: "damaged", "password", "too-large", "unknown-kind", …
    pub code: String,
    /// The values the sentence names (file name, sizes, limits, format, languages).
    pub params: BTreeMap<String, String>,
    /// The technical detail, for Details (None: the sentence says all).
    pub detail: Option<String>,
    /// The English sentence.
    pub message: String,
}

impl FileError {
    /// The code of an error whose cause is not known more precisely than its message.
    pub const UNREADABLE: &'static str = "unreadable";

    /// An error by its extractor's code (`failure`), with the English `message` beside it.
    pub fn coded(failure: &Failure, message: &str) -> Self {
        Self {
            code: failure.code.clone(),
            params: failure.params.clone(),
            detail: Some(failure.detail.clone()).filter(|d| !d.is_empty()),
            message: message.to_owned(),
        }
    }

    /// An error known only by its English `message` (a library stored before codes, or a
    /// failure outside extraction): said as "could not be read", the message under Details.
    pub fn from_message(name: &str, message: &str) -> Self {
        Self {
            code: Self::UNREADABLE.to_owned(),
            params: BTreeMap::from([("file".to_owned(), name.to_owned())]),
            detail: Some(message.to_owned()),
            message: message.to_owned(),
        }
    }
}

/// How far the indexing of files is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct IndexProgress {
    /// The file being read, or whose passages are embedded.
    pub document_name: String,
    /// Which of the two stages.
    pub stage: IndexStage,
    /// Files read (reading) or passages embedded (embedding) so far.
    pub done: usize,
    /// In all.
    pub total: usize,
    /// While the file's scanned pages are read by OCR: pages read so far, and of how many.
    pub scanned_pages: Option<ScannedPages>,
}

/// How far the OCR of a file's scanned pages is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ScannedPages {
    pub done: usize,
    pub total: usize,
}

/// The two stages of indexing: every file is read (then searchable by keyword), then its
/// passages are embedded (then searchable by meaning).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum IndexStage {
    /// Extracting text and storing passages.
    Reading,
    /// Computing the passages' vectors.
    Embedding,
}

/// The window event that carries [`DocumentEvent`]s.
pub const DOCUMENTS_EVENT: &str = "documents";

/// Where indexing events go.
pub type DocumentSink = Arc<dyn Fn(DocumentEvent) + Send + Sync>;

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

impl From<&Document> for DocumentInfo {
    fn from(d: &Document) -> Self {
        DocumentInfo {
            id: d.id,
            name: file_name(&d.path),
            format: d.format.clone(),
            title: d.title.clone(),
            size: d.size,
            passages: d.passages,
            waiting: 0,
            error: d.error.as_deref().map(|message| match &d.failure {
                Some(failure) => FileError::coded(failure, message),
                None => FileError::from_message(&file_name(&d.path), message),
            }),
            indexing: false,
        }
    }
}

/// What the user is told before passages of their files go to `server` (host and port).
pub fn remote_notice(server: &str) -> RemoteNotice {
    RemoteNotice {
        server: server.to_string(),
        message: format!(
            "Passages of the files attached to this conversation will be sent to {server} to \
             answer. Your files and their index stay on this computer."
        ),
    }
}
