//! `pull`: from a catalog id or an `owner/name` to a registered model, in steps that each
//! either finish or leave a state the next run resumes from:
//!
//! 1. resolve the revision to a commit and list the files (recorded in
//!    `downloads/<name>/download.json`, so a resumed download fetches the same commit even if
//!    the branch moved meanwhile);
//! 2. check the free disk space for what is still missing;
//! 3. download each file with resume and checksum (see [`crate::download`]), and check the
//!    NPU kernels against the model's kernel list when it has one (see [`crate::kernels`]);
//! 4. validate the folder with `q4nx` (and the store's model check: the chat template);
//! 5. move it into `models/` and register it (see [`crate::store`]).
//!
//! A speech model of the catalog (Whisper) takes the same steps 1 to 3; its folder is then
//! checked and moved to `models/speech/<name>/`, unregistered (see [`crate::speech`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::catalog::{self, Backend, CatalogEntry};
use crate::download::{self, DownloadOptions, FileEvent, FileJob, FileOutcome};
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::hub_api::{is_repo_id, HubClient};
use crate::kernels::{self, KERNEL_LIST_FILE};
use crate::model_dir::{self, ModelFiles, ValidatedModel, WeightFormat};
use crate::names::check_name;
use crate::progress::{DownloadControl, Phase, Progress, Request, SpeedMeter};
use crate::registry::{FileRecord, FlmDetails, HearthFields};
use crate::speech;
use crate::store::{details_for, unix_now, InstalledModel, Manifest, NewModel, Store};

/// What to pull.
#[derive(Debug, Clone, Default)]
pub struct PullRequest {
    /// A catalog id, name or tag (`minicpm5-2b`, `qwen3:1.7b`), or a Hub repository
    /// `owner/name`, optionally with `@revision`.
    pub query: String,
    /// Install under this name instead of the default.
    pub name: Option<String>,
    /// Branch, tag or commit; default the catalog's, else `main`.
    pub revision: Option<String>,
}

/// How a pull ended, when it did not fail.
#[derive(Debug, Clone, PartialEq)]
pub enum PullOutcome {
    /// Downloaded, verified, validated and registered.
    Installed(InstalledModel),
    /// A model of that name was already installed; nothing was fetched.
    AlreadyInstalled(InstalledModel),
    /// Paused on request; running the same pull again resumes it.
    Paused {
        /// Bytes on disk.
        done_bytes: u64,
        /// Bytes of the whole model.
        total_bytes: u64,
    },
    /// Cancelled on request; the partial files were deleted.
    Cancelled,
}

/// A resolved request.
struct Spec {
    query: String,
    name: String,
    repo: String,
    revision: String,
    catalog: Option<&'static CatalogEntry>,
}

impl Spec {
    /// Whether it is a speech model of the catalog.
    fn is_speech(&self) -> bool {
        self.catalog.is_some_and(CatalogEntry::is_speech)
    }
}

fn resolve(request: &PullRequest) -> Result<Spec> {
    let query = request.query.trim();
    if let Some(entry) = catalog::find(query)? {
        return Ok(Spec {
            query: query.to_string(),
            name: request.name.clone().unwrap_or_else(|| entry.name.clone()),
            repo: entry.repo.clone(),
            revision: request
                .revision
                .clone()
                .unwrap_or_else(|| entry.revision.clone()),
            catalog: Some(entry),
        });
    }
    let (repo, revision) = match query.split_once('@') {
        Some((repo, rev)) if !rev.is_empty() => (repo, Some(rev.to_string())),
        _ => (query, None),
    };
    if !is_repo_id(repo) {
        return Err(Error::UnknownModel {
            query: query.to_string(),
            known: catalog::entries()?.iter().map(|e| e.id.clone()).collect(),
        });
    }
    let default_name = repo.split('/').nth(1).unwrap_or(repo).to_string();
    Ok(Spec {
        query: query.to_string(),
        name: request.name.clone().unwrap_or(default_name),
        repo: repo.to_string(),
        revision: request
            .revision
            .clone()
            .or(revision)
            .unwrap_or_else(|| "main".to_string()),
        catalog: None,
    })
}

/// The name a pull of `request` installs under (for keying downloads in progress).
pub fn target_name(request: &PullRequest) -> Result<String> {
    let spec = resolve(request)?;
    check_name(&spec.name)?;
    Ok(spec.name)
}

/// Downloads, verifies, validates and registers a model. `on_progress` gets a snapshot at
/// each step and at most every 100 ms while bytes arrive; `control` pauses or cancels.
pub fn pull(
    store: &Store,
    client: &HubClient,
    request: &PullRequest,
    options: &DownloadOptions,
    control: &DownloadControl,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<PullOutcome> {
    let spec = resolve(request)?;
    check_name(&spec.name)?;
    if spec.is_speech() {
        if let Some(model) = speech::installed(store, &spec.name)? {
            store.clear_leftover_staging(&spec.name);
            return Ok(PullOutcome::AlreadyInstalled(model));
        }
    } else if store.registry().read()?.find(&spec.name).is_some() {
        store.clear_leftover_staging(&spec.name);
        return Ok(PullOutcome::AlreadyInstalled(store.get(&spec.name)?));
    }
    if client.is_offline() {
        return Err(Error::Offline {
            what: format!("{} ({})", spec.name, spec.repo),
        });
    }
    let root = store.downloads_dir().join(&spec.name);
    fsutil::create_dir_all(&root)?;
    let lock =
        FileLock::try_exclusive(&root.join(".lock"))?.ok_or_else(|| Error::AlreadyDownloading {
            name: spec.name.clone(),
        })?;
    let files_dir = root.join("files");
    let mut reporter = Reporter::new(&spec.name, on_progress);
    reporter.phase(Phase::Resolving, None);

    // 1. The manifest: an earlier run's, or a new one from the Hub.
    let manifest = match Manifest::read(&root) {
        Some(m) if m.repo == spec.repo && m.requested_revision == spec.revision => m,
        stale => {
            if stale.is_some() {
                tracing::info!(name = %spec.name, "earlier partial download is of another revision; starting afresh");
                fsutil::remove_dir_all(&files_dir)?;
            }
            match list_files(client, &spec, control) {
                Ok(manifest) => {
                    manifest.write(&root)?;
                    manifest
                }
                Err(e) => {
                    // Nothing was downloaded: leave no trace of this attempt.
                    drop(lock);
                    let _ = fsutil::remove_dir_all(&root);
                    return match e {
                        Error::Stopped {
                            request: Request::Cancel,
                        } => {
                            reporter.phase(Phase::Cancelled, None);
                            Ok(PullOutcome::Cancelled)
                        }
                        Error::Stopped { .. } => {
                            reporter.phase(Phase::Paused, None);
                            Ok(PullOutcome::Paused {
                                done_bytes: 0,
                                total_bytes: 0,
                            })
                        }
                        e => Err(e),
                    };
                }
            }
        }
    };
    fsutil::create_dir_all(&files_dir)?;

    // 2. Room for what is still missing.
    let (total, already) = check_free_space(store, &manifest, &files_dir, options)?;
    reporter.start(manifest.files.len(), total, already);

    // 3. Every file, resumed and verified.
    let records = match download_files(
        client,
        &manifest,
        &files_dir,
        options,
        control,
        &mut reporter,
    )? {
        Downloaded::All(records) => records,
        Downloaded::Stopped(Request::Cancel) => {
            drop(lock);
            fsutil::remove_dir_all(&root)?;
            reporter.phase(Phase::Cancelled, None);
            return Ok(PullOutcome::Cancelled);
        }
        Downloaded::Stopped(_) => {
            let done_bytes = manifest.files.iter().fold(0u64, |sum, f| {
                sum.saturating_add(download::bytes_on_disk(&files_dir.join(&f.name), f.size))
            });
            reporter.phase(Phase::Paused, None);
            return Ok(PullOutcome::Paused {
                done_bytes,
                total_bytes: total,
            });
        }
    };

    if spec.is_speech() {
        // 4 and 5 for speech: checked, then moved into models/speech/ (no registry entry).
        reporter.phase(Phase::Validating, None);
        if let Err(e) = speech::check_folder(&files_dir) {
            drop(lock);
            let _ = fsutil::remove_dir_all(&root);
            return Err(e);
        }
        reporter.phase(Phase::Registering, None);
        let new = speech::NewSpeechModel {
            name: &spec.name,
            repo: &manifest.repo,
            commit: &manifest.commit,
            catalog_id: manifest.catalog_id.as_deref(),
            files: records,
        };
        let model = speech::install(store, &files_dir, new)?;
        drop(lock);
        fsutil::remove_dir_all(&root)?;
        reporter.phase(Phase::Done, None);
        return Ok(PullOutcome::Installed(model));
    }

    // 4. The kernels against the model's list, then the folder as a whole, with q4nx.
    reporter.phase(Phase::Validating, None);
    let checked = check_kernels(&files_dir, &records, &manifest.repo)
        .and_then(|()| model_dir::validate(&files_dir))
        .and_then(|v| store.check_model(&files_dir, &spec.name).map(|()| v));
    let validated = match checked {
        Ok(v) => v,
        Err(e) => {
            // The files are exactly what the Hub holds, so fetching them again cannot help.
            drop(lock);
            let _ = fsutil::remove_dir_all(&root);
            return Err(e);
        }
    };

    // 5. Into models/ and the registry.
    reporter.phase(Phase::Registering, None);
    let new = new_model(&spec, client, &manifest, &validated, records);
    let model = store.register(&files_dir, new)?;
    drop(lock);
    fsutil::remove_dir_all(&root)?;
    reporter.phase(Phase::Done, None);
    Ok(PullOutcome::Installed(model))
}

/// Resolves the spec's revision to a commit and lists the files a model folder needs there.
fn list_files(client: &HubClient, spec: &Spec, control: &DownloadControl) -> Result<Manifest> {
    let commit = client.commit_of(&spec.repo, &spec.revision, control)?;
    let remote = client.files(&spec.repo, &commit, control)?;
    let names: Vec<String> = remote.iter().map(|f| f.name.clone()).collect();
    let mut selected = if spec.is_speech() {
        ModelFiles {
            format: WeightFormat::Ct2,
            files: speech::select(&names, &spec.repo)?,
        }
    } else {
        model_dir::select(&names, &spec.repo)?
    };
    if !spec.is_speech() && names.iter().any(|n| n == KERNEL_LIST_FILE) {
        selected.files.push(KERNEL_LIST_FILE.to_string());
    }
    // Each file's declared size must fit its use, as an import checks the files on disk.
    let model_bytes = remote
        .iter()
        .find(|f| f.name == "model.q4nx")
        .map(|f| f.size);
    for f in remote.iter().filter(|f| selected.files.contains(&f.name)) {
        let max = if spec.is_speech() {
            speech::max_file_size(&f.name)
        } else {
            model_dir::max_file_size(&f.name, model_bytes)
        };
        if f.size > max {
            return Err(Error::RefusedModel {
                name: spec.repo.clone(),
                reason: format!(
                    "{} is declared as {} bytes, more than the {max} a file of its kind may be",
                    f.name, f.size
                ),
            });
        }
    }
    Ok(Manifest {
        query: spec.query.clone(),
        repo: spec.repo.clone(),
        requested_revision: spec.revision.clone(),
        commit,
        catalog_id: spec.catalog.map(|c| c.id.clone()),
        format: selected.format,
        files: remote
            .into_iter()
            .filter(|f| selected.files.contains(&f.name))
            .collect(),
    })
}

/// Checks every kernel the model's kernel list names (when it has one) among the verified
/// `records`: its size and sha256 must be the listed ones.
fn check_kernels(
    files_dir: &Path,
    records: &BTreeMap<String, FileRecord>,
    repo: &str,
) -> Result<()> {
    let path = files_dir.join(KERNEL_LIST_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    let listed = kernels::parse_kernel_list(&bytes, repo)?;
    kernels::verify_kernels(&listed, records, repo)?;
    tracing::info!(
        repo,
        kernels = listed.len(),
        "kernels verified against the list"
    );
    Ok(())
}

/// Checks the disk holds what is still missing plus the reserve; returns the bytes of the
/// whole model and those already on disk.
fn check_free_space(
    store: &Store,
    manifest: &Manifest,
    files_dir: &Path,
    options: &DownloadOptions,
) -> Result<(u64, u64)> {
    // The manifest may come from an older version or an edited file: saturate, so that an
    // absurd size is refused as "not enough space" rather than wrapping around.
    let total: u64 = manifest
        .files
        .iter()
        .fold(0u64, |sum, f| sum.saturating_add(f.size));
    let already: u64 = manifest.files.iter().fold(0u64, |sum, f| {
        sum.saturating_add(download::bytes_on_disk(&files_dir.join(&f.name), f.size))
    });
    let needed = total
        .saturating_sub(already)
        .saturating_add(options.disk_reserve);
    let available = fsutil::free_space(files_dir)?;
    if available < needed {
        return Err(Error::NotEnoughDisk {
            path: store.root().to_path_buf(),
            needed,
            available,
        });
    }
    Ok((total, already))
}

/// How the downloads of a pull ended.
enum Downloaded {
    /// Every file is on disk and verified.
    All(BTreeMap<String, FileRecord>),
    /// Paused or cancelled on request.
    Stopped(Request),
}

/// Downloads every file of the manifest that is not already complete, in order.
fn download_files(
    client: &HubClient,
    manifest: &Manifest,
    files_dir: &Path,
    options: &DownloadOptions,
    control: &DownloadControl,
    reporter: &mut Reporter<'_>,
) -> Result<Downloaded> {
    let mut records = BTreeMap::new();
    for remote in &manifest.files {
        let path = files_dir.join(&remote.name);
        if std::fs::metadata(&path)
            .map(|m| m.len() == remote.size)
            .unwrap_or(false)
        {
            // Verified and renamed by an earlier run.
            let record = match &remote.sha256 {
                Some(sha256) => FileRecord {
                    size: remote.size,
                    sha256: sha256.clone(),
                },
                None => download::sha256_file(&path)?,
            };
            records.insert(remote.name.clone(), record);
            reporter.file_done(remote.size);
            continue;
        }
        let job = FileJob {
            client,
            repo: &manifest.repo,
            commit: &manifest.commit,
            remote,
            path,
        };
        reporter.phase(Phase::Downloading, Some(&remote.name));
        let outcome = download::download_file(&job, options, control, &mut |event| match event {
            FileEvent::Bytes(n) => reporter.bytes(n),
            FileEvent::Retrying(message) => reporter.retrying(message),
        })?;
        match outcome {
            FileOutcome::Done(record) => {
                reporter.file_done(remote.size);
                records.insert(remote.name.clone(), record);
            }
            FileOutcome::Stopped(request) => return Ok(Downloaded::Stopped(request)),
        }
    }
    Ok(Downloaded::All(records))
}

/// What the registry records about a pulled model: the catalog's facts when it came from the
/// catalog, else what the files say.
fn new_model(
    spec: &Spec,
    client: &HubClient,
    manifest: &Manifest,
    validated: &ValidatedModel,
    records: BTreeMap<String, FileRecord>,
) -> NewModel {
    let (details, backends, context_length, tag, vlm) = match spec.catalog {
        Some(entry) => (
            FlmDetails {
                family: entry.flm_family.clone(),
                think: entry.think,
                think_toggleable: entry.think,
                parameter_size: entry.parameters.clone(),
                quantization_level: entry.quantization.clone(),
                extra: Default::default(),
            },
            entry.backends.clone(),
            entry.context_length,
            Some(entry.tag.clone()),
            entry.vlm,
        ),
        None => (
            details_for(validated, &spec.name),
            vec![Backend::Cpu],
            validated.max_context.min(32768),
            None,
            false,
        ),
    };
    NewModel {
        name: spec.name.clone(),
        tag,
        url: format!(
            "{}/{}/resolve/{}",
            client.endpoint(),
            manifest.repo,
            manifest.commit
        ),
        details,
        context_length,
        vlm,
        hearth: HearthFields {
            source: "huggingface".into(),
            repo: Some(manifest.repo.clone()),
            revision: Some(manifest.commit.clone()),
            imported_from: None,
            catalog_id: manifest.catalog_id.clone(),
            format: validated.format,
            architecture: validated.family.clone(),
            backends,
            files: records,
            installed_at: unix_now(),
            linked: None,
        },
    }
}

/// Turns file events into throttled [`Progress`] snapshots.
struct Reporter<'a> {
    progress: Progress,
    sink: &'a mut dyn FnMut(&Progress),
    finished_bytes: u64,
    meter: SpeedMeter,
    last_sent: Option<Instant>,
}

impl<'a> Reporter<'a> {
    fn new(name: &str, sink: &'a mut dyn FnMut(&Progress)) -> Reporter<'a> {
        Reporter {
            progress: Progress {
                name: name.to_string(),
                phase: Phase::Resolving,
                file: None,
                files_done: 0,
                file_count: 0,
                done_bytes: 0,
                total_bytes: 0,
                bytes_per_sec: 0.0,
                eta_secs: None,
                message: None,
            },
            sink,
            finished_bytes: 0,
            meter: SpeedMeter::new(),
            last_sent: None,
        }
    }

    fn send(&mut self) {
        self.last_sent = Some(Instant::now());
        (self.sink)(&self.progress);
    }

    fn phase(&mut self, phase: Phase, file: Option<&str>) {
        self.progress.phase = phase;
        self.progress.file = file.map(str::to_string);
        self.progress.message = None;
        self.send();
    }

    fn start(&mut self, file_count: usize, total: u64, already: u64) {
        self.progress.file_count = file_count;
        self.progress.total_bytes = total;
        self.progress.done_bytes = already;
        if already > 0 {
            self.progress.message = Some(format!(
                "resuming: {} of {} already here",
                crate::human_bytes(already),
                crate::human_bytes(total)
            ));
        }
        self.send();
    }

    /// The current file holds `n` bytes.
    fn bytes(&mut self, n: u64) {
        self.progress.done_bytes = self.finished_bytes + n;
        self.meter.record(self.progress.done_bytes);
        if self.progress.phase == Phase::Retrying {
            self.progress.phase = Phase::Downloading;
            self.progress.message = None;
        }
        let due = self
            .last_sent
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
        if due {
            let speed = self.meter.bytes_per_sec();
            self.progress.bytes_per_sec = speed;
            let left = self
                .progress
                .total_bytes
                .saturating_sub(self.progress.done_bytes);
            self.progress.eta_secs = (speed > 0.0).then(|| left as f64 / speed);
            self.send();
        }
    }

    fn retrying(&mut self, message: String) {
        tracing::warn!("{message}");
        self.progress.phase = Phase::Retrying;
        self.progress.message = Some(message);
        self.send();
    }

    /// A file of `size` bytes is complete.
    fn file_done(&mut self, size: u64) {
        self.finished_bytes = self.finished_bytes.saturating_add(size);
        self.progress.files_done += 1;
        self.progress.done_bytes = self.finished_bytes;
        self.send();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_ids_resolve_to_their_repo_and_name() {
        let spec = resolve(&PullRequest {
            query: "qwen3:1.7b".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(spec.repo, "FastFlowLM/Qwen3-1.7B-NPU2");
        assert_eq!(spec.name, "Qwen3-1.7B-NPU2");
        assert_eq!(spec.revision, "main");
    }

    #[test]
    fn any_repo_with_optional_revision_is_accepted() {
        let spec = resolve(&PullRequest {
            query: "someone/Tiny-Model@v2".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            (
                spec.repo.as_str(),
                spec.revision.as_str(),
                spec.name.as_str()
            ),
            ("someone/Tiny-Model", "v2", "Tiny-Model")
        );
    }

    #[test]
    fn target_name_is_the_catalog_name_or_the_repo_name() {
        let name = |q: &str| {
            target_name(&PullRequest {
                query: q.into(),
                ..Default::default()
            })
            .unwrap()
        };
        assert_eq!(name("minicpm5-2b"), "MiniCPM5-2B");
        assert_eq!(name("a/Some-Model@v1"), "Some-Model");
    }

    #[test]
    fn unknown_query_lists_the_catalog() {
        let err = resolve(&PullRequest {
            query: "gpt-7".into(),
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(err.to_string().contains("minicpm5-2b"), "{err}");
    }
}
