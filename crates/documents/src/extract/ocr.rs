//! Reading scans: text out of pictures of pages by OCR, with Tesseract run as a separate program
//! (`tesseract PAGE stdout -l deu+eng --psm 1`), and the pages of a PDF that have no text layer
//! drawn as pictures by Poppler's `pdftoppm`, also a separate program (Poppler is GPL: it is
//! run, never linked). Neither is part of Hearth; a missing one is a plain error with a code
//! (`scanned-no-ocr-program`), as is a language whose data is not installed
//! (`scanned-no-ocr-language`).
//!
//! Each run is confined (`program`): killed on Cancel and when Hearth dies, limited in memory
//! and processor time, in a private temporary folder removed afterwards. A file's OCR reads at
//! most `OcrSettings::max_pages` pages (a longer scan is refused with `too-many-scanned-pages`
//! before any is read), one page at a time, reporting each page to `progress`.
//!
//! Orientation: with Tesseract's `osd` data installed, page segmentation mode 1 detects a page
//! turned by 90, 180 or 270 degrees and reads it upright; without it, mode 3 reads pages as they
//! are (no orientation detection; `osd_installed` says which).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use super::program::{self, Bounds, PrivateDir, RunError};
use super::ExtractError;

/// How scans are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OcrSettings {
    /// Tesseract's language codes (`eng`, `deu`, `fra`, `spa`, `chi_sim`…), the most likely
    /// first: the UI's language and English by default, or the person's choice. Empty turns
    /// OCR off (a scan is then refused with `scanned-ocr-off`). Those not installed are left
    /// out; when none is installed the scan is refused with `scanned-no-ocr-language`.
    pub languages: Vec<String>,
    /// The resolution PDF pages are drawn at for OCR. By default 300 dpi (2.3 times slower
    /// than 150 and far more accurate on small print; bench/README.md).
    pub dpi: u32,
    /// The most pages of one file read by OCR. By default 500 (about 15 minutes on two cores).
    pub max_pages: usize,
    /// The processor time of one page's drawing or reading, in seconds. By default 120.
    pub max_page_seconds: u64,
    /// The address space of the renderer and of Tesseract. By default 2 GiB.
    pub max_memory: u64,
}

impl Default for OcrSettings {
    fn default() -> Self {
        OcrSettings {
            languages: vec!["eng".to_owned()],
            dpi: 300,
            max_pages: 500,
            max_page_seconds: 120,
            max_memory: 2 << 30,
        }
    }
}

/// An installed OCR language: its Tesseract code and the size of its data file (what choosing
/// it costs on disk; reading with more languages is also slower).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OcrLanguage {
    pub code: String,
    pub data_bytes: u64,
}

/// The most a page's text from Tesseract may be (a dense page has about 5 KB).
const MAX_PAGE_TEXT: u64 = 4 << 20;

/// The program that reads pictures of text.
const TESSERACT: &str = "tesseract";
/// The program that draws a PDF's pages.
const PDFTOPPM: &str = "pdftoppm";

fn quick_bounds() -> Bounds {
    Bounds {
        memory: 1 << 30,
        seconds: 20,
        max_output: 1 << 20,
    }
}

/// The OCR languages installed for Tesseract, with their data sizes, without `osd` (the
/// orientation data, not a language). `None` when Tesseract is not installed.
pub fn available_ocr_languages() -> Option<Vec<OcrLanguage>> {
    let (dir, codes) = list_languages().ok()?;
    Some(
        codes
            .into_iter()
            .filter(|code| code != "osd")
            .map(|code| {
                let data_bytes = dir
                    .as_ref()
                    .and_then(|dir| std::fs::metadata(dir.join(format!("{code}.traineddata"))).ok())
                    .map_or(0, |meta| meta.len());
                OcrLanguage { code, data_bytes }
            })
            .collect(),
    )
}

/// Whether Tesseract's orientation data (`osd`) is installed, so that turned pages are read
/// upright.
pub fn osd_installed() -> bool {
    list_languages().is_ok_and(|(_, codes)| codes.iter().any(|code| code == "osd"))
}

/// Tesseract's data folder (when it names one) and its installed codes.
fn list_languages() -> Result<(Option<PathBuf>, Vec<String>), RunError> {
    let dir = PrivateDir::new("ocr").map_err(RunError::System)?;
    let out = program::run(
        TESSERACT,
        &["--list-langs".as_ref()],
        dir.path(),
        &[],
        quick_bounds(),
        &AtomicBool::new(false),
    )?;
    let out = String::from_utf8_lossy(&out);
    let mut lines = out.lines();
    // `List of available languages in "/usr/share/tesseract-ocr/5/tessdata/" (6):`
    let data = lines
        .next()
        .and_then(|first| first.split('"').nth(1))
        .map(PathBuf::from);
    let codes = lines
        .map(str::trim)
        .filter(|code| {
            !code.is_empty()
                && code
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .map(str::to_owned)
        .collect();
    Ok((data, codes))
}

/// The pages to read and how: the checks made before any page is drawn or read.
pub(super) struct Reader {
    languages: String,
    psm: &'static str,
    settings: OcrSettings,
    dir: PrivateDir,
}

impl Reader {
    /// Checks that OCR is on, Tesseract is installed with at least one of the languages asked
    /// for, and `pages` is within the limit, for the file at `path`.
    pub fn new(path: &Path, settings: &OcrSettings, pages: usize) -> Result<Reader, ExtractError> {
        if settings.languages.is_empty() {
            return Err(ExtractError::NoTextLayer {
                path: path.to_owned(),
            });
        }
        if pages > settings.max_pages {
            return Err(ExtractError::TooManyScannedPages {
                path: path.to_owned(),
                pages: pages as u64,
                limit: settings.max_pages as u64,
            });
        }
        let (_, installed) = list_languages().map_err(|error| match error {
            RunError::NotFound => ExtractError::OcrProgramMissing {
                path: path.to_owned(),
                program: TESSERACT.to_owned(),
            },
            error => ExtractError::OcrFailed {
                path: path.to_owned(),
                detail: format!("{TESSERACT} --list-langs: {error}"),
            },
        })?;
        let mut chosen: Vec<&str> = Vec::new();
        for code in &settings.languages {
            if code != "osd"
                && installed.iter().any(|known| known == code)
                && !chosen.contains(&code.as_str())
            {
                chosen.push(code);
            }
        }
        if chosen.is_empty() {
            return Err(ExtractError::NoOcrLanguage {
                path: path.to_owned(),
                languages: settings.languages.join("+"),
                installed: installed
                    .iter()
                    .filter(|code| *code != "osd")
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("+"),
            });
        }
        let psm = if installed.iter().any(|code| code == "osd") {
            "1"
        } else {
            "3"
        };
        let dir = PrivateDir::new("ocr").map_err(|error| ExtractError::Io {
            path: path.to_owned(),
            source: error,
        })?;
        Ok(Reader {
            languages: chosen.join("+"),
            psm,
            settings: settings.clone(),
            dir,
        })
    }

    /// The private folder the pages are drawn in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn bounds(&self, max_output: u64) -> Bounds {
        Bounds {
            memory: self.settings.max_memory,
            seconds: self.settings.max_page_seconds,
            max_output,
        }
    }

    /// The text Tesseract reads in `source`: page `pdf_page` of that PDF, drawn first, or
    /// else the picture itself (any format Leptonica reads: PNG, JPEG, TIFF, WebP), one text
    /// per frame (a TIFF's `frames` pages; each run's time bound grows with them).
    pub fn read(
        &self,
        path: &Path,
        source: &Path,
        pdf_page: Option<u32>,
        frames: usize,
        cancel: &AtomicBool,
    ) -> Result<Vec<String>, ExtractError> {
        let image = match pdf_page {
            Some(page) => self.draw(path, source, page, cancel)?,
            None => source.to_owned(),
        };
        let args: [&OsStr; 7] = [
            image.as_os_str(),
            "stdout".as_ref(),
            "-l".as_ref(),
            self.languages.as_ref(),
            "--psm".as_ref(),
            self.psm.as_ref(),
            "quiet".as_ref(),
        ];
        // One thread per Tesseract: the machine's cores are shared with the chat, and
        // Tesseract's own threads gain little on one page.
        let env = [("OMP_THREAD_LIMIT", "1")];
        let frames = frames.max(1) as u64;
        let mut bounds = self.bounds(MAX_PAGE_TEXT.saturating_mul(frames));
        bounds.seconds = bounds.seconds.saturating_mul(frames);
        let out = program::run(TESSERACT, &args, self.dir(), &env, bounds, cancel);
        if pdf_page.is_some() {
            let _ = std::fs::remove_file(&image);
        }
        let out = out.map_err(|error| failed(path, TESSERACT, error))?;
        // Tesseract ends each page with a form feed.
        let out = String::from_utf8_lossy(&out);
        let mut texts: Vec<String> = out.split('\u{c}').map(clean).collect();
        if texts.len() > 1 && texts.last().is_some_and(String::is_empty) {
            texts.pop();
        }
        Ok(texts)
    }

    /// Draws page `page` (from 1) of the PDF `pdf` (a copy in `dir()`) as a grey PNG at the
    /// settings' resolution; its path.
    fn draw(
        &self,
        path: &Path,
        pdf: &Path,
        page: u32,
        cancel: &AtomicBool,
    ) -> Result<PathBuf, ExtractError> {
        let number = page.to_string();
        let dpi = self.settings.dpi.to_string();
        let stem = self.dir().join("page");
        let args: [&OsStr; 11] = [
            "-r".as_ref(),
            dpi.as_ref(),
            "-f".as_ref(),
            number.as_ref(),
            "-l".as_ref(),
            number.as_ref(),
            "-png".as_ref(),
            "-gray".as_ref(),
            "-singlefile".as_ref(),
            pdf.as_os_str(),
            stem.as_os_str(),
        ];
        program::run(
            PDFTOPPM,
            &args,
            self.dir(),
            &[],
            self.bounds(1 << 16),
            cancel,
        )
        .map_err(|error| failed(path, PDFTOPPM, error))?;
        Ok(self.dir().join("page.png"))
    }
}

/// The error for a run of `program` on the file at `path` that did not end well.
fn failed(path: &Path, program: &str, error: RunError) -> ExtractError {
    let path = path.to_owned();
    match error {
        RunError::Cancelled => ExtractError::Cancelled { path },
        RunError::NotFound => ExtractError::OcrProgramMissing {
            path,
            program: program.to_owned(),
        },
        error => ExtractError::OcrFailed {
            path,
            detail: format!("{program}: {error}"),
        },
    }
}

/// Tesseract's text with its page-break form feed dropped, trailing spaces cut, and runs of
/// blank lines made one.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.split('\n') {
        let line = line.replace('\u{c}', "");
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tesseract_text_is_cleaned() {
        assert_eq!(clean("a  \nb\n\n\n\nc\n\u{c}"), "a\nb\n\nc");
    }

    #[test]
    fn turned_off_and_too_long_are_refused_before_any_program_runs() {
        let off = OcrSettings {
            languages: Vec::new(),
            ..OcrSettings::default()
        };
        let error = Reader::new(Path::new("scan.pdf"), &off, 1).err().unwrap();
        assert_eq!(error.code(), "scanned-ocr-off");
        let error = Reader::new(Path::new("scan.pdf"), &OcrSettings::default(), 10_000)
            .err()
            .unwrap();
        assert_eq!(error.code(), "too-many-scanned-pages");
        assert_eq!(error.params()["pages"], "10000");
    }
}
