//! PDF, page by page, from its text layer, with lopdf (chosen over pdf-extract and pdf_oxide in
//! bench/pdf_extractors: as complete on Debian's manuals, 3 to 9 times faster, and the
//! lightest to build; bench/README.md has the figures).
//!
//! lopdf repairs damaged cross-reference tables, opens PDFs encrypted with an empty user
//! password (most "protected" PDFs only restrict printing), and bounds every stream it inflates
//! (`STREAM_LIMIT`), so a small crafted file cannot inflate to gigabytes. A page that fails to
//! decode is skipped with a warning rather than losing the document. A page whose text layer is
//! empty is most likely a scanned image: its number is listed in `Extracted::scanned_pages`,
//! for `extract` to read it by OCR (`ocr`).
//!
//! A document's whole cost is bounded, not only each stream's: at most `MAX_PAGES` pages are
//! walked (the page tree's claimed `/Count` is never used to reserve memory), a page's content
//! is decoded one operator at a time (`Content::decode_iter`) keeping only the text, and all the
//! pages together may inflate at most `DOCUMENT_CONTENT_LIMIT` bytes and decode at most
//! `DOCUMENT_OPERATOR_LIMIT` operators (pages that share one huge stream count it each time).

use std::path::Path;

use std::collections::BTreeMap;

use lopdf::content::Content;
use lopdf::{Document, Encoding, LoadOptions, Object, ObjectId};

use super::{ExtractError, ExtractLimits, Extracted, Format, Place, Section};

/// The most one stream loaded with the document (an object stream) may inflate to.
const STREAM_LIMIT: usize = 64 << 20;

/// The most one page's content (its streams together) or one font's encoding may inflate to.
/// A page of text takes kilobytes; 8 MiB leaves room for pages drawn with large vector paths.
const PAGE_CONTENT_LIMIT: usize = 8 << 20;

/// The most pages read from one PDF. The longest real books have a few thousand.
pub(super) const MAX_PAGES: usize = 100_000;

/// The most bytes of page content inflated for one PDF, all pages together.
const DOCUMENT_CONTENT_LIMIT: usize = 256 << 20;

/// The most content operators decoded for one PDF, all pages together (a dense page of text
/// has a few thousand).
const DOCUMENT_OPERATOR_LIMIT: usize = 20_000_000;

/// What is left of a document's content budget as its pages are read.
struct Budget {
    content_bytes: usize,
    operators: usize,
}

pub(super) fn extract(
    path: &Path,
    bytes: &[u8],
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let options = LoadOptions {
        max_decompressed_size: Some(STREAM_LIMIT),
        ..LoadOptions::default()
    };
    let document =
        Document::load_mem_with_options(bytes, options).map_err(|error| match error {
            lopdf::Error::InvalidPassword | lopdf::Error::Decryption(_) => {
                ExtractError::Encrypted {
                    path: path.to_owned(),
                    format: Format::Pdf,
                }
            }
            error => corrupt(path, error.to_string()),
        })?;
    // An encrypted PDF that the empty password did not open is loaded without its objects.
    if document.trailer.has(b"Encrypt") && !document.was_encrypted() {
        return Err(ExtractError::Encrypted {
            path: path.to_owned(),
            format: Format::Pdf,
        });
    }
    // Walked with `push`: collecting would reserve from the iterator's size hint, the sum of
    // the `/Count`s the file claims (a 720-byte file can claim four billion pages).
    let mut pages = Vec::new();
    for page_id in document.page_iter() {
        if pages.len() == MAX_PAGES {
            return Err(ExtractError::TooComplex {
                path: path.to_owned(),
                detail: format!("it has more than {MAX_PAGES} pages"),
            });
        }
        pages.push(page_id);
    }
    if pages.is_empty() {
        return Err(corrupt(path, "it has no pages".to_owned()));
    }
    let mut budget = Budget {
        content_bytes: DOCUMENT_CONTENT_LIMIT,
        operators: DOCUMENT_OPERATOR_LIMIT,
    };
    let mut sections = Vec::new();
    let mut scanned_pages = Vec::new();
    let mut total = 0;
    let mut first_failure = None;
    for (index, &page_id) in pages.iter().enumerate() {
        let number = index as u32 + 1;
        match page_text(&document, page_id, &mut budget) {
            Ok(Some(text)) if text.trim().is_empty() => scanned_pages.push(number),
            Ok(Some(text)) => {
                total += text.len();
                if total > limits.max_text_bytes {
                    return Err(ExtractError::TooMuchText {
                        path: path.to_owned(),
                        limit: limits.max_text_bytes,
                    });
                }
                sections.push(Section {
                    place: Place::Page(number),
                    text,
                    from_scan: false,
                });
            }
            Ok(None) => {
                return Err(ExtractError::TooComplex {
                    path: path.to_owned(),
                    detail: format!(
                        "its pages draw more than {} million operations or {} MiB of content, \
                         more than Hearth reads from one PDF",
                        DOCUMENT_OPERATOR_LIMIT / 1_000_000,
                        DOCUMENT_CONTENT_LIMIT >> 20
                    ),
                });
            }
            Err(error) => {
                tracing::warn!(file = %path.display(), page = number, %error, "page skipped");
                first_failure.get_or_insert(format!("page {number}: {error}"));
            }
        }
    }
    if sections.is_empty() && scanned_pages.is_empty() {
        return Err(corrupt(path, first_failure.unwrap_or_default()));
    }
    Ok(Extracted {
        format: Format::Pdf,
        title: title(&document),
        sections,
        scanned_pages,
    })
}

/// The text a page shows, as lopdf's `extract_text` gives it (fonts' encodings and ToUnicode
/// maps, `Tj`, `TJ`, `'` and `"`, a line break at `T*` and `ET`, a space for a wide `TJ` gap),
/// but for one page by its id: `extract_text` takes page numbers and walks the whole page tree
/// for each call, which made a page-by-page reading take time growing with the square of the
/// page count (4,000 pages took 3.9 s; bench/README.md). `None` when the page would exceed
/// what is left of the document's `budget`.
fn page_text(
    document: &Document,
    page_id: ObjectId,
    budget: &mut Budget,
) -> lopdf::Result<Option<String>> {
    let mut encodings = BTreeMap::new();
    for (name, font) in document.get_page_fonts(page_id)? {
        // A font whose encoding cannot be read leaves its text out, as extract_text does; a
        // font stream that would inflate past the limit fails the page.
        match font.get_font_encoding_with_limit(document, PAGE_CONTENT_LIMIT) {
            Ok(encoding) => {
                encodings.insert(name, encoding);
            }
            Err(error @ lopdf::Error::Decompress(_)) => return Err(error),
            Err(_) => {}
        }
    }
    let content = document.get_page_content_with_limit(page_id, PAGE_CONTENT_LIMIT)?;
    let Some(left) = budget.content_bytes.checked_sub(content.len()) else {
        return Ok(None);
    };
    budget.content_bytes = left;
    let mut text = String::new();
    let mut encoding = None;
    for operation in Content::decode_iter(&content) {
        let Some(left) = budget.operators.checked_sub(1) else {
            return Ok(None);
        };
        budget.operators = left;
        let operation = operation?;
        let operands = operation.operands.as_slice();
        match operation.operator.as_str() {
            "Tf" => {
                encoding = operands
                    .first()
                    .and_then(|font| font.as_name().ok())
                    .and_then(|font| encodings.get(font));
            }
            "Tj" | "TJ" => shown_text(&mut text, encoding, operands),
            "'" => {
                end_line(&mut text);
                shown_text(&mut text, encoding, operands);
            }
            "\"" => {
                end_line(&mut text);
                shown_text(&mut text, encoding, operands.get(2..).unwrap_or_default());
            }
            "T*" | "ET" => end_line(&mut text),
            _ => {}
        }
    }
    Ok(Some(text))
}

/// Appends the text of a text-showing operator's operands: strings, and the strings of a `TJ`
/// array, whose adjustments of more than 100 thousandths of an em read as a space.
fn shown_text(text: &mut String, encoding: Option<&Encoding>, operands: &[Object]) {
    let Some(encoding) = encoding else { return };
    for operand in operands {
        match operand {
            Object::String(bytes, _) => {
                let _ = encoding.write_to_string(bytes, text);
            }
            Object::Array(items) => {
                for item in items {
                    match item {
                        Object::String(bytes, _) => {
                            let _ = encoding.write_to_string(bytes, text);
                        }
                        Object::Integer(gap) if *gap < -100 => text.push(' '),
                        Object::Real(gap) if *gap < -100.0 => text.push(' '),
                        _ => {}
                    }
                }
                text.push(' ');
            }
            _ => {}
        }
    }
}

fn end_line(text: &mut String) {
    if !text.ends_with('\n') {
        text.push('\n');
    }
}

/// The title in the document's information dictionary, if it has a non-empty one.
fn title(document: &Document) -> Option<String> {
    let info = document.trailer.get(b"Info").ok()?;
    let info = match info.as_reference() {
        Ok(id) => document.get_dictionary(id).ok()?,
        Err(_) => info.as_dict().ok()?,
    };
    let title = lopdf::decode_text_string(info.get(b"Title").ok()?).ok()?;
    let title = title.trim();
    (!title.is_empty()).then(|| title.to_owned())
}

fn corrupt(path: &Path, detail: String) -> ExtractError {
    ExtractError::Corrupt {
        path: path.to_owned(),
        format: Format::Pdf,
        detail,
    }
}
