//! Reading the system through a root directory.
//!
//! Every file this crate reads (sysfs, procfs, `/etc`, `/opt`) is named by its absolute path on a
//! live system and resolved under a root: `/` on a real machine, a fixture tree in tests. The
//! helpers here turn the three ways a read fails (missing, not permitted, unusable content) into
//! [`ReadError`] values that name the file, so callers can say "unavailable: <reason>".

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a system file could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The file does not exist.
    Missing(PathBuf),
    /// The file exists but this user may not read it.
    PermissionDenied(PathBuf),
    /// Reading failed for another reason (a directory where a file was expected, an I/O error).
    Io { path: PathBuf, message: String },
    /// The file was read but its content is not what the kernel writes there.
    Garbage { path: PathBuf, message: String },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Missing(p) => write!(f, "{} does not exist", p.display()),
            ReadError::PermissionDenied(p) => {
                write!(f, "{} needs permission to read", p.display())
            }
            ReadError::Io { path, message } => {
                write!(f, "{} could not be read: {message}", path.display())
            }
            ReadError::Garbage { path, message } => {
                write!(f, "{} has unexpected content: {message}", path.display())
            }
        }
    }
}

impl std::error::Error for ReadError {}

/// A root directory under which absolute system paths are resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRoot {
    root: PathBuf,
}

impl Default for FsRoot {
    /// The live system, `/`.
    fn default() -> Self {
        FsRoot::new("/")
    }
}

impl FsRoot {
    /// A root at `root` (`/` for the live system).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FsRoot { root: root.into() }
    }

    /// The root directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this is the live system (`/`), where processes, ioctls and `$PATH` are real.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Resolves an absolute system path (`/sys/class/accel`) under the root.
    pub fn path(&self, absolute: impl AsRef<Path>) -> PathBuf {
        let rel = absolute.as_ref();
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        self.root.join(rel)
    }

    /// The system path that `resolved` (a path under the root) stands for, for messages:
    /// a fixture path `/tmp/x/sys/foo` is shown as `/sys/foo`.
    pub fn display_path(&self, resolved: &Path) -> PathBuf {
        match resolved.strip_prefix(&self.root) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => resolved.to_path_buf(),
        }
    }

    /// Reads a whole file as bytes.
    pub fn read_bytes(&self, absolute: impl AsRef<Path>) -> Result<Vec<u8>, ReadError> {
        let path = self.path(absolute);
        std::fs::read(&path).map_err(|e| self.io_error(&path, e))
    }

    /// Reads a text file and trims surrounding whitespace (sysfs values end in a newline).
    pub fn read_trimmed(&self, absolute: impl AsRef<Path>) -> Result<String, ReadError> {
        let path = self.path(absolute.as_ref());
        let bytes = std::fs::read(&path).map_err(|e| self.io_error(&path, e))?;
        match String::from_utf8(bytes) {
            Ok(s) => Ok(s.trim().to_string()),
            Err(_) => Err(self.garbage(&path, "not UTF-8 text")),
        }
    }

    /// Reads a file holding one unsigned decimal or `0x` hexadecimal number.
    pub fn read_u64(&self, absolute: impl AsRef<Path>) -> Result<u64, ReadError> {
        let absolute = absolute.as_ref();
        let text = self.read_trimmed(absolute)?;
        parse_u64(&text).ok_or_else(|| {
            self.garbage(
                &self.path(absolute),
                &format!("expected a number, found {:?}", shorten(&text)),
            )
        })
    }

    /// Lists the entries of a directory, sorted by name; a missing directory is an empty list.
    pub fn list_dir(&self, absolute: impl AsRef<Path>) -> Vec<String> {
        let path = self.path(absolute);
        let Ok(entries) = std::fs::read_dir(&path) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        names
    }

    /// True when the path exists under the root (following symlinks inside the fixture).
    pub fn exists(&self, absolute: impl AsRef<Path>) -> bool {
        self.path(absolute).exists()
    }

    /// The target of a symlink as written (not resolved), e.g. `../../../bus/pci/drivers/amdxdna`.
    pub fn read_link(&self, absolute: impl AsRef<Path>) -> Option<PathBuf> {
        std::fs::read_link(self.path(absolute)).ok()
    }

    /// Maps an I/O error on `path` (resolved) to a [`ReadError`] naming the system path.
    pub fn io_error(&self, path: &Path, err: io::Error) -> ReadError {
        let shown = self.display_path(path);
        match err.kind() {
            io::ErrorKind::NotFound => ReadError::Missing(shown),
            io::ErrorKind::PermissionDenied => ReadError::PermissionDenied(shown),
            _ => ReadError::Io {
                path: shown,
                message: err.to_string(),
            },
        }
    }

    /// A [`ReadError::Garbage`] naming the system path for `path` (resolved).
    pub fn garbage(&self, path: &Path, message: &str) -> ReadError {
        ReadError::Garbage {
            path: self.display_path(path),
            message: message.to_string(),
        }
    }
}

/// Parses `123` or `0x1f`; `None` for anything else.
pub fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// At most 40 characters of `text`, for error messages about garbage content.
pub fn shorten(text: &str) -> String {
    let mut s: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// Orders `hwmon10` after `hwmon9` and `card1` after `card0`.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head.to_string(), tail.parse::<u64>().ok())
    };
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_resolves_under_root() {
        let r = FsRoot::new("/fixture");
        assert_eq!(
            r.path("/sys/class/accel"),
            PathBuf::from("/fixture/sys/class/accel")
        );
        assert_eq!(
            r.display_path(Path::new("/fixture/sys/x")),
            PathBuf::from("/sys/x")
        );
        assert!(FsRoot::default().is_live());
        assert!(!r.is_live());
    }

    #[test]
    fn numbers_parse_decimal_and_hex() {
        assert_eq!(parse_u64("0x17f0\n"), Some(0x17f0));
        assert_eq!(parse_u64("4200000"), Some(4_200_000));
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(parse_u64("watts"), None);
    }

    #[test]
    fn read_errors_name_the_system_path() {
        let dir = tempfile::tempdir().unwrap();
        let r = FsRoot::new(dir.path());
        assert_eq!(
            r.read_u64("/sys/nothing"),
            Err(ReadError::Missing(PathBuf::from("/sys/nothing")))
        );
        std::fs::create_dir_all(dir.path().join("sys/dir")).unwrap();
        assert!(matches!(r.read_u64("/sys/dir"), Err(ReadError::Io { .. })));
        std::fs::write(dir.path().join("sys/junk"), "twelve\n").unwrap();
        let err = r.read_u64("/sys/junk").unwrap_err();
        assert_eq!(
            err.to_string(),
            "/sys/junk has unexpected content: expected a number, found \"twelve\""
        );
        std::fs::write(dir.path().join("sys/bin"), [0xff, 0xfe]).unwrap();
        assert!(matches!(
            r.read_trimmed("/sys/bin"),
            Err(ReadError::Garbage { .. })
        ));
    }

    #[test]
    fn directories_list_in_natural_order() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["hwmon10", "hwmon2", "hwmon1"] {
            std::fs::create_dir_all(dir.path().join("c").join(n)).unwrap();
        }
        let r = FsRoot::new(dir.path());
        assert_eq!(r.list_dir("/c"), ["hwmon1", "hwmon2", "hwmon10"]);
        assert!(r.list_dir("/absent").is_empty());
    }
}
