//! Tests of [`super::check_picture`]: good pictures in the three formats, and hostile bytes made
//! here (a decompression bomb, a 100,000 x 100,000 header, a truncated PNG, not a picture).

use super::*;
use image::{ImageEncoder, RgbImage, RgbaImage};

fn png(width: u32, height: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(width, height, |x, y| image::Rgb([x as u8, y as u8, 7]));
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
        .unwrap();
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc_input = kind.to_vec();
    crc_input.extend_from_slice(data);
    out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
    out
}

/// A PNG header (signature and IHDR) for `width` x `height`, 8-bit RGB or 1-bit grey.
fn png_header(width: u32, height: u32, one_bit_grey: bool) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(if one_bit_grey {
        &[1, 0, 0, 0, 0]
    } else {
        &[8, 2, 0, 0, 0]
    });
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(chunk(b"IHDR", &ihdr));
    out
}

/// Writes bits least significant first, as deflate packs them.
struct Bits {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits {
    fn put(&mut self, value: u32, count: u32) {
        self.acc |= u64::from(value) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }

    /// A Huffman code, written most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        let reversed = code.reverse_bits() >> (32 - len);
        self.put(reversed, len);
    }
}

/// A zlib stream that inflates to `total` zero bytes in about 13 bits per 258 of them: one
/// fixed-Huffman block of a literal 0 and then copies of length 258 at distance 1.
fn zero_bomb(total: u64) -> Vec<u8> {
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        n: 0,
    };
    bits.put(1, 1); // the last block
    bits.put(1, 2); // fixed Huffman codes
    bits.code(0b0011_0000, 8); // literal 0
    let mut left = total - 1;
    while left >= 258 {
        bits.code(0b1100_0101, 8); // length 258 (code 285)
        bits.code(0, 5); // distance 1
        left -= 258;
    }
    for _ in 0..left {
        bits.code(0b0011_0000, 8);
    }
    bits.code(0, 7); // end of block
    if bits.n > 0 {
        bits.put(0, 8 - bits.n);
    }
    let mut out = bits.out;
    // Adler-32 of zeros: A stays 1, B adds 1 per byte.
    let b = (total % 65521) as u32;
    out.extend_from_slice(&((b << 16) | 1).to_be_bytes());
    out
}

#[test]
fn a_png_is_downscaled_to_the_longest_side_asked_for_and_stays_png() {
    let p = check_picture(&png(300, 100), 150).unwrap();
    assert_eq!(p.format, PictureFormat::Png);
    assert_eq!((p.width, p.height), (150, 50));
    assert_eq!(sniff(&p.bytes), Some(ImageFormat::Png));
    let small = check_picture(&png(20, 10), DEFAULT_LONGEST_SIDE).unwrap();
    assert_eq!((small.width, small.height), (20, 10), "never upscaled");
}

#[test]
fn a_jpeg_stays_jpeg_and_a_webp_becomes_png() {
    let img = RgbImage::from_fn(64, 48, |x, _| image::Rgb([x as u8 * 3, 90, 200]));
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 80)
        .encode_image(&img)
        .unwrap();
    let p = check_picture(&jpeg, 32).unwrap();
    assert_eq!((p.format, p.width, p.height), (PictureFormat::Jpeg, 32, 24));
    assert_eq!(sniff(&p.bytes), Some(ImageFormat::Jpeg));

    let rgba = RgbaImage::from_fn(10, 20, |x, y| image::Rgba([x as u8, y as u8, 0, 128]));
    let mut webp = Vec::new();
    image::codecs::webp::WebPEncoder::new_lossless(&mut webp)
        .write_image(rgba.as_raw(), 10, 20, image::ExtendedColorType::Rgba8)
        .unwrap();
    let p = check_picture(&webp, DEFAULT_LONGEST_SIDE).unwrap();
    assert_eq!((p.format, p.width, p.height), (PictureFormat::Png, 10, 20));
    let back = image::load_from_memory(&p.bytes).unwrap();
    assert!(back.color().has_alpha(), "transparency is kept");
}

#[test]
fn the_name_does_not_matter_the_bytes_do() {
    assert_eq!(sniff(&png(2, 2)), Some(ImageFormat::Png));
    assert_eq!(
        check_picture(b"GIF89a not one we take", 100),
        Err(PictureError::NotAPicture)
    );
    let words = check_picture(b"%PDF-1.7\n...", 100)
        .unwrap_err()
        .to_string();
    assert!(words.contains("not a PNG, JPEG or WebP"), "{words}");
    assert_eq!(check_picture(b"", 100), Err(PictureError::Empty));
}

#[test]
fn a_file_over_20_mb_is_refused_unread() {
    let mut big = png(2, 2);
    big.resize(MAX_PICTURE_BYTES + 1, 0);
    let e = check_picture(&big, 100).unwrap_err();
    assert!(matches!(e, PictureError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("up to 20.0 MB"), "{e}");
}

#[test]
fn a_100000_by_100000_header_is_refused_by_its_size() {
    let mut file = png_header(100_000, 100_000, false);
    file.extend(chunk(b"IEND", &[]));
    let e = check_picture(&file, 100).unwrap_err();
    assert_eq!(
        e,
        PictureError::TooManyPixels {
            width: 100_000,
            height: 100_000,
            max: MAX_PICTURE_PIXELS
        }
    );
    assert!(e.to_string().contains("up to 40 megapixels"), "{e}");
}

#[test]
fn a_decompression_bomb_is_refused_before_it_is_inflated() {
    // 20,000 x 20,000 one-bit pixels: 50 MB of zeros once inflated, 400 megapixels once
    // decoded, from a file of about 300 kB.
    let (width, height) = (20_000u32, 20_000u32);
    let row = 1 + u64::from(width).div_ceil(8);
    let mut file = png_header(width, height, true);
    file.extend(chunk(b"IDAT", &zero_bomb(row * u64::from(height))));
    file.extend(chunk(b"IEND", &[]));
    assert!(file.len() < 400_000, "{} bytes", file.len());
    let e = check_picture(&file, 100).unwrap_err();
    assert!(matches!(e, PictureError::TooManyPixels { .. }), "{e}");
}

#[test]
fn a_small_bomb_within_the_bounds_decodes_to_what_it_says() {
    // The same construction at 300 x 200 is a valid, all-black picture: the bomb above is
    // refused for its size, not for being malformed.
    let (width, height) = (300u32, 200u32);
    let row = 1 + u64::from(width).div_ceil(8);
    let mut file = png_header(width, height, true);
    file.extend(chunk(b"IDAT", &zero_bomb(row * u64::from(height))));
    file.extend(chunk(b"IEND", &[]));
    let p = check_picture(&file, DEFAULT_LONGEST_SIDE).unwrap();
    assert_eq!((p.width, p.height), (300, 200));
}

#[test]
fn a_truncated_png_is_refused_as_damaged() {
    let whole = png(64, 64);
    for cut in [9, 20, 33, 50, whole.len() / 2, whole.len() - 13] {
        let e = check_picture(&whole[..cut], 100).unwrap_err();
        assert!(
            matches!(e, PictureError::Damaged { format: "PNG", .. }),
            "cut at {cut}: {e}"
        );
        assert!(e.to_string().contains("damaged or cut short"), "{e}");
    }
}

#[test]
fn a_jpeg_that_says_it_is_huge_is_refused() {
    // SOI, then a baseline frame header for 65,535 x 65,535 with three components.
    let mut jpeg = vec![
        0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0xFF, 0xFF, 0xFF, 0xFF, 3,
    ];
    for id in 1..=3u8 {
        jpeg.extend_from_slice(&[id, 0x11, 0]);
    }
    jpeg.extend_from_slice(&[0xFF, 0xD9]);
    let e = check_picture(&jpeg, 100).unwrap_err();
    assert!(
        matches!(
            e,
            PictureError::TooManyPixels { .. } | PictureError::Damaged { .. }
        ),
        "{e}"
    );
}

#[test]
fn base64_and_data_urls_round_trip() {
    for bytes in [&b""[..], b"a", b"ab", b"abc", b"\xff\x00\x10hello"] {
        assert_eq!(from_base64(&base64(bytes)).unwrap(), bytes);
    }
    assert_eq!(base64(b"hi!?"), "aGkhPw==");
    let p = check_picture(&png(4, 4), 100).unwrap();
    let url = data_url(&p);
    assert!(url.starts_with("data:image/png;base64,"), "{url}");
    assert_eq!(bytes_of_url(&url).unwrap(), &p.bytes[..]);
    assert_eq!(bytes_of_url(&base64(&p.bytes)).unwrap(), &p.bytes[..]);
    assert!(bytes_of_url("https://example.org/cat.png")
        .unwrap_err()
        .contains("not fetched"));
    assert!(bytes_of_url("data:image/png;base64,@@@").is_err());
    assert!(bytes_of_url("data:image/png,raw").is_err());
}
