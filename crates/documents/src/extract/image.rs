//! Pictures (PNG, JPEG, TIFF, WebP) inspected from their headers only, by Hearth's own bounded
//! readers, before anything decodes them: their size in pixels, bits per pixel, frames (a TIFF
//! may hold many pages) and EXIF orientation. What would be too large to decode
//! (`ImageLimits::max_pixels`), would unpack to far more than its file (`max_unpacked_ratio`:
//! an image bomb) or holds more frames than OCR reads is refused here with its code; the
//! decoding itself is Tesseract's (Leptonica's), in its own confined process (`ocr`).
//!
//! HEIC and AVIF (HEIF containers) are recognised and refused plainly (`unsupported-image`):
//! Debian's Tesseract does not read them.

use std::collections::HashSet;
use std::path::Path;

use super::ExtractError;

/// The bounds on a picture, checked from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLimits {
    /// The most pixels (width x height) of one picture or frame. By default 100 million: a
    /// page at 600 dpi is 35 million, a phone's photo 12 to 50 million.
    pub max_pixels: u64,
    /// The largest ratio of unpacked bytes (at least one per pixel) to the file's bytes, for
    /// pictures that unpack to more than `ratio_floor_bytes`. By default 2,000 (a page of text
    /// scanned to PNG or CCITT G4 TIFF unpacks 10 to 400 times its size; a PNG bomb, 8,000).
    pub max_unpacked_ratio: u64,
    /// Below this many unpacked bytes the ratio is not checked (a blank fax page unpacks
    /// thousands of times its size but only to a few megabytes). By default 32 MiB.
    pub ratio_floor_bytes: u64,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_pixels: 100_000_000,
            max_unpacked_ratio: 2_000,
            ratio_floor_bytes: 32 << 20,
        }
    }
}

/// What a picture's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ImageInfo {
    /// "PNG", "JPEG", "TIFF" or "WebP".
    pub kind: &'static str,
    /// The file name extension Tesseract is given the bytes under.
    pub extension: &'static str,
    pub width: u64,
    pub height: u64,
    pub bits_per_pixel: u64,
    /// Frames (pages of a TIFF; 1 otherwise), counted up to one more than the limit asked.
    pub frames: u64,
    /// EXIF orientation (1 to 8; 1 when there is none).
    pub orientation: u16,
}

/// Inspects `bytes`, the picture at `path`, counting at most `max_frames + 1` frames, and
/// refuses it when it is beyond `limits`.
pub(super) fn check(
    path: &Path,
    bytes: &[u8],
    limits: &ImageLimits,
    max_frames: u64,
) -> Result<ImageInfo, ExtractError> {
    let info = inspect(path, bytes, max_frames + 1)?;
    let pixels = info.width.saturating_mul(info.height);
    if pixels > limits.max_pixels {
        return Err(ExtractError::ImageTooLarge {
            path: path.to_owned(),
            width: info.width,
            height: info.height,
            max_pixels: limits.max_pixels,
        });
    }
    // Decoders unpack to at least a byte per pixel.
    let unpacked = pixels
        .saturating_mul(info.bits_per_pixel.div_ceil(8).max(1))
        .saturating_mul(info.frames);
    if unpacked > limits.ratio_floor_bytes
        && unpacked / (bytes.len() as u64).max(1) > limits.max_unpacked_ratio
    {
        return Err(ExtractError::ImageBomb {
            path: path.to_owned(),
            file_bytes: bytes.len() as u64,
            unpacked_bytes: unpacked,
        });
    }
    Ok(info)
}

/// What the header of `bytes` says, counting at most `max_frames` frames.
pub(super) fn inspect(
    path: &Path,
    bytes: &[u8],
    max_frames: u64,
) -> Result<ImageInfo, ExtractError> {
    let damaged = |detail: &str| ExtractError::Corrupt {
        path: path.to_owned(),
        format: super::Format::Image,
        detail: detail.to_owned(),
    };
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        let brand = &bytes[8..12];
        let kind = match brand {
            b"avif" | b"avis" => "AVIF",
            b"heic" | b"heix" | b"hevc" | b"hevx" | b"mif1" | b"msf1" | b"heim" | b"heis" => "HEIC",
            _ => return Err(damaged("it is not a picture Hearth knows")),
        };
        return Err(ExtractError::UnsupportedImage {
            path: path.to_owned(),
            kind: kind.to_owned(),
        });
    }
    let info = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(bytes)
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        jpeg(bytes)
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        tiff(bytes, max_frames)
    } else if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        webp(bytes)
    } else {
        Err("it is not a PNG, JPEG, TIFF or WebP picture")
    };
    let info = info.map_err(damaged)?;
    if info.width == 0 || info.height == 0 {
        return Err(damaged("its header gives it no pixels"));
    }
    Ok(info)
}

type Parsed = Result<ImageInfo, &'static str>;

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn png(bytes: &[u8]) -> Parsed {
    const TRUNCATED: &str = "its header is cut short";
    if bytes.get(12..16) != Some(b"IHDR") {
        return Err("its first chunk is not the header (IHDR)");
    }
    let width = be32(bytes, 16).ok_or(TRUNCATED)?;
    let height = be32(bytes, 20).ok_or(TRUNCATED)?;
    let depth = *bytes.get(24).ok_or(TRUNCATED)?;
    let channels = match bytes.get(25).ok_or(TRUNCATED)? {
        0 | 3 => 1,
        4 => 2,
        2 => 3,
        6 => 4,
        _ => return Err("its colour type is not one PNG defines"),
    };
    if !matches!(depth, 1 | 2 | 4 | 8 | 16) {
        return Err("its bit depth is not one PNG defines");
    }
    Ok(ImageInfo {
        kind: "PNG",
        extension: "png",
        width: width.into(),
        height: height.into(),
        bits_per_pixel: u64::from(depth) * channels,
        frames: 1,
        orientation: 1,
    })
}

fn jpeg(bytes: &[u8]) -> Parsed {
    let mut at = 2;
    let mut orientation = 1;
    loop {
        // Fill bytes may precede a marker.
        while bytes.get(at) == Some(&0xff) && bytes.get(at + 1) == Some(&0xff) {
            at += 1;
        }
        let (Some(0xff), Some(&marker)) = (bytes.get(at), bytes.get(at + 1)) else {
            return Err("it ends before its frame header");
        };
        at += 2;
        if matches!(marker, 0x01 | 0xd0..=0xd7) {
            continue;
        }
        if marker == 0xd9 || marker == 0xda {
            return Err("it has no frame header before its image data");
        }
        let length = usize::from(be16(bytes, at).ok_or("a segment is cut short")?);
        let segment = bytes
            .get(at + 2..at + length.max(2))
            .ok_or("a segment is cut short")?;
        match marker {
            0xc0..=0xc3 | 0xc5..=0xc7 | 0xc9..=0xcb | 0xcd..=0xcf => {
                let precision = *segment.first().ok_or("its frame header is cut short")?;
                let height = be16(segment, 1).ok_or("its frame header is cut short")?;
                let width = be16(segment, 3).ok_or("its frame header is cut short")?;
                let components = *segment.get(5).ok_or("its frame header is cut short")?;
                return Ok(ImageInfo {
                    kind: "JPEG",
                    extension: "jpg",
                    width: width.into(),
                    height: height.into(),
                    bits_per_pixel: u64::from(precision) * u64::from(components),
                    frames: 1,
                    orientation,
                });
            }
            0xe1 if segment.starts_with(b"Exif\0\0") => {
                orientation = exif_orientation(&segment[6..]).unwrap_or(1);
            }
            _ => {}
        }
        at += length;
    }
}

/// The Orientation tag (274) of the first IFD of the TIFF structure `tiff` (EXIF's).
fn exif_orientation(tiff: &[u8]) -> Option<u16> {
    let order = Order::of(tiff)?;
    let ifd = order.u32(tiff, 4)? as usize;
    let count = order.u16(tiff, ifd)? as usize;
    (0..count.min(512)).find_map(|index| {
        let entry = ifd + 2 + index * 12;
        (order.u16(tiff, entry)? == 274)
            .then(|| order.u16(tiff, entry + 8))
            .flatten()
            .filter(|value| (1..=8).contains(value))
    })
}

/// A TIFF's byte order.
#[derive(Clone, Copy)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn of(tiff: &[u8]) -> Option<Order> {
        match tiff.get(0..4)? {
            b"II*\0" => Some(Order::Little),
            b"MM\0*" => Some(Order::Big),
            _ => None,
        }
    }

    fn u16(self, bytes: &[u8], at: usize) -> Option<u16> {
        let two = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u16::from_le_bytes(two),
            Order::Big => u16::from_be_bytes(two),
        })
    }

    fn u32(self, bytes: &[u8], at: usize) -> Option<u32> {
        let four = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u32::from_le_bytes(four),
            Order::Big => u32::from_be_bytes(four),
        })
    }

    /// A SHORT or LONG entry's first value.
    fn value(self, bytes: &[u8], entry: usize) -> Option<u64> {
        match self.u16(bytes, entry + 2)? {
            3 => self.u16(bytes, entry + 8).map(u64::from),
            4 => self.u32(bytes, entry + 8).map(u64::from),
            _ => None,
        }
    }
}

/// A TIFF: the first frame's size, depth and orientation, and its frames counted along the
/// chain of IFDs (a loop in the chain is damage, not an endless count).
fn tiff(bytes: &[u8], max_frames: u64) -> Parsed {
    let order = Order::of(bytes).ok_or("its header is cut short")?;
    let mut next = order.u32(bytes, 4).ok_or("its header is cut short")? as usize;
    let mut seen = HashSet::new();
    let mut first = None;
    let mut frames = 0;
    while next != 0 && frames < max_frames {
        if !seen.insert(next) {
            return Err("its chain of pages loops");
        }
        let count = order
            .u16(bytes, next)
            .ok_or("a page's directory is outside the file")? as usize;
        let end = next + 2 + count * 12;
        if end + 4 > bytes.len() {
            return Err("a page's directory is outside the file");
        }
        if first.is_none() {
            let (mut width, mut height, mut bits, mut samples, mut orientation) = (0, 0, 1, 1, 1);
            for index in 0..count {
                let entry = next + 2 + index * 12;
                let tag = order.u16(bytes, entry).unwrap_or(0);
                let value = order.value(bytes, entry);
                match (tag, value) {
                    (256, Some(v)) => width = v,
                    (257, Some(v)) => height = v,
                    // With several samples the value is an offset to a list: 8 bits each is
                    // what such files hold.
                    (258, Some(v)) => {
                        bits = if order.u32(bytes, entry + 4) == Some(1) {
                            v
                        } else {
                            8
                        }
                    }
                    (277, Some(v)) => samples = v,
                    (274, Some(v)) if (1..=8).contains(&v) => orientation = v as u16,
                    _ => {}
                }
            }
            first = Some((width, height, bits.max(1) * samples.max(1), orientation));
        }
        frames += 1;
        next = order
            .u32(bytes, end)
            .ok_or("a page's directory is cut short")? as usize;
    }
    if next != 0 {
        // More frames than asked for: one more is what tells the caller.
        frames += 1;
    }
    let (width, height, bits_per_pixel, orientation) = first.ok_or("it holds no pages")?;
    Ok(ImageInfo {
        kind: "TIFF",
        extension: "tif",
        width,
        height,
        bits_per_pixel,
        frames,
        orientation,
    })
}

fn webp(bytes: &[u8]) -> Parsed {
    const TRUNCATED: &str = "its header is cut short";
    let chunk = bytes.get(12..16).ok_or(TRUNCATED)?;
    let data = bytes.get(20..).ok_or(TRUNCATED)?;
    let le24 = |at: usize| -> Option<u64> {
        let b = data.get(at..at + 3)?;
        Some(u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16)
    };
    let (width, height) = match chunk {
        b"VP8 " => {
            if data.get(3..6) != Some(&[0x9d, 0x01, 0x2a]) {
                return Err("its lossy frame has no start code");
            }
            let w = u16::from_le_bytes(data.get(6..8).ok_or(TRUNCATED)?.try_into().unwrap());
            let h = u16::from_le_bytes(data.get(8..10).ok_or(TRUNCATED)?.try_into().unwrap());
            (u64::from(w & 0x3fff), u64::from(h & 0x3fff))
        }
        b"VP8L" => {
            if data.first() != Some(&0x2f) {
                return Err("its lossless frame has no signature");
            }
            let bits = u32::from_le_bytes(data.get(1..5).ok_or(TRUNCATED)?.try_into().unwrap());
            (
                u64::from(bits & 0x3fff) + 1,
                u64::from((bits >> 14) & 0x3fff) + 1,
            )
        }
        b"VP8X" => (le24(4).ok_or(TRUNCATED)? + 1, le24(7).ok_or(TRUNCATED)? + 1),
        _ => return Err("its first chunk is not an image"),
    };
    Ok(ImageInfo {
        kind: "WebP",
        extension: "webp",
        width,
        height,
        bits_per_pixel: 32,
        frames: 1,
        orientation: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_header(width: u32, height: u32, depth: u8, colour: u8) -> Vec<u8> {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&width.to_be_bytes());
        png.extend_from_slice(&height.to_be_bytes());
        png.extend_from_slice(&[depth, colour, 0, 0, 0, 0, 0, 0, 0]);
        png
    }

    #[test]
    fn a_png_too_large_is_refused_from_its_header() {
        let png = png_header(30_000, 30_000, 1, 0);
        let error = check(Path::new("big.png"), &png, &ImageLimits::default(), 1).unwrap_err();
        assert_eq!(error.code(), "image-too-large");
        assert_eq!(error.params()["width"], "30000");
        let fine = check(
            Path::new("a.png"),
            &png_header(2480, 3508, 8, 0),
            &ImageLimits::default(),
            1,
        );
        assert_eq!(fine.unwrap().bits_per_pixel, 8);
    }

    #[test]
    fn truncated_and_foreign_headers_are_damaged_not_panics() {
        let png = png_header(10, 10, 8, 2);
        for end in 0..png.len() {
            let _ = inspect(Path::new("a.png"), &png[..end], 1);
        }
        let jpeg = [0xff, 0xd8, 0xff, 0xe1, 0xff, 0xff, b'E'];
        assert_eq!(
            inspect(Path::new("a.jpg"), &jpeg, 1).unwrap_err().code(),
            "damaged"
        );
        let heic = b"\0\0\0\x18ftypheic\0\0\0\0";
        let error = inspect(Path::new("IMG.HEIC"), heic, 1).unwrap_err();
        assert_eq!(error.code(), "unsupported-image");
        // A TIFF whose page chain points back to itself.
        let mut tiff = b"II*\0\x08\0\0\0\0\0".to_vec();
        tiff.extend_from_slice(&8u32.to_le_bytes());
        assert_eq!(
            inspect(Path::new("a.tif"), &tiff, 100).unwrap_err().code(),
            "damaged"
        );
    }

    #[test]
    fn a_jpeg_gives_its_size_and_exif_orientation() {
        let mut exif = b"Exif\0\0MM\0*\0\0\0\x08\0\x01".to_vec();
        exif.extend_from_slice(&[0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]);
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe1];
        jpeg.extend_from_slice(&((exif.len() + 2) as u16).to_be_bytes());
        jpeg.extend_from_slice(&exif);
        jpeg.extend_from_slice(&[0xff, 0xc0, 0, 8, 8, 0x01, 0x00, 0x02, 0x00, 3]);
        let info = inspect(Path::new("a.jpg"), &jpeg, 1).unwrap();
        assert_eq!((info.width, info.height, info.orientation), (512, 256, 6));
        assert_eq!(info.bits_per_pixel, 24);
    }
}
