//! OpenDocument text (ODT): the paragraphs (`<text:p>`) and headings (`<text:h>`, a section
//! each) of `content.xml`. White space follows ODF's rule (runs collapse to one space;
//! `<text:s text:c="N"/>`, `<text:tab/>` and `<text:line-break/>` stand for the spaces, tabs and
//! line breaks). Tracked deletions (`<text:tracked-changes>`) and comments (`<office:annotation>`)
//! are not shown in the document and are left out. A password-protected ODT lists its encrypted
//! parts in `META-INF/manifest.xml`.
//!
//! Text is counted as it is produced (a `<text:s/>` run stands for at most `MAX_SPACE_RUN`
//! spaces), so a small file cannot expand past `ExtractLimits::max_text_bytes` before the limit
//! applies.

use std::path::Path;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::archive::Archive;
use super::docx::element_text;
use super::xml;
use super::{ExtractError, ExtractLimits, Extracted, Format, Place, Section};

pub(super) fn extract(
    path: &Path,
    bytes: &[u8],
    limits: &ExtractLimits,
) -> Result<Extracted, ExtractError> {
    let mut archive = Archive::open(path, Format::Odt, bytes, limits)?;
    if let Some(manifest) = archive.read("META-INF/manifest.xml")? {
        if xml::decode(&manifest).contains("encryption-data") {
            return Err(ExtractError::Encrypted {
                path: path.to_owned(),
                format: Format::Odt,
            });
        }
    }
    let content = archive.read_required("content.xml")?;
    let sections =
        content_sections(&xml::decode(&content), limits.max_text_bytes).map_err(|problem| {
            match problem {
                Problem::Malformed(detail) => ExtractError::Corrupt {
                    path: path.to_owned(),
                    format: Format::Odt,
                    detail: format!("content.xml: {detail}"),
                },
                Problem::TooMuchText => ExtractError::TooMuchText {
                    path: path.to_owned(),
                    limit: limits.max_text_bytes,
                },
            }
        })?;
    let title = match archive.read("meta.xml")? {
        Some(meta) => element_text(&xml::decode(&meta), "title"),
        None => None,
    };
    Ok(Extracted {
        scanned_pages: Vec::new(),
        format: Format::Odt,
        title,
        sections,
    })
}

/// The most spaces one `<text:s text:c="N"/>` stands for here (a document's alignment by
/// spaces needs a few dozen; the text only needs to know there is a gap).
const MAX_SPACE_RUN: usize = 64;

/// Why `content.xml` gave no sections.
#[derive(Debug)]
enum Problem {
    Malformed(String),
    /// More than the text limit, found while reading.
    TooMuchText,
}

fn content_sections(content: &str, max_text_bytes: usize) -> Result<Vec<Section>, Problem> {
    let mut reader = Reader::from_str(content);
    // Bytes of text in finished paragraphs; with the paragraph being read, checked at each event.
    let mut total = 0usize;
    let mut sections = vec![Section {
        from_scan: false,
        place: Place::Whole,
        text: String::new(),
    }];
    let mut paragraph = String::new();
    // Depth inside text:p/text:h (notes nest paragraphs in paragraphs), and inside parts
    // whose text is not shown.
    let mut paragraph_depth = 0usize;
    let mut hidden_depth = 0usize;
    let mut heading_depth: Option<usize> = None;
    loop {
        if total + paragraph.len() > max_text_bytes {
            return Err(Problem::TooMuchText);
        }
        let event = reader.read_event().map_err(|error| {
            Problem::Malformed(format!(
                "malformed XML at byte {}: {error}",
                reader.buffer_position()
            ))
        })?;
        match event {
            Event::Start(element) => match element.name().0 {
                "text:tracked-changes" | "office:annotation" | "text:note-citation" => {
                    hidden_depth += 1
                }
                _ if hidden_depth > 0 => {}
                "text:h" => {
                    paragraph_depth += 1;
                    heading_depth.get_or_insert(paragraph_depth);
                }
                "text:p" => {
                    if paragraph_depth > 0 && !paragraph.ends_with(' ') {
                        paragraph.push(' ');
                    }
                    paragraph_depth += 1;
                }
                _ => {}
            },
            Event::Empty(element) if hidden_depth == 0 && paragraph_depth > 0 => {
                match element.name().0 {
                    "text:s" => {
                        let count = xml::attribute(&element, "c")
                            .and_then(|c| c.parse::<usize>().ok())
                            .unwrap_or(1)
                            .min(MAX_SPACE_RUN);
                        paragraph.extend(std::iter::repeat_n(' ', count));
                    }
                    "text:tab" => paragraph.push('\t'),
                    "text:line-break" => paragraph.push('\n'),
                    _ => {}
                }
            }
            Event::Text(text) if hidden_depth == 0 && paragraph_depth > 0 => {
                push_collapsed(&mut paragraph, &text.xml10_content());
            }
            Event::GeneralRef(reference) if hidden_depth == 0 && paragraph_depth > 0 => {
                paragraph.push_str(&xml::reference(&reference).unwrap_or_default());
            }
            Event::End(element) => match element.name().0 {
                "text:tracked-changes" | "office:annotation" | "text:note-citation" => {
                    hidden_depth = hidden_depth.saturating_sub(1)
                }
                _ if hidden_depth > 0 => {}
                "text:p" | "text:h" if paragraph_depth > 0 => {
                    if heading_depth == Some(paragraph_depth) {
                        heading_depth = None;
                        let heading = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !heading.is_empty() {
                            sections.push(Section {
                                from_scan: false,
                                place: Place::Heading(heading),
                                text: String::new(),
                            });
                        }
                    }
                    paragraph_depth -= 1;
                    if paragraph_depth == 0 {
                        let section = sections.last_mut().expect("there is always a section");
                        section.text.push_str(paragraph.trim_start_matches(' '));
                        section.text.push('\n');
                        total += paragraph.len() + 1;
                        paragraph.clear();
                    } else {
                        // A note's paragraph inside a paragraph: keep them apart by a space.
                        paragraph.push(' ');
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(sections)
}

/// Appends `text` with every run of white space as one space (and none doubled across calls).
fn push_collapsed(out: &mut String, text: &str) {
    for (index, part) in text.split([' ', '\t', '\n', '\r']).enumerate() {
        if index > 0 && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push_str(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_spaces_and_hidden_parts_read_as_shown() {
        let content = r#"<office:document-content xmlns:office="o" xmlns:text="t"><office:body><office:text>
            <text:tracked-changes><text:changed-region><text:deletion><text:p>deleted</text:p></text:deletion></text:changed-region></text:tracked-changes>
            <text:p>Intro   with
              spaces<text:s text:c="3"/>and<text:tab/>tab &amp; more</text:p>
            <text:h text:outline-level="1">The  <text:span>Part</text:span></text:h>
            <text:p>Body<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>a note</text:p></text:note-body></text:note><office:annotation><text:p>comment</text:p></office:annotation></text:p>
            </office:text></office:body></office:document-content>"#;
        let sections = content_sections(content, 1 << 20).unwrap();
        assert_eq!(sections[0].text, "Intro with spaces   and\ttab & more\n");
        assert_eq!(sections[1].place, Place::Heading("The Part".into()));
        assert_eq!(sections[1].text, "The Part\nBody a note \n");
    }
}
