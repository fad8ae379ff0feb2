//! Extraction in a child process (`extract::child`): an abort or a blow-up in a parser ends only
//! that file's reading, with its plain error, and the caller goes on; Cancel kills the child.
//!
//! This test binary has its own `main` (no test harness): like `hearth` and the desktop app it
//! calls `run_if_asked()` first, so it can be started again as its own extraction child.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{pdf_of, write};
use hearth_documents::extract::{child, extract_cancellable};
use hearth_documents::{extract, ExtractError, ExtractLimits, Extracted};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/documents")
        .join(name)
}

const FIXTURES: [&str; 7] = [
    "sample.pdf",
    "sample.docx",
    "sample.odt",
    "sample.epub",
    "sample.html",
    "sample.md",
    "encrypted.pdf",
];

fn main() {
    // What each fixture gives read in this process, before this process may use a child (the
    // child itself skips this).
    let in_process: Option<Vec<Result<Extracted, String>>> =
        (std::env::args_os().nth(1).as_deref() != Some(child::ARGUMENT.as_ref())).then(|| {
            FIXTURES
                .iter()
                .map(|name| {
                    extract(&fixture(name), &ExtractLimits::default()).map_err(|e| e.to_string())
                })
                .collect()
        });
    child::run_if_asked();
    assert!(child::available());
    let tests: [(&str, &dyn Fn()); 4] = [
        ("a_child_reads_every_fixture_as_the_process_does", &|| {
            a_child_reads_every_fixture_as_the_process_does(in_process.as_ref().unwrap())
        }),
        (
            "a_reader_out_of_memory_fails_only_its_file",
            &a_reader_out_of_memory_fails_only_its_file,
        ),
        ("cancel_kills_the_reader", &cancel_kills_the_reader),
        (
            "p1_pdf_claiming_four_billion_pages_reads_through_the_child",
            &p1_pdf_claiming_four_billion_pages_reads_through_the_child,
        ),
    ];
    for (name, test) in tests {
        let started = Instant::now();
        test();
        println!(
            "test {name} ... ok ({:.2} s)",
            started.elapsed().as_secs_f64()
        );
    }
}

fn a_child_reads_every_fixture_as_the_process_does(in_process: &[Result<Extracted, String>]) {
    for (name, expected) in FIXTURES.iter().zip(in_process) {
        let got = extract(&fixture(name), &ExtractLimits::default()).map_err(|e| e.to_string());
        assert_eq!(&got, expected, "{name}");
    }
}

/// A web page of `megabytes` MiB of text.
fn big_page(dir: &Path, megabytes: usize) -> PathBuf {
    let text = "kittens sleep. ".repeat((megabytes << 20) / 15);
    write(
        dir,
        "big.html",
        format!("<html><body><p>{text}</p></body></html>").as_bytes(),
    )
}

fn a_reader_out_of_memory_fails_only_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ExtractLimits {
        max_reader_memory: 192 << 20,
        ..ExtractLimits::default()
    };
    // Its bytes, their copy and its text do not fit in the child's 192 MiB: the child aborts
    // on an allocation failure, which no `catch_unwind` could have caught in process.
    let error = extract(&big_page(dir.path(), 48), &limits).unwrap_err();
    assert!(
        matches!(error, ExtractError::ReaderStopped { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("big.html") && message.contains("run out of memory"),
        "{message}"
    );
    // And the next file, under the same limits, reads.
    let small = write(dir.path(), "small.html", b"<p>still here</p>");
    let extracted = extract(&small, &limits).unwrap();
    assert_eq!(extracted.sections[0].text.trim(), "still here");
}

fn cancel_kills_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let page = big_page(dir.path(), 48);
    let cancel = Arc::new(AtomicBool::new(false));
    let setter = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            cancel.store(true, Ordering::Relaxed);
        })
    };
    let started = Instant::now();
    let error = extract_cancellable(&page, &ExtractLimits::default(), &cancel).unwrap_err();
    setter.join().unwrap();
    assert!(matches!(error, ExtractError::Cancelled { .. }), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

fn p1_pdf_claiming_four_billion_pages_reads_through_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let objects: [&[u8]; 6] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R 3 0 R] /Count 2 >>",
        b"<< /Type /Pages /Kids [] /Count 4000000000 >>",
        b"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 6 0 R >> >> /Contents 5 0 R >>",
        b"<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 720 Td (budget kept) Tj ET\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ];
    let pdf = pdf_of(&objects);
    let path = write(dir.path(), "count_4e9.pdf", &pdf);
    let extracted = extract(&path, &ExtractLimits::default()).unwrap();
    assert!(extracted.sections[0].text.contains("budget kept"));
}
