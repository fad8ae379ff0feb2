//! Reading a file the user named, safely: only a regular file, not a folder, pipe, socket or
//! device (opening a pipe would wait forever, reading a device would never end), and not a file
//! of the kernel's pseudo filesystems (`/proc/self/environ` is a "regular file" holding secrets,
//! and its size of 0 says nothing of its length). The size is checked before reading and the
//! read is bounded as well, so a file that grows meanwhile cannot exceed the limit.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::ExtractError;

/// Refuses what is not a regular file at `path` (symbolic links followed), without opening it.
pub(super) fn check(path: &Path) -> Result<(), ExtractError> {
    let metadata = std::fs::metadata(path).map_err(|source| ExtractError::Io {
        path: path.to_owned(),
        source,
    })?;
    check_kind(path, &metadata)
}

/// The regular file at `path`, opened for reading after every check (its kind, its
/// filesystem, a size of at most `max_bytes`), and its size: what may be read or hashed.
pub(crate) fn open(path: &Path, max_bytes: u64) -> Result<(File, u64), ExtractError> {
    let io_error = |source| ExtractError::Io {
        path: path.to_owned(),
        source,
    };
    // Looked at before opening, since opening a FIFO for reading blocks until a writer comes.
    check(path)?;
    // O_NONBLOCK as well, in case the path was swapped for a FIFO between the two calls; it
    // changes nothing for a regular file. O_NOCTTY: a terminal never becomes ours.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io_error)?;
    let metadata = file.metadata().map_err(io_error)?;
    check_kind(path, &metadata)?;
    check_filesystem(path, &file)?;
    if metadata.len() > max_bytes {
        return Err(ExtractError::TooLarge {
            path: path.to_owned(),
            size: metadata.len(),
            limit: max_bytes,
        });
    }
    Ok((file, metadata.len()))
}

/// The whole content of the regular file at `path`, refused when larger than `max_bytes`.
pub(super) fn read(path: &Path, max_bytes: u64) -> Result<Vec<u8>, ExtractError> {
    let (file, size) = open(path, max_bytes)?;
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ExtractError::Io {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > max_bytes {
        return Err(ExtractError::TooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            limit: max_bytes,
        });
    }
    Ok(bytes)
}

fn check_kind(path: &Path, metadata: &Metadata) -> Result<(), ExtractError> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return Ok(());
    }
    if kind.is_dir() {
        return Err(ExtractError::Folder {
            path: path.to_owned(),
        });
    }
    let kind = if kind.is_fifo() {
        "pipe"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "device"
    } else {
        "special file"
    };
    Err(ExtractError::NotRegularFile {
        path: path.to_owned(),
        kind,
    })
}

/// Refuses a file on one of the kernel's pseudo filesystems, which expose system state.
fn check_filesystem(path: &Path, file: &File) -> Result<(), ExtractError> {
    use std::os::fd::AsRawFd;
    // SAFETY: `statfs` is a plain C struct for which all zeroes is a valid value.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fstatfs` only writes into `stat`; the descriptor is open, `file` being borrowed.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(ExtractError::Io {
            path: path.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    // The field's integer type differs between architectures; the magic numbers all fit in 32 bits.
    let magic = stat.f_type as u32;
    let filesystem = match magic {
        0x9fa0 => "proc filesystem",
        0x6265_6572 => "sysfs",
        0x6462_6720 => "debugfs",
        0x7472_6163 => "tracefs",
        0x7363_6673 => "securityfs",
        0x6367_7270 | 0x0027_e0eb => "cgroup filesystem",
        0xde5e_81e4 => "efivarfs",
        0xcafe_4a11 => "bpf filesystem",
        0x6265_6570 => "configfs",
        _ => return Ok(()),
    };
    Err(ExtractError::SystemFile {
        path: path.to_owned(),
        filesystem,
    })
}
