//! Piper voices as downloads a person asks for: one medium-quality voice for each language
//! Hearth speaks, from the Hub repository `rhasspy/piper-voices` at the tag Piper's own voice
//! list links to, into the folder where read-aloud looks for voices.
//!
//! A voice is two files in a nested folder of that repository,
//! `en/en_US/lessac/medium/en_US-lessac-medium.onnx` and its `.onnx.json`; they land side by
//! side as `<folder>/en_US-lessac-medium.onnx(.json)`. Their sizes and checksums are not
//! written here (they could not be learnt where this was built): they are asked of the Hub at
//! download time, from the listing of the voice's folder at the commit the tag points to,
//! and every byte is checked against them (sha256 from the LFS metadata for the model, the
//! git blob id for its description) as a model pull does ([`crate::download`]).
//!
//! The description is fetched first and the model last, so a voice is only ever found (a
//! `.onnx` beside its `.onnx.json`) once both are complete and verified. A dropped connection
//! resumes at the byte it reached, in the same call or the next one (the `.part` files stay);
//! a cancel deletes them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::download::{self, DownloadOptions, FileEvent, FileJob, FileOutcome};
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::hub_api::{HubClient, RemoteFile};
use crate::progress::{DownloadControl, Phase, Progress, Request, SpeedMeter};

/// The Hub repository of Piper's voices.
pub const VOICES_REPO: &str = "rhasspy/piper-voices";

/// The revision voices are fetched at: the tag Piper's voice list (VOICES.md) links to.
pub const VOICES_REVISION: &str = "v1.0.0";

/// The largest voice model accepted (medium voices are about 63 MB, high ones about 114 MB).
const MAX_MODEL_BYTES: u64 = 256 << 20;

/// The largest voice description accepted (they are a few kilobytes).
const MAX_DESCRIPTION_BYTES: u64 = 1 << 20;

/// One voice Hearth offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PiperVoiceEntry {
    /// The two-letter language code (`en`, `de`, `fr`, `es`, `zh`) of Hearth's languages.
    pub language: &'static str,
    /// The voice's name, which its files are named after (`en_US-lessac-medium`).
    pub name: &'static str,
    /// Its folder in [`VOICES_REPO`].
    pub folder: &'static str,
    /// About how many bytes it takes, to say before the download (the Hub's listing gives the
    /// exact size when it starts).
    pub about_bytes: u64,
}

/// About the size of a medium-quality Piper voice (its model; the description is tiny).
const MEDIUM_VOICE_BYTES: u64 = 63_000_000;

/// The voices Hearth offers, one per language it speaks.
pub const PIPER_VOICES: &[PiperVoiceEntry] = &[
    PiperVoiceEntry {
        language: "en",
        name: "en_US-lessac-medium",
        folder: "en/en_US/lessac/medium",
        about_bytes: MEDIUM_VOICE_BYTES,
    },
    PiperVoiceEntry {
        language: "de",
        name: "de_DE-thorsten-medium",
        folder: "de/de_DE/thorsten/medium",
        about_bytes: MEDIUM_VOICE_BYTES,
    },
    PiperVoiceEntry {
        language: "fr",
        name: "fr_FR-siwis-medium",
        folder: "fr/fr_FR/siwis/medium",
        about_bytes: MEDIUM_VOICE_BYTES,
    },
    PiperVoiceEntry {
        language: "es",
        name: "es_ES-davefx-medium",
        folder: "es/es_ES/davefx/medium",
        about_bytes: MEDIUM_VOICE_BYTES,
    },
    PiperVoiceEntry {
        language: "zh",
        name: "zh_CN-huayan-medium",
        folder: "zh/zh_CN/huayan/medium",
        about_bytes: MEDIUM_VOICE_BYTES,
    },
];

/// The voice Hearth offers for `language` (a two-letter code), if any.
pub fn voice_for_language(language: &str) -> Option<&'static PiperVoiceEntry> {
    PIPER_VOICES.iter().find(|v| v.language == language)
}

impl PiperVoiceEntry {
    /// The paths of its description and model in [`VOICES_REPO`], in the order fetched.
    pub fn remote_paths(&self) -> [String; 2] {
        [
            format!("{}/{}.onnx.json", self.folder, self.name),
            format!("{}/{}.onnx", self.folder, self.name),
        ]
    }

    /// Where its model lands in `folder` (its description is beside it, plus `.json`).
    pub fn model_path(&self, folder: &Path) -> PathBuf {
        folder.join(format!("{}.onnx", self.name))
    }

    /// Whether both its files are in `folder`.
    pub fn is_installed(&self, folder: &Path) -> bool {
        let model = self.model_path(folder);
        model.is_file() && PathBuf::from(format!("{}.json", model.display())).is_file()
    }
}

/// How a voice download ended, when it did not fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoiceOutcome {
    /// Downloaded and verified; read-aloud finds it from now on.
    Installed,
    /// It was already there; nothing was fetched.
    AlreadyInstalled,
    /// Paused on request; the bytes so far are kept and the next download resumes them.
    Paused,
    /// Cancelled on request; the partial files were deleted.
    Cancelled,
}

/// Downloads `voice` into `folder` (made if missing) from `client`'s Hub, verifying every
/// file. `on_progress` gets a snapshot at each step and at most every 100 ms while bytes
/// arrive; `control` pauses or cancels.
pub fn download_voice(
    client: &HubClient,
    voice: &PiperVoiceEntry,
    folder: &Path,
    options: &DownloadOptions,
    control: &DownloadControl,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<VoiceOutcome> {
    if voice.is_installed(folder) {
        return Ok(VoiceOutcome::AlreadyInstalled);
    }
    if client.is_offline() {
        return Err(Error::Offline {
            what: format!("the voice {} ({VOICES_REPO})", voice.name),
        });
    }
    fsutil::create_dir_all(folder)?;
    let lock_path = folder.join(format!(".{}.lock", voice.name));
    let lock = FileLock::try_exclusive(&lock_path)?.ok_or_else(|| Error::AlreadyDownloading {
        name: voice.name.to_string(),
    })?;
    let mut progress = Progress {
        name: voice.name.to_string(),
        phase: Phase::Resolving,
        file: None,
        files_done: 0,
        file_count: 2,
        done_bytes: 0,
        total_bytes: 0,
        bytes_per_sec: 0.0,
        eta_secs: None,
        message: None,
    };
    on_progress(&progress);
    let jobs = match list(client, voice, folder, control) {
        Ok(jobs) => jobs,
        Err(Error::Stopped { request }) => {
            lock.remove();
            return Ok(stopped(voice, folder, request, &mut progress, on_progress));
        }
        Err(e) => {
            lock.remove();
            return Err(e);
        }
    };
    let (commit, files) = jobs;
    progress.total_bytes = files.iter().map(|(f, _)| f.size).sum();
    let already: u64 = files
        .iter()
        .map(|(f, path)| download::bytes_on_disk(path, f.size))
        .sum();
    let needed = progress
        .total_bytes
        .saturating_sub(already)
        .saturating_add(options.disk_reserve);
    let available = fsutil::free_space(folder)?;
    if available < needed {
        lock.remove();
        return Err(Error::NotEnoughDisk {
            path: folder.to_path_buf(),
            needed,
            available,
        });
    }

    let mut meter = SpeedMeter::new();
    let mut before = 0u64;
    for (remote, path) in &files {
        if download::bytes_on_disk(path, remote.size) == remote.size && path.is_file() {
            before += remote.size;
            progress.files_done += 1;
            continue;
        }
        progress.phase = Phase::Downloading;
        progress.file = Some(file_name(&remote.name).to_string());
        progress.message = None;
        on_progress(&progress);
        let job = FileJob {
            client,
            repo: VOICES_REPO,
            commit: &commit,
            remote,
            path: path.clone(),
        };
        let mut last_sent = std::time::Instant::now() - Duration::from_secs(1);
        let outcome = download::download_file(&job, options, control, &mut |event| {
            match event {
                FileEvent::Bytes(n) => {
                    progress.phase = Phase::Downloading;
                    progress.done_bytes = before + n;
                    meter.record(progress.done_bytes);
                    progress.bytes_per_sec = meter.bytes_per_sec();
                    progress.eta_secs = (progress.bytes_per_sec > 0.0).then(|| {
                        progress.total_bytes.saturating_sub(progress.done_bytes) as f64
                            / progress.bytes_per_sec
                    });
                }
                FileEvent::Retrying(message) => {
                    // Said at once: the next bytes would hide it.
                    progress.phase = Phase::Retrying;
                    progress.message = Some(message);
                    on_progress(&progress);
                    return;
                }
            }
            if last_sent.elapsed() >= Duration::from_millis(100) {
                last_sent = std::time::Instant::now();
                on_progress(&progress);
            }
        });
        match outcome {
            Ok(FileOutcome::Done(_)) => {
                before += remote.size;
                progress.files_done += 1;
                progress.done_bytes = before;
            }
            Ok(FileOutcome::Stopped(request)) => {
                lock.remove();
                return Ok(stopped(voice, folder, request, &mut progress, on_progress));
            }
            Err(e) => {
                lock.remove();
                return Err(e);
            }
        }
    }
    lock.remove();
    progress.phase = Phase::Done;
    progress.file = None;
    progress.done_bytes = progress.total_bytes;
    on_progress(&progress);
    tracing::info!(voice = voice.name, commit = %commit, "Piper voice installed");
    Ok(VoiceOutcome::Installed)
}

/// The commit [`VOICES_REVISION`] points to, and the voice's files there with where each
/// lands, their declared sizes bounded.
fn list(
    client: &HubClient,
    voice: &PiperVoiceEntry,
    folder: &Path,
    control: &DownloadControl,
) -> Result<(String, Vec<(RemoteFile, PathBuf)>)> {
    let commit = client.commit_of(VOICES_REPO, VOICES_REVISION, control)?;
    let mut files = Vec::new();
    for (path, max) in voice
        .remote_paths()
        .into_iter()
        .zip([MAX_DESCRIPTION_BYTES, MAX_MODEL_BYTES])
    {
        let remote = client.file_info(VOICES_REPO, &commit, &path, control)?;
        if remote.size > max {
            return Err(Error::MetadataMismatch {
                file: path,
                detail: format!(
                    "the Hub lists it as {} bytes, more than the {max} a voice file may be",
                    remote.size
                ),
            });
        }
        let local = download::destination(folder, file_name(&remote.name))?;
        files.push((remote, local));
    }
    Ok((commit, files))
}

/// Ends a download stopped on request: a cancel deletes the partial files.
fn stopped(
    voice: &PiperVoiceEntry,
    folder: &Path,
    request: Request,
    progress: &mut Progress,
    on_progress: &mut dyn FnMut(&Progress),
) -> VoiceOutcome {
    if request == Request::Cancel {
        for path in voice.remote_paths() {
            let part = download::part_path(&folder.join(file_name(&path)));
            let _ = std::fs::remove_file(part);
        }
        progress.phase = Phase::Cancelled;
        on_progress(progress);
        VoiceOutcome::Cancelled
    } else {
        progress.phase = Phase::Paused;
        on_progress(progress);
        VoiceOutcome::Paused
    }
}

/// The last part of a `folder/…/name` path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_language_has_one_medium_voice_whose_paths_stay_in_their_folder() {
        for language in ["en", "de", "fr", "es", "zh"] {
            let voice = voice_for_language(language).unwrap();
            assert!(voice.name.starts_with(language), "{voice:?}");
            assert!(voice.name.ends_with("-medium"), "{voice:?}");
            for path in voice.remote_paths() {
                assert_eq!(crate::hub_api::check_relative_path(&path), Ok(()), "{path}");
                assert!(path.starts_with(&format!("{language}/")), "{path}");
            }
        }
        assert_eq!(PIPER_VOICES.len(), 5);
        assert_eq!(voice_for_language("xx"), None);
    }

    #[test]
    fn a_voice_is_installed_only_with_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let voice = voice_for_language("de").unwrap();
        assert!(!voice.is_installed(dir.path()));
        std::fs::write(voice.model_path(dir.path()), b"onnx").unwrap();
        assert!(!voice.is_installed(dir.path()));
        std::fs::write(dir.path().join("de_DE-thorsten-medium.onnx.json"), b"{}").unwrap();
        assert!(voice.is_installed(dir.path()));
    }
}
