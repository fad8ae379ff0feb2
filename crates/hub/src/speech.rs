//! Speech models: Whisper as faster-whisper's CTranslate2 conversions (`config.json`, a
//! vocabulary, `model.bin`), pulled from the catalog like any model (see [`crate::pull`]) but
//! installed apart, in `models/speech/<name>/`, where the app's speech code looks for them, and
//! never added to FastFlowLM's registry (FastFlowLM brings its own Whisper for the NPU).
//!
//! - [`select`]: which of a repository's files a speech model keeps.
//! - [`check_folder`]: the check a complete folder passes before it is moved into place: a
//!   config that is a JSON object, a vocabulary, and a `model.bin` that is CTranslate2's file of
//!   a Whisper model (its header says `WhisperSpec`). The engine reads the rest when it loads.
//! - [`install`]: the checked folder moved into place with [`DOWNLOAD_MARK`], the record of what
//!   Hearth downloaded; [`remove`] deletes only a folder that carries it, so a Whisper folder the
//!   person put there is theirs and stays.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::catalog::{self, Backend, CatalogEntry};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::model_dir::WeightFormat;
use crate::names::check_name;
use crate::registry::FileRecord;
use crate::store::{unix_now, InstalledModel, Removed, Store};

pub use crate::names::SPEECH_FOLDER;

/// The file in a speech model's folder saying Hearth downloaded it (and what it fetched).
pub const DOWNLOAD_MARK: &str = ".hearth-download.json";

/// The vocabulary files a faster-whisper folder may carry (one is needed).
const VOCABULARIES: [&str; 3] = ["vocabulary.txt", "vocabulary.json", "tokenizer.json"];

/// Small files kept when present.
const OPTIONAL: [&str; 1] = ["preprocessor_config.json"];

/// CTranslate2's `model.bin` versions the engine reads.
const CT2_VERSIONS: std::ops::RangeInclusive<u32> = 3..=6;

/// The record [`DOWNLOAD_MARK`] holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Mark {
    repo: String,
    commit: String,
    catalog_id: Option<String>,
    files: BTreeMap<String, FileRecord>,
    installed_at: u64,
}

/// Where speech models live in `store`: `models/speech/`.
pub fn speech_models_dir(store: &Store) -> PathBuf {
    store.models_dir().join(SPEECH_FOLDER)
}

/// Whether the catalog entry `query` names is a speech model.
pub fn is_speech_query(query: &str) -> Result<bool> {
    Ok(catalog::find(query)?.is_some_and(CatalogEntry::is_speech))
}

/// Picks a speech model's files from a repository's top-level names: `config.json`,
/// `model.bin`, the vocabularies and the preprocessor config. `origin` names the repository in
/// the error when something needed is missing.
pub fn select(names: &[String], origin: &str) -> Result<Vec<String>> {
    let has = |wanted: &str| names.iter().any(|n| n == wanted);
    let mut missing = Vec::new();
    for needed in ["config.json", "model.bin"] {
        if !has(needed) {
            missing.push(needed.to_string());
        }
    }
    if !VOCABULARIES.iter().any(|v| has(v)) {
        missing.push(VOCABULARIES.join(" or "));
    }
    if !missing.is_empty() {
        let mut found = names.to_vec();
        found.sort();
        return Err(Error::MissingFiles {
            repo: origin.to_string(),
            missing,
            found,
        });
    }
    let mut files: Vec<String> = names
        .iter()
        .filter(|n| {
            let n = n.as_str();
            n == "config.json"
                || n == "model.bin"
                || VOCABULARIES.contains(&n)
                || OPTIONAL.contains(&n)
        })
        .cloned()
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// Most bytes a speech model's file may have: `model.bin` is bounded by the disk (checked
/// before the download), the vocabularies and configs by what they hold.
pub fn max_file_size(name: &str) -> u64 {
    const MIB: u64 = 1 << 20;
    match name {
        "model.bin" => u64::MAX,
        "tokenizer.json" | "vocabulary.json" | "vocabulary.txt" => 64 * MIB,
        _ => 16 * MIB,
    }
}

/// Checks a complete speech model folder before it is moved into place; the error says what
/// is wrong in words, and that nothing was installed.
pub fn check_folder(dir: &Path) -> Result<()> {
    let bad = |reason: String| Error::InvalidModel {
        dir: dir.to_path_buf(),
        reason,
    };
    let config = dir.join("config.json");
    let text = read_capped(&config, max_file_size("config.json"))?;
    match serde_json::from_slice::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Object(_)) => {}
        Ok(_) => return Err(bad("config.json is not a JSON object".into())),
        Err(e) => return Err(bad(format!("config.json is not valid JSON ({e})"))),
    }
    let vocabulary = VOCABULARIES
        .iter()
        .map(|v| dir.join(v))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            bad(format!(
                "it has no vocabulary ({})",
                VOCABULARIES.join(", ")
            ))
        })?;
    let len = std::fs::metadata(&vocabulary)
        .map_err(|e| Error::io("read", &vocabulary, e))?
        .len();
    if len == 0 {
        return Err(bad(format!(
            "{} is empty",
            vocabulary.file_name().unwrap_or_default().to_string_lossy()
        )));
    }
    check_model_bin(&dir.join("model.bin")).map_err(bad)
}

/// Reads CTranslate2's header of `path`: `u32` version, then (version 2+) the spec name as a
/// `u16` length counting a final NUL and the bytes. A Whisper model's spec is `WhisperSpec`.
fn check_model_bin(path: &Path) -> std::result::Result<(), String> {
    let mut head = Vec::with_capacity(64);
    std::fs::File::open(path)
        .and_then(|f| f.take(64).read_to_end(&mut head))
        .map_err(|e| format!("model.bin cannot be read ({e})"))?;
    let not = "model.bin is not a CTranslate2 model file (faster-whisper's form)";
    if head.len() < 6 {
        return Err(format!("{not}: it is only {} bytes long", head.len()));
    }
    let version = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if !CT2_VERSIONS.contains(&version) {
        return Err(format!(
            "{not}: its version is {version}, and Hearth reads versions 3 to 6"
        ));
    }
    let len = usize::from(u16::from_le_bytes([head[4], head[5]]));
    let name = head
        .get(6..6 + len)
        .ok_or_else(|| format!("{not}: its header is cut short"))?;
    let name = name.strip_suffix(&[0]).unwrap_or(name);
    let name = String::from_utf8_lossy(name);
    if name != "WhisperSpec" {
        return Err(format!(
            "model.bin is a CTranslate2 model of another kind ({:?}), not Whisper",
            name.escape_debug().to_string()
        ));
    }
    Ok(())
}

fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("read", path, e))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    if bytes.len() as u64 > max {
        return Err(Error::InvalidModel {
            dir: path.parent().unwrap_or(path).to_path_buf(),
            reason: format!(
                "{} is larger than the {max} bytes a file of its kind may be",
                path.display()
            ),
        });
    }
    Ok(bytes)
}

/// What a pull records about a speech model it installs.
pub(crate) struct NewSpeechModel<'a> {
    pub name: &'a str,
    pub repo: &'a str,
    pub commit: &'a str,
    pub catalog_id: Option<&'a str>,
    pub files: BTreeMap<String, FileRecord>,
}

/// Moves the checked folder `staged` to `models/speech/<name>/` with its [`DOWNLOAD_MARK`].
/// A folder already there is the person's and is left alone.
pub(crate) fn install(
    store: &Store,
    staged: &Path,
    new: NewSpeechModel<'_>,
) -> Result<InstalledModel> {
    check_name(new.name)?;
    let dir = speech_models_dir(store);
    fsutil::create_dir_all(&dir)?;
    let target = dir.join(new.name);
    if target.exists() {
        return Err(Error::FolderExists {
            name: new.name.to_string(),
            path: target,
        });
    }
    let mark = Mark {
        repo: new.repo.to_string(),
        commit: new.commit.to_string(),
        catalog_id: new.catalog_id.map(str::to_string),
        files: new.files,
        installed_at: unix_now(),
    };
    let text = serde_json::to_vec_pretty(&mark).map_err(|e| Error::Registry {
        path: staged.join(DOWNLOAD_MARK),
        detail: e.to_string(),
    })?;
    fsutil::write_atomic(&staged.join(DOWNLOAD_MARK), &text)?;
    std::fs::rename(staged, &target).map_err(|e| Error::io("move into place", &target, e))?;
    fsutil::sync_dir(&dir);
    installed(store, new.name)?.ok_or_else(|| Error::NotInstalled {
        name: new.name.to_string(),
    })
}

/// The speech model `name` as the store shows models: one Hearth downloaded (its mark says
/// from where), or a Whisper folder the person put there; None when `models/speech/<name>/`
/// holds no speech model.
pub fn installed(store: &Store, name: &str) -> Result<Option<InstalledModel>> {
    check_name(name)?;
    let folder = speech_models_dir(store).join(name);
    let looks = folder.join("config.json").is_file()
        && (folder.join("model.bin").is_file() || folder.join("model.safetensors").is_file());
    if !looks {
        return Ok(None);
    }
    let mark = read_mark(&folder);
    let catalog_id = mark.as_ref().and_then(|m| m.catalog_id.clone());
    let tag = catalog_id
        .as_deref()
        .and_then(|id| catalog::find(id).ok().flatten())
        .map(|e| e.tag.clone())
        .unwrap_or_default();
    Ok(Some(InstalledModel {
        name: name.to_string(),
        tag,
        size_bytes: fsutil::dir_size(&folder),
        source: match &mark {
            Some(m) => format!("huggingface:{}@{}", m.repo, m.commit),
            None => format!("folder:{}", folder.display()),
        },
        repo: mark.as_ref().map(|m| m.repo.clone()),
        revision: mark.as_ref().map(|m| m.commit.clone()),
        catalog_id,
        format: if folder.join("model.bin").is_file() {
            WeightFormat::Ct2
        } else {
            WeightFormat::Safetensors
        },
        backends: vec![Backend::Cpu],
        is_default: false,
        builtin: false,
        files: mark.map(|m| m.files).unwrap_or_default(),
        linked: None,
        sees_pictures: false,
        folder,
    }))
}

fn read_mark(folder: &Path) -> Option<Mark> {
    let bytes = std::fs::read(folder.join(DOWNLOAD_MARK)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The speech model folder name `query` means: a speech model of the catalog (by id, name or
/// tag), or a folder in `models/speech/`; None when it means neither (a chat model, say).
pub fn folder_name(store: &Store, query: &str) -> Result<Option<String>> {
    if let Some(entry) = catalog::find(query)? {
        return Ok(entry.is_speech().then(|| entry.name.clone()));
    }
    if check_name(query).is_err() {
        return Ok(None);
    }
    Ok(speech_models_dir(store)
        .join(query)
        .is_dir()
        .then(|| query.to_string()))
}

/// Deletes the speech model `name` that Hearth downloaded (and any partial download of it).
/// A Whisper folder without Hearth's mark is the person's: it is refused, in words.
pub fn remove(store: &Store, name: &str) -> Result<Removed> {
    check_name(name)?;
    let dir = speech_models_dir(store);
    let folder = dir.join(name);
    let mut freed = 0;
    if folder.exists() {
        // Only a direct child of models/speech (links resolved) is ever deleted.
        let inside = match (dir.canonicalize(), folder.canonicalize()) {
            (Ok(d), Ok(f)) => f.parent() == Some(d.as_path()),
            _ => false,
        };
        if !inside || read_mark(&folder).is_none() {
            return Err(Error::InvalidName {
                name: name.to_string(),
                reason: format!(
                    "the speech model folder {} was not downloaded by Hearth, so Hearth leaves it \
                     alone; delete the folder yourself if you no longer want it",
                    folder.display()
                ),
            });
        }
        freed = fsutil::dir_size(&folder);
        fsutil::remove_dir_all(&folder)?;
    } else if !store.downloads_dir().join(name).is_dir() {
        return Err(Error::NotInstalled {
            name: name.to_string(),
        });
    }
    freed += store.discard_download(name)?;
    Ok(Removed {
        name: name.to_string(),
        freed_bytes: freed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_faster_whisper_repo_keeps_its_model_files_only() {
        let picked = select(
            &names(&[
                ".gitattributes",
                "README.md",
                "config.json",
                "model.bin",
                "tokenizer.json",
                "vocabulary.txt",
            ]),
            "Systran/faster-whisper-base",
        )
        .unwrap();
        assert_eq!(
            picked,
            [
                "config.json",
                "model.bin",
                "tokenizer.json",
                "vocabulary.txt"
            ]
        );
        let err = select(&names(&["config.json", "README.md"]), "o/r").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("model.bin"), "{text}");
        assert!(text.contains("vocabulary.txt or"), "{text}");
    }

    fn folder(bin: &[u8], config: &str, vocab: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("model.bin"), bin).unwrap();
        std::fs::write(dir.path().join("config.json"), config).unwrap();
        std::fs::write(dir.path().join("vocabulary.txt"), vocab).unwrap();
        dir
    }

    fn header(version: u32, spec: &str) -> Vec<u8> {
        let mut out = version.to_le_bytes().to_vec();
        out.extend_from_slice(&(spec.len() as u16 + 1).to_le_bytes());
        out.extend_from_slice(spec.as_bytes());
        out.push(0);
        out.extend_from_slice(&[0; 16]);
        out
    }

    #[test]
    fn a_whisper_model_bin_passes_and_every_malformed_folder_is_refused_in_words() {
        let good = folder(&header(6, "WhisperSpec"), "{}", "a\nb\n");
        check_folder(good.path()).unwrap();
        let cases: [(Vec<u8>, &str, &str, &str); 7] = [
            (header(6, "TransformerSpec"), "{}", "a", "another kind"),
            (header(9, "WhisperSpec"), "{}", "a", "versions 3 to 6"),
            (b"GGUF".to_vec(), "{}", "a", "only 4 bytes"),
            (vec![6, 0, 0, 0, 200, 0, b'W'], "{}", "a", "cut short"),
            (header(6, "WhisperSpec"), "{", "a", "not valid JSON"),
            (header(6, "WhisperSpec"), "[1]", "a", "not a JSON object"),
            (header(6, "WhisperSpec"), "{}", "", "is empty"),
        ];
        for (bin, config, vocab, said) in cases {
            let dir = folder(&bin, config, vocab);
            let err = check_folder(dir.path()).unwrap_err().to_string();
            assert!(err.contains(said), "{said}: {err}");
        }
        let none = folder(&header(6, "WhisperSpec"), "{}", "a");
        std::fs::remove_file(none.path().join("vocabulary.txt")).unwrap();
        assert!(check_folder(none.path())
            .unwrap_err()
            .to_string()
            .contains("no vocabulary"));
    }

    #[test]
    fn the_catalog_holds_three_whisper_models_with_their_languages_and_pins() {
        let speech = catalog::speech_entries().unwrap();
        let ids: Vec<&str> = speech.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["whisper-base", "whisper-tiny", "whisper-small"]);
        for entry in speech {
            assert_eq!(entry.languages.len(), 99, "{}", entry.id);
            for code in ["en", "fr", "de", "es", "zh"] {
                assert!(entry.languages.iter().any(|l| l == code), "{code}");
            }
            assert_eq!(entry.revision.len(), 40, "pinned to a commit");
            assert_eq!(entry.format, WeightFormat::Ct2);
            assert!(entry.files.iter().all(|f| f.sha256.len() == 64));
        }
        let base = catalog::find("whisper-base").unwrap().unwrap();
        assert_eq!(base.download_bytes, 147_882_941);
    }
}
