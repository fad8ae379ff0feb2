//! The model list a FastFlowLM started with `--asr 1` reads, so that it finds its Whisper.
//!
//! `--asr 1` makes FastFlowLM look up `whisper-v3:turbo` in the model list it was given
//! (`FLM_CONFIG_PATH`) and load the folder that entry names, pulling it from the network first
//! when its files are missing. Hearth hands FastFlowLM its own registry, which lists Hearth's
//! models only: with it, FastFlowLM would not find Whisper (it falls back to another model's
//! entry). So, unless Hearth's registry has its own `whisper-v3` entry, [`registry_for_asr`]
//! writes `fastflowlm-model-list.json` in Hearth's state folder: Hearth's registry with
//! FastFlowLM's own `whisper-v3:turbo` entry added, its `name` made the absolute path of the
//! folder where `flm pull whisper-v3:turbo` put it (FastFlowLM joins the models folder and the
//! name as paths, so an absolute name stands alone, and it finds the kernels by the folder's
//! last part). Hearth never lets FastFlowLM download at run time: a Whisper whose files are not
//! all there is [`NpuError::WhisperMissing`], and the processor hears instead.
//!
//! Where FastFlowLM keeps its own things: its model list beside its program (the portable
//! and SDK layouts) or in `<prefix>/share/flm/` (the package); its models in
//! `<FLM_MODEL_PATH or ~/.config/flm>/<model_path>/<name>` (notes, "Model folder").

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::npu::transcribe::ASR_MODEL;
use crate::npu::NpuError;

/// The family and size of [`ASR_MODEL`] in a model list.
const FAMILY: &str = "whisper-v3";
const SIZE: &str = "turbo";

/// The model list written for a FastFlowLM with Whisper, in the state folder.
pub const SPEECH_REGISTRY: &str = "fastflowlm-model-list.json";

/// The largest model list read (FastFlowLM's own is about 60 KB).
const MAX_LIST_BYTES: u64 = 8 * 1024 * 1024;

/// FastFlowLM's own models folder for this user: `$FLM_MODEL_PATH`, else `~/.config/flm`.
pub fn default_flm_models_dir() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FLM_MODEL_PATH").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".config").join("flm"))
}

/// FastFlowLM's own model list for the program at `program`: beside it (following a link to
/// the real file), else `<prefix>/share/flm/model_list.json`.
pub fn own_model_list(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let mut places = Vec::new();
    for p in [program, real.as_path()] {
        if let Some(dir) = p.parent() {
            places.push(dir.join("model_list.json"));
            if let Some(prefix) = dir.parent() {
                places.push(prefix.join("share").join("flm").join("model_list.json"));
            }
        }
    }
    places.into_iter().find(|p| p.is_file())
}

fn read_list(path: &Path) -> Result<Value, String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    if len > MAX_LIST_BYTES {
        return Err(format!(
            "{} is {len} bytes, more than a model list's {MAX_LIST_BYTES}",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a model list: {e}", path.display()))?;
    if !value.get("models").is_some_and(Value::is_object) {
        return Err(format!(
            "{} is not a model list: it has no \"models\" object",
            path.display()
        ));
    }
    Ok(value)
}

fn whisper_entry(list: &Value) -> Option<&Value> {
    list.get("models")?.get(FAMILY)?.get(SIZE)
}

/// The model list FastFlowLM started with `--asr 1` should read: `hearth_registry` itself when
/// it lists `whisper-v3:turbo`; else one written in `state_dir` ([`SPEECH_REGISTRY`]) with
/// FastFlowLM's own Whisper entry (from the list beside `program`) pointing at its folder under
/// `flm_models_dir`, all of whose files must be there.
pub fn registry_for_asr(
    program: &Path,
    hearth_registry: &Path,
    state_dir: &Path,
    flm_models_dir: Option<&Path>,
) -> Result<PathBuf, NpuError> {
    let bad = |detail: String| NpuError::WhisperMissing { detail };
    // No registry yet (no model installed): Whisper alone, in Hearth's models folder's place.
    let mut hearth = if hearth_registry.exists() {
        read_list(hearth_registry).map_err(bad)?
    } else {
        let models = hearth_registry.with_file_name("models");
        serde_json::json!({ "model_path": models, "models": {} })
    };
    if whisper_entry(&hearth).is_some() {
        return Ok(hearth_registry.to_path_buf());
    }
    let own_path = own_model_list(program).ok_or_else(|| {
        bad(format!(
            "FastFlowLM's own model_list.json was not found beside {} or in its share/flm folder",
            program.display()
        ))
    })?;
    let own = read_list(&own_path).map_err(bad)?;
    let mut entry = whisper_entry(&own)
        .filter(|e| e.is_object())
        .cloned()
        .ok_or_else(|| {
            bad(format!(
                "{} has no {ASR_MODEL}: this FastFlowLM has no Whisper",
                own_path.display()
            ))
        })?;
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && !n.contains(['/', '\\']) && *n != "..")
        .ok_or_else(|| {
            bad(format!(
                "{}'s {ASR_MODEL} entry has no usable folder name",
                own_path.display()
            ))
        })?
        .to_owned();
    let models_dir = flm_models_dir.ok_or_else(|| {
        bad("FastFlowLM's models folder is unknown (neither FLM_MODEL_PATH nor HOME is set)".into())
    })?;
    let sub = own
        .get("model_path")
        .and_then(Value::as_str)
        .unwrap_or("models");
    let folder = models_dir.join(sub).join(&name);
    let files: Vec<&str> = entry
        .get("files")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let missing: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| f.contains(['/', '\\']) || !folder.join(f).is_file())
        .collect();
    if files.is_empty() || !missing.is_empty() {
        return Err(bad(format!(
            "it is not downloaded in {} (missing: {}); run `flm pull {ASR_MODEL}` once",
            folder.display(),
            if missing.is_empty() {
                "its list of files".to_string()
            } else {
                missing.join(", ")
            }
        )));
    }
    entry["name"] = Value::String(folder.to_string_lossy().into_owned());
    hearth["models"][FAMILY] = serde_json::json!({ SIZE: entry });
    write_private(state_dir, &hearth).map_err(|e| NpuError::Log {
        path: state_dir.join(SPEECH_REGISTRY),
        detail: e.to_string(),
    })
}

/// Writes `list` to `<state_dir>/`[`SPEECH_REGISTRY`] (0600, replaced whole).
fn write_private(state_dir: &Path, list: &Value) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(state_dir)?;
    let path = state_dir.join(SPEECH_REGISTRY);
    let tmp = state_dir.join(format!("{SPEECH_REGISTRY}.tmp"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(list.to_string().as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(dir: &Path, with_files: bool) -> (PathBuf, PathBuf, PathBuf) {
        let bin = dir.join("env/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let program = bin.join("flm");
        std::fs::write(&program, "").unwrap();
        let own = serde_json::json!({"model_path": "models", "models": {"whisper-v3": {"turbo": {
            "name": "Whisper-V3-Turbo-NPU2", "files": ["config.json", "model.q4nx"],
            "details": {"family": "whisper-v3"}}}}});
        std::fs::write(bin.join("model_list.json"), own.to_string()).unwrap();
        let hearth = dir.join("data/model_list.json");
        std::fs::create_dir_all(hearth.parent().unwrap()).unwrap();
        std::fs::write(
            &hearth,
            r#"{"model_path": "/m", "models": {"demo": {"5m": {"name": "Demo"}}}}"#,
        )
        .unwrap();
        let flm_home = dir.join("flm-home");
        let folder = flm_home.join("models/Whisper-V3-Turbo-NPU2");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("config.json"), "{}").unwrap();
        if with_files {
            std::fs::write(folder.join("model.q4nx"), "").unwrap();
        }
        (program, hearth, flm_home)
    }

    #[test]
    fn whisper_is_added_with_its_absolute_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let (program, hearth, flm_home) = setup(tmp.path(), true);
        let state = tmp.path().join("state");
        let path = registry_for_asr(&program, &hearth, &state, Some(&flm_home)).unwrap();
        assert_eq!(path, state.join(SPEECH_REGISTRY));
        let list = read_list(&path).unwrap();
        assert_eq!(list["models"]["demo"]["5m"]["name"], "Demo");
        assert_eq!(
            list["models"]["whisper-v3"]["turbo"]["name"],
            flm_home
                .join("models/Whisper-V3-Turbo-NPU2")
                .to_string_lossy()
                .as_ref()
        );
        // No registry yet: Whisper alone.
        let none = registry_for_asr(
            &program,
            &tmp.path().join("x/model_list.json"),
            &state,
            Some(&flm_home),
        );
        let list = read_list(&none.unwrap()).unwrap();
        assert_eq!(list["models"].as_object().unwrap().len(), 1);
        // A registry that has its own Whisper is used as it is.
        let again = registry_for_asr(&program, &path, &state, None).unwrap();
        assert_eq!(again, path);
    }

    #[test]
    fn a_whisper_not_downloaded_or_a_broken_list_is_said_in_words() {
        let tmp = tempfile::tempdir().unwrap();
        let (program, hearth, flm_home) = setup(tmp.path(), false);
        let state = tmp.path().join("state");
        let err = registry_for_asr(&program, &hearth, &state, Some(&flm_home)).unwrap_err();
        let words = err.to_string();
        assert!(
            words.contains("model.q4nx") && words.contains("flm pull whisper-v3:turbo"),
            "{words}"
        );
        std::fs::write(program.parent().unwrap().join("model_list.json"), "{\"mod").unwrap();
        let err = registry_for_asr(&program, &hearth, &state, Some(&flm_home)).unwrap_err();
        assert!(err.to_string().contains("not a model list"), "{err}");
        std::fs::write(&hearth, "[]").unwrap();
        let err = registry_for_asr(&program, &hearth, &state, Some(&flm_home)).unwrap_err();
        assert!(err.to_string().contains("no \"models\""), "{err}");
    }
}
