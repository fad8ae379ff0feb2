//! Opening a file of the library in the person's own program, at the page a source cites where
//! that program can be told the page (review #13: "Open the file at this page").
//!
//! Only a file the library holds can be opened, by its document id: the front end never names a
//! path. The program is the one the desktop opens the file's kind with (`xdg-mime query
//! default`); for the PDF viewers that take a page on their command line (Evince, Atril, Xreader,
//! Okular, Zathura, MuPDF, qpdfview, Firefox and Chromium) it is started with the page, anything
//! else through `xdg-open` without it, and [`Opened::at_page`] says which, so the front end can
//! tell the person the page to turn to. The program is the person's, not a helper of Hearth's:
//! it is started in a session of its own and stays open when Hearth quits.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::app::App;
use crate::documents::file_name;
use crate::error::{Error, ErrorCode, Result};

/// How a file was opened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Opened {
    /// The file's name (no folder).
    pub name: String,
    /// Whether the program was asked to show the page (false: it opens at its own first page).
    pub at_page: bool,
}

/// A program and its arguments, planned before anything runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launch {
    program: String,
    args: Vec<String>,
    at_page: bool,
}

/// The desktop's default program for PDFs (its `.desktop` id), if `xdg-mime` says one.
fn default_pdf_viewer() -> Option<String> {
    let output = Command::new("xdg-mime")
        .args(["query", "default", "application/pdf"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let id = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !id.is_empty()).then_some(id)
}

/// Whether `program` is on the PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .any(|dir| std::fs::metadata(dir.join(program)).is_ok_and(|m| m.is_file()))
    })
}

/// How to open `path`: at `page` (1-based) with a PDF viewer that takes one on its command
/// line, when `viewer` (the default program's desktop id) is one and `installed` finds it;
/// otherwise with `xdg-open`, at no page.
pub(crate) fn plan(
    path: &Path,
    page: Option<u32>,
    viewer: Option<&str>,
    installed: impl Fn(&str) -> bool,
) -> Launch {
    let file = path.to_string_lossy().into_owned();
    let with_page = page.zip(viewer).and_then(|(page, viewer)| {
        let id = viewer.to_ascii_lowercase();
        let (program, args): (&str, Vec<String>) = if id.contains("evince") {
            ("evince", vec![format!("--page-index={page}"), file.clone()])
        } else if id.contains("atril") {
            ("atril", vec![format!("--page-index={page}"), file.clone()])
        } else if id.contains("xreader") {
            (
                "xreader",
                vec![format!("--page-index={page}"), file.clone()],
            )
        } else if id.contains("okular") {
            ("okular", vec![format!("--page={page}"), file.clone()])
        } else if id.contains("zathura") {
            ("zathura", vec![format!("--page={page}"), file.clone()])
        } else if id.contains("mupdf") {
            ("mupdf", vec![file.clone(), page.to_string()])
        } else if id.contains("qpdfview") {
            ("qpdfview", vec![format!("{file}#{page}")])
        } else if id.contains("firefox") {
            ("firefox", vec![file_url(path, page)])
        } else if id.contains("chromium") {
            ("chromium", vec![file_url(path, page)])
        } else {
            return None;
        };
        installed(program).then(|| Launch {
            program: program.to_string(),
            args,
            at_page: true,
        })
    });
    with_page.unwrap_or(Launch {
        program: "xdg-open".to_string(),
        args: vec![file],
        at_page: false,
    })
}

/// `file:///…#page=N`, with the path's bytes percent-encoded where a URL needs it.
fn file_url(path: &Path, page: u32) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut url = String::from("file://");
    for &byte in path.as_os_str().as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            url.push(byte as char);
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url.push_str(&format!("#page={page}"));
    url
}

impl App {
    /// Opens the library's document `document_id` in the person's program, at `page` where the
    /// program allows (see the module doc). The file must still be where it was attached.
    pub fn open_document(&self, document_id: i64, page: Option<u32>) -> Result<Opened> {
        let documents = self
            .documents()
            .with_library(|library| library.documents().map_err(crate::documents::library_error))?;
        let document = documents
            .into_iter()
            .find(|d| d.id == document_id)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::NotFound,
                    "This file is no longer in Your files, so Hearth cannot open it.",
                )
            })?;
        let name = file_name(&document.path);
        if !document.path.is_file() {
            return Err(Error::new(
                ErrorCode::NotFound,
                format!(
                    "{name} is no longer at {}: it was moved or deleted. Attach it again from \
                     where it is now.",
                    document.path.display()
                ),
            )
            .detail("moved", &[("name", name)]));
        }
        let viewer = page.and_then(|_| default_pdf_viewer());
        let launch = plan(&document.path, page, viewer.as_deref(), on_path);
        start(&launch).map_err(|error| {
            Error::new(
                ErrorCode::Unsupported,
                format!(
                    "Hearth could not open {name} ({}: {error}). Open it from your file manager \
                     instead.",
                    launch.program
                ),
            )
            .detail("noOpener", &[("name", name.clone())])
        })?;
        Ok(Opened {
            name,
            at_page: launch.at_page,
        })
    }
}

/// Starts the program in a process group of its own, with no terminal streams, and reaps it
/// from a thread when it ends (it is the person's program: it may outlive Hearth).
fn start(launch: &Launch) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(&launch.program)
        .args(&launch.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    std::thread::Builder::new()
        .name("open-file".into())
        .spawn(move || child.wait())
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_program(_: &str) -> bool {
        true
    }

    #[test]
    fn review_13_a_pdf_viewer_that_takes_a_page_gets_it() {
        let path = Path::new("/home/ana/Tax papers/letter.pdf");
        let evince = plan(
            path,
            Some(4),
            Some("org.gnome.Evince.desktop"),
            every_program,
        );
        assert_eq!(evince.program, "evince");
        assert_eq!(
            evince.args,
            ["--page-index=4", "/home/ana/Tax papers/letter.pdf"]
        );
        assert!(evince.at_page);
        let okular = plan(
            path,
            Some(4),
            Some("okularApplication_pdf.desktop"),
            every_program,
        );
        assert_eq!(okular.args[0], "--page=4");
        let firefox = plan(path, Some(4), Some("firefox-esr.desktop"), every_program);
        assert_eq!(
            firefox.args,
            ["file:///home/ana/Tax%20papers/letter.pdf#page=4"]
        );
    }

    #[test]
    fn review_13_any_other_program_or_no_page_opens_through_xdg_open_without_a_page() {
        let path = Path::new("/home/ana/notes.docx");
        for (page, viewer) in [
            (None, Some("org.gnome.Evince.desktop")),
            (Some(2), Some("libreoffice-writer.desktop")),
            (Some(2), None),
        ] {
            let launch = plan(path, page, viewer, every_program);
            assert_eq!(launch.program, "xdg-open");
            assert_eq!(launch.args, ["/home/ana/notes.docx"]);
            assert!(!launch.at_page);
        }
        let missing = plan(
            path,
            Some(2),
            Some("org.gnome.Evince.desktop"),
            |_: &str| false,
        );
        assert_eq!(
            missing.program, "xdg-open",
            "a viewer not installed is not started"
        );
    }
}
