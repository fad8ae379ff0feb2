//! Checking a picture someone gives Hearth, the one way the app, `hearth run`/`chat` and
//! `hearth serve` all do it: [`check_picture`] takes the file's bytes and returns a
//! [`Picture`] a model can be given, or a [`PictureError`] in plain words.
//!
//! The contract, in order:
//! 1. at most [`MAX_PICTURE_BYTES`] (20 MB), refused before anything is read;
//! 2. PNG, JPEG or WebP, known by the file's first bytes (never by its name);
//! 3. at most [`MAX_PICTURE_PIXELS`] (40 megapixels), read from the header before anything is
//!    decoded, so a small file that claims a huge picture (a decompression bomb) costs nothing;
//!    decoding then runs under the same bound as an allocation limit;
//! 4. decoded (a damaged or cut-short file is refused), turned upright as its EXIF orientation
//!    says, downscaled so its longest side is at most the side asked for (the backend's; by
//!    default [`DEFAULT_LONGEST_SIDE`]), and re-encoded: JPEG stays JPEG (quality 90), PNG and
//!    WebP become PNG. Re-encoding always, even a small picture, also drops what the file
//!    carried besides the pixels (EXIF, the place a photo was taken).
//!
//! It lives in `chat` because every front end reaches `chat` (DESIGN.md: the app, the server,
//! the CLI), and the [`Picture`] it makes is the engine's, carried on a
//! [`hearth_engine::ChatMessage`]. It uses the `image` crate with only its png, jpeg and webp
//! decoders.

use std::io::Cursor;
use std::sync::Arc;

use hearth_engine::{Picture, PictureFormat};
use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

/// The largest picture file Hearth takes: 20 MB.
pub const MAX_PICTURE_BYTES: usize = 20 * 1024 * 1024;

/// The most pixels a picture may have: 40 megapixels (a 7,300 x 5,470 photo).
pub const MAX_PICTURE_PIXELS: u64 = 40_000_000;

/// The longest side a picture is downscaled to when the backend does not ask for another:
/// 1,536 pixels, more than the vision models Hearth reaches read (Gemma 3 reads 896, Qwen's
/// read up to about 1,280 by default) so their own resizing decides the rest.
pub const DEFAULT_LONGEST_SIDE: u32 = 1536;

/// The most pictures one message may carry, in the app (the desktop's composer reads it through
/// the app's status), `hearth run`/`chat` and `hearth serve`: four, as many as a vision model
/// on the NPU reads well in one prompt, and a bound on what one request may weigh.
pub const MAX_PICTURES: usize = 4;

/// What a picture is counted as in a prompt when the backend cannot say (a server's `usage`
/// says afterwards): one token per 28 x 28 pixels (Qwen2-VL's merged patches) and at least 256
/// (Gemma 3 gives every picture 256), so the estimate is never below what either family spends.
pub fn picture_tokens(picture: &Picture) -> usize {
    tokens_for(picture.width, picture.height)
}

/// [`picture_tokens`] of a picture `width` x `height` pixels (the app's estimate before sending).
pub fn tokens_for(width: u32, height: u32) -> usize {
    let patches = width.div_ceil(28) as usize * height.div_ceil(28) as usize;
    patches.max(256)
}

/// Why a picture was refused. The words say what was wrong and what to do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PictureError {
    /// The file is empty.
    #[error("the picture is empty (0 bytes): choose a PNG, JPEG or WebP picture")]
    Empty,
    /// The file is larger than [`MAX_PICTURE_BYTES`].
    #[error("the picture is {} MB; Hearth takes pictures up to {} MB: make it smaller or crop it to the part that matters", mb(*.size), mb(*.max))]
    TooLarge {
        /// Its size in bytes.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// The file is not a PNG, JPEG or WebP picture.
    #[error("this is not a PNG, JPEG or WebP picture (its first bytes are not one of those): save it as one of them and try again")]
    NotAPicture,
    /// The picture has more pixels than [`MAX_PICTURE_PIXELS`].
    #[error("the picture is {width} x {height} pixels; Hearth takes pictures up to {} megapixels: make it smaller and try again", .max / 1_000_000)]
    TooManyPixels {
        /// Width its header says.
        width: u32,
        /// Height its header says.
        height: u32,
        /// The bound, in pixels.
        max: u64,
    },
    /// The file could not be decoded (damaged, cut short, or using a part of its format the
    /// decoder does not read).
    #[error("the {format} picture could not be read ({detail}): it may be damaged or cut short; open it in an image viewer, save it again and retry")]
    Damaged {
        /// "PNG", "JPEG" or "WebP".
        format: &'static str,
        /// The decoder's words.
        detail: String,
    },
    /// Re-encoding the checked picture failed (should not happen).
    #[error("the picture could not be prepared for the model ({0})")]
    Encode(String),
}

fn mb(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// The format the bytes say they are, from their first bytes.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageFormat::Jpeg)
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some(ImageFormat::WebP)
    } else {
        None
    }
}

fn format_name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "PNG",
        ImageFormat::Jpeg => "JPEG",
        _ => "WebP",
    }
}

/// Checks `bytes` as a picture and prepares it for a model whose pictures are at most
/// `longest_side` pixels on their longest side (see the module's contract).
pub fn check_picture(bytes: &[u8], longest_side: u32) -> Result<Picture, PictureError> {
    if bytes.is_empty() {
        return Err(PictureError::Empty);
    }
    if bytes.len() > MAX_PICTURE_BYTES {
        return Err(PictureError::TooLarge {
            size: bytes.len(),
            max: MAX_PICTURE_BYTES,
        });
    }
    let format = sniff(bytes).ok_or(PictureError::NotAPicture)?;
    let damaged = |e: image::ImageError| PictureError::Damaged {
        format: format_name(format),
        detail: e.to_string(),
    };
    // The header alone, with no bound of the decoder's own, so a huge picture is named by its
    // size rather than by the decoder's limit.
    // A PNG says its size in its first chunk, which is read here directly: the decoder reads
    // on to the first pixel data before it tells, and a file cut short there is still named
    // by the size it claims.
    let (width, height) = match png_size(bytes) {
        Some(size) => size,
        None => {
            let mut header = ImageReader::with_format(Cursor::new(bytes), format);
            header.limits(Limits::no_limits());
            header.into_dimensions().map_err(damaged)?
        }
    };
    if width == 0 || height == 0 {
        return Err(PictureError::Damaged {
            format: format_name(format),
            detail: format!("it says it is {width} x {height} pixels"),
        });
    }
    if u64::from(width) * u64::from(height) > MAX_PICTURE_PIXELS {
        return Err(PictureError::TooManyPixels {
            width,
            height,
            max: MAX_PICTURE_PIXELS,
        });
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    // Four 16-bit channels per pixel, the most a decoder holds, plus its working room.
    limits.max_alloc = Some(MAX_PICTURE_PIXELS * 8 + 64 * 1024 * 1024);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().map_err(damaged)?;
    let orientation = decoder.orientation().ok();
    let mut image = DynamicImage::from_decoder(decoder).map_err(damaged)?;
    if let Some(orientation) = orientation {
        image.apply_orientation(orientation);
    }
    let side = longest_side.max(1);
    if image.width().max(image.height()) > side {
        image = image.resize(side, side, image::imageops::FilterType::Triangle);
    }
    encode(image, format)
}

/// The width and height in a PNG's IHDR chunk (which must come first), if it has one.
fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || !bytes.starts_with(b"\x89PNG\r\n\x1a\n") || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let word =
        |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    Some((word(16), word(20)))
}

/// Re-encodes a checked picture: JPEG as JPEG, the others as PNG, in 8 bits per channel.
fn encode(image: DynamicImage, from: ImageFormat) -> Result<Picture, PictureError> {
    let (width, height) = (image.width(), image.height());
    let mut out = Vec::new();
    let format = if from == ImageFormat::Jpeg {
        let rgb = image.into_rgb8();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
            .encode_image(&rgb)
            .map_err(|e| PictureError::Encode(e.to_string()))?;
        PictureFormat::Jpeg
    } else {
        let image = if image.color().has_alpha() {
            DynamicImage::ImageRgba8(image.into_rgba8())
        } else {
            DynamicImage::ImageRgb8(image.into_rgb8())
        };
        image
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .map_err(|e| PictureError::Encode(e.to_string()))?;
        PictureFormat::Png
    };
    Ok(Picture {
        format,
        width,
        height,
        bytes: Arc::from(out),
    })
}

/// The picture as a `data:` URL (`data:image/png;base64,...`), the way OpenAI's `image_url`
/// parts carry one.
pub fn data_url(picture: &Picture) -> String {
    format!(
        "data:{};base64,{}",
        picture.format.media_type(),
        base64(&picture.bytes)
    )
}

/// Standard base64 (with padding) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional, whitespace ignored); None when it is not base64.
pub fn from_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0u32;
    let mut padding = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => {
                padding += 1;
                continue;
            }
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        if padding > 0 {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (padding <= 2).then_some(out)
}

/// A picture given as OpenAI's `image_url` carries it (a `data:image/...;base64,` URL) or as
/// Ollama's `images` do (plain base64): its bytes, or why they could not be read. A web address
/// is refused: Hearth fetches nothing it was not asked to download.
pub fn bytes_of_url(url: &str) -> Result<Vec<u8>, String> {
    let url = url.trim();
    let payload = if let Some(rest) = url.strip_prefix("data:") {
        let (kind, data) = rest
            .split_once(',')
            .ok_or("the picture's data URL has no comma before its data")?;
        if !kind.ends_with(";base64") {
            return Err(
                "the picture's data URL is not base64 (use data:image/png;base64,...)".into(),
            );
        }
        data
    } else if url.starts_with("http://") || url.starts_with("https://") {
        return Err(
            "pictures by web address are not fetched: send the picture itself as a data:image/png;base64,... URL"
                .into(),
        );
    } else {
        url
    };
    // A base64 text larger than the largest picture's encoding is refused unread.
    if payload.len() > MAX_PICTURE_BYTES / 3 * 4 + 8 {
        return Err(format!(
            "the picture is larger than {} MB; Hearth takes pictures up to that size",
            MAX_PICTURE_BYTES / (1024 * 1024)
        ));
    }
    from_base64(payload).ok_or_else(|| "the picture's data is not valid base64".into())
}

#[cfg(test)]
#[path = "picture_tests.rs"]
mod tests;
