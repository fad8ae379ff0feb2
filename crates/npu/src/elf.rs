//! The shared libraries an executable needs (its ELF `DT_NEEDED` entries), read in bounds, and
//! the NPU runtime FastFlowLM was built for, told from them.
//!
//! FastFlowLM 1.0.11 and later come in two builds: one linking XRT (`libxrt_coreutil.so`), one
//! linking the FastFlow SDK's HRX runtime (`libhrx.so`), which opens the device through the
//! amdxdna driver itself and needs no XRT. [`runtime_of`] reads which one a binary is.
//!
//! Only 64-bit little-endian ELF files are read (FastFlowLM runs on x86-64 Linux). The reader
//! takes the section headers, the `.dynamic` section and the string table it links to; every
//! offset and size is checked against the file before it is used, and each read is capped, so a
//! damaged or hostile file is an error, never a panic or a large allocation.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

/// Most bytes read for the section header table, the dynamic section or its string table.
const MAX_PART: u64 = 4 << 20;
/// Most section headers considered.
const MAX_SECTIONS: u64 = 4096;

const SHT_DYNAMIC: u32 = 6;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

/// Why the needed libraries could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("could not read {what}: {source}")]
    Io {
        /// What was being read.
        what: &'static str,
        /// The system's words.
        source: std::io::Error,
    },
    /// It is not an ELF file this reader takes.
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    /// A header points outside the file or is larger than the reader allows.
    #[error("damaged ELF file: {0}")]
    Damaged(&'static str),
}

/// The NPU runtime a FastFlowLM binary links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// AMD's XRT (`libxrt_coreutil`), with its NPU plugin.
    Xrt,
    /// The FastFlow SDK's HRX (`libhrx`): the amdxdna driver and firmware, no XRT.
    Hrx,
}

impl Runtime {
    /// "XRT" or "HRX".
    pub fn label(self) -> &'static str {
        match self {
            Runtime::Xrt => "XRT",
            Runtime::Hrx => "HRX",
        }
    }

    /// The runtime these needed libraries name, if one: HRX wins when both are named.
    pub fn from_needed(needed: &[String]) -> Option<Runtime> {
        let names = |prefix: &str| needed.iter().any(|n| n.starts_with(prefix));
        if names("libhrx") {
            Some(Runtime::Hrx)
        } else if names("libxrt_coreutil") {
            Some(Runtime::Xrt)
        } else {
            None
        }
    }
}

/// The runtime of the FastFlowLM binary `program` (links resolved; the portable tarball's
/// `flm` is a shell wrapper, so its `flm-real` beside it is read). `None` when the binary names
/// neither runtime or cannot be read.
pub fn runtime_of(program: &Path) -> Option<Runtime> {
    let real = program.canonicalize().ok()?;
    let wrapped = real.with_file_name("flm-real");
    let binary = if wrapped.is_file() { wrapped } else { real };
    match needed_libraries(&binary) {
        Ok(needed) => Runtime::from_needed(&needed),
        Err(e) => {
            tracing::debug!("{}: {e}", binary.display());
            None
        }
    }
}

/// The `DT_NEEDED` entries of the ELF file at `path`, in order.
pub fn needed_libraries(path: &Path) -> Result<Vec<String>, ElfError> {
    let mut file = File::open(path).map_err(|source| ElfError::Io {
        what: "the file",
        source,
    })?;
    let len = file
        .metadata()
        .map_err(|source| ElfError::Io {
            what: "the file's size",
            source,
        })?
        .len();
    needed_in(&mut file, len)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads `size` bytes at `offset`, after checking they lie in a file of `len` bytes and within
/// [`MAX_PART`].
fn read_part(
    file: &mut (impl Read + Seek),
    len: u64,
    offset: u64,
    size: u64,
    what: &'static str,
) -> Result<Vec<u8>, ElfError> {
    if size > MAX_PART || offset.checked_add(size).is_none_or(|end| end > len) {
        return Err(ElfError::Damaged(what));
    }
    let mut buf = vec![0; size as usize];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut buf))
        .map_err(|source| ElfError::Io { what, source })?;
    Ok(buf)
}

fn needed_in(file: &mut (impl Read + Seek), len: u64) -> Result<Vec<String>, ElfError> {
    let header = read_part(file, len, 0, 64, "the ELF header").map_err(|e| match e {
        ElfError::Damaged(_) => ElfError::NotElf64,
        e => e,
    })?;
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Err(ElfError::NotElf64);
    }
    let sh_off = u64_at(&header, 0x28);
    let sh_entsize = u64::from(u16_at(&header, 0x3a));
    let sh_num = u64::from(u16_at(&header, 0x3c));
    if sh_num == 0 {
        return Ok(Vec::new());
    }
    if sh_entsize < 64 || sh_num > MAX_SECTIONS {
        return Err(ElfError::Damaged("the section header table"));
    }
    let table = read_part(
        file,
        len,
        sh_off,
        sh_entsize * sh_num,
        "the section header table",
    )?;
    let section = |i: u64| &table[(i * sh_entsize) as usize..(i * sh_entsize + 64) as usize];
    let Some(dynamic) = (0..sh_num)
        .map(section)
        .find(|s| u32_at(s, 4) == SHT_DYNAMIC)
    else {
        // A static executable needs nothing.
        return Ok(Vec::new());
    };
    let strtab_index = u64::from(u32_at(dynamic, 0x28));
    if strtab_index >= sh_num {
        return Err(ElfError::Damaged(
            "the dynamic section's string table index",
        ));
    }
    let strtab = section(strtab_index);
    let dyn_bytes = read_part(
        file,
        len,
        u64_at(dynamic, 0x18),
        u64_at(dynamic, 0x20),
        "the dynamic section",
    )?;
    let strings = read_part(
        file,
        len,
        u64_at(strtab, 0x18),
        u64_at(strtab, 0x20),
        "the dynamic string table",
    )?;
    let mut needed = Vec::new();
    for entry in dyn_bytes.chunks_exact(16) {
        let tag = u64_at(entry, 0);
        if tag == DT_NULL {
            break;
        }
        if tag != DT_NEEDED {
            continue;
        }
        let start = usize::try_from(u64_at(entry, 8))
            .ok()
            .filter(|&s| s < strings.len())
            .ok_or(ElfError::Damaged("a needed library's name"))?;
        let end = strings[start..]
            .iter()
            .position(|&b| b == 0)
            .ok_or(ElfError::Damaged("a needed library's name"))?;
        needed.push(String::from_utf8_lossy(&strings[start..start + end]).into_owned());
    }
    Ok(needed)
}

/// A minimal ELF64 file whose dynamic section needs `libs`: the tests' stand-in for a
/// FastFlowLM binary (the imitation's tests write one to tell an HRX build from an XRT one).
pub fn minimal_elf(libs: &[&str]) -> Vec<u8> {
    let mut strings = vec![0u8];
    let mut offsets = Vec::new();
    for lib in libs {
        offsets.push(strings.len() as u64);
        strings.extend_from_slice(lib.as_bytes());
        strings.push(0);
    }
    let mut dynamic = Vec::new();
    for off in &offsets {
        dynamic.extend_from_slice(&DT_NEEDED.to_le_bytes());
        dynamic.extend_from_slice(&off.to_le_bytes());
    }
    dynamic.extend_from_slice(&[0u8; 16]);
    let str_off = 64u64;
    let dyn_off = str_off + strings.len() as u64;
    let sh_off = dyn_off + dynamic.len() as u64;
    let mut out = vec![0u8; 64];
    out[..4].copy_from_slice(b"\x7fELF");
    out[4] = 2;
    out[5] = 1;
    out[6] = 1;
    out[0x28..0x30].copy_from_slice(&sh_off.to_le_bytes());
    out[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    out[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&strings);
    out.extend_from_slice(&dynamic);
    let header = |kind: u32, offset: u64, size: u64, link: u32| {
        let mut h = vec![0u8; 64];
        h[4..8].copy_from_slice(&kind.to_le_bytes());
        h[0x18..0x20].copy_from_slice(&offset.to_le_bytes());
        h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
        h[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
        h
    };
    out.extend(header(0, 0, 0, 0));
    out.extend(header(3, str_off, strings.len() as u64, 0));
    out.extend(header(SHT_DYNAMIC, dyn_off, dynamic.len() as u64, 1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn needed(bytes: &[u8]) -> Result<Vec<String>, ElfError> {
        needed_in(&mut Cursor::new(bytes), bytes.len() as u64)
    }

    #[test]
    fn reads_needed_libraries_and_tells_the_runtime() {
        let hrx = minimal_elf(&["libhrx.so.0", "libstdc++.so.6", "libc.so.6"]);
        let libs = needed(&hrx).unwrap();
        assert_eq!(libs, ["libhrx.so.0", "libstdc++.so.6", "libc.so.6"]);
        assert_eq!(Runtime::from_needed(&libs), Some(Runtime::Hrx));
        let xrt = needed(&minimal_elf(&["libxrt_coreutil.so.2", "libc.so.6"])).unwrap();
        assert_eq!(Runtime::from_needed(&xrt), Some(Runtime::Xrt));
        let neither = needed(&minimal_elf(&["libc.so.6"])).unwrap();
        assert_eq!(Runtime::from_needed(&neither), None);
    }

    #[test]
    fn reads_this_test_binary() {
        let me = std::env::current_exe().unwrap();
        let libs = needed_libraries(&me).unwrap();
        assert!(libs.iter().any(|l| l.starts_with("libc.so")), "{libs:?}");
    }

    #[test]
    fn malformed_files_are_errors() {
        assert!(matches!(needed(b""), Err(ElfError::NotElf64)));
        assert!(matches!(
            needed(b"#!/bin/sh\nexec flm-real \"$@\"\n"),
            Err(ElfError::NotElf64)
        ));
        let good = minimal_elf(&["libhrx.so.0"]);
        // 32-bit or big-endian.
        let mut other = good.clone();
        other[4] = 1;
        assert!(matches!(needed(&other), Err(ElfError::NotElf64)));
        // Every cut of the file is refused or reads what is there, never panics.
        for cut in 0..good.len() {
            let _ = needed(&good[..cut]);
        }
        // Section headers past the end of the file.
        let mut far = good.clone();
        far[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(needed(&far), Err(ElfError::Damaged(_))));
        // Too many sections.
        let mut many = good.clone();
        many[0x3c..0x3e].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(matches!(needed(&many), Err(ElfError::Damaged(_))));
        // A string table link out of range.
        let mut link = good.clone();
        let dyn_header = link.len() - 64;
        link[dyn_header + 0x28..dyn_header + 0x2c].copy_from_slice(&9u32.to_le_bytes());
        assert!(matches!(needed(&link), Err(ElfError::Damaged(_))));
        // A name offset out of range.
        let mut name = good.clone();
        let entry = 64 + "\0libhrx.so.0\0".len();
        name[entry + 8..entry + 16].copy_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(needed(&name), Err(ElfError::Damaged(_))));
        // A name without its terminating zero.
        let mut open = good;
        let last = 64 + "\0libhrx.so.0".len();
        open[last] = b'x';
        assert!(matches!(needed(&open), Err(ElfError::Damaged(_))));
    }
}
