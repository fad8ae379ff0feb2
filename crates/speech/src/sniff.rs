//! What a file's first bytes say it is, for plain refusals: a sound format Hearth recognizes
//! but does not decode (Opus, AAC, ...) gets its name and a way out, a common non-sound file
//! (a PDF, a picture, text) is said to be one. Sniffing never accepts anything: the decoder
//! still reads every file it is given.

use crate::error::Error;

/// The refusal for a file whose first bytes are `head` (at least the first 64 bytes when the
/// file has them), if they show a known format Hearth does not decode.
pub fn refusal(head: &[u8]) -> Option<Error> {
    let unsupported = |format, example| Some(Error::Unsupported { format, example });
    if head.starts_with(b"OggS") && find(head, b"OpusHead") {
        return unsupported("Opus", "recording.opus");
    }
    if head.starts_with(b"OggS") && find(head, b"Speex   ") {
        return unsupported("Speex", "recording.spx");
    }
    if head.len() >= 12 && &head[4..8] == b"ftyp" {
        return unsupported("AAC (MP4/M4A)", "recording.m4a");
    }
    if head.starts_with(&[0x1A, 0x45, 0xDF, 0xA3]) {
        return unsupported("WebM/Matroska", "recording.webm");
    }
    if head.starts_with(b"FORM") && head.len() >= 12 && matches!(&head[8..12], b"AIFF" | b"AIFC") {
        return unsupported("AIFF", "recording.aiff");
    }
    if head.starts_with(b"#!AMR") {
        return unsupported("AMR", "recording.amr");
    }
    if head.starts_with(&[0xFF, 0xF1]) || head.starts_with(&[0xFF, 0xF9]) {
        return unsupported("AAC (ADTS)", "recording.aac");
    }
    if head.starts_with(&[0x30, 0x26, 0xB2, 0x75]) {
        return unsupported("Windows Media (WMA)", "recording.wma");
    }
    None
}

/// What a file that is not sound looks like, when its first bytes say.
pub fn looks_like(head: &[u8]) -> Option<&'static str> {
    let kinds: &[(&[u8], &str)] = &[
        (b"%PDF", "a PDF document"),
        (b"\x89PNG", "a PNG picture"),
        (b"\xFF\xD8\xFF", "a JPEG picture"),
        (b"GIF8", "a GIF picture"),
        (b"PK\x03\x04", "a ZIP archive or office document"),
        (b"\x7FELF", "a program"),
        (b"\x1F\x8B", "a gzip archive"),
    ];
    if let Some((_, kind)) = kinds.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    if head.starts_with(b"RIFF") && head.len() >= 12 && &head[8..12] == b"WEBP" {
        return Some("a WebP picture");
    }
    if head.starts_with(b"RIFF") && head.len() >= 12 && &head[8..12] == b"AVI " {
        return Some("an AVI video");
    }
    let text = !head.is_empty()
        && std::str::from_utf8(head).is_ok_and(|s| {
            s.chars()
                .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
        });
    text.then_some("text")
}

fn find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opus_and_aac_are_named() {
        let mut ogg = b"OggS\0\x02".to_vec();
        ogg.resize(28, 0);
        ogg.extend_from_slice(b"OpusHead\x01\x02");
        assert!(matches!(
            refusal(&ogg),
            Some(Error::Unsupported { format: "Opus", .. })
        ));
        let m4a = b"\0\0\0\x20ftypM4A \0\0\0\0";
        assert!(matches!(
            refusal(m4a),
            Some(Error::Unsupported {
                format: "AAC (MP4/M4A)",
                ..
            })
        ));
        assert!(refusal(b"RIFF\0\0\0\0WAVEfmt ").is_none());
        assert!(refusal(b"fLaC\0\0\0\x22").is_none());
    }

    #[test]
    fn common_files_that_are_not_sound_are_named() {
        assert_eq!(looks_like(b"%PDF-1.7\n"), Some("a PDF document"));
        assert_eq!(looks_like(b"hello, this is a note\n"), Some("text"));
        assert_eq!(looks_like(&[0, 1, 2, 3]), None);
    }
}
