//! Small file-system helpers: advisory locks, free space, folder sizes and atomic writes.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An exclusive `flock(2)` lock, held until dropped.
///
/// `flock` locks belong to the open file description, so two `FileLock`s taken in one process
/// (from two threads) exclude each other just as two processes do. A lock is ours only while
/// its path still names the file we locked, so a holder may delete the lock file
/// ([`FileLock::remove`]): whoever opened the old file retries on the new one.
#[derive(Debug)]
pub struct FileLock {
    /// Held open for the lock's lifetime (the lock is the open file's).
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// Waits until the lock on `path` (created if missing) is ours.
    pub fn exclusive(path: &Path) -> Result<FileLock> {
        Self::take(path, libc::LOCK_EX).map(|lock| lock.expect("blocking flock returns a lock"))
    }

    /// Takes the lock on `path` if nobody holds it; `Ok(None)` if somebody does.
    pub fn try_exclusive(path: &Path) -> Result<Option<FileLock>> {
        Self::take(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    fn take(path: &Path, operation: libc::c_int) -> Result<Option<FileLock>> {
        loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)
                .map_err(|e| Error::io("open lock file", path, e))?;
            // SAFETY: `file` is an open file for the whole call; flock only reads the descriptor.
            let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
            if rc != 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EWOULDBLOCK) => return Ok(None),
                    _ => return Err(Error::io("lock", path, err)),
                }
            }
            // The holder before us may have deleted the file after we opened it: then the
            // lock we hold is on a file nobody else will open, so open the path again.
            if same_file(&file, path) {
                return Ok(Some(FileLock {
                    _file: file,
                    path: path.to_path_buf(),
                }));
            }
        }
    }

    /// Deletes the lock file, then releases the lock.
    pub fn remove(self) {
        if let Err(e) = fs::remove_file(&self.path) {
            tracing::debug!(path = %self.path.display(), error = %e, "lock file not removed");
        }
    }
}

/// Whether the open `file` is the file `path` names now.
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Bytes free for an unprivileged user on the file system holding `path` (`statvfs(3)`).
pub fn free_space(path: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        Error::io(
            "check free space of",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"),
        )
    })?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a valid NUL-terminated string and `stat` points to writable memory of
    // the right type; statvfs fills it completely when it returns 0.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(Error::io(
            "check free space of",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: rc == 0, so statvfs initialised the struct.
    let stat = unsafe { stat.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ between libc targets
    let free = (stat.f_bavail as u64).saturating_mul(stat.f_frsize as u64);
    Ok(free)
}

/// Total size in bytes of the regular files under `dir` (0 if it does not exist).
pub fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(t) if t.is_file() => entry.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// Writes `bytes` to `path` so that readers see either the old or the new content, never a
/// mix: write a temporary file beside it, flush it to disk, rename it over, sync the folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
        file.write_all(bytes)
            .map_err(|e| Error::io("write", &tmp, e))?;
        file.sync_all().map_err(|e| Error::io("sync", &tmp, e))?;
        fs::rename(&tmp, path).map_err(|e| Error::io("replace", path, e))?;
        sync_dir(dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Flushes a folder's entries (renames, new files) to disk; best effort.
pub fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// Creates `dir` and its parents.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io("create folder", dir, e))
}

/// Removes `dir` and everything in it; a missing folder is not an error.
pub fn remove_dir_all(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove folder", dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("hearth-hub-fsutil-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn second_lock_in_same_process_is_refused_while_first_is_held() {
        let dir = temp_dir("lock");
        let path = dir.join("x.lock");
        let first = FileLock::try_exclusive(&path).unwrap();
        assert!(first.is_some());
        assert!(
            FileLock::try_exclusive(&path).unwrap().is_none(),
            "flock is per open file, so a second open must not get the lock"
        );
        drop(first);
        assert!(FileLock::try_exclusive(&path).unwrap().is_some());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_removed_lock_file_is_not_shared_by_two_holders() {
        let dir = temp_dir("lock-remove");
        let path = dir.join("x.lock");
        let first = FileLock::try_exclusive(&path).unwrap().unwrap();
        // A second process opened the file before it was removed, and locks it after.
        let stale = File::open(&path).unwrap();
        first.remove();
        assert!(!path.exists(), "removed by its holder");
        // SAFETY: `stale` is open; flock only reads the descriptor.
        assert_eq!(unsafe { libc::flock(stale.as_raw_fd(), libc::LOCK_EX) }, 0);
        assert!(
            !same_file(&stale, &path),
            "the stale file is not the lock any more"
        );
        let new = FileLock::try_exclusive(&path).unwrap();
        assert!(new.is_some(), "a new holder locks a new file");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn free_space_of_temp_dir_is_positive_and_missing_path_is_an_error() {
        assert!(free_space(&std::env::temp_dir()).unwrap() > 0);
        assert!(free_space(Path::new("/no/such/folder/for/hearth")).is_err());
    }

    #[test]
    fn write_atomic_replaces_content_and_leaves_no_temp_file() {
        let dir = temp_dir("atomic");
        let path = dir.join("a.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        assert_eq!(dir_size(&dir), 3);
        fs::remove_dir_all(dir).unwrap();
    }
}
