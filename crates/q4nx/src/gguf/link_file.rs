//! `gguf-link.json`, the file of a linked model folder that names its GGUF (see
//! [`super::link_gguf`]): what it records ([`GgufLink`]), reading it, measuring a file for it,
//! and opening the file only if it is still the one that was added.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use sha2::{Digest, Sha256};

use crate::gguf::Header;
use crate::Error;

/// The file in a linked model folder that names its GGUF.
pub const LINK_FILE: &str = "gguf-link.json";

/// The version of [`LINK_FILE`]'s format this build writes and reads.
const LINK_VERSION: u64 = 1;

/// Largest [`LINK_FILE`] read: a real one is a few hundred bytes.
const MAX_LINK_BYTES: u64 = 64 << 10;

/// What [`LINK_FILE`] records of the GGUF file a model reads, as measured when it was added.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufLink {
    /// Format version of the link file (1).
    pub version: u64,
    /// The GGUF file's absolute path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its modification time, nanoseconds since the Unix epoch (may be negative for a file
    /// dated before 1970).
    pub modified_ns: i64,
    /// Bytes of its header: magic, version, metadata and tensor table, up to the aligned
    /// start of the tensor data.
    pub header_bytes: u64,
    /// SHA-256 of those header bytes, lowercase hex.
    pub header_sha256: String,
}

impl GgufLink {
    /// Measures the GGUF file at `path` (made absolute, symbolic links resolved) as a link
    /// records it. The file must parse as GGUF.
    pub fn measure(path: &Path) -> Result<Self, Error> {
        let path = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
        let (map, header) = map_gguf(&path)?;
        let meta = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        let header_bytes = header.data_start;
        Ok(GgufLink {
            version: LINK_VERSION,
            bytes: map.len() as u64,
            modified_ns: modified_ns(&meta),
            header_bytes: header_bytes as u64,
            header_sha256: sha256_hex(&map[..header_bytes]),
            path,
        })
    }

    /// Reads `dir`'s [`LINK_FILE`]; a missing, oversized or malformed one is
    /// [`Error::BadLink`] (or [`Error::Io`] when it cannot be read).
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let at = dir.join(LINK_FILE);
        let bad = |detail: String| Error::BadLink {
            path: at.clone(),
            detail,
        };
        let file = File::open(&at).map_err(|e| Error::io(&at, e))?;
        let mut text = String::new();
        file.take(MAX_LINK_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => bad("it is not UTF-8 text".into()),
                _ => Error::io(&at, e),
            })?;
        if text.len() as u64 > MAX_LINK_BYTES {
            return Err(bad(format!(
                "it is larger than {} KiB, which no link is",
                MAX_LINK_BYTES >> 10
            )));
        }
        let link: GgufLink =
            serde_json::from_str(&text).map_err(|e| bad(format!("it is not a link: {e}")))?;
        if link.version != LINK_VERSION {
            return Err(bad(format!(
                "its version is {}, this Hearth reads version {LINK_VERSION}; update Hearth",
                link.version
            )));
        }
        if !link.path.is_absolute() {
            return Err(bad(format!(
                "it names {}, not an absolute path",
                link.path.display()
            )));
        }
        let hex = link.header_sha256.len() == 64
            && link.header_sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex || link.header_bytes == 0 || link.header_bytes > link.bytes {
            return Err(bad(
                "its header size or hash is not one a GGUF file has".into()
            ));
        }
        Ok(link)
    }

    /// Opens the linked file if it is still the file that was added: same size, same
    /// modification time, same header hash; else [`Error::LinkedFileMissing`] or
    /// [`Error::LinkedFileChanged`]. The checks are made on the open file, so a file swapped
    /// in between is seen.
    pub fn open(&self) -> Result<(Mmap, Header), Error> {
        let path = &self.path;
        let changed = |detail: String| Error::LinkedFileChanged {
            path: path.clone(),
            detail,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::LinkedFileMissing { path: path.clone() })
            }
            Err(e) => return Err(Error::io(path, e)),
        };
        let meta = file.metadata().map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(changed("it is no longer a file".into()));
        }
        if meta.len() != self.bytes {
            return Err(changed(format!(
                "it was {} bytes, it is {} now",
                self.bytes,
                meta.len()
            )));
        }
        if modified_ns(&meta) != self.modified_ns {
            return Err(changed("it was modified".into()));
        }
        // SAFETY: read-only map of a file Hearth never writes; see `map_gguf`.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        if map.len() as u64 != self.bytes {
            return Err(changed("its size changed while it was opened".into()));
        }
        let header = crate::gguf::parse(&map, path)
            .map_err(|e| changed(format!("it no longer reads as GGUF: {e}")))?;
        let end = self.header_bytes as usize;
        if header.data_start != end || sha256_hex(&map[..end]) != self.header_sha256 {
            return Err(changed("its header is not the one it had".into()));
        }
        Ok((map, header))
    }

    /// The link as `gguf-link.json`'s text.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a link serializes");
        s.push('\n');
        s
    }
}

/// Maps `path` read-only and parses its GGUF header.
fn map_gguf(path: &Path) -> Result<(Mmap, Header), Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and Hearth never writes a GGUF file; another program
    // changing the file while it is mapped can give wrong values or a SIGBUS, never a slice
    // outside the map (every range was checked against the length mapped here). The link's
    // size, time and header hash are checked at every open to catch such a change between runs.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let header = crate::gguf::parse(&map, path)?;
    Ok((map, header))
}

/// Modification time in nanoseconds since the Unix epoch.
fn modified_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
