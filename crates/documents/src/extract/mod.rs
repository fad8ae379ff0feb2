//! Text extraction: one file in, its text out, cut where the file itself is cut (a PDF's pages,
//! a Markdown file's or a web page's headings, an e-book's chapters), so that a passage found
//! later can be cited by the place it came from.
//!
//! `extract` is the one entry point. It reads only regular files (`regular_file`), no larger
//! than `ExtractLimits::max_file_bytes`, picks the reader by the file's extension
//! (`Format::from_path`), and runs it with every third-party parser inside `guarded`, so a
//! parser's panic on a hostile file becomes an `ExtractError` naming the file instead of taking
//! the caller down. Zip-based formats (DOCX, ODT, EPUB) go through `archive`, which refuses
//! archives that would unpack past the limits (zip bombs).
//!
//! A panic is not the only way a parser can fail: an allocation failure or a stack overflow
//! aborts the process. So in a program that called `child::run_if_asked()` (Hearth's own), the
//! binary formats (PDF, DOCX, ODT, EPUB, HTML) are parsed in a child process under memory and
//! time limits (`child`); plain text, Markdown and source files, read by Hearth's own code in
//! time and memory linear in their size, are read in process. Each reader also bounds its work
//! at the cause (pages, operators, expansions, parts, headings), so the child's limits are the
//! second line, not the first.
//!
//! Scans are read by OCR (`scan`, with `ocr` running Tesseract and Poppler as separate confined
//! programs): a PDF's pages without a text layer (`Extracted::scanned_pages`) and pictures
//! (`Format::Image`, inspected from their headers by `image` before anything decodes them).
//! Their sections are marked `from_scan`. Every error has a stable code with parameters for a
//! front end to translate (`error`).

mod archive;
pub mod child;
mod docx;
mod epub;
mod error;
mod html;
mod image;
mod markdown;
pub mod ocr;
mod odt;
mod pdf;
mod program;
mod regular_file;
mod scan;
mod text_encoding;
mod wire;
mod xml;

use std::fmt;

pub use error::{ExtractError, CODES};
pub use image::ImageLimits;
pub use ocr::{available_ocr_languages, osd_installed, OcrLanguage, OcrSettings};
use std::panic::{catch_unwind, UnwindSafe};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// What a file is, decided by its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Plain text (`.txt`, `.log`, `.csv`...): one section.
    PlainText,
    /// Markdown: one section per heading.
    Markdown,
    /// Program source or configuration (`.rs`, `.py`, `.toml`...): one section.
    SourceCode,
    /// PDF, from its text layer: one section per page.
    Pdf,
    /// Word document (Office Open XML): one section per heading.
    Docx,
    /// OpenDocument text: one section per heading.
    Odt,
    /// Web page: its visible text, one section per heading.
    Html,
    /// E-book: its chapters in reading order, one section per heading.
    Epub,
    /// A picture (PNG, JPEG, TIFF, WebP) of a page, read by OCR: one section, or one per page
    /// of a TIFF. HEIC and AVIF are recognised and refused plainly.
    Image,
}

/// Every extension Hearth reads, lowercase, with its format: the one list behind
/// `Format::from_path` and the file dialog's filter.
const EXTENSIONS: &[(&str, Format)] = &[
    ("txt", Format::PlainText),
    ("text", Format::PlainText),
    ("log", Format::PlainText),
    ("csv", Format::PlainText),
    ("tsv", Format::PlainText),
    ("rst", Format::PlainText),
    ("org", Format::PlainText),
    ("adoc", Format::PlainText),
    ("tex", Format::PlainText),
    ("pdf", Format::Pdf),
    ("docx", Format::Docx),
    ("odt", Format::Odt),
    ("html", Format::Html),
    ("htm", Format::Html),
    ("xhtml", Format::Html),
    ("epub", Format::Epub),
    ("md", Format::Markdown),
    ("markdown", Format::Markdown),
    ("mdown", Format::Markdown),
    ("mkd", Format::Markdown),
    ("rs", Format::SourceCode),
    ("py", Format::SourceCode),
    ("c", Format::SourceCode),
    ("h", Format::SourceCode),
    ("cc", Format::SourceCode),
    ("cpp", Format::SourceCode),
    ("hpp", Format::SourceCode),
    ("cs", Format::SourceCode),
    ("go", Format::SourceCode),
    ("java", Format::SourceCode),
    ("kt", Format::SourceCode),
    ("swift", Format::SourceCode),
    ("js", Format::SourceCode),
    ("mjs", Format::SourceCode),
    ("ts", Format::SourceCode),
    ("jsx", Format::SourceCode),
    ("tsx", Format::SourceCode),
    ("svelte", Format::SourceCode),
    ("vue", Format::SourceCode),
    ("css", Format::SourceCode),
    ("rb", Format::SourceCode),
    ("php", Format::SourceCode),
    ("pl", Format::SourceCode),
    ("lua", Format::SourceCode),
    ("r", Format::SourceCode),
    ("scala", Format::SourceCode),
    ("hs", Format::SourceCode),
    ("ml", Format::SourceCode),
    ("sh", Format::SourceCode),
    ("bash", Format::SourceCode),
    ("zsh", Format::SourceCode),
    ("fish", Format::SourceCode),
    ("sql", Format::SourceCode),
    ("toml", Format::SourceCode),
    ("yaml", Format::SourceCode),
    ("yml", Format::SourceCode),
    ("json", Format::SourceCode),
    ("ini", Format::SourceCode),
    ("cfg", Format::SourceCode),
    ("png", Format::Image),
    ("jpg", Format::Image),
    ("jpeg", Format::Image),
    ("tif", Format::Image),
    ("tiff", Format::Image),
    ("webp", Format::Image),
    ("heic", Format::Image),
    ("heif", Format::Image),
    ("avif", Format::Image),
];

impl Format {
    /// The format a file's extension (any case) names, or `None` when Hearth does not read it.
    pub fn from_path(path: &Path) -> Option<Format> {
        let extension = path.extension()?.to_str()?.to_ascii_lowercase();
        EXTENSIONS
            .iter()
            .find(|(known, _)| *known == extension)
            .map(|(_, format)| *format)
    }

    /// A stable lowercase code for this kind of file (the `format` parameter of an error), for
    /// a front end to name it in the person's language.
    pub fn code(self) -> &'static str {
        match self {
            Format::PlainText => "text",
            Format::Markdown => "markdown",
            Format::SourceCode => "source",
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Odt => "odt",
            Format::Html => "html",
            Format::Epub => "epub",
            Format::Image => "image",
        }
    }

    /// What a person calls this kind of file, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::PlainText => "text file",
            Format::Markdown => "Markdown file",
            Format::SourceCode => "source file",
            Format::Pdf => "PDF",
            Format::Docx => "Word document (DOCX)",
            Format::Odt => "OpenDocument text (ODT)",
            Format::Html => "web page (HTML)",
            Format::Epub => "e-book (EPUB)",
            Format::Image => "picture",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every extension Hearth reads (lowercase, no dot), for a file dialog's filter.
pub fn accepted_extensions() -> Vec<&'static str> {
    EXTENSIONS.iter().map(|(extension, _)| *extension).collect()
}

/// A file's text, cut into the sections a citation can name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extracted {
    pub format: Format,
    /// The title the file gives itself (a Markdown `# heading`, a PDF's or EPUB's metadata, an
    /// HTML `<title>`), when it gives one.
    pub title: Option<String>,
    /// In the file's order; none is empty.
    pub sections: Vec<Section>,
    /// The pages (from 1) of a PDF, or the frames of a picture, that have no text layer: the
    /// scanned ones. Those read by OCR have their sections (`Section::from_scan`); when OCR is
    /// off or unavailable, a file with other text keeps that and these pages are left out.
    pub scanned_pages: Vec<u32>,
}

/// The text of one page or one section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    pub place: Place,
    pub text: String,
    /// Read by OCR from a picture of the page (a scan or a photo): its citation says "read
    /// from a scan", since a word in it may be misread.
    pub from_scan: bool,
}

/// Where in a file a section is: what a citation names beside the file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// A page of a PDF, counted from 1 as a viewer counts them.
    Page(u32),
    /// A section, by its heading's text (an e-book's chapter, by its title).
    Heading(String),
    /// The file as a whole, or the part of it before its first heading: no finer place.
    Whole,
}

/// How much of a file Hearth will read: the bounds that keep a huge or hostile file from taking
/// the machine's memory or time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractLimits {
    /// The largest file read at all (its size on disk). By default 256 MiB: larger files are
    /// refused with a message, not streamed, since their text would be too much to index anyway.
    pub max_file_bytes: u64,
    /// The most text one file may yield, in bytes of UTF-8. By default 64 MiB.
    pub max_text_bytes: usize,
    /// The most entries a zip-based file (DOCX, ODT, EPUB) may list. By default 10,000.
    pub max_archive_entries: usize,
    /// The most bytes read out of one zip-based file, all entries together. By default 256 MiB.
    pub max_unpacked_bytes: u64,
    /// The largest ratio of an entry's unpacked to packed size. By default 200 (text XML
    /// compresses about 5 to 20 times; a zip bomb compresses a thousand times and more).
    pub max_compression_ratio: u64,
    /// The address space of the child process that parses a binary format (see `child`). By
    /// default 4 GiB.
    pub max_reader_memory: u64,
    /// The processor time of that child, in seconds; it is killed after twice as long in
    /// wall-clock time. By default 120.
    pub max_reader_seconds: u64,
    /// How scans (PDF pages without a text layer, pictures) are read by OCR: the languages
    /// (by default English), the resolution, and the bounds on pages, time and memory.
    pub ocr: OcrSettings,
    /// The bounds on a picture, checked from its header before it is decoded.
    pub image: ImageLimits,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        ExtractLimits {
            max_file_bytes: 256 << 20,
            max_text_bytes: 64 << 20,
            max_archive_entries: 10_000,
            max_unpacked_bytes: 256 << 20,
            max_compression_ratio: 200,
            max_reader_memory: 4 << 30,
            max_reader_seconds: 120,
            ocr: OcrSettings::default(),
            image: ImageLimits::default(),
        }
    }
}

/// Opens the file at `path` after the checks `extract` makes before reading (a regular file,
/// of a kind Hearth reads, not of the kernel's pseudo filesystems, within the size limit),
/// without reading it: what indexing hashes, so that nothing is read that would be refused.
pub(crate) fn open_checked(
    path: &Path,
    limits: &ExtractLimits,
) -> Result<std::fs::File, ExtractError> {
    format_of(path)?;
    Ok(regular_file::open(path, limits.max_file_bytes)?.0)
}

/// The format of the file at `path`, once it is known to be a regular file.
fn format_of(path: &Path) -> Result<Format, ExtractError> {
    // First, so that a folder or a pipe is called what it is, whatever its name.
    regular_file::check(path)?;
    Format::from_path(path).ok_or_else(|| ExtractError::UnknownFormat {
        path: path.to_owned(),
    })
}

/// Reads the text of the file at `path`, cut into sections, within `limits`.
pub fn extract(path: &Path, limits: &ExtractLimits) -> Result<Extracted, ExtractError> {
    extract_cancellable(path, limits, &AtomicBool::new(false))
}

/// `extract`, which stops with `ExtractError::Cancelled` when `cancel` is set while a binary
/// format is parsed in a child process or a scan is read by OCR.
pub fn extract_cancellable(
    path: &Path,
    limits: &ExtractLimits,
    cancel: &AtomicBool,
) -> Result<Extracted, ExtractError> {
    extract_with_progress(path, limits, cancel, &mut |_, _| {})
}

/// `extract_cancellable`, calling `pages(read, of)` before each scanned page is read by OCR and
/// after the last.
pub fn extract_with_progress(
    path: &Path,
    limits: &ExtractLimits,
    cancel: &AtomicBool,
    pages: &mut dyn FnMut(usize, usize),
) -> Result<Extracted, ExtractError> {
    let format = format_of(path)?;
    let bytes = regular_file::read(path, limits.max_file_bytes)?;
    let mut extracted = match format {
        Format::Image => return scan::picture(path, &bytes, limits, cancel, pages),
        Format::Pdf | Format::Docx | Format::Odt | Format::Epub | Format::Html
            if child::available() =>
        {
            child::extract(path, format, &bytes, limits, cancel)?
        }
        _ => parse(path, format, &bytes, limits)?,
    };
    if !extracted.scanned_pages.is_empty() {
        scan::pdf_pages(path, &bytes, &mut extracted, limits, cancel, pages)?;
    }
    Ok(extracted)
}

/// The sections of `bytes`, the content of the file at `path`, read as `format`.
fn parse(
    path: &Path,
    format: Format,
    bytes: &[u8],
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let extracted = match format {
        Format::PlainText | Format::SourceCode => Extracted {
            format,
            title: None,
            sections: vec![Section {
                place: Place::Whole,
                text: text_encoding::decode(path, format, bytes)?,
                from_scan: false,
            }],
            scanned_pages: Vec::new(),
        },
        Format::Markdown => markdown::extract(&text_encoding::decode(path, format, bytes)?),
        Format::Html => {
            let page = html::decode(path, format, bytes)?;
            let (title, sections) = guarded(path, format, || Ok(html::extract(&page)))?;
            Extracted {
                format,
                title,
                sections,
                scanned_pages: Vec::new(),
            }
        }
        Format::Pdf => guarded(path, format, || pdf::extract(path, bytes, limits))?,
        Format::Docx => guarded(path, format, || docx::extract(path, bytes, limits))?,
        Format::Odt => guarded(path, format, || odt::extract(path, bytes, limits))?,
        Format::Epub => guarded(path, format, || epub::extract(path, bytes, limits))?,
        // Read by OCR in `extract_with_progress`, never parsed here.
        Format::Image => {
            return Err(ExtractError::ReaderStopped {
                path: path.to_owned(),
                reason: "a picture is read by OCR, not by a parser".to_owned(),
            })
        }
    };
    finish(path, extracted, limits)
}

/// The most characters of a heading kept as a section's place. A place is stored and embedded
/// with every passage of its section, so an unbounded heading would multiply the file's size.
pub const MAX_HEADING_CHARS: usize = 200;

/// Drops empty sections, shortens long headings, and refuses a file with no text (and no
/// scanned pages left to read) or too much.
fn finish(
    path: &Path,
    mut extracted: Extracted,
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    extracted
        .sections
        .retain(|section| !section.text.trim().is_empty());
    for section in &mut extracted.sections {
        if let Place::Heading(heading) = &mut section.place {
            shorten(heading, MAX_HEADING_CHARS);
        }
    }
    if let Some(title) = &mut extracted.title {
        shorten(title, MAX_HEADING_CHARS);
    }
    if extracted.sections.is_empty() && extracted.scanned_pages.is_empty() {
        return Err(ExtractError::NoText {
            path: path.to_owned(),
        });
    }
    // A heading counts too: it is stored and embedded with its section's passages.
    let total: usize = extracted
        .sections
        .iter()
        .map(|s| match &s.place {
            Place::Heading(heading) => heading.len() + s.text.len(),
            _ => s.text.len(),
        })
        .sum();
    if total > limits.max_text_bytes {
        return Err(ExtractError::TooMuchText {
            path: path.to_owned(),
            limit: limits.max_text_bytes,
        });
    }
    Ok(extracted)
}

/// Cuts `text` to its first `max_chars` characters, marking the cut with an ellipsis.
fn shorten(text: &mut String, max_chars: usize) {
    if let Some((end, _)) = text.char_indices().nth(max_chars) {
        text.truncate(end);
        text.push('\u{2026}');
    }
}

/// Runs a third-party parser so that its panic on a malformed file becomes `ParserPanic` for
/// that file rather than unwinding into the caller (the panic hook still prints the message).
/// The parsers only read the bytes they are given and build their own values, so nothing they
/// leave half-done is seen after a panic.
fn guarded<T>(
    path: &Path,
    format: Format,
    parse: impl FnOnce() -> Result<T, ExtractError> + UnwindSafe,
) -> Result<T, ExtractError> {
    catch_unwind(parse).unwrap_or_else(|_| {
        Err(ExtractError::ParserPanic {
            path: path.to_owned(),
            format,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_decides_the_format_in_any_case() {
        assert_eq!(
            Format::from_path(Path::new("a/Notes.MD")),
            Some(Format::Markdown)
        );
        assert_eq!(
            Format::from_path(Path::new("main.rs")),
            Some(Format::SourceCode)
        );
        assert_eq!(Format::from_path(Path::new("README")), None);
        assert_eq!(
            Format::from_path(Path::new("photo.JPEG")),
            Some(Format::Image)
        );
        assert_eq!(Format::from_path(Path::new("drawing.xcf")), None);
    }

    #[test]
    fn every_extension_is_listed_once() {
        let mut extensions = accepted_extensions();
        let count = extensions.len();
        extensions.sort();
        extensions.dedup();
        assert_eq!(extensions.len(), count, "an extension has two formats");
    }

    #[test]
    fn a_panicking_parser_becomes_an_error_naming_the_file() {
        let error = guarded::<()>(Path::new("bad.txt"), Format::PlainText, || {
            panic!("parser bug")
        })
        .unwrap_err();
        assert!(error.to_string().contains("bad.txt"), "{error}");
    }
}
