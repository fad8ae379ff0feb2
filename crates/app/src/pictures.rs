//! Pictures a person gives with a message, as the front ends hand them over: bytes (pasted, or
//! dropped on the desktop's composer), a file (the picker, `hearth run --image`), or a drop on
//! the window (by its token). Each is checked once, here, with the chat crate's
//! [`check_picture`] (kind sniffed from the bytes, bounded in bytes and pixels before it is
//! decoded, downscaled, re-encoded) and comes back as a [`DraftPicture`]: what the composer shows
//! before sending and sends back with the message ([`PictureUpload`]), checked again then, since
//! what comes from a web view is not trusted.
//!
//! Contract:
//! - at most [`MAX_PICTURES`] pictures per message, each at most [`MAX_PICTURE_BYTES`] (the chat
//!   crate's bounds, which the CLI and the server keep too; the desktop's composer reads them as
//!   [`PICTURE_LIMITS`] in the app's status); a file is measured before it is read, base64
//!   before it is decoded;
//! - a picture costs the model's context an estimate of [`picture::tokens_for`] until the backend
//!   counts it (its count is the answer's prompt tokens);
//! - saved pictures are read back by message and place ([`App::message_picture`]) and go with
//!   their conversation (the store deletes them with it);
//! - for a model that does not see, [`App::pictures_as_documents`] writes the pictures to the
//!   data folder's `pictures read` folder as a drop of documents: the document path reads their
//!   text by OCR.

use std::path::{Path, PathBuf};

use hearth_chat::picture::{self, check_picture, PictureError};
use hearth_chat::Picture;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::drop::{DropKind, Dropped};
use crate::error::{Error, ErrorCode, Result};
use crate::lock::lock;
use crate::session::Session;

pub use hearth_chat::picture::{MAX_PICTURES, MAX_PICTURE_BYTES};

/// The folder of the data folder that pictures read by OCR are written to (they stay while the
/// library lists them).
pub const PICTURES_READ_DIR: &str = "pictures read";

/// The bounds on the pictures of one message, as a front end shows and checks them first (the
/// desktop reads them in the app's status; the app checks them again all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PictureLimits {
    /// The most pictures one message carries ([`MAX_PICTURES`]).
    pub max_pictures: u32,
    /// The largest picture file, in bytes ([`MAX_PICTURE_BYTES`]).
    pub max_picture_bytes: u32,
}

/// Hearth's bounds on the pictures of a message.
pub const PICTURE_LIMITS: PictureLimits = PictureLimits {
    max_pictures: MAX_PICTURES as u32,
    max_picture_bytes: MAX_PICTURE_BYTES as u32,
};

/// A picture checked and ready to go with the next message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct DraftPicture {
    /// The file's name (or what the front end called a pasted picture).
    pub name: String,
    /// `image/png` or `image/jpeg` (what it was re-encoded to).
    pub media_type: String,
    /// Width in pixels, after downscaling.
    pub width: u32,
    /// Height in pixels, after downscaling.
    pub height: u32,
    /// Its size in bytes, re-encoded.
    pub size: u32,
    /// The re-encoded picture, base64: shown as the thumbnail, sent back with the message.
    pub data: String,
    /// What it costs of the context, estimated ([`picture::tokens_for`]).
    pub tokens: u32,
}

/// A picture as a front end sends it with a message: its name and its bytes, base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PictureUpload {
    /// Its name, for errors.
    pub name: String,
    /// The picture's bytes, base64.
    pub data: String,
}

/// The error a person sees for a refused picture: its name, and the check's words.
fn refused(name: &str, error: PictureError) -> Error {
    Error::invalid(format!("{name}: {error}."))
}

/// The longest base64 text a picture of [`MAX_PICTURE_BYTES`] takes (with line breaks spared).
fn max_base64_len() -> usize {
    MAX_PICTURE_BYTES.div_ceil(3) * 4 + 1024
}

/// The bytes of `data` (base64), refused plainly when too long or not base64.
fn decode(name: &str, data: &str) -> Result<Vec<u8>> {
    if data.len() > max_base64_len() {
        return Err(refused(
            name,
            PictureError::TooLarge {
                size: data.len() / 4 * 3,
                max: MAX_PICTURE_BYTES,
            },
        ));
    }
    picture::from_base64(data).ok_or_else(|| {
        Error::invalid(format!(
            "{name}: the picture did not arrive whole (its data is not base64). Add it again."
        ))
    })
}

/// The picture of `bytes`, checked for a model that reads pictures up to `longest_side`.
pub fn check(name: &str, bytes: &[u8], longest_side: u32) -> Result<Picture> {
    check_picture(bytes, longest_side).map_err(|e| refused(name, e))
}

/// The file at `path`, measured before it is read, checked as [`check`] does.
pub fn check_file(path: &Path, longest_side: u32) -> Result<(String, Picture)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let unreadable = |e: std::io::Error| {
        Error::new(
            ErrorCode::Storage,
            format!("{name} could not be read: {e}. Check that it is still there and readable."),
        )
    };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > MAX_PICTURE_BYTES as u64 {
        return Err(refused(
            &name,
            PictureError::TooLarge {
                size: usize::try_from(size).unwrap_or(usize::MAX),
                max: MAX_PICTURE_BYTES,
            },
        ));
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    let picture = check(&name, &bytes, longest_side)?;
    Ok((name, picture))
}

/// What the composer shows of a checked picture.
pub fn draft(name: &str, picture: &Picture) -> DraftPicture {
    DraftPicture {
        name: name.to_string(),
        media_type: picture.format.media_type().to_string(),
        width: picture.width,
        height: picture.height,
        size: u32::try_from(picture.bytes.len()).unwrap_or(u32::MAX),
        data: picture::base64(&picture.bytes),
        tokens: u32::try_from(picture::tokens_for(picture.width, picture.height))
            .unwrap_or(u32::MAX),
    }
}

/// The pictures a message was sent with, checked again (at most [`MAX_PICTURES`]).
pub fn uploads(pictures: &[PictureUpload], longest_side: u32) -> Result<Vec<Picture>> {
    if pictures.len() > MAX_PICTURES {
        return Err(Error::invalid(format!(
            "A message can carry at most {MAX_PICTURES} pictures; this one has {}. Send the others in another message.",
            pictures.len()
        )));
    }
    pictures
        .iter()
        .map(|p| check(&p.name, &decode(&p.name, &p.data)?, longest_side))
        .collect()
}

/// A file name for a picture written out: its own name's stem (letters, digits, spaces,
/// dashes), the extension of what it was re-encoded to, never an existing file's.
fn free_name(dir: &Path, name: &str, picture: &Picture) -> PathBuf {
    let stem = Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = crate::export::file_stem(&stem);
    let ext = picture.format.extension();
    let mut path = dir.join(format!("{stem}.{ext}"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stem} ({n}).{ext}"));
        n += 1;
    }
    path
}

impl App {
    /// The longest side the model in use takes its pictures at (the chat crate's default when
    /// no model is open, or while it answers: the model is locked then, and the picture is
    /// checked again for it when sent).
    fn picture_side(&self) -> u32 {
        match self.model.try_lock() {
            Ok(model) => model.as_ref().map(Session::picture_side),
            Err(_) => None,
        }
        .unwrap_or(picture::DEFAULT_LONGEST_SIDE)
    }

    /// Checks a pasted or dropped picture (`data`: its bytes, base64) for the next message.
    pub fn check_picture(&self, name: &str, data: &str) -> Result<DraftPicture> {
        let bytes = decode(name, data)?;
        Ok(draft(name, &check(name, &bytes, self.picture_side())?))
    }

    /// Checks picture files (chosen in a dialog); the first refused one is the error, named.
    pub fn check_picture_files(&self, paths: &[PathBuf]) -> Result<Vec<DraftPicture>> {
        if paths.len() > MAX_PICTURES {
            return Err(Error::invalid(format!(
                "A message can carry at most {MAX_PICTURES} pictures; {} were chosen. Choose fewer.",
                paths.len()
            )));
        }
        paths
            .iter()
            .map(|path| {
                let (name, picture) = check_file(path, self.picture_side())?;
                Ok(draft(&name, &picture))
            })
            .collect()
    }

    /// The pictures of the drop `token` (a drop of documents that are all pictures; once),
    /// checked for the next message.
    pub fn take_dropped_pictures(&self, token: &str) -> Result<Vec<DraftPicture>> {
        let paths = self.drops.take(token, DropKind::Documents)?;
        self.check_picture_files(&paths)
    }

    /// The pictures of `conversation`'s messages, read from the store (for its export).
    pub fn pictures_of(
        &self,
        conversation: &hearth_chat::conversations::Conversation,
    ) -> Result<crate::export::MessagePictures> {
        let store = lock(&self.store);
        let mut pictures = crate::export::MessagePictures::new();
        for m in conversation
            .messages
            .iter()
            .filter(|m| !m.pictures.is_empty())
        {
            pictures.insert(m.id, store.pictures(m.id)?);
        }
        Ok(pictures)
    }

    /// Picture `index` of the saved message `message_id`, as a `data:` URL to show.
    pub fn message_picture(&self, message_id: i64, index: u32) -> Result<String> {
        let picture = lock(&self.store).picture(message_id, index)?;
        Ok(picture::data_url(&picture))
    }

    /// The pictures of a message the model will not see, written to the data folder's
    /// [`PICTURES_READ_DIR`] and kept as a drop of documents: the front end attaches them by
    /// the token returned, and their text is read by OCR.
    pub fn pictures_as_documents(&self, pictures: &[PictureUpload]) -> Result<String> {
        let checked = uploads(pictures, picture::DEFAULT_LONGEST_SIDE)?;
        let dir = self.home.data_dir.join(PICTURES_READ_DIR);
        let unwritable = |e: std::io::Error| {
            Error::new(
                ErrorCode::Storage,
                format!(
                    "The pictures could not be written to {} to read their text: {e}. Check the disk has room.",
                    dir.display()
                ),
            )
        };
        std::fs::create_dir_all(&dir).map_err(unwritable)?;
        let mut paths = Vec::with_capacity(checked.len());
        for (upload, picture) in pictures.iter().zip(&checked) {
            let path = free_name(&dir, &upload.name, picture);
            std::fs::write(&path, &picture.bytes).map_err(unwritable)?;
            paths.push(path);
        }
        let dropped: Dropped = self.drops.register(&paths);
        dropped.token.ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                format!(
                    "The pictures were written but not taken as documents: {}",
                    dropped.reason
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 x 1 PNG made here: signature, IHDR, one IDAT (stored deflate), IEND.
    fn png() -> Vec<u8> {
        fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut crc_input = kind.to_vec();
            crc_input.extend_from_slice(data);
            out.extend_from_slice(&crc_input);
            out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
        }
        fn crc32(bytes: &[u8]) -> u32 {
            let mut crc = !0u32;
            for &b in bytes {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 != 0 {
                        (crc >> 1) ^ 0xEDB8_8320
                    } else {
                        crc >> 1
                    };
                }
            }
            !crc
        }
        fn adler(bytes: &[u8]) -> u32 {
            let (mut a, mut b) = (1u32, 0u32);
            for &x in bytes {
                a = (a + u32::from(x)) % 65521;
                b = (b + a) % 65521;
            }
            (b << 16) | a
        }
        let raw = [0u8, 255, 0, 0, 0, 0, 255]; // filter 0, red, blue
        let mut z = vec![0x78, 0x01, 1, raw.len() as u8, 0, !(raw.len() as u8), 0xff];
        z.extend_from_slice(&raw);
        z.extend_from_slice(&adler(&raw).to_be_bytes());
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&2u32.to_be_bytes());
        ihdr.extend_from_slice(&1u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &z);
        chunk(&mut out, b"IEND", &[]);
        out
    }

    #[test]
    fn a_picture_becomes_a_draft_with_its_size_and_estimate() {
        let picture = check("dot.png", &png(), 1536).unwrap();
        let d = draft("dot.png", &picture);
        assert_eq!(
            (d.width, d.height, d.media_type.as_str()),
            (2, 1, "image/png")
        );
        assert_eq!(d.tokens, 256, "at least Gemma 3's 256");
        assert_eq!(
            picture::from_base64(&d.data).unwrap(),
            picture.bytes.to_vec()
        );
        assert_eq!(picture::tokens_for(1536, 1024), 55 * 37);
    }

    #[test]
    fn uploads_are_checked_again_and_bounded() {
        let good = PictureUpload {
            name: "dot.png".into(),
            data: picture::base64(&png()),
        };
        assert_eq!(uploads(std::slice::from_ref(&good), 1536).unwrap().len(), 1);
        let text = PictureUpload {
            name: "notes.txt".into(),
            data: picture::base64(b"just words, not a picture"),
        };
        let e = uploads(&[text], 1536).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert!(
            e.message.starts_with("notes.txt: this is not a PNG"),
            "{}",
            e.message
        );
        let garbled = PictureUpload {
            name: "x.png".into(),
            data: "%%%".into(),
        };
        assert!(uploads(&[garbled], 1536)
            .unwrap_err()
            .message
            .contains("did not arrive whole"));
        let five = vec![good; MAX_PICTURES + 1];
        assert!(uploads(&five, 1536)
            .unwrap_err()
            .message
            .contains("at most 4 pictures"));
    }

    #[test]
    fn huge_base64_and_files_are_refused_before_they_are_read() {
        let huge = "A".repeat(max_base64_len() + 1);
        let e = decode("big.png", &huge).unwrap_err();
        assert!(
            e.message.contains("Hearth takes pictures up to 20"),
            "{}",
            e.message
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.png");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_PICTURE_BYTES as u64 + 1).unwrap();
        let e = check_file(&path, 1536).unwrap_err();
        assert!(
            e.message.starts_with("big.png: the picture is"),
            "{}",
            e.message
        );
        let e = check_file(&dir.path().join("gone.png"), 1536).unwrap_err();
        assert_eq!(e.code, ErrorCode::Storage);
    }
}
