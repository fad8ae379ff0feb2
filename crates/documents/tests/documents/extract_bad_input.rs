//! Files that cannot or must not be read: each is refused with a message that names the file and
//! says what to do, within bounded memory and time, and never with a panic. The malformed files
//! are built here; the encrypted and image-only PDFs are committed fixtures.

use std::path::{Path, PathBuf};

use crate::common::{write, zip_of};
use hearth_documents::{extract, ExtractError, ExtractLimits};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/documents")
        .join(name)
}

fn refused(path: &Path) -> ExtractError {
    refused_within(path, &ExtractLimits::default())
}

fn refused_within(path: &Path, limits: &ExtractLimits) -> ExtractError {
    let error = match extract(path, limits) {
        Ok(extracted) => panic!("{} was read: {extracted:?}", path.display()),
        Err(error) => error,
    };
    let name = path.file_name().unwrap().to_string_lossy();
    assert!(
        error.to_string().contains(&*name),
        "the message names the file: {error}"
    );
    error
}

#[test]
fn a_folder_is_named_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("papers.pdf");
    std::fs::create_dir(&folder).unwrap();
    let error = refused(&folder);
    assert!(matches!(error, ExtractError::Folder { .. }), "{error}");
    assert!(error.to_string().contains("attach the files inside it"));
}

#[test]
fn a_pipe_is_refused_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("notes.txt");
    let c_path = std::ffi::CString::new(pipe.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let error = refused(&pipe);
    assert!(error.to_string().contains("is a pipe"), "{error}");
}

#[test]
fn a_device_is_refused() {
    let error = refused(Path::new("/dev/zero"));
    assert!(error.to_string().contains("is a device"), "{error}");
}

#[test]
fn a_link_into_proc_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("environ.txt");
    std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
    let error = refused(&link);
    assert!(
        matches!(error, ExtractError::SystemFile { .. }),
        "the process's environment is never read: {error}"
    );
}

#[test]
fn a_500_mb_file_is_refused_by_its_size_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.txt");
    // Sparse: no disk space is used, and reading it would take seconds, so a quick refusal
    // shows the size was checked first.
    std::fs::File::create(&path)
        .unwrap()
        .set_len(500 << 20)
        .unwrap();
    let error = refused(&path);
    assert!(
        error
            .to_string()
            .contains("is 500 MiB, more than the 256 MiB"),
        "{error}"
    );
}

#[test]
fn an_unknown_kind_of_file_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let error = refused(&write(dir.path(), "drawing.xcf", b"gimp xcf v011"));
    assert!(error.to_string().contains("pdf, docx"), "{error}");
}

#[test]
fn a_missing_file_says_it_could_not_be_read() {
    let error = refused(Path::new("/nonexistent/hearth/letter.txt"));
    assert!(error.to_string().starts_with("could not read"), "{error}");
}

#[test]
fn an_encrypted_pdf_asks_for_a_copy_without_password() {
    let error = refused(&fixture("encrypted.pdf"));
    assert!(matches!(error, ExtractError::Encrypted { .. }), "{error}");
    assert!(error.to_string().contains("encrypted PDF"), "{error}");
}

#[test]
fn an_image_only_pdf_with_ocr_off_says_reading_scans_is_off() {
    let mut limits = ExtractLimits::default();
    limits.ocr.languages.clear();
    let error = extract(&fixture("scan.pdf"), &limits).unwrap_err();
    assert_eq!(error.code(), "scanned-ocr-off");
    assert!(error.to_string().contains("scanned image"), "{error}");
}

#[test]
fn binary_data_under_a_text_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let error = refused(&write(dir.path(), "a.txt", b"\x7fELF\x02\x01\x01\0\0\0"));
    assert!(error.to_string().contains("binary data"), "{error}");
}

#[test]
fn an_empty_file_holds_no_text() {
    let dir = tempfile::tempdir().unwrap();
    let error = refused(&write(dir.path(), "empty.md", b"\n  \n"));
    assert!(matches!(error, ExtractError::NoText { .. }), "{error}");
}

#[test]
fn more_text_than_the_limit_is_refused() {
    let limits = ExtractLimits {
        max_text_bytes: 10,
        ..ExtractLimits::default()
    };
    let error = refused_within(&fixture("sample.pdf"), &limits);
    assert!(matches!(error, ExtractError::TooMuchText { .. }), "{error}");
}

#[test]
fn garbage_under_each_format_name_is_called_damaged() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["junk.pdf", "junk.docx", "junk.odt", "junk.epub"] {
        let error = refused(&write(dir.path(), name, b"this is not what the name says"));
        assert!(
            error.to_string().contains("may be damaged"),
            "{name}: {error}"
        );
    }
}

#[test]
fn a_zip_missing_its_main_part_names_the_part() {
    let dir = tempfile::tempdir().unwrap();
    let docx = zip_of(&[("word/styles.xml", b"<w:styles/>")]);
    let error = refused(&write(dir.path(), "empty.docx", &docx));
    assert!(
        error.to_string().contains("it has no word/document.xml"),
        "{error}"
    );
    let epub = zip_of(&[("mimetype", b"application/epub+zip")]);
    let error = refused(&write(dir.path(), "empty.epub", &epub));
    assert!(
        error.to_string().contains("META-INF/container.xml"),
        "{error}"
    );
}

#[test]
fn truncated_documents_of_each_format_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["sample.docx", "sample.odt", "sample.epub"] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let error = refused(&write(dir.path(), name, &bytes[..bytes.len() / 2]));
        assert!(
            matches!(error, ExtractError::Corrupt { .. }),
            "{name}: {error}"
        );
    }
    // lopdf rebuilds a lost cross-reference table, so half a PDF may still give its first
    // page; either way it is no panic, and an error names the file.
    let pdf = std::fs::read(fixture("sample.pdf")).unwrap();
    let path = write(dir.path(), "half.pdf", &pdf[..pdf.len() / 2]);
    if let Err(error) = extract(&path, &ExtractLimits::default()) {
        assert!(error.to_string().contains("half.pdf"), "{error}");
    }
}

#[test]
fn a_highly_compressed_entry_is_refused_as_a_zip_bomb() {
    let dir = tempfile::tempdir().unwrap();
    let mut document = b"<w:document><w:body><w:p><w:r><w:t>".to_vec();
    document.resize(document.len() + (64 << 20), b' ');
    document.extend_from_slice(b"</w:t></w:r></w:p></w:body></w:document>");
    let docx = zip_of(&[("word/document.xml", &document)]);
    assert!(
        docx.len() < 1 << 20,
        "64 MiB packs into {} bytes",
        docx.len()
    );
    let error = refused(&write(dir.path(), "bomb.docx", &docx));
    assert!(
        error
            .to_string()
            .contains("word/document.xml unpacks to more than 200 times its packed size"),
        "{error}"
    );
}

#[test]
fn an_archive_of_too_many_entries_is_refused_before_listing_them() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..10_001).map(|i| format!("OEBPS/{i}.xhtml")).collect();
    let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let error = refused(&write(dir.path(), "many.epub", &zip_of(&entries)));
    assert!(
        error
            .to_string()
            .contains("it lists 10001 entries, more than the 10000"),
        "{error}"
    );
}

#[test]
fn entries_that_unpack_past_the_total_are_refused() {
    let limits = ExtractLimits {
        max_unpacked_bytes: 1 << 20,
        ..ExtractLimits::default()
    };
    let dir = tempfile::tempdir().unwrap();
    // Text that packs poorly (digits of a running counter), within the ratio but over 1 MiB.
    let mut body = String::from("<w:document><w:body><w:p><w:r><w:t>");
    let mut value = 1u64;
    while body.len() < 2 << 20 {
        value = value.wrapping_mul(6364136223846793005).wrapping_add(1);
        body.push_str(&format!("{value} "));
    }
    body.push_str("</w:t></w:r></w:p></w:body></w:document>");
    let docx = zip_of(&[("word/document.xml", body.as_bytes())]);
    let error = refused_within(&write(dir.path(), "long.docx", &docx), &limits);
    assert!(
        error
            .to_string()
            .contains("its entries unpack to more than 1 MiB together"),
        "{error}"
    );
}

#[test]
fn a_password_protected_office_file_is_not_taken_for_a_zip() {
    let dir = tempfile::tempdir().unwrap();
    let mut ole = vec![0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
    ole.resize(4096, 0);
    let error = refused(&write(dir.path(), "locked.docx", &ole));
    assert!(error.to_string().contains("password-protected"), "{error}");
}

#[test]
fn an_ebook_locked_with_drm_is_called_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let container =
        br#"<container><rootfiles><rootfile full-path="content.opf"/></rootfiles></container>"#;
    let opf = br#"<package><manifest><item id="c" href="c.xhtml"/></manifest><spine><itemref idref="c"/></spine></package>"#;
    let encryption = br#"<encryption><EncryptedData><CipherData><CipherReference URI="c.xhtml"/></CipherData></EncryptedData></encryption>"#;
    let epub = zip_of(&[
        ("META-INF/container.xml", container),
        ("content.opf", opf),
        ("META-INF/encryption.xml", encryption),
        ("c.xhtml", b"\x93\x11 ciphertext"),
    ]);
    let error = refused(&write(dir.path(), "locked.epub", &epub));
    assert!(error.to_string().contains("locked with DRM"), "{error}");
}

#[test]
fn a_password_protected_odt_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = br#"<manifest:manifest xmlns:manifest="m"><manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data manifest:checksum="x"/></manifest:file-entry></manifest:manifest>"#;
    let odt = zip_of(&[
        ("mimetype", b"application/vnd.oasis.opendocument.text"),
        ("META-INF/manifest.xml", manifest),
        ("content.xml", b"\x8f\x02 ciphertext"),
    ]);
    let error = refused(&write(dir.path(), "locked.odt", &odt));
    assert!(
        error
            .to_string()
            .contains("is a password-protected OpenDocument text (ODT): open it with its password"),
        "{error}"
    );
}

/// Every fixture with bytes overwritten at many places: whatever comes out, no panic escapes,
/// and an error names the file. (A parser's panic is caught and reported as `ParserPanic`.)
#[test]
fn damaged_copies_of_every_fixture_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    // The parsers are what is damaged here: a copy whose pages lost their text would otherwise
    // be drawn and read by Tesseract, seconds a page (OCR's own bad input is in ocr.rs).
    let mut no_ocr = ExtractLimits::default();
    no_ocr.ocr.languages.clear();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for name in [
        "sample.pdf",
        "sample.docx",
        "sample.odt",
        "sample.epub",
        "sample.html",
        "sample.md",
        "encrypted.pdf",
    ] {
        let original = std::fs::read(fixture(name)).unwrap();
        for round in 0..150 {
            let mut bytes = original.clone();
            for _ in 0..1 + round % 8 {
                let at = (random() % bytes.len() as u64) as usize;
                bytes[at] = random() as u8;
            }
            let path = write(dir.path(), name, &bytes);
            if let Err(error) = extract(&path, &no_ocr) {
                assert!(
                    error.to_string().contains(name),
                    "{name}, round {round}: {error}"
                );
            }
        }
    }
}

/// A one-page PDF (Helvetica) whose page content and information dictionary are given.
fn pdf_with(content: &[u8], info: &[u8]) -> Vec<u8> {
    let mut stream = format!("<< /Length {} >>\nstream\n", content.len()).into_bytes();
    stream.extend_from_slice(content);
    stream.extend_from_slice(b"\nendstream");
    let objects: [&[u8]; 6] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
          /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        &stream,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        info,
    ];
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (index, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", index + 1).as_bytes());
        pdf.extend_from_slice(body);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(b"xref\n0 7\n0000000000 65535 f \n");
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!("trailer\n<< /Size 7 /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n")
            .as_bytes(),
    );
    pdf
}

/// Nesting a million deep in an object or a page's content overflows no stack, even a thread's
/// small one: the parsers bound their depth (a stack overflow would abort the whole app, which
/// no `catch_unwind` can stop).
#[test]
fn deeply_nested_pdf_objects_do_not_overflow_a_small_stack() {
    let dir = tempfile::tempdir().unwrap();
    let depth = 1_000_000;
    let nested_array = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let nested_dictionary = format!("{}{}", "<< /A ".repeat(depth), ">>".repeat(depth));
    let cases = [
        (
            "nested-info.pdf",
            pdf_with(
                b"BT /F1 12 Tf 72 720 Td (kept) Tj ET",
                format!("<< /Title {nested_dictionary} /Keywords {nested_array} >>").as_bytes(),
            ),
        ),
        (
            "nested-content.pdf",
            pdf_with(
                format!("BT /F1 12 Tf (a) Tj {nested_array} TJ {nested_dictionary} BDC ET")
                    .as_bytes(),
                b"<< >>",
            ),
        ),
    ];
    for (name, pdf) in cases {
        let path = write(dir.path(), name, &pdf);
        let outcome = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || extract(&path, &ExtractLimits::default()).map(|_| ()))
            .unwrap()
            .join()
            .expect("no panic, no overflow");
        if let Err(error) = outcome {
            assert!(error.to_string().contains(name), "{error}");
        }
    }
}
