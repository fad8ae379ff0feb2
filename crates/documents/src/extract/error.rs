//! Why a file's text could not be read: `ExtractError`, in three parts kept apart.
//!
//! - `code()`: a stable, lowercase, hyphenated code ("damaged", "password", "too-large", …)
//!   that a front end translates into plain words in the person's language. Codes are never
//!   renamed; a new kind of failure gets a new code. `CODES` lists them all.
//! - `params()`: what those plain words may name: always `file` (the file's name, not its
//!   path), and per code the sizes, limits, format or languages (all as text).
//! - `detail()`: the technical text for a Details fold: the full path and, where there is one,
//!   the parser's or the program's own message. Never shown as the sentence itself.
//!
//! `Display` stays the English sentence the command line prints (path, what happened, what to
//! do), as before the codes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{accepted_extensions, Format};

/// Every code `ExtractError::code` returns, for a front end's catalog (and its test that each
/// one is translated).
pub const CODES: &[&str] = &[
    "cannot-open",
    "folder",
    "not-a-file",
    "system-file",
    "too-large",
    "unknown-kind",
    "password",
    "drm",
    "scanned-ocr-off",
    "scanned-no-ocr-program",
    "scanned-no-ocr-language",
    "ocr-failed",
    "too-many-scanned-pages",
    "image-too-large",
    "image-bomb",
    "unsupported-image",
    "no-text",
    "damaged",
    "zip-bomb",
    "too-much-text",
    "too-complex",
    "reader-stopped",
    "cancelled",
];

/// Why a file's text could not be read. Each message names the file and says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    #[error("could not read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is a folder, not a file: attach the files inside it", path.display())]
    Folder { path: PathBuf },
    #[error(
        "{} is a {kind}, not a regular file: Hearth reads only regular files",
        path.display()
    )]
    NotRegularFile { path: PathBuf, kind: &'static str },
    #[error(
        "{} is a file of the kernel's {filesystem} (system state, not a document): Hearth does \
         not read it",
        path.display()
    )]
    SystemFile {
        path: PathBuf,
        filesystem: &'static str,
    },
    #[error(
        "{} is {} MiB, more than the {} MiB Hearth reads from one file: split it, or save the \
         part you need as a smaller file",
        path.display(), size >> 20, limit >> 20
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(
        "Hearth cannot read {}: its kind of file is not one it knows (it reads {})",
        path.display(), accepted_extensions().join(", ")
    )]
    UnknownFormat { path: PathBuf },
    #[error("{} is {}", path.display(), encrypted_advice(*format))]
    Encrypted { path: PathBuf, format: Format },
    /// A scan (a PDF without a text layer, or a picture) and reading scans is turned off (no
    /// OCR language was asked for).
    #[error(
        "{}: this is a scanned image with no text layer, and reading scans (OCR) is turned \
         off: choose a language scans are read in, then attach it again",
        path.display()
    )]
    NoTextLayer { path: PathBuf },
    /// A scan, and the OCR program (Tesseract) or the page renderer (Poppler) is not installed.
    #[error(
        "{}: this is a scanned image, and the program that reads scans is not installed \
         ({program}): install it (Debian and Ubuntu: tesseract-ocr and poppler-utils), then \
         attach it again",
        path.display()
    )]
    OcrProgramMissing { path: PathBuf, program: String },
    /// A scan, and none of the languages asked for has its OCR data installed.
    #[error(
        "{}: this is a scanned image, and no OCR language is installed for it (asked for \
         {languages}; installed: {installed}): install the language's data (Debian and Ubuntu: \
         tesseract-ocr-<language>), then attach it again",
        path.display()
    )]
    NoOcrLanguage {
        path: PathBuf,
        languages: String,
        installed: String,
    },
    /// The OCR program or the page renderer failed on the file.
    #[error(
        "{} could not be read as a scan: {detail}. The file may be damaged: open it in the \
         program that made it and save it again",
        path.display()
    )]
    OcrFailed { path: PathBuf, detail: String },
    /// More pages need OCR than Hearth reads from one file.
    #[error(
        "{} has {pages} scanned pages, more than the {limit} Hearth reads from one file by OCR: \
         split it into smaller files",
        path.display()
    )]
    TooManyScannedPages {
        path: PathBuf,
        pages: u64,
        limit: u64,
    },
    /// A picture larger than Hearth reads (its header says so; it is not decoded).
    #[error(
        "{} is a picture of {width} x {height} pixels, more than the {} million pixels Hearth \
         reads: save it smaller (a page scanned at 300 dpi is about 9 million)",
        path.display(), max_pixels / 1_000_000
    )]
    ImageTooLarge {
        path: PathBuf,
        width: u64,
        height: u64,
        max_pixels: u64,
    },
    /// A picture that would unpack to far more than a real picture of its size (an image bomb).
    #[error(
        "{} is refused as a possible image bomb: it is {} KiB but would unpack to {} MiB. A \
         real picture of this size is far smaller unpacked; save it again from the program that \
         made it",
        path.display(), file_bytes >> 10, unpacked_bytes >> 20
    )]
    ImageBomb {
        path: PathBuf,
        file_bytes: u64,
        unpacked_bytes: u64,
    },
    /// A kind of picture Hearth does not read (HEIC, AVIF).
    #[error(
        "{} is a {kind} picture, which Hearth cannot read: save or export it as JPEG or PNG, \
         then attach that",
        path.display()
    )]
    UnsupportedImage { path: PathBuf, kind: String },
    #[error("{} holds no text to search", path.display())]
    NoText { path: PathBuf },
    #[error(
        "{} is not a readable {format}: {detail}. It may be damaged or only partly downloaded: \
         open it in the program that made it and save it again",
        path.display()
    )]
    Corrupt {
        path: PathBuf,
        format: Format,
        detail: String,
    },
    #[error(
        "{} is refused as a possible zip bomb: {detail}. A real document of this kind is far \
         smaller unpacked; save it again from the program that made it",
        path.display()
    )]
    ArchiveLimit { path: PathBuf, detail: String },
    #[error(
        "{} yields more than {} MiB of text, more than Hearth indexes from one file: split it \
         into smaller files",
        path.display(), limit >> 20
    )]
    TooMuchText { path: PathBuf, limit: usize },
    #[error(
        "the {format} reader failed on {} (an internal error of the parser, caught): the file \
         may be damaged; open it in the program that made it and save it again",
        path.display()
    )]
    ParserPanic { path: PathBuf, format: Format },
    #[error(
        "{} is too complex to read: {detail}. Save the part you need as a smaller file",
        path.display()
    )]
    TooComplex { path: PathBuf, detail: String },
    #[error(
        "{} could not be read: {reason}. The file may be damaged or made to harm; open it in the \
         program that made it and save it again",
        path.display()
    )]
    ReaderStopped { path: PathBuf, reason: String },
    #[error("reading {} was cancelled", path.display())]
    Cancelled { path: PathBuf },
}

impl ExtractError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        use ExtractError::*;
        match self {
            Io { path, .. }
            | Folder { path }
            | NotRegularFile { path, .. }
            | SystemFile { path, .. }
            | TooLarge { path, .. }
            | UnknownFormat { path }
            | Encrypted { path, .. }
            | NoTextLayer { path }
            | OcrProgramMissing { path, .. }
            | NoOcrLanguage { path, .. }
            | OcrFailed { path, .. }
            | TooManyScannedPages { path, .. }
            | ImageTooLarge { path, .. }
            | ImageBomb { path, .. }
            | UnsupportedImage { path, .. }
            | NoText { path }
            | Corrupt { path, .. }
            | ArchiveLimit { path, .. }
            | TooMuchText { path, .. }
            | ParserPanic { path, .. }
            | TooComplex { path, .. }
            | ReaderStopped { path, .. }
            | Cancelled { path } => path,
        }
    }

    /// The stable code of this kind of failure (one of `CODES`), for a front end to translate.
    pub fn code(&self) -> &'static str {
        use ExtractError::*;
        match self {
            Io { .. } => "cannot-open",
            Folder { .. } => "folder",
            NotRegularFile { .. } => "not-a-file",
            SystemFile { .. } => "system-file",
            TooLarge { .. } => "too-large",
            UnknownFormat { .. } => "unknown-kind",
            Encrypted {
                format: Format::Epub,
                ..
            } => "drm",
            Encrypted { .. } => "password",
            NoTextLayer { .. } => "scanned-ocr-off",
            OcrProgramMissing { .. } => "scanned-no-ocr-program",
            NoOcrLanguage { .. } => "scanned-no-ocr-language",
            OcrFailed { .. } => "ocr-failed",
            TooManyScannedPages { .. } => "too-many-scanned-pages",
            ImageTooLarge { .. } => "image-too-large",
            ImageBomb { .. } => "image-bomb",
            UnsupportedImage { .. } => "unsupported-image",
            NoText { .. } => "no-text",
            Corrupt { .. } | ParserPanic { .. } => "damaged",
            ArchiveLimit { .. } => "zip-bomb",
            TooMuchText { .. } => "too-much-text",
            TooComplex { .. } => "too-complex",
            ReaderStopped { .. } => "reader-stopped",
            Cancelled { .. } => "cancelled",
        }
    }

    /// What the translated sentence of `code()` may name, as text: always `file` (the file's
    /// name) and `format` (the kind of file its name says: `Format::code`, or its extension),
    /// and per code:
    /// - too-large: `size_mib`, `limit_mib`;
    /// - not-a-file: `kind` (folder, pipe, socket, device…); system-file: `filesystem`;
    /// - scanned-no-ocr-program: `program`;
    /// - scanned-no-ocr-language: `languages` (asked for), `installed` (Tesseract codes joined
    ///   by "+", e.g. "eng+deu");
    /// - too-many-scanned-pages: `pages`, `limit`;
    /// - image-too-large: `width`, `height`, `limit_megapixels`;
    /// - image-bomb: `size_kib`, `unpacked_mib`;
    /// - unsupported-image: `kind` (HEIC, AVIF);
    /// - too-much-text: `limit_mib`.
    pub fn params(&self) -> BTreeMap<&'static str, String> {
        use ExtractError::*;
        let mut params = BTreeMap::new();
        let path = self.path();
        params.insert("file", file_name(path));
        let format = match self {
            Encrypted { format, .. } | Corrupt { format, .. } | ParserPanic { format, .. } => {
                format.code().to_owned()
            }
            _ => match Format::from_path(path) {
                Some(format) => format.code().to_owned(),
                None => path
                    .extension()
                    .map(|e| e.to_string_lossy().to_lowercase())
                    .unwrap_or_default(),
            },
        };
        params.insert("format", format);
        match self {
            TooLarge { size, limit, .. } => {
                params.insert("size_mib", (size >> 20).to_string());
                params.insert("limit_mib", (limit >> 20).to_string());
            }
            NotRegularFile { kind, .. } => {
                params.insert("kind", (*kind).to_owned());
            }
            SystemFile { filesystem, .. } => {
                params.insert("filesystem", (*filesystem).to_owned());
            }
            OcrProgramMissing { program, .. } => {
                params.insert("program", program.clone());
            }
            NoOcrLanguage {
                languages,
                installed,
                ..
            } => {
                params.insert("languages", languages.clone());
                params.insert("installed", installed.clone());
            }
            TooManyScannedPages { pages, limit, .. } => {
                params.insert("pages", pages.to_string());
                params.insert("limit", limit.to_string());
            }
            ImageTooLarge {
                width,
                height,
                max_pixels,
                ..
            } => {
                params.insert("width", width.to_string());
                params.insert("height", height.to_string());
                params.insert("limit_megapixels", (max_pixels / 1_000_000).to_string());
            }
            ImageBomb {
                file_bytes,
                unpacked_bytes,
                ..
            } => {
                params.insert("size_kib", (file_bytes >> 10).to_string());
                params.insert("unpacked_mib", (unpacked_bytes >> 20).to_string());
            }
            UnsupportedImage { kind, .. } => {
                params.insert("kind", kind.clone());
            }
            TooMuchText { limit, .. } => {
                params.insert("limit_mib", (limit >> 20).to_string());
            }
            _ => {}
        }
        params
    }

    /// The technical text for a Details fold: the full path, and the parser's or program's own
    /// words where there are some (never the plain sentence).
    pub fn detail(&self) -> String {
        use ExtractError::*;
        let path = self.path().display();
        match self {
            Io { source, .. } => format!("{path}: {source}"),
            Corrupt { detail, .. }
            | ArchiveLimit { detail, .. }
            | TooComplex { detail, .. }
            | OcrFailed { detail, .. } => format!("{path}: {detail}"),
            ReaderStopped { reason, .. } => format!("{path}: {reason}"),
            ParserPanic { format, .. } => format!("{path}: the {format} parser panicked"),
            OcrProgramMissing { program, .. } => format!("{path}: {program} not found"),
            NoOcrLanguage {
                languages,
                installed,
                ..
            } => format!("{path}: OCR languages asked {languages}, installed {installed}"),
            _ => path.to_string(),
        }
    }
}

/// The last part of `path`, as a person sees it in a list.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// What an encrypted file of `format` is and what the user can do about it.
fn encrypted_advice(format: Format) -> String {
    match format {
        Format::Pdf => {
            "an encrypted PDF: open it with its password in a PDF viewer, save or print \
                        it to a PDF without one, and attach that"
                .to_owned()
        }
        Format::Epub => {
            "an e-book locked with DRM: Hearth reads only e-books without DRM".to_owned()
        }
        format => format!(
            "a password-protected {format}: open it with its password in the program that made \
             it, save a copy without one, and attach that"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_listed_and_params_name_the_file_not_the_path() {
        let error = ExtractError::TooLarge {
            path: "/home/someone/Tax papers/scanned-letter.pdf".into(),
            size: 300 << 20,
            limit: 256 << 20,
        };
        assert_eq!(error.code(), "too-large");
        let params = error.params();
        assert_eq!(params["file"], "scanned-letter.pdf");
        assert_eq!(params["format"], "pdf");
        assert_eq!(params["size_mib"], "300");
        assert_eq!(params["limit_mib"], "256");
        assert!(error.detail().contains("/home/someone/Tax papers"));
        let corrupt = ExtractError::Corrupt {
            path: "a/broken.pdf".into(),
            format: Format::Pdf,
            detail: "failed parsing cross reference table".into(),
        };
        assert_eq!(corrupt.code(), "damaged");
        assert!(corrupt
            .detail()
            .ends_with("failed parsing cross reference table"));
        assert!(!corrupt
            .params()
            .values()
            .any(|v| v.contains("cross reference")));
        for error in [
            error,
            corrupt,
            ExtractError::Encrypted {
                path: "b.epub".into(),
                format: Format::Epub,
            },
            ExtractError::NoTextLayer {
                path: "scan.pdf".into(),
            },
            ExtractError::UnsupportedImage {
                path: "IMG_1.HEIC".into(),
                kind: "HEIC".into(),
            },
        ] {
            assert!(
                CODES.contains(&error.code()),
                "{} is not listed",
                error.code()
            );
        }
    }
}
