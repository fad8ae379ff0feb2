//! The zip container of DOCX, ODT and EPUB, read within `ExtractLimits`: the number of entries
//! is checked from the end-of-central-directory record before the zip crate lists them (so a
//! directory of millions of entries is refused before it is held in memory), and every entry is
//! read through a bound: its share of what the file may unpack in total, and at most
//! `max_compression_ratio` times its packed size. Entry sizes the archive declares are not
//! trusted; the bound holds on the bytes actually inflated.

use std::io::{Cursor, Read};
use std::path::Path;

use zip::result::ZipError;
use zip::ZipArchive;

use super::{ExtractError, ExtractLimits, Format};

/// Entries this small are not held to the compression ratio: a short XML part full of
/// repeated markup may legitimately shrink a thousand times, and its size does no harm.
const RATIO_EXEMPT_BYTES: u64 = 1 << 20;

pub(super) struct Archive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    path: &'a Path,
    format: Format,
    limits: &'a ExtractLimits,
    unpacked: u64,
}

impl<'a> Archive<'a> {
    pub(super) fn open(
        path: &'a Path,
        format: Format,
        bytes: &'a [u8],
        limits: &'a ExtractLimits,
    ) -> Result<Archive<'a>, ExtractError> {
        if bytes.starts_with(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]) {
            return Err(ExtractError::Corrupt {
                path: path.to_owned(),
                format,
                detail: "it is an OLE compound file, not a zip: a password-protected document, \
                         or an older format (such as .doc) under this name; save it without a \
                         password in the current format"
                    .to_owned(),
            });
        }
        if let Some(entries) = declared_entries(bytes) {
            if entries > limits.max_archive_entries as u64 {
                return Err(ExtractError::ArchiveLimit {
                    path: path.to_owned(),
                    detail: format!(
                        "it lists {entries} entries, more than the {} Hearth opens",
                        limits.max_archive_entries
                    ),
                });
            }
        }
        let zip = ZipArchive::new(Cursor::new(bytes))
            .map_err(|error| zip_error(path, format, "", error))?;
        if zip.len() > limits.max_archive_entries {
            return Err(ExtractError::ArchiveLimit {
                path: path.to_owned(),
                detail: format!(
                    "it lists {} entries, more than the {} Hearth opens",
                    zip.len(),
                    limits.max_archive_entries
                ),
            });
        }
        Ok(Archive {
            zip,
            path,
            format,
            limits,
            unpacked: 0,
        })
    }

    /// The unpacked bytes of the entry `name`, or `None` when the archive has no such entry.
    pub(super) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let entry = match self.zip.by_name(name) {
            Ok(entry) => entry,
            Err(ZipError::FileNotFound) => return Ok(None),
            Err(error) => return Err(zip_error(self.path, self.format, name, error)),
        };
        let left = self.limits.max_unpacked_bytes.saturating_sub(self.unpacked);
        let by_ratio = entry
            .compressed_size()
            .saturating_mul(self.limits.max_compression_ratio)
            .max(RATIO_EXEMPT_BYTES);
        let bound = left.min(by_ratio);
        let mut bytes = Vec::new();
        entry
            .take(bound + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| zip_error(self.path, self.format, name, ZipError::Io(error)))?;
        if bytes.len() as u64 > bound {
            let detail = if bound == by_ratio {
                format!(
                    "its entry {name} unpacks to more than {} times its packed size",
                    self.limits.max_compression_ratio
                )
            } else {
                format!(
                    "its entries unpack to more than {} MiB together",
                    self.limits.max_unpacked_bytes >> 20
                )
            };
            return Err(ExtractError::ArchiveLimit {
                path: self.path.to_owned(),
                detail,
            });
        }
        self.unpacked += bytes.len() as u64;
        Ok(Some(bytes))
    }

    /// Like `read`, for an entry the format requires.
    pub(super) fn read_required(&mut self, name: &str) -> Result<Vec<u8>, ExtractError> {
        self.read(name)?.ok_or_else(|| ExtractError::Corrupt {
            path: self.path.to_owned(),
            format: self.format,
            detail: format!("it has no {name}"),
        })
    }
}

fn zip_error(path: &Path, format: Format, entry: &str, error: ZipError) -> ExtractError {
    match error {
        ZipError::InvalidPassword => ExtractError::Encrypted {
            path: path.to_owned(),
            format,
        },
        ZipError::UnsupportedArchive(why) if why.to_lowercase().contains("password") => {
            ExtractError::Encrypted {
                path: path.to_owned(),
                format,
            }
        }
        error => ExtractError::Corrupt {
            path: path.to_owned(),
            format,
            detail: if entry.is_empty() {
                format!("its zip container: {error}")
            } else {
                format!("its entry {entry}: {error}")
            },
        },
    }
}

/// The number of entries the end-of-central-directory record (or its zip64 twin) declares,
/// if the record is found.
fn declared_entries(bytes: &[u8]) -> Option<u64> {
    const EOCD: &[u8] = b"PK\x05\x06";
    const ZIP64_LOCATOR: &[u8] = b"PK\x06\x07";
    const ZIP64_EOCD: &[u8] = b"PK\x06\x06";
    // The record is 22 bytes and may be followed by a comment of up to 65,535.
    let search_from = bytes.len().saturating_sub(22 + 65_535);
    let at = search_from + bytes[search_from..].windows(4).rposition(|w| w == EOCD)?;
    let u16_at = |offset: usize| -> Option<u64> {
        let b = bytes.get(offset..offset + 2)?;
        Some(u16::from_le_bytes([b[0], b[1]]) as u64)
    };
    let entries = u16_at(at + 10)?;
    if entries != 0xffff {
        return Some(entries);
    }
    // Zip64: a 20-byte locator just before the record gives the zip64 record's offset.
    let locator = at.checked_sub(20)?;
    if bytes.get(locator..locator + 4)? != ZIP64_LOCATOR {
        return Some(entries);
    }
    let u64_at = |offset: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(offset..offset + 8)?.try_into().ok()?,
        ))
    };
    let record = usize::try_from(u64_at(locator + 8)?).ok()?;
    if bytes.get(record..record.checked_add(4)?)? != ZIP64_EOCD {
        return Some(entries);
    }
    u64_at(record.checked_add(32)?)
}
