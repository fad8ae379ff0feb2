//! Scans read by OCR, in Hearth's process (which only starts and watches programs): a PDF's
//! pages that have no text layer, drawn one at a time by `pdftoppm` and read by Tesseract
//! (`pdf_pages`), and pictures (`picture`), checked from their headers first (`image`).
//!
//! The PDF's and the picture's bytes are the ones `extract` read and checked: they are copied
//! into OCR's private folder and the programs read that copy, never the file again. A mixed PDF
//! keeps its text pages as they are and gets its scanned pages added in page order. When OCR is
//! off or cannot run (no Tesseract, no language), a PDF with other text keeps that text (the
//! scanned pages are left out, with a warning in the log); one with none is refused with the
//! error's code.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::ocr::Reader;
use super::{finish, image, ExtractError, ExtractLimits, Extracted, Format, Place};

/// The most frames of a TIFF counted (its page directories are walked, not decoded).
const MAX_FRAMES_COUNTED: u64 = 1_000_000;

/// Reads `extracted.scanned_pages` of the PDF `bytes` (the file at `path`) by OCR, adding their
/// sections; `pages(read, of)` is called before each page and after the last.
pub(super) fn pdf_pages(
    path: &Path,
    bytes: &[u8],
    extracted: &mut Extracted,
    limits: &ExtractLimits,
    cancel: &AtomicBool,
    pages: &mut dyn FnMut(usize, usize),
) -> Result<(), ExtractError> {
    let scanned = extracted.scanned_pages.clone();
    let reader = match Reader::new(path, &limits.ocr, scanned.len()) {
        Ok(reader) => reader,
        Err(error) if !extracted.sections.is_empty() => {
            tracing::warn!(
                file = %path.display(),
                pages = scanned.len(),
                code = error.code(),
                "scanned pages left out: {error}"
            );
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    let copy = reader.dir().join("document.pdf");
    std::fs::write(&copy, bytes).map_err(|source| ExtractError::Io {
        path: path.to_owned(),
        source,
    })?;
    for (read, &page) in scanned.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err(ExtractError::Cancelled {
                path: path.to_owned(),
            });
        }
        pages(read, scanned.len());
        let mut texts = reader.read(path, &copy, Some(page), 1, cancel)?;
        let text = texts.pop().unwrap_or_default();
        if !text.is_empty() {
            extracted.sections.push(super::Section {
                place: Place::Page(page),
                text,
                from_scan: true,
            });
        }
    }
    pages(scanned.len(), scanned.len());
    extracted
        .sections
        .sort_by_key(|section| match section.place {
            Place::Page(page) => page,
            _ => 0,
        });
    if extracted.sections.is_empty() {
        return Err(ExtractError::NoText {
            path: path.to_owned(),
        });
    }
    let checked = finish(
        path,
        std::mem::replace(extracted, empty(Format::Pdf)),
        limits,
    )?;
    *extracted = checked;
    Ok(())
}

/// Reads the picture `bytes` (the file at `path`) by OCR: one section, or one per page of a
/// TIFF with several.
pub(super) fn picture(
    path: &Path,
    bytes: &[u8],
    limits: &ExtractLimits,
    cancel: &AtomicBool,
    pages: &mut dyn FnMut(usize, usize),
) -> Result<Extracted, ExtractError> {
    let info = image::check(path, bytes, &limits.image, MAX_FRAMES_COUNTED)?;
    if info.orientation != 1 {
        // Tesseract does not read EXIF; its orientation detection (with `osd`) turns the page.
        tracing::debug!(file = %path.display(), orientation = info.orientation, "EXIF orientation");
    }
    let frames = usize::try_from(info.frames).unwrap_or(usize::MAX);
    let reader = Reader::new(path, &limits.ocr, frames)?;
    let copy = reader.dir().join(format!("picture.{}", info.extension));
    std::fs::write(&copy, bytes).map_err(|source| ExtractError::Io {
        path: path.to_owned(),
        source,
    })?;
    pages(0, frames);
    let texts = reader.read(path, &copy, None, frames, cancel)?;
    pages(frames, frames);
    let several = texts.len() > 1;
    let sections = texts
        .into_iter()
        .enumerate()
        .filter(|(_, text)| !text.is_empty())
        .map(|(index, text)| super::Section {
            place: if several {
                Place::Page(index as u32 + 1)
            } else {
                Place::Whole
            },
            text,
            from_scan: true,
        })
        .collect::<Vec<_>>();
    if sections.is_empty() {
        return Err(ExtractError::NoText {
            path: path.to_owned(),
        });
    }
    finish(
        path,
        Extracted {
            format: Format::Image,
            title: None,
            sections,
            scanned_pages: (1..=frames as u32).collect(),
        },
        limits,
    )
}

fn empty(format: Format) -> Extracted {
    Extracted {
        format,
        title: None,
        sections: Vec::new(),
        scanned_pages: Vec::new(),
    }
}
