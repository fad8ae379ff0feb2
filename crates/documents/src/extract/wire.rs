//! The framing between Hearth and its extraction child (`child`): one request on the child's
//! stdin (the file's path, format, limits and bytes), one answer on its stdout (the extracted
//! sections, or the error a parser reported). Numbers are little-endian `u64`, byte strings are
//! a length then the bytes; a message that does not decode in full is `None`, never a panic.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{ExtractError, ExtractLimits, Extracted, Format, Place, Section};

/// Every format in a fixed order: a format travels as its index here.
const FORMATS: [Format; 9] = [
    Format::PlainText,
    Format::Markdown,
    Format::SourceCode,
    Format::Pdf,
    Format::Docx,
    Format::Odt,
    Format::Html,
    Format::Epub,
    Format::Image,
];

/// What the child is asked to read.
pub(super) struct Request {
    pub path: PathBuf,
    pub format: Format,
    pub limits: ExtractLimits,
    pub bytes: Vec<u8>,
}

pub(super) fn encode_request(
    path: &Path,
    format: Format,
    limits: &ExtractLimits,
    bytes: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 128);
    put_bytes(&mut out, path.as_os_str().as_bytes());
    put_format(&mut out, format);
    for number in limit_numbers(limits) {
        put_u64(&mut out, number);
    }
    put_bytes(&mut out, bytes);
    out
}

pub(super) fn decode_request(message: &[u8]) -> Option<Request> {
    let mut input = Input(message);
    let path = PathBuf::from(OsStr::from_bytes(input.bytes()?));
    let format = input.format()?;
    let limits = ExtractLimits {
        max_file_bytes: input.u64()?,
        max_text_bytes: input.u64()?.try_into().ok()?,
        max_archive_entries: input.u64()?.try_into().ok()?,
        max_unpacked_bytes: input.u64()?,
        max_compression_ratio: input.u64()?,
        ..ExtractLimits::default()
    };
    let bytes = input.bytes()?.to_vec();
    input.end()?;
    Some(Request {
        path,
        format,
        limits,
        bytes,
    })
}

/// The limits the child applies, in `decode_request`'s order (the child's own limits, memory
/// and time, are set on it by the parent and need not travel).
fn limit_numbers(limits: &ExtractLimits) -> [u64; 5] {
    [
        limits.max_file_bytes,
        limits.max_text_bytes as u64,
        limits.max_archive_entries as u64,
        limits.max_unpacked_bytes,
        limits.max_compression_ratio,
    ]
}

pub(super) fn encode_answer(answer: &Result<Extracted, ExtractError>) -> Vec<u8> {
    let mut out = Vec::new();
    match answer {
        Ok(extracted) => {
            out.push(0);
            put_format(&mut out, extracted.format);
            match &extracted.title {
                Some(title) => {
                    out.push(1);
                    put_bytes(&mut out, title.as_bytes());
                }
                None => out.push(0),
            }
            put_u64(&mut out, extracted.sections.len() as u64);
            for section in &extracted.sections {
                match &section.place {
                    Place::Page(page) => {
                        out.push(0);
                        put_u64(&mut out, u64::from(*page));
                    }
                    Place::Heading(heading) => {
                        out.push(1);
                        put_bytes(&mut out, heading.as_bytes());
                    }
                    Place::Whole => out.push(2),
                }
                out.push(u8::from(section.from_scan));
                put_bytes(&mut out, section.text.as_bytes());
            }
            put_u64(&mut out, extracted.scanned_pages.len() as u64);
            for page in &extracted.scanned_pages {
                put_u64(&mut out, u64::from(*page));
            }
        }
        Err(error) => {
            out.push(1);
            match error {
                ExtractError::Encrypted { format, .. } => {
                    out.push(1);
                    put_format(&mut out, *format);
                }
                ExtractError::NoTextLayer { .. } => out.push(2),
                ExtractError::NoText { .. } => out.push(3),
                ExtractError::Corrupt { format, detail, .. } => {
                    out.push(4);
                    put_format(&mut out, *format);
                    put_bytes(&mut out, detail.as_bytes());
                }
                ExtractError::ArchiveLimit { detail, .. } => {
                    out.push(5);
                    put_bytes(&mut out, detail.as_bytes());
                }
                ExtractError::TooMuchText { limit, .. } => {
                    out.push(6);
                    put_u64(&mut out, *limit as u64);
                }
                ExtractError::ParserPanic { format, .. } => {
                    out.push(7);
                    put_format(&mut out, *format);
                }
                ExtractError::TooComplex { detail, .. } => {
                    out.push(8);
                    put_bytes(&mut out, detail.as_bytes());
                }
                // The parsers report none of the others (they concern the file on disk, which
                // the parent checked and read); passed on as the reason the reader stopped.
                other => {
                    out.push(0);
                    put_bytes(&mut out, other.to_string().as_bytes());
                }
            }
        }
    }
    out
}

/// The child's answer about the file at `path`.
pub(super) fn decode_answer(
    path: &Path,
    message: &[u8],
) -> Option<Result<Extracted, ExtractError>> {
    let mut input = Input(message);
    let path = path.to_owned();
    let answer = match input.byte()? {
        0 => {
            let format = input.format()?;
            let title = match input.byte()? {
                0 => None,
                1 => Some(input.text()?),
                _ => return None,
            };
            let count = input.u64()?;
            // Each section takes at least 10 bytes, so a count the message cannot hold is false.
            if count > message.len() as u64 / 10 {
                return None;
            }
            let mut sections = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let place = match input.byte()? {
                    0 => Place::Page(input.u64()?.try_into().ok()?),
                    1 => Place::Heading(input.text()?),
                    2 => Place::Whole,
                    _ => return None,
                };
                let from_scan = match input.byte()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                sections.push(Section {
                    place,
                    text: input.text()?,
                    from_scan,
                });
            }
            let count = input.u64()?;
            if count > message.len() as u64 / 8 {
                return None;
            }
            let mut scanned_pages = Vec::with_capacity(count as usize);
            for _ in 0..count {
                scanned_pages.push(input.u64()?.try_into().ok()?);
            }
            Ok(Extracted {
                format,
                title,
                sections,
                scanned_pages,
            })
        }
        1 => Err(match input.byte()? {
            0 => ExtractError::ReaderStopped {
                path,
                reason: input.text()?,
            },
            1 => ExtractError::Encrypted {
                path,
                format: input.format()?,
            },
            2 => ExtractError::NoTextLayer { path },
            3 => ExtractError::NoText { path },
            4 => ExtractError::Corrupt {
                path,
                format: input.format()?,
                detail: input.text()?,
            },
            5 => ExtractError::ArchiveLimit {
                path,
                detail: input.text()?,
            },
            6 => ExtractError::TooMuchText {
                path,
                limit: input.u64()?.try_into().ok()?,
            },
            7 => ExtractError::ParserPanic {
                path,
                format: input.format()?,
            },
            8 => ExtractError::TooComplex {
                path,
                detail: input.text()?,
            },
            _ => return None,
        }),
        _ => return None,
    };
    input.end()?;
    Some(answer)
}

fn put_u64(out: &mut Vec<u8>, number: u64) {
    out.extend_from_slice(&number.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u64(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn put_format(out: &mut Vec<u8>, format: Format) {
    let index = FORMATS.iter().position(|f| *f == format);
    out.push(index.expect("every format is listed") as u8);
}

/// A message being decoded, from its front.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if count > self.0.len() {
            return None;
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Some(taken)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let count = self.u64()?.try_into().ok()?;
        self.take(count)
    }

    fn text(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }

    fn format(&mut self) -> Option<Format> {
        FORMATS.get(usize::from(self.byte()?)).copied()
    }

    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_survive_the_trip() {
        let limits = ExtractLimits {
            max_text_bytes: 1234,
            ..ExtractLimits::default()
        };
        let message = encode_request(Path::new("a/b.pdf"), Format::Pdf, &limits, b"%PDF");
        let request = decode_request(&message).unwrap();
        assert_eq!(request.path, Path::new("a/b.pdf"));
        assert_eq!(request.format, Format::Pdf);
        assert_eq!(request.limits.max_text_bytes, 1234);
        assert_eq!(request.bytes, b"%PDF");

        let extracted = Extracted {
            format: Format::Epub,
            title: Some("T".into()),
            sections: vec![
                Section {
                    place: Place::Page(3),
                    text: "page".into(),
                    from_scan: false,
                },
                Section {
                    place: Place::Heading("H".into()),
                    text: "under".into(),
                    from_scan: true,
                },
                Section {
                    place: Place::Whole,
                    text: "all".into(),
                    from_scan: false,
                },
            ],
            scanned_pages: vec![4, 7],
        };
        let back = decode_answer(Path::new("x"), &encode_answer(&Ok(extracted.clone())));
        assert_eq!(back.unwrap().unwrap(), extracted);
        let error = ExtractError::Corrupt {
            path: "x".into(),
            format: Format::Odt,
            detail: "bad".into(),
        };
        let back = decode_answer(Path::new("x"), &encode_answer(&Err(error))).unwrap();
        assert!(matches!(back, Err(ExtractError::Corrupt { detail, .. }) if detail == "bad"));
    }

    #[test]
    fn a_damaged_message_decodes_to_none() {
        let message = encode_answer(&Err(ExtractError::NoText { path: "x".into() }));
        assert!(decode_answer(Path::new("x"), &message[..1]).is_none());
        let mut long = message.clone();
        long.push(0);
        assert!(decode_answer(Path::new("x"), &long).is_none());
        // A section count far beyond what the message holds reserves nothing.
        let mut huge = vec![0, 0, 0];
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_answer(Path::new("x"), &huge).is_none());
    }
}
