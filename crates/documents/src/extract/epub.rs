//! EPUB e-books: the chapters in reading order (the package's spine), each read as a web page
//! (`html`), so a chapter's headings become sections. Text before a chapter's first heading is
//! placed under the chapter's own title, or "Part N" (its position in the spine) when it has
//! none. Books locked with DRM list their chapters in `META-INF/encryption.xml`; fonts listed
//! there are only obfuscated, which does not stop reading.
//!
//! Costs stay linear in the book: the manifest is looked up by id in a map, `encryption.xml`'s
//! URIs are read once into a set, a part listed twice in the spine is read once, the spine is
//! cut at `MAX_SPINE` parts, and the text is counted chapter by chapter against
//! `ExtractLimits::max_text_bytes`.

use std::collections::{HashMap, HashSet};
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
    let corrupt = |detail: String| ExtractError::Corrupt {
        path: path.to_owned(),
        format: Format::Epub,
        detail,
    };
    let mut archive = Archive::open(path, Format::Epub, bytes, limits)?;
    let container = archive.read_required("META-INF/container.xml")?;
    let package_path = first_attribute(&xml::decode(&container), "rootfile", "full-path")
        .ok_or_else(|| corrupt("META-INF/container.xml names no package".to_owned()))?;
    let package = archive.read_required(&package_path)?;
    let package = Package::read(&xml::decode(&package))
        .map_err(|detail| corrupt(format!("{package_path}: {detail}")))?;
    let base = package_path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let manifest: HashMap<&str, &str> = package
        .manifest
        .iter()
        .map(|(id, href)| (id.as_str(), href.as_str()))
        .collect();
    let mut seen = HashSet::new();
    let chapters: Vec<String> = package
        .spine
        .iter()
        .filter_map(|id| manifest.get(id.as_str()))
        .map(|href| join(base, href))
        .filter(|chapter| seen.insert(chapter.clone()))
        .take(MAX_SPINE)
        .collect();
    if chapters.is_empty() {
        return Err(corrupt(format!("{package_path} lists no chapters")));
    }
    if let Some(encryption) = archive.read("META-INF/encryption.xml")? {
        let encrypted = encrypted_uris(&xml::decode(&encryption));
        if chapters.iter().any(|chapter| encrypted.contains(chapter)) {
            return Err(ExtractError::Encrypted {
                path: path.to_owned(),
                format: Format::Epub,
            });
        }
    }
    let mut sections = Vec::new();
    let mut total = 0usize;
    for (index, chapter) in chapters.iter().enumerate() {
        // A spine entry missing from the zip is skipped: the rest of the book still reads.
        let Some(page) = archive.read(chapter)? else {
            tracing::warn!(file = %path.display(), chapter, "chapter missing from the book");
            continue;
        };
        let (chapter_title, chapter_sections) = super::html::extract(&xml::decode(&page));
        total += chapter_sections.iter().map(|s| s.text.len()).sum::<usize>();
        if total > limits.max_text_bytes {
            return Err(ExtractError::TooMuchText {
                path: path.to_owned(),
                limit: limits.max_text_bytes,
            });
        }
        let label = chapter_title
            .filter(|title| Some(title) != package.title.as_ref())
            .unwrap_or_else(|| format!("Part {}", index + 1));
        sections.extend(chapter_sections.into_iter().map(|section| Section {
            from_scan: false,
            place: match section.place {
                Place::Whole => Place::Heading(label.clone()),
                place => place,
            },
            text: section.text,
        }));
    }
    Ok(Extracted {
        scanned_pages: Vec::new(),
        format: Format::Epub,
        title: package.title,
        sections,
    })
}

/// The most parts of a book's spine read (a long book has a few hundred).
const MAX_SPINE: usize = 10_000;

/// The `URI`s of `encryption.xml`'s `CipherReference`s: the parts that are encrypted.
fn encrypted_uris(encryption: &str) -> HashSet<String> {
    let mut uris = HashSet::new();
    let mut reader = Reader::from_str(encryption);
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(found) | Event::Empty(found)
                if xml::local_name(&found) == "CipherReference" =>
            {
                uris.extend(xml::attribute(&found, "URI").map(|uri| percent_decode(&uri)));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    uris
}

/// What the package document (`.opf`) says: the title, the manifest (id, href) and the spine's
/// ids in reading order.
struct Package {
    title: Option<String>,
    manifest: Vec<(String, String)>,
    spine: Vec<String>,
}

impl Package {
    fn read(opf: &str) -> Result<Package, String> {
        let mut package = Package {
            title: None,
            manifest: Vec::new(),
            spine: Vec::new(),
        };
        let mut reader = Reader::from_str(opf);
        let mut in_title = false;
        let mut title = String::new();
        loop {
            let event = reader.read_event().map_err(|error| {
                format!(
                    "malformed XML at byte {}: {error}",
                    reader.buffer_position()
                )
            })?;
            match event {
                Event::Start(element) | Event::Empty(element) => match xml::local_name(&element) {
                    "title" if package.title.is_none() => in_title = true,
                    "item" => {
                        if let (Some(id), Some(href)) = (
                            xml::attribute(&element, "id"),
                            xml::attribute(&element, "href"),
                        ) {
                            package.manifest.push((id, href));
                        }
                    }
                    "itemref" => package.spine.extend(xml::attribute(&element, "idref")),
                    _ => {}
                },
                Event::Text(text) if in_title => title.push_str(&text.xml10_content()),
                Event::GeneralRef(reference) if in_title => {
                    title.push_str(&xml::reference(&reference).unwrap_or_default())
                }
                Event::End(element) if in_title && element.local_name().as_ref() == "title" => {
                    in_title = false;
                    let text = title.split_whitespace().collect::<Vec<_>>().join(" ");
                    package.title = (!text.is_empty()).then_some(text);
                }
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(package)
    }
}

/// The value of `attribute` on the first `element` (by local names).
fn first_attribute(document: &str, element: &str, attribute: &str) -> Option<String> {
    let mut reader = Reader::from_str(document);
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(found) | Event::Empty(found) if xml::local_name(&found) == element => {
                return xml::attribute(&found, attribute);
            }
            Event::Eof => return None,
            _ => {}
        }
    }
    None
}

/// The zip entry an href of the package names: relative to the package's folder, its
/// `%XX` escapes decoded, without a `#fragment`, and with `..` resolved.
fn join(base: &str, href: &str) -> String {
    let href = href.split('#').next().unwrap_or(href);
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in href.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    percent_decode(&parts.join("/"))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = bytes
            .get(index + 1..index + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[index], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                index += 3;
            }
            (byte, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrefs_resolve_against_the_package_folder() {
        assert_eq!(
            join("OEBPS", "text/ch%201.xhtml#top"),
            "OEBPS/text/ch 1.xhtml"
        );
        assert_eq!(join("OEBPS/content", "../ch2.xhtml"), "OEBPS/ch2.xhtml");
        assert_eq!(join("", "ch3.xhtml"), "ch3.xhtml");
    }

    #[test]
    fn the_package_gives_title_manifest_and_spine() {
        let opf = r#"<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="dc">
            <metadata><dc:title>A &amp; B</dc:title></metadata>
            <manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>
            <item id="c2" href="c2.xhtml" media-type="application/xhtml+xml"/></manifest>
            <spine><itemref idref="c2"/><itemref idref="c1"/></spine></package>"#;
        let package = Package::read(opf).unwrap();
        assert_eq!(package.title.as_deref(), Some("A & B"));
        assert_eq!(package.spine, ["c2", "c1"]);
        assert_eq!(package.manifest.len(), 2);
    }
}
