//! Downloading one file so that no byte is fetched twice: the bytes go straight to
//! `<file>.part` as they arrive, and every new attempt (after a dropped connection, a stall, a
//! pause, a crash or a reboot) asks the Hub for `Range: bytes=<length of .part>-`. The file
//! is hashed as it is written (the kept prefix is hashed from disk on resume) and only a file
//! whose checksum matches the Hub's metadata is renamed to its final name.
//!
//! Stall detection: `ureq` bounds a body read by a total time budget, not per read, so each
//! attempt gets a window ([`DownloadOptions::attempt_window`]); when it ends the attempt is
//! simply resumed at the next byte. An attempt that brings no byte counts as a failure; after
//! [`DownloadOptions::stall_timeout`] without any byte or [`DownloadOptions::max_attempts`]
//! failed attempts in a row the download stops with an error and can be resumed later.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::hub_api::{check_relative_path, HubClient, Opened, RemoteFile};
use crate::progress::{DownloadControl, Request};
use crate::registry::FileRecord;

/// How downloads behave; the defaults suit a laptop on a home connection.
#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Longest a single request may spend receiving a body before it is resumed with a new
    /// request. Bounds how long a silent connection goes unnoticed. Default 10 s.
    pub attempt_window: Duration,
    /// With no byte received for this long, the download stops as stalled. Default 60 s.
    pub stall_timeout: Duration,
    /// Attempts in a row that bring no byte before giving up. Default 6.
    pub max_attempts: u32,
    /// Wait after the first failed attempt; doubles each time, up to 30 s. Default 1 s.
    pub retry_delay: Duration,
    /// Space left free on the disk beyond the download itself. Default 64 MiB.
    pub disk_reserve: u64,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            attempt_window: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(60),
            max_attempts: 6,
            retry_delay: Duration::from_secs(1),
            disk_reserve: 64 << 20,
        }
    }
}

/// What happened to one file.
#[derive(Debug)]
pub(crate) enum FileOutcome {
    /// Downloaded and verified; renamed to its final name.
    Done(FileRecord),
    /// Stopped because the caller asked (pause or cancel); the `.part` is kept.
    Stopped(Request),
}

/// Events from one file's download, for the pull's progress report.
pub(crate) enum FileEvent {
    /// The `.part` now holds this many bytes.
    Bytes(u64),
    /// An attempt failed; `message` says what and what happens next.
    Retrying(String),
}

/// One file to fetch.
pub(crate) struct FileJob<'a> {
    pub client: &'a HubClient,
    pub repo: &'a str,
    pub commit: &'a str,
    pub remote: &'a RemoteFile,
    /// Final path; the bytes go to the same path plus `.part` until verified.
    pub path: PathBuf,
}

/// Path of the partial file for `path`.
pub(crate) fn part_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    path.with_file_name(name)
}

/// Where the file at `path` (checked with [`check_relative_path`]) goes inside `folder`.
pub(crate) fn destination(folder: &Path, path: &str) -> Result<PathBuf> {
    check_relative_path(path).map_err(|why| {
        Error::io(
            format!("place {path:?} in"),
            folder,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("the path {why}; nothing was written"),
            ),
        )
    })?;
    Ok(folder.join(path))
}

/// The two checksums the Hub publishes: sha256 for LFS files, the git blob sha1 for others.
struct Hashers {
    sha256: Sha256,
    git_sha1: Sha1,
}

impl Hashers {
    fn new(size: u64) -> Hashers {
        let mut git_sha1 = Sha1::new();
        git_sha1.update(format!("blob {size}\0").as_bytes());
        Hashers {
            sha256: Sha256::new(),
            git_sha1,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        self.sha256.update(bytes);
        self.git_sha1.update(bytes);
    }
}

/// Downloads `job` with resume, stall detection and verification.
pub(crate) fn download_file(
    job: &FileJob<'_>,
    options: &DownloadOptions,
    control: &DownloadControl,
    report: &mut dyn FnMut(FileEvent),
) -> Result<FileOutcome> {
    let name = &job.remote.name;
    let size = job.remote.size;
    let part = part_path(&job.path);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&part)
        .map_err(|e| Error::io("open", &part, e))?;
    let mut have = file
        .metadata()
        .map_err(|e| Error::io("read size of", &part, e))?
        .len();
    if have > size {
        tracing::warn!(file = %name, have, size, "partial file longer than the file on the Hub; starting it again");
        file.set_len(0)
            .map_err(|e| Error::io("truncate", &part, e))?;
        have = 0;
    }
    let mut hashers = Hashers::new(size);
    if have > 0 {
        hash_prefix(&mut file, &part, have, &mut hashers)?;
        tracing::info!(file = %name, from = have, "resuming download");
    }
    file.seek(SeekFrom::Start(have))
        .map_err(|e| Error::io("seek in", &part, e))?;
    report(FileEvent::Bytes(have));

    let mut failures = 0u32;
    let mut last_progress = Instant::now();
    while have < size {
        let request = control.request();
        if request != Request::Run {
            return Ok(FileOutcome::Stopped(request));
        }
        let before = have;
        let result = attempt(
            job,
            options,
            control,
            &mut file,
            &part,
            &mut have,
            &mut hashers,
            report,
        );
        if have > before {
            failures = 0;
            last_progress = Instant::now();
        }
        let failure = match result {
            Ok(()) if have >= size => break,
            Ok(()) if control.request() != Request::Run => continue,
            // The body ended early without an error: resume as after a cut.
            Ok(()) => AttemptError::Transient {
                detail: "the connection ended early".to_string(),
                timed_out: false,
            },
            Err(e) => e,
        };
        match failure {
            AttemptError::Fatal(e) => return Err(e),
            AttemptError::Transient { detail, timed_out } => {
                if have > before {
                    report(FileEvent::Retrying(format!(
                        "{name}: {detail}; resuming at {}",
                        crate::human_bytes(have)
                    )));
                    continue;
                }
                failures += 1;
                let silent_for = last_progress.elapsed();
                if failures >= options.max_attempts || silent_for >= options.stall_timeout {
                    return Err(if timed_out || silent_for >= options.stall_timeout {
                        Error::Stalled {
                            file: name.clone(),
                            secs: silent_for.as_secs(),
                            attempts: failures,
                        }
                    } else {
                        Error::Network {
                            url: job.client.resolve_url(job.repo, job.commit, name),
                            detail: detail.clone(),
                        }
                    });
                }
                let wait = options
                    .retry_delay
                    .saturating_mul(1 << (failures - 1).min(5))
                    .min(Duration::from_secs(30));
                report(FileEvent::Retrying(format!(
                    "{name}: {detail}; trying again in {} s (attempt {} of {})",
                    wait.as_secs_f32().ceil(),
                    failures + 1,
                    options.max_attempts
                )));
                control.sleep(wait);
            }
        }
    }
    file.sync_all().map_err(|e| Error::io("sync", &part, e))?;
    drop(file);

    let sha256 = hex(&hashers.sha256.finalize());
    let git_sha1 = hex(&hashers.git_sha1.finalize());
    let mismatch = match &job.remote.sha256 {
        Some(expected) if *expected != sha256 => Some(("sha256", expected.clone(), sha256.clone())),
        Some(_) => None,
        None if is_sha1_hex(&job.remote.git_oid) && job.remote.git_oid != git_sha1 => {
            Some(("git sha1", job.remote.git_oid.clone(), git_sha1))
        }
        None => None,
    };
    if let Some((algorithm, expected, actual)) = mismatch {
        let _ = fs::remove_file(&part);
        return Err(Error::ChecksumMismatch {
            file: name.clone(),
            algorithm,
            expected,
            actual,
        });
    }
    fs::rename(&part, &job.path)
        .map_err(|e| Error::io(format!("rename {} to", part.display()), &job.path, e))?;
    Ok(FileOutcome::Done(FileRecord { size, sha256 }))
}

enum AttemptError {
    /// Worth another attempt from the same byte.
    Transient { detail: String, timed_out: bool },
    /// Retrying cannot help.
    Fatal(Error),
}

impl From<Error> for AttemptError {
    fn from(e: Error) -> Self {
        match e {
            Error::Network { detail, .. } => AttemptError::Transient {
                timed_out: detail.to_ascii_lowercase().contains("timeout")
                    || detail.to_ascii_lowercase().contains("timed out"),
                detail,
            },
            Error::HttpStatus { status, url } if status == 429 || status >= 500 => {
                AttemptError::Transient {
                    detail: format!("{url} answered HTTP {status}"),
                    timed_out: false,
                }
            }
            other => AttemptError::Fatal(other),
        }
    }
}

/// One request: open at `have`, check the metadata, stream into the file.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename these
fn attempt(
    job: &FileJob<'_>,
    options: &DownloadOptions,
    control: &DownloadControl,
    file: &mut File,
    part: &Path,
    have: &mut u64,
    hashers: &mut Hashers,
    report: &mut dyn FnMut(FileEvent),
) -> std::result::Result<(), AttemptError> {
    let remote = job.remote;
    let opened = job.client.open(
        job.repo,
        job.commit,
        &remote.name,
        *have,
        options.attempt_window,
    )?;
    let mut body = match opened {
        Opened::Complete if *have == remote.size => return Ok(()),
        Opened::Complete => {
            return Err(AttemptError::Fatal(Error::MetadataMismatch {
                file: remote.name.clone(),
                detail: format!(
                    "the Hub says byte {} is past the end, but its file list gives {} bytes",
                    have, remote.size
                ),
            }))
        }
        Opened::Body(body) => body,
    };
    if let Some(commit) = &body.repo_commit {
        if !commit.eq_ignore_ascii_case(job.commit) {
            return Err(AttemptError::Fatal(Error::MetadataMismatch {
                file: remote.name.clone(),
                detail: format!("the Hub served commit {commit} instead of {}", job.commit),
            }));
        }
    }
    if let (Some(etag), Some(sha256)) = (&body.etag, &remote.sha256) {
        if is_sha256_hex(etag) && !etag.eq_ignore_ascii_case(sha256) {
            return Err(AttemptError::Fatal(Error::MetadataMismatch {
                file: remote.name.clone(),
                detail: format!("X-Linked-Etag says sha256 {etag} but the file list says {sha256}"),
            }));
        }
    }
    if let Some(total) = body.total {
        if total != remote.size {
            return Err(AttemptError::Fatal(Error::MetadataMismatch {
                file: remote.name.clone(),
                detail: format!(
                    "the server sends {total} bytes but the file list gives {}",
                    remote.size
                ),
            }));
        }
    }
    if body.start == 0 && *have > 0 {
        tracing::warn!(file = %remote.name, "server ignored Range; receiving the whole file again");
        file.set_len(0)
            .map_err(|e| AttemptError::Fatal(Error::io("truncate", part, e)))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| AttemptError::Fatal(Error::io("seek in", part, e)))?;
        *have = 0;
        *hashers = Hashers::new(remote.size);
    }
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        if control.request() != Request::Run {
            return Ok(());
        }
        let n = match body.reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let text = e.to_string().to_ascii_lowercase();
                return Err(AttemptError::Transient {
                    timed_out: e.kind() == std::io::ErrorKind::TimedOut
                        || text.contains("timeout")
                        || text.contains("timed out"),
                    detail: format!("the connection dropped ({e})"),
                });
            }
        };
        if *have + n as u64 > remote.size {
            return Err(AttemptError::Fatal(Error::MetadataMismatch {
                file: remote.name.clone(),
                detail: format!(
                    "the server sent more than the {} bytes the file list gives",
                    remote.size
                ),
            }));
        }
        file.write_all(&buf[..n])
            .map_err(|e| AttemptError::Fatal(Error::io("write", part, e)))?;
        hashers.update(&buf[..n]);
        *have += n as u64;
        report(FileEvent::Bytes(*have));
    }
}

/// Feeds the first `len` bytes of the partial file to the hashers.
fn hash_prefix(file: &mut File, path: &Path, len: u64, hashers: &mut Hashers) -> Result<()> {
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io("seek in", path, e))?;
    let mut remaining = len;
    let mut buf = vec![0u8; 1 << 20];
    while remaining > 0 {
        let want = remaining.min(buf.len() as u64) as usize;
        file.read_exact(&mut buf[..want])
            .map_err(|e| Error::io("read", path, e))?;
        hashers.update(&buf[..want]);
        remaining -= want as u64;
    }
    Ok(())
}

/// sha256 of a whole file, as lowercase hex, with its size.
pub fn sha256_file(path: &Path) -> Result<FileRecord> {
    let mut file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| Error::io("read", path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok(FileRecord {
        size,
        sha256: hex(&hasher.finalize()),
    })
}

/// Copies the open file `src` (which `from` names) to a new file `to` created with the
/// permission bits `mode` (the umask narrows them further), returning the size and sha256 of
/// what was written. More than `max` bytes is refused (the file grew, or is not what its size
/// said), with the partial copy removed.
pub(crate) fn copy_hashed(
    src: &mut File,
    from: &Path,
    to: &Path,
    mode: u32,
    max: u64,
) -> Result<FileRecord> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)
        .map_err(|e| Error::io("create", to, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    let mut limited = src.take(max.saturating_add(1));
    loop {
        let n = limited
            .read(&mut buf)
            .map_err(|e| Error::io("read", from, e))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        if size > max {
            drop(dst);
            let _ = fs::remove_file(to);
            return Err(Error::io(
                "copy",
                from,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("it holds more than the {max} bytes a file of its kind may"),
                ),
            ));
        }
        dst.write_all(&buf[..n])
            .map_err(|e| Error::io("write", to, e))?;
        hasher.update(&buf[..n]);
    }
    dst.sync_all().map_err(|e| Error::io("sync", to, e))?;
    Ok(FileRecord {
        size,
        sha256: hex(&hasher.finalize()),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn is_hex_of_len(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_sha256_hex(text: &str) -> bool {
    is_hex_of_len(text, 64)
}

fn is_sha1_hex(text: &str) -> bool {
    is_hex_of_len(text, 40)
}

/// Bytes of a file of `size` at `path` already on disk: all once verified and renamed, else
/// what its `.part` holds.
pub(crate) fn bytes_on_disk(path: &Path, size: u64) -> u64 {
    match std::fs::metadata(path) {
        Ok(m) if m.len() == size => size,
        _ => std::fs::metadata(part_path(path))
            .map(|m| m.len().min(size))
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_blob_sha1_matches_git_hash_object() {
        // `printf 'hello\n' | git hash-object --stdin`
        let mut h = Hashers::new(6);
        h.update(b"hello\n");
        assert_eq!(
            hex(&h.git_sha1.finalize()),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn part_path_appends_suffix() {
        assert_eq!(
            part_path(Path::new("/x/model.q4nx")),
            PathBuf::from("/x/model.q4nx.part")
        );
    }

    #[test]
    fn paths_that_could_leave_the_folder_are_refused() {
        for good in ["a.onnx", "en/en_US/lessac/medium/x.onnx.json", "a..b/c"] {
            assert_eq!(check_relative_path(good), Ok(()), "{good:?}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "..",
            "a\u{0}b",
            "a\nb",
        ] {
            assert!(check_relative_path(bad).is_err(), "{bad:?}");
            assert!(destination(Path::new("/v"), bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            destination(Path::new("/v"), "en/x.onnx").unwrap(),
            PathBuf::from("/v/en/x.onnx")
        );
    }

    #[test]
    fn hex_checks() {
        assert!(is_sha256_hex(&"a".repeat(64)));
        assert!(!is_sha256_hex(&"g".repeat(64)));
        assert!(is_sha1_hex(&"0".repeat(40)));
    }
}
