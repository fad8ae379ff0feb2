//! Word documents (DOCX, Office Open XML): the body's paragraphs from `word/document.xml`, cut
//! at headings. A paragraph is a heading when its style is one: the style's name in
//! `word/styles.xml` is "heading N" or "Title" (Word writes these English names whatever the
//! language of its menus, while the style ids are translated), or it has an outline level.
//! Text is the runs' `<w:t>`; deleted text of tracked changes (`<w:delText>`) and field codes
//! (`<w:instrText>`) are not shown in Word and are left out. Headers, footers and footnotes are
//! not read.

use std::collections::HashSet;
use std::path::Path;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::archive::Archive;
use super::xml;
use super::{ExtractError, ExtractLimits, Extracted, Format, Place, Section};

pub(super) fn extract(
    path: &Path,
    bytes: &[u8],
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let mut archive = Archive::open(path, Format::Docx, bytes, limits)?;
    let heading_styles = match archive.read("word/styles.xml")? {
        Some(styles) => heading_styles(&xml::decode(&styles)),
        None => HashSet::new(),
    };
    let body = archive.read_required("word/document.xml")?;
    let sections = body_sections(&xml::decode(&body), &heading_styles)
        .map_err(|detail| corrupt(path, format!("word/document.xml: {detail}")))?;
    let title = match archive.read("docProps/core.xml")? {
        Some(core) => element_text(&xml::decode(&core), "title"),
        None => None,
    };
    Ok(Extracted {
        scanned_pages: Vec::new(),
        format: Format::Docx,
        title,
        sections,
    })
}

/// The ids of the paragraph styles that are headings.
fn heading_styles(styles: &str) -> HashSet<String> {
    let mut headings = HashSet::new();
    let mut reader = Reader::from_str(styles);
    let mut style_id: Option<String> = None;
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(element) if xml::local_name(&element) == "style" => {
                style_id = xml::attribute(&element, "styleId");
            }
            Event::Empty(element) => {
                let Some(id) = &style_id else { continue };
                let is_heading = match xml::local_name(&element) {
                    "name" => xml::attribute(&element, "val").is_some_and(|name| {
                        let name = name.to_ascii_lowercase();
                        name == "title" || name.starts_with("heading ")
                    }),
                    "outlineLvl" => true,
                    _ => false,
                };
                if is_heading {
                    headings.insert(id.clone());
                }
            }
            Event::End(element) if element.local_name().as_ref() == "style" => style_id = None,
            Event::Eof => break,
            _ => {}
        }
    }
    headings
}

/// The body's text, one section per heading.
fn body_sections(body: &str, heading_styles: &HashSet<String>) -> Result<Vec<Section>, String> {
    let mut reader = Reader::from_str(body);
    let mut sections = vec![Section {
        from_scan: false,
        place: Place::Whole,
        text: String::new(),
    }];
    let mut paragraph = String::new();
    let mut is_heading = false;
    let mut in_text = false;
    let mut in_run = false;
    loop {
        let event = reader.read_event().map_err(|error| {
            format!(
                "malformed XML at byte {}: {error}",
                reader.buffer_position()
            )
        })?;
        match event {
            Event::Start(element) => match xml::local_name(&element) {
                // Not cleared here: a text box's paragraphs sit inside a run of the outer one.
                "p" => is_heading = false,
                "r" => in_run = true,
                "t" => in_text = true,
                _ => {}
            },
            Event::Empty(element) => match xml::local_name(&element) {
                "pStyle" => {
                    is_heading |= xml::attribute(&element, "val")
                        .is_some_and(|style| heading_styles.contains(&style));
                }
                "outlineLvl" => {
                    // Level 9 is Word's "body text".
                    is_heading |= xml::attribute(&element, "val").is_some_and(|l| l != "9");
                }
                "tab" if in_run => paragraph.push('\t'),
                "br" | "cr" if in_run => paragraph.push('\n'),
                "noBreakHyphen" if in_run => paragraph.push('-'),
                _ => {}
            },
            Event::Text(text) if in_text => paragraph.push_str(&text.xml10_content()),
            Event::CData(text) if in_text => paragraph.push_str(&text.into_inner()),
            Event::GeneralRef(reference) if in_text => {
                paragraph.push_str(&xml::reference(&reference).unwrap_or_default())
            }
            Event::End(element) => match element.local_name().as_ref() {
                "t" => in_text = false,
                "r" => in_run = false,
                "p" => {
                    let heading = paragraph.trim();
                    if is_heading && !heading.is_empty() {
                        sections.push(Section {
                            from_scan: false,
                            place: Place::Heading(heading.to_owned()),
                            text: String::new(),
                        });
                    }
                    let section = sections.last_mut().expect("there is always a section");
                    section.text.push_str(&paragraph);
                    section.text.push('\n');
                    paragraph.clear();
                }
                // A table cell's paragraphs end with a line already; rows need nothing more.
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(sections)
}

/// The text of the first element with this local name (the `<dc:title>` of `core.xml`).
pub(super) fn element_text(document: &str, local: &str) -> Option<String> {
    let mut reader = Reader::from_str(document);
    let mut inside = false;
    let mut text = String::new();
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(element) if xml::local_name(&element) == local => inside = true,
            Event::Text(content) if inside => text.push_str(&content.xml10_content()),
            Event::GeneralRef(reference) if inside => {
                text.push_str(&xml::reference(&reference).unwrap_or_default())
            }
            Event::End(element) if inside && element.local_name().as_ref() == local => break,
            Event::Eof => break,
            _ => {}
        }
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

fn corrupt(path: &Path, detail: String) -> ExtractError {
    ExtractError::Corrupt {
        path: path.to_owned(),
        format: Format::Docx,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translated_heading_styles_are_found_by_their_english_name() {
        let styles = r#"<w:styles xmlns:w="x">
            <w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>
            <w:style w:type="paragraph" w:styleId="Standard"><w:name w:val="Normal"/></w:style>
            <w:style w:type="paragraph" w:styleId="Custom"><w:name w:val="Mine"/>
              <w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>
            </w:styles>"#;
        let found = heading_styles(styles);
        assert!(found.contains("berschrift1") && found.contains("Custom"));
        assert!(!found.contains("Standard"));
    }

    #[test]
    fn runs_tabs_and_deleted_text_read_as_word_shows_them() {
        let body = r#"<w:document xmlns:w="x"><w:body>
            <w:p><w:r><w:t>Intro</w:t><w:tab/><w:t xml:space="preserve">A &amp; B</w:t></w:r>
              <w:del><w:r><w:delText>gone</w:delText></w:r></w:del></w:p>
            <w:p><w:pPr><w:pStyle w:val="H"/></w:pPr><w:r><w:t>Part </w:t></w:r><w:r><w:t>One</w:t></w:r></w:p>
            <w:p><w:r><w:instrText>PAGE</w:instrText><w:t>Body</w:t></w:r></w:p>
            </w:body></w:document>"#;
        let sections = body_sections(body, &HashSet::from(["H".to_owned()])).unwrap();
        assert_eq!(sections[0].text, "Intro\tA & B\n");
        assert_eq!(sections[1].place, Place::Heading("Part One".into()));
        assert_eq!(sections[1].text, "Part One\nBody\n");
    }
}
