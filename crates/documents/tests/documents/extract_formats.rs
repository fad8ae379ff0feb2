//! Each format's extractor on the committed fixtures (tests/fixtures/documents, written by its
//! make_fixtures.py): the text, the places a citation names, and the title.

use std::path::PathBuf;

use hearth_documents::extract::accepted_extensions;
use hearth_documents::{extract, ExtractLimits, Extracted, Format, Place};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/documents")
        .join(name)
}

fn extracted(name: &str) -> Extracted {
    extract(&fixture(name), &ExtractLimits::default())
        .unwrap_or_else(|error| panic!("{name} extracts: {error}"))
}

fn places(extracted: &Extracted) -> Vec<Place> {
    extracted.sections.iter().map(|s| s.place.clone()).collect()
}

fn heading(text: &str) -> Place {
    Place::Heading(text.to_owned())
}

#[test]
fn plain_text_is_one_section() {
    let text = extracted("sample.txt");
    assert_eq!(text.format, Format::PlainText);
    assert_eq!(places(&text), [Place::Whole]);
    assert_eq!(
        text.sections[0].text,
        "Shopping list: apples, bread, 中文 tea.\n"
    );
}

#[test]
fn source_code_is_one_section_by_its_extension() {
    let source = extracted("sample.rs");
    assert_eq!(source.format, Format::SourceCode);
    assert!(source.sections[0].text.contains("fn add(a: i32"));
}

#[test]
fn markdown_is_cut_at_its_headings() {
    let markdown = extracted("sample.md");
    assert_eq!(markdown.title.as_deref(), Some("Travel notes"));
    assert_eq!(
        places(&markdown),
        [Place::Whole, heading("Travel notes"), heading("Trains")]
    );
    assert!(markdown.sections[2]
        .text
        .contains("night train leaves at 22:10"));
}

#[test]
fn a_pdf_is_read_page_by_page() {
    let pdf = extracted("sample.pdf");
    assert_eq!(pdf.format, Format::Pdf);
    assert_eq!(pdf.title.as_deref(), Some("Solar panel manual"));
    assert_eq!(places(&pdf), [Place::Page(1), Place::Page(2)]);
    assert!(pdf.sections[0]
        .text
        .contains("Clean the panels twice a year with water."));
    assert!(pdf.sections[1]
        .text
        .contains("The inverter is guaranteed for ten years."));
}

#[test]
fn a_word_document_is_cut_at_heading_styles() {
    let docx = extracted("sample.docx");
    assert_eq!(docx.title.as_deref(), Some("Flat lease"));
    assert_eq!(
        places(&docx),
        [Place::Whole, heading("Rent"), heading("Notice")]
    );
    assert_eq!(
        docx.sections[2].text,
        "Notice\nEither party may end the lease with three months' notice & in writing.\n"
    );
}

#[test]
fn an_opendocument_text_is_cut_at_its_headings() {
    let odt = extracted("sample.odt");
    assert_eq!(odt.title.as_deref(), Some("Garden club"));
    assert_eq!(
        places(&odt),
        [Place::Whole, heading("Budget"), heading("Next meeting")]
    );
    assert_eq!(
        odt.sections[1].text,
        "Budget\nThe club spends 120 euros on  seeds this spring.\n"
    );
    assert!(odt.sections[2].text.contains("third Sunday"));
}

#[test]
fn a_web_page_gives_its_visible_text_in_its_declared_charset() {
    let html = extracted("sample.html");
    assert_eq!(html.title.as_deref(), Some("Café menu"));
    assert_eq!(
        places(&html),
        [Place::Whole, heading("Breakfast"), heading("Lunch")]
    );
    assert_eq!(html.sections[0].text, "Home\n", "no script or style text");
    assert_eq!(
        html.sections[1].text,
        "Breakfast\nCroissant & coffee: 4\u{a0}euros.\n"
    );
    assert_eq!(html.sections[2].text, "Lunch\nSoup of the day\nCrêpe\n");
}

#[test]
fn an_ebook_is_read_chapter_by_chapter_in_spine_order() {
    let epub = extracted("sample.epub");
    assert_eq!(epub.title.as_deref(), Some("The Lighthouse"));
    assert_eq!(
        places(&epub),
        [heading("Part 1"), heading("The storm"), heading("Morning")],
        "a chapter titled as the book is named by its place in the spine"
    );
    assert!(epub.sections[0].text.contains("The keeper lit the lamp"));
    assert!(epub.sections[2].text.contains("fishing boat"));
}

#[test]
fn text_in_a_legacy_encoding_is_detected_not_mangled() {
    let latin1 = extracted("latin1.txt");
    assert_eq!(
        latin1.sections[0].text,
        "Le café était fermé; déjà à midi, les élèves étaient partis.\n"
    );
}

#[test]
fn every_fixture_format_is_in_the_dialog_filter() {
    let extensions = accepted_extensions();
    for extension in ["pdf", "docx", "odt", "html", "epub", "md", "txt", "rs"] {
        assert!(extensions.contains(&extension), "{extension} is accepted");
    }
}
