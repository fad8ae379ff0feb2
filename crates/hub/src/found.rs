//! Models already on this computer: the GGUF and safetensors models that Ollama, LM Studio, Jan
//! and the Hugging Face cache keep, found by reading their folders, each with whether Hearth
//! can import it and, when not, why.
//!
//! Whether a model can be imported is decided by the importers' own checks, never by a list
//! kept here: a GGUF file goes through [`q4nx::gguf::check_header`] (the check
//! [`Store::import_gguf`] runs before converting), a safetensors folder through the folder
//! import's [`model_dir::validate`]. Only headers and metadata are read, never tensor data.
//!
//! Those folders belong to other programs: nothing here writes, moves or deletes anything in
//! them. A folder that does not exist is skipped; a file that cannot be read is listed with the
//! reason. A scan is bounded as a whole: every folder entry it looks at, under every root,
//! comes out of one budget, and so does every model it judges; walks are bounded in depth, and a
//! folder reached twice (a symbolic link loop) is walked once. A file there may be hostile: a
//! GGUF header read is capped by `q4nx`, and JSON files are read only up to 1 MB.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::gguf_import::{clean_name, gguf_magic, is_gguf_file, name_from_file, plain_refusal};
use crate::model_dir;
use crate::progress::{Phase, Progress};
use crate::store::{ImportOptions, InstalledModel, Store};
use crate::GgufImportOptions;

/// The program whose folder a model was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum FoundSource {
    /// Ollama's model store (manifests and blobs).
    Ollama,
    /// LM Studio's models folder.
    Lmstudio,
    /// Jan's models folders.
    Jan,
    /// The Hugging Face cache (`models--<org>--<name>/snapshots/<rev>/`).
    Huggingface,
}

/// How a found model's weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum FoundFormat {
    /// One GGUF file.
    Gguf,
    /// A folder with config.json and safetensors weights.
    Safetensors,
}

/// A model found on this computer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct FoundModel {
    /// The name its program shows (`llama3.2:1b` for Ollama).
    pub name: String,
    /// A name Hearth can register it under (letters, digits, `.`, `-`, `_`).
    pub import_name: String,
    /// The GGUF file, or the safetensors folder: what `hearth import` takes.
    pub path: PathBuf,
    /// Whose folder it is in.
    pub source: FoundSource,
    /// Bytes of its weights (and, for a folder, its other files).
    pub size_bytes: u64,
    /// GGUF `general.architecture`, or config.json `architectures[0]` / `model_type`.
    pub architecture: Option<String>,
    /// GGUF or safetensors.
    pub format: FoundFormat,
    /// Whether Hearth's import accepts it.
    pub runnable: bool,
    /// Why not, in plain words, when it does not.
    pub reason: Option<String>,
}

/// Where to look and how far. [`FoundRoots::from_env`] gives the usual places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundRoots {
    /// Ollama model stores (each with `manifests/` and `blobs/`).
    pub ollama: Vec<PathBuf>,
    /// LM Studio models folders (`<publisher>/<repo>/*.gguf`).
    pub lmstudio: Vec<PathBuf>,
    /// Jan models folders (`**/*.gguf`).
    pub jan: Vec<PathBuf>,
    /// Hugging Face hub caches (`models--<org>--<name>/`).
    pub huggingface: Vec<PathBuf>,
    /// Deepest folder level walked below a root. By default, 6.
    pub max_depth: usize,
    /// Most folder entries looked at in one scan, under all roots together. By default, 20 000.
    pub max_entries: usize,
    /// Most models judged (a header read each) in one scan. By default, 500.
    pub max_models: usize,
}

impl Default for FoundRoots {
    fn default() -> Self {
        FoundRoots {
            ollama: Vec::new(),
            lmstudio: Vec::new(),
            jan: Vec::new(),
            huggingface: Vec::new(),
            max_depth: 6,
            max_entries: 20_000,
            max_models: 500,
        }
    }
}

impl FoundRoots {
    /// The usual places, from this process's environment (see [`FoundRoots::from_vars`]).
    pub fn from_env() -> FoundRoots {
        FoundRoots::from_vars(|key| std::env::var_os(key))
    }

    /// The usual places, with environment variables read through `var`:
    /// Ollama's `$OLLAMA_MODELS`, else `~/.ollama/models` and the system service's
    /// `/usr/share/ollama/.ollama/models`; LM Studio's `~/.lmstudio/models` and
    /// `~/.cache/lm-studio/models`; Jan's `~/jan/models` and `$XDG_DATA_HOME/Jan/data/models`
    /// (and `.../llamacpp/models`); the Hugging Face cache at `$HF_HUB_CACHE`, else
    /// `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
    /// A place under the home folder is left out when `HOME` is not set.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> FoundRoots {
        let path = |key: &str| var(key).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = path("HOME");
        let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));
        let data_home = path("XDG_DATA_HOME").or_else(|| under_home(".local/share"));
        let cache_home = path("XDG_CACHE_HOME").or_else(|| under_home(".cache"));

        let ollama = match path("OLLAMA_MODELS") {
            Some(dir) => vec![dir],
            None => under_home(".ollama/models")
                .into_iter()
                .chain([PathBuf::from("/usr/share/ollama/.ollama/models")])
                .collect(),
        };
        let lmstudio = [".lmstudio/models", ".cache/lm-studio/models"]
            .iter()
            .filter_map(|rel| under_home(rel))
            .collect();
        let jan = under_home("jan/models")
            .into_iter()
            .chain(data_home.iter().flat_map(|d| {
                [
                    d.join("Jan/data/models"),
                    d.join("Jan/data/llamacpp/models"),
                ]
            }))
            .collect();
        let huggingface = path("HF_HUB_CACHE")
            .or_else(|| path("HF_HOME").map(|h| h.join("hub")))
            .or_else(|| cache_home.map(|c| c.join("huggingface/hub")))
            .into_iter()
            .collect();
        FoundRoots {
            ollama,
            lmstudio,
            jan,
            huggingface,
            ..FoundRoots::default()
        }
    }
}

/// Every model found under `roots`, in the order of the roots, each folder once.
pub fn scan(roots: &FoundRoots) -> Vec<FoundModel> {
    let mut seen_roots = HashSet::new();
    let mut first_visit = |root: &Path| match root.canonicalize() {
        Ok(real) if real.is_dir() => seen_roots.insert(real),
        _ => false,
    };
    let mut found = Vec::new();
    let mut budget = Budget {
        depth: roots.max_depth,
        entries: roots.max_entries,
        models: roots.max_models,
    };
    for root in &roots.ollama {
        if first_visit(root) {
            scan_ollama(root, &mut budget, &mut found);
        }
    }
    for (source, list) in [
        (FoundSource::Lmstudio, &roots.lmstudio),
        (FoundSource::Jan, &roots.jan),
    ] {
        for root in list {
            if first_visit(root) {
                for file in gguf_files(root, budget.depth, &mut budget) {
                    if !budget.take_model() {
                        break;
                    }
                    let name = gguf_name(&file);
                    found.push(gguf_model(name, file, source));
                }
            }
        }
    }
    for root in &roots.huggingface {
        if first_visit(root) {
            scan_huggingface(root, &mut budget, &mut found);
        }
    }
    if budget.entries == 0 || budget.models == 0 {
        tracing::warn!(
            models = found.len(),
            "stopped looking for models after {} folder entries or {} models",
            roots.max_entries,
            roots.max_models
        );
    }
    tracing::debug!(models = found.len(), "scanned for models on this computer");
    found
}

/// Adds the found model at `path` to `store` under `name` (by default the name it would get
/// from `hearth import`). A GGUF file is linked where it lies (a small folder in the store, the
/// file only read), or with `copy` converted into Hearth's own copy; a folder is copied, never
/// moved. `progress` sees the GGUF's link or conversion and the registering.
pub fn import_found(
    store: &Store,
    path: &Path,
    name: Option<String>,
    copy: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<InstalledModel> {
    let name = name.filter(|n| !n.trim().is_empty());
    if is_gguf_file(path) {
        let shown = name.clone().unwrap_or_else(|| name_from_file(path));
        let options = GgufImportOptions {
            name,
            threads: None,
        };
        let mut report = |phase: Phase, tensor: Option<String>, done: (usize, usize, u64, u64)| {
            progress(Progress {
                name: shown.clone(),
                phase,
                file: tensor,
                files_done: done.0,
                file_count: done.1,
                done_bytes: done.2,
                total_bytes: done.3,
                bytes_per_sec: 0.0,
                eta_secs: None,
                message: None,
            })
        };
        let mut converting = |p: q4nx::ConvertProgress| {
            report(
                Phase::Converting,
                Some(p.tensor),
                (p.tensors_done, p.tensors_total, p.bytes_done, p.bytes_total),
            )
        };
        let model = if copy {
            store.import_gguf(path, &options, &mut converting)?.0
        } else {
            store.link_gguf(path, &options, &mut converting)?.0
        };
        report(
            Phase::Done,
            None,
            (0, 0, model.size_bytes, model.size_bytes),
        );
        return Ok(model);
    }
    if !path.is_dir() {
        return Err(Error::io(
            "open",
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "neither a GGUF file nor a model folder; list the models again",
            ),
        ));
    }
    let options = ImportOptions {
        name,
        move_files: false,
    };
    let model = store.import(path, &options)?;
    progress(Progress {
        name: model.name.clone(),
        phase: Phase::Done,
        file: None,
        files_done: 0,
        file_count: 0,
        done_bytes: model.size_bytes,
        total_bytes: model.size_bytes,
        bytes_per_sec: 0.0,
        eta_secs: None,
        message: None,
    });
    Ok(model)
}

/// What is left of a scan's limits: every walk and every model judged draws on one budget.
#[derive(Debug)]
struct Budget {
    /// Deepest folder level below a root.
    depth: usize,
    /// Folder entries still to look at.
    entries: usize,
    /// Models still to judge.
    models: usize,
}

impl Budget {
    /// Takes one folder entry; false when none are left.
    fn take_entry(&mut self) -> bool {
        let some = self.entries > 0;
        self.entries = self.entries.saturating_sub(1);
        some
    }

    /// Takes one model to judge; false when none are left.
    fn take_model(&mut self) -> bool {
        let some = self.models > 0;
        self.models = self.models.saturating_sub(1);
        some
    }

    /// The entries of `dir`, each taken from the budget (as many as it allows).
    fn read_dir(&mut self, dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            tracing::debug!(dir = %dir.display(), "cannot read folder; skipped");
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            if !self.take_entry() {
                break;
            }
            out.push(entry.path());
        }
        out
    }
}

/// The files under `root` (symbolic links followed, each folder walked once), at most `depth`
/// folders down and as many entries as `budget` has left, sorted by path.
fn walk_files(root: &Path, depth: usize, budget: &mut Budget) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, level)) = stack.pop() {
        if budget.entries == 0 {
            break;
        }
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        if !seen.insert(real) {
            continue;
        }
        for path in budget.read_dir(&dir) {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() && level < depth => stack.push((path, level + 1)),
                Ok(m) if m.is_file() => files.push(path),
                _ => {}
            }
        }
    }
    files.sort();
    files
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension()
        .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case(ext))
}

/// The GGUF model files under `root`, leaving out vision projectors (`mmproj-*.gguf`), which
/// are parts of a model rather than models.
fn gguf_files(root: &Path, depth: usize, budget: &mut Budget) -> Vec<PathBuf> {
    walk_files(root, depth, budget)
        .into_iter()
        .filter(|p| has_extension(p, "gguf"))
        .filter(|p| {
            !p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .to_ascii_lowercase()
                    .starts_with("mmproj")
            })
        })
        .collect()
}

/// The name of a loose GGUF file: its stem, or its folder's name when the stem says nothing
/// (`<id>/model.gguf`, as Jan keeps them).
fn gguf_name(file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.eq_ignore_ascii_case("model") {
        if let Some(parent) = file.parent().and_then(Path::file_name) {
            return parent.to_string_lossy().into_owned();
        }
    }
    stem
}

/// A name `hearth import` accepts, from a shown name (`llama3.2:1b` gives `llama3.2-1b`).
fn import_name(name: &str) -> String {
    let mut out: String = clean_name(name).chars().take(100).collect();
    if out.is_empty() {
        out = "imported-model".into();
    }
    out
}

/// A q4nx error as a reason: without the file's path, which the list shows already.
fn q4nx_reason(error: q4nx::Error) -> String {
    match error {
        q4nx::Error::Gguf { detail, .. } => detail,
        q4nx::Error::Truncated { detail, .. } => {
            format!("the file is truncated ({detail}); it is damaged or incomplete")
        }
        q4nx::Error::Io { source, .. } => format!("it cannot be read: {source}"),
        other => other.to_string(),
    }
}

/// A found GGUF file, judged by the importer's check of its header.
fn gguf_model(name: String, file: PathBuf, source: FoundSource) -> FoundModel {
    let size_bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let (architecture, verdict) = match gguf_magic(&file) {
        Err(e) => (None, Err(format!("it cannot be read: {e}"))),
        Ok(false) => (
            None,
            Err("it is not a GGUF file (it does not start with \"GGUF\")".to_string()),
        ),
        Ok(true) => {
            // The map is read only where the header is: the tensor data stays on disk.
            match q4nx::gguf::GgufFile::open(&file) {
                Ok(gguf) => {
                    let h = gguf.header();
                    let arch = h
                        .get("general.architecture")
                        .and_then(q4nx::gguf::Value::as_str)
                        .map(str::to_string);
                    let verdict = q4nx::gguf::check_header(h, &file)
                        .map_err(|e| plain_refusal(arch.as_deref(), q4nx_reason(e)));
                    (arch, verdict)
                }
                Err(e) => (None, Err(q4nx_reason(e))),
            }
        }
    };
    finish(
        name,
        file,
        source,
        size_bytes,
        architecture,
        FoundFormat::Gguf,
        verdict,
    )
}

fn finish(
    name: String,
    path: PathBuf,
    source: FoundSource,
    size_bytes: u64,
    architecture: Option<String>,
    format: FoundFormat,
    verdict: std::result::Result<(), String>,
) -> FoundModel {
    FoundModel {
        import_name: import_name(&name),
        name,
        path,
        source,
        size_bytes,
        architecture,
        format,
        runnable: verdict.is_ok(),
        reason: verdict.err(),
    }
}

/// Ollama's store: `manifests/<registry>/<namespace>/<model>/<tag>` (JSON naming the layers)
/// and `blobs/sha256-<hex>` (the model layer is a GGUF file).
fn scan_ollama(root: &Path, budget: &mut Budget, out: &mut Vec<FoundModel>) {
    const MODEL_LAYER: &str = "application/vnd.ollama.image.model";
    let manifests = root.join("manifests");
    for manifest in walk_files(&manifests, budget.depth, budget) {
        if !budget.take_model() {
            break;
        }
        let Ok(rel) = manifest.strip_prefix(&manifests) else {
            continue;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let [_registry, namespace, model, tag] = parts.as_slice() else {
            continue;
        };
        let name = if namespace == "library" {
            format!("{model}:{tag}")
        } else {
            format!("{namespace}/{model}:{tag}")
        };
        let not_runnable = |reason: String| {
            finish(
                name.clone(),
                manifest.clone(),
                FoundSource::Ollama,
                0,
                None,
                FoundFormat::Gguf,
                Err(reason),
            )
        };
        let digest = match read_small_json(&manifest) {
            Ok(json) => json["layers"].as_array().and_then(|layers| {
                layers
                    .iter()
                    .find(|l| l["mediaType"].as_str() == Some(MODEL_LAYER))
                    .and_then(|l| l["digest"].as_str().map(str::to_string))
            }),
            Err(reason) => {
                out.push(not_runnable(format!("its Ollama manifest {reason}")));
                continue;
            }
        };
        let Some(digest) = digest else {
            out.push(not_runnable(
                "its Ollama manifest names no model layer".into(),
            ));
            continue;
        };
        // Only hex digits go into the blob's path: a manifest cannot point outside blobs/.
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            out.push(not_runnable(format!(
                "its Ollama manifest has a model digest {digest:?} that is not sha256:<hex>"
            )));
            continue;
        }
        let blob = root.join("blobs").join(format!("sha256-{hex}"));
        if !blob.is_file() {
            out.push(not_runnable(format!(
                "its model file {} is missing; `ollama pull {name}` fetches it again",
                blob.display()
            )));
            continue;
        }
        out.push(gguf_model(name, blob, FoundSource::Ollama));
    }
}

/// A JSON file of at most 1 MB, or why not (a manifest or config.json is a few KB).
fn read_small_json(path: &Path) -> std::result::Result<serde_json::Value, String> {
    const MAX: u64 = 1 << 20;
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot be read: {e}"))?
        .len();
    if len > MAX {
        return Err(format!("is {len} bytes, more than such a file ever is"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot be read: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("is not valid JSON: {e}"))
}

/// The Hugging Face cache: `models--<org>--<name>/snapshots/<rev>/` with GGUF files, or with
/// config.json and safetensors weights.
fn scan_huggingface(root: &Path, budget: &mut Budget, out: &mut Vec<FoundModel>) {
    let mut repos: Vec<PathBuf> = budget
        .read_dir(root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("models--"))
        })
        .collect();
    repos.sort();
    // Snapshots (or repos) linked to one folder are judged once.
    let mut seen = HashSet::new();
    for repo in repos {
        let folder = repo
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let repo_id = folder.trim_start_matches("models--").replacen("--", "/", 1);
        let mut snapshots: Vec<PathBuf> = budget
            .read_dir(&repo.join("snapshots"))
            .into_iter()
            .filter(|p| p.is_dir())
            .collect();
        snapshots.sort();
        snapshots.retain(|s| s.canonicalize().is_ok_and(|real| seen.insert(real)));
        let several = snapshots.len() > 1;
        for snapshot in snapshots {
            let rev = snapshot
                .file_name()
                .map(|n| n.to_string_lossy().chars().take(7).collect::<String>())
                .unwrap_or_default();
            let repo_name = if several {
                format!("{repo_id}@{rev}")
            } else {
                repo_id.clone()
            };
            for file in gguf_files(&snapshot, budget.depth.min(3), budget) {
                if !budget.take_model() {
                    break;
                }
                let stem = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push(gguf_model(
                    format!("{repo_name}/{stem}"),
                    file,
                    FoundSource::Huggingface,
                ));
            }
            if budget.models == 0 {
                break;
            }
            if let Some(model) = safetensors_snapshot(repo_name, &snapshot, budget) {
                out.push(model);
            }
        }
    }
}

/// A snapshot with config.json and `*.safetensors` at its top, judged by the folder import's
/// own validation (which reads the safetensors headers, not the weights).
fn safetensors_snapshot(name: String, dir: &Path, budget: &mut Budget) -> Option<FoundModel> {
    let names: Vec<String> = budget
        .read_dir(dir)
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let has_weights = names.iter().any(|n| n.ends_with(".safetensors"));
    if !has_weights || !names.iter().any(|n| n == "config.json") || !budget.take_model() {
        return None;
    }
    let size_bytes = names
        .iter()
        .filter_map(|n| std::fs::metadata(dir.join(n)).ok())
        .map(|m| m.len())
        .sum();
    let architecture = read_small_json(&dir.join("config.json"))
        .ok()
        .and_then(|c| {
            c["architectures"][0]
                .as_str()
                .or_else(|| c["model_type"].as_str())
                .map(str::to_string)
        });
    let verdict = model_dir::validate(dir).map(drop).map_err(|e| match e {
        Error::InvalidModel { reason, .. } => reason,
        Error::MissingFiles { missing, .. } => {
            format!("the folder lacks {}", missing.join(", "))
        }
        other => other.to_string(),
    });
    Some(finish(
        name,
        dir.to_path_buf(),
        FoundSource::Huggingface,
        size_bytes,
        architecture,
        FoundFormat::Safetensors,
        verdict,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_follow_the_variables_each_program_reads() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let r = FoundRoots::from_vars(vars(&[("HOME", "/h")]));
        assert_eq!(
            r.ollama,
            [
                PathBuf::from("/h/.ollama/models"),
                PathBuf::from("/usr/share/ollama/.ollama/models")
            ]
        );
        assert_eq!(
            r.lmstudio,
            [
                PathBuf::from("/h/.lmstudio/models"),
                PathBuf::from("/h/.cache/lm-studio/models")
            ]
        );
        assert_eq!(r.jan[0], PathBuf::from("/h/jan/models"));
        assert_eq!(r.jan[1], PathBuf::from("/h/.local/share/Jan/data/models"));
        assert_eq!(r.huggingface, [PathBuf::from("/h/.cache/huggingface/hub")]);

        let r = FoundRoots::from_vars(vars(&[
            ("HOME", "/h"),
            ("OLLAMA_MODELS", "/o"),
            ("HF_HOME", "/hf"),
            ("XDG_CACHE_HOME", "/c"),
        ]));
        assert_eq!(
            r.ollama,
            [PathBuf::from("/o")],
            "OLLAMA_MODELS replaces both"
        );
        assert_eq!(
            r.huggingface,
            [PathBuf::from("/hf/hub")],
            "HF_HOME before XDG"
        );
        let r = FoundRoots::from_vars(vars(&[("HF_HUB_CACHE", "/x"), ("HF_HOME", "/hf")]));
        assert_eq!(r.huggingface, [PathBuf::from("/x")]);
        assert!(r.lmstudio.is_empty(), "no home, no home folders");
    }

    #[test]
    fn import_names_are_names_the_store_accepts() {
        assert_eq!(import_name("llama3.2:1b"), "llama3.2-1b");
        assert_eq!(import_name("org/repo/file"), "org-repo-file");
        assert_eq!(import_name(":::"), "imported-model");
        assert!(crate::names::check_name(&import_name(&"x".repeat(300))).is_ok());
    }

    #[test]
    fn a_generic_gguf_stem_takes_its_folders_name() {
        assert_eq!(
            gguf_name(Path::new("/m/qwen3-1.7b/model.gguf")),
            "qwen3-1.7b"
        );
        assert_eq!(gguf_name(Path::new("/m/x/Tiny.Q4_1.gguf")), "Tiny.Q4_1");
    }

    #[test]
    fn a_found_file_of_an_unsupported_family_names_it_in_plain_words() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("phi4.gguf");
        std::fs::write(&file, q4nx::gguf::write::tiny_model("phimoe").finish()).unwrap();
        let found = gguf_model("phi4".into(), file, FoundSource::Lmstudio);
        assert!(!found.runnable);
        let reason = found.reason.unwrap();
        assert!(
            reason.starts_with("Phi-3.5-MoE models are not supported yet"),
            "{reason}"
        );
        assert_eq!(found.architecture.as_deref(), Some("phimoe"));
    }
}
