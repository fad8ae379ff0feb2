//! What the zip-based formats share for reading their XML parts with quick-xml, which expands
//! no DTD entities (so no "billion laughs") and fetches nothing.

use std::borrow::Cow;

use quick_xml::events::{BytesRef, BytesStart};

/// An XML part's text: in the encoding its byte-order mark or declaration names, else UTF-8
/// (malformed bytes become U+FFFD rather than failing the whole document).
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    if let Some((encoding, bom_length)) = encoding_rs::Encoding::for_bom(bytes) {
        return encoding.decode_without_bom_handling(&bytes[bom_length..]).0;
    }
    if let Some(encoding) = declared_encoding(bytes) {
        return encoding.decode_without_bom_handling(bytes).0;
    }
    String::from_utf8_lossy(bytes)
}

/// The encoding an `<?xml ... encoding="..."?>` declaration names, when not UTF-8.
fn declared_encoding(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = bytes.get(..bytes.len().min(200))?;
    let declaration = &head[..head.windows(2).position(|w| w == b"?>")?];
    let at = declaration.windows(9).position(|w| w == b"encoding=")? + 9;
    let quoted = &declaration[at..];
    let quote = *quoted.first()?;
    let label = quoted[1..].split(|&b| b == quote).next()?;
    encoding_rs::Encoding::for_label(label).filter(|e| *e != encoding_rs::UTF_8)
}

/// The unescaped value of the attribute `local` (namespace prefix ignored) of an element.
pub(super) fn attribute(element: &BytesStart, local: &str) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|attribute| attribute.key.local_name().as_ref() == local)
        .map(|attribute| {
            attribute
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map(Cow::into_owned)
                .unwrap_or_else(|_| attribute.value.into_owned())
        })
}

/// The local name (without namespace prefix) of an element.
pub(super) fn local_name<'a>(element: &'a BytesStart) -> &'a str {
    let name = element.name().0;
    name.rsplit(':').next().unwrap_or(name)
}

/// The text an entity or character reference stands for (`&amp;`, `&#233;`), if known.
pub(super) fn reference(reference: &BytesRef) -> Option<String> {
    if let Ok(Some(character)) = reference.resolve_char_ref() {
        return Some(character.to_string());
    }
    quick_xml::escape::resolve_xml_entity(reference).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_legacy_encoding_is_honoured() {
        let mut bytes = b"<?xml version='1.0' encoding='ISO-8859-1'?><p>".to_vec();
        bytes.push(0xe9);
        assert!(decode(&bytes).ends_with("<p>é"));
        assert_eq!(decode("<p>é</p>".as_bytes()), "<p>é</p>");
    }
}
