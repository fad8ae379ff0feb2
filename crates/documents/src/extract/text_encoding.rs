//! Bytes to text for the plain-text formats. A file that is not UTF-8 is decoded by detection,
//! never lossily: a byte-order mark names UTF-8 or UTF-16; valid UTF-8 is UTF-8; anything else
//! goes to chardetng (Firefox's detector for legacy web text), which picks among the legacy
//! encodings (Windows-1252, Shift_JIS, GBK, EUC-KR, KOI8-R...) the one the bytes read best as,
//! and encoding_rs decodes it. Every byte sequence decodes in a legacy single-byte encoding, so
//! nothing is dropped; a wrong guess shows as odd letters, never as lost text.

use std::path::Path;

use encoding_rs::{Encoding, UTF_8};

use super::{ExtractError, Format};

/// The text of `bytes`, a file of `format` at `path`. Refuses binary data (NUL bytes outside
/// UTF-16), which is not text whatever its extension says.
pub(super) fn decode(path: &Path, format: Format, bytes: &[u8]) -> Result<String, ExtractError> {
    if let Some((encoding, bom_length)) = Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_length..]);
        return Ok(text.into_owned());
    }
    if bytes.contains(&0) {
        return Err(ExtractError::Corrupt {
            path: path.to_owned(),
            format,
            detail: "it holds binary data, not text".to_owned(),
        });
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(text.to_owned());
    }
    let encoding = detect(bytes);
    tracing::info!(
        file = %path.display(),
        encoding = encoding.name(),
        "not UTF-8: decoded in the detected encoding"
    );
    let (text, _) = encoding.decode_without_bom_handling(bytes);
    Ok(text.into_owned())
}

/// The legacy encoding `bytes` most likely are in (never UTF-8: they are not valid UTF-8).
fn detect(bytes: &[u8]) -> &'static Encoding {
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(bytes, true);
    let encoding = detector.guess(None, chardetng::Utf8Detection::Deny);
    if encoding == UTF_8 {
        encoding_rs::WINDOWS_1252
    } else {
        encoding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(bytes: &[u8]) -> String {
        decode(Path::new("t.txt"), Format::PlainText, bytes).unwrap()
    }

    #[test]
    fn utf8_stays_as_it_is() {
        assert_eq!(decoded("naïve café 中文".as_bytes()), "naïve café 中文");
    }

    #[test]
    fn a_byte_order_mark_names_utf16() {
        let mut bytes = vec![0xff, 0xfe];
        bytes.extend("héllo".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(decoded(&bytes), "héllo");
    }

    #[test]
    fn latin1_text_is_detected_not_replaced() {
        let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode("Le café était fermé, déjà à midi.");
        assert_eq!(decoded(&bytes), "Le café était fermé, déjà à midi.");
    }

    #[test]
    fn shift_jis_text_is_detected() {
        let text = "日本語のテキストファイルです。これは文書の検索のための例です。";
        let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(text);
        assert_eq!(decoded(&bytes), text);
    }

    #[test]
    fn binary_data_is_refused() {
        let error = decode(Path::new("x.txt"), Format::PlainText, b"\x7fELF\0\0\x01").unwrap_err();
        assert!(error.to_string().contains("binary data"), "{error}");
    }
}
