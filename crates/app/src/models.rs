//! The models Hearth can open: the registry's (through [`Home::store`], the same list the
//! Models view and the CLI use) and the built-in one, each with where it can run here.

use std::path::PathBuf;

use hearth_chat::{Availability, BackendKind};
use hearth_hub::{BuiltinKind, BuiltinModel, InstalledModel};
use serde::Serialize;

use crate::error::{Error, ErrorCode, Result};
use crate::fidelity::{self, SelftestSummary};
use crate::home::Home;

/// The weights files whose sha256 names a model's weights, in the order they are looked up.
pub(crate) const WEIGHTS_FILES: [&str; 2] = ["model.q4nx", "model.safetensors"];

/// sha256 of an installed model's weights, as the registry recorded it at install (None when
/// it has no record, e.g. the built-in model).
pub fn weights_sha256(installed: &InstalledModel) -> Option<String> {
    WEIGHTS_FILES
        .iter()
        .find_map(|f| installed.files.get(*f))
        .map(|record| record.sha256.clone())
}

/// A model Hearth can open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LocalModel {
    /// Its name in the registry.
    pub name: String,
    /// Its folder.
    pub path: PathBuf,
    /// Which model came with Hearth, when this is it (None for a model the user installed).
    pub builtin: Option<BuiltinKind>,
    /// The model Hearth opens at start.
    pub is_default: bool,
    /// sha256 of its weights from the registry, or for the built-in model from its folder's
    /// record (None when it has none).
    #[serde(skip)]
    pub sha256: Option<String>,
    /// Where it can run on this computer: Hearth's engine on the processor (every local
    /// model; unusable only for a linked GGUF file that was moved, changed or deleted, with
    /// the plain words of [`LocalModel::unavailable`]), then the NPU through FastFlowLM,
    /// usable or with the reason why not, and seeing pictures where the registry's `vlm` says.
    pub backends: Vec<Availability>,
    /// How the NPU's answers compared with the processor's, once the self-test has run.
    pub selftest: Option<SelftestSummary>,
}

impl LocalModel {
    /// Whether it can run on the NPU now.
    pub fn runs_on_npu(&self) -> bool {
        self.backends
            .iter()
            .any(|b| b.kind == BackendKind::Npu && b.usable)
    }

    /// Why it cannot be opened at all (None when it can): its GGUF file, linked where it lay,
    /// was moved, changed or deleted since it was added ("… was moved or changed since you
    /// added it: find it, or remove it").
    pub fn unavailable(&self) -> Option<&str> {
        self.backends
            .iter()
            .find(|b| b.kind == BackendKind::Cpu && !b.usable)
            .and_then(|b| b.reason.as_deref())
    }

    /// Why it cannot run on the NPU (None when it can).
    pub fn npu_reason(&self) -> Option<&str> {
        self.backends
            .iter()
            .find(|b| b.kind == BackendKind::Npu)
            .and_then(|b| b.reason.as_deref())
    }

    /// A model folder given by its path, outside the registry (`hearth run --model DIR`): named
    /// after the folder, and run on the processor only, since FastFlowLM runs only the models
    /// the registry lists.
    pub fn folder(path: PathBuf) -> Self {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        LocalModel {
            name,
            path,
            builtin: None,
            is_default: false,
            sha256: None,
            backends: vec![Availability::usable(BackendKind::Cpu)],
            selftest: None,
        }
    }

    /// sha256 of the weights: the registry's record, or for a built-in model without one (the
    /// demo, a few MB) the hash of its `model.q4nx`, computed now.
    pub fn weights_sha256(&self) -> Option<String> {
        self.sha256.clone().or_else(|| {
            self.builtin
                .is_some()
                .then(|| hearth_hub::sha256_file(&self.path.join(WEIGHTS_FILES[0])).ok())
                .flatten()
                .map(|record| record.sha256)
        })
    }
}

/// The built-in model: it runs on the processor only (FastFlowLM runs registered models).
fn builtin_entry(model: &BuiltinModel) -> LocalModel {
    LocalModel {
        name: model.name().into(),
        path: model.folder.clone(),
        builtin: Some(model.kind),
        is_default: false,
        sha256: model.sha256.clone(),
        backends: vec![
            Availability::usable(BackendKind::Cpu),
            Availability::unusable(
                BackendKind::Npu,
                "the built-in model runs on the processor only: FastFlowLM runs downloaded models",
            ),
        ],
        selftest: None,
    }
}

/// Registered models (the default first, then as the registry lists them), then the built-in
/// model. A registry that cannot be read lists only the built-in one, and the reason is logged.
/// Where each can run on the NPU is FastFlowLM's verdict, known issues included
/// (`hearth_backends::npu::registry_availabilities`).
pub fn local_models(home: &Home) -> Vec<LocalModel> {
    let store = home.store();
    let installed = match store.list() {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!("models: the registry cannot be read: {error}");
            return home.builtin.iter().map(builtin_entry).collect();
        }
    };
    // Only a model that chats (not one for searching files, ordering passages or speech).
    let installed: Vec<_> = installed.into_iter().filter(|m| m.is_chat()).collect();
    // FastFlowLM is asked about the models it could run: not a GGUF file linked where it lies.
    let registered: Vec<&str> = installed
        .iter()
        .filter(|m| !m.builtin && m.linked.is_none())
        .map(|m| m.name.as_str())
        .collect();
    let mut npu = if registered.is_empty() {
        Vec::new()
    } else {
        hearth_backends::npu::registry_availabilities(&store.registry_path(), &registered)
    }
    .into_iter();
    let mut models: Vec<LocalModel> = installed
        .into_iter()
        .map(|m| {
            // The store lists a built-in model only when `home` has one.
            if let Some(builtin) = home.builtin.as_ref().filter(|_| m.builtin) {
                return LocalModel {
                    is_default: m.is_default,
                    ..builtin_entry(builtin)
                };
            }
            let sha256 = weights_sha256(&m);
            let (cpu, npu) = match m.unavailable() {
                Some(reason) => (
                    Availability::unusable(BackendKind::Cpu, reason.clone()),
                    Availability::unusable(BackendKind::Npu, reason),
                ),
                None if m.linked.is_some() => (
                    Availability::usable(BackendKind::Cpu),
                    Availability::unusable(BackendKind::Npu, LINKED_NPU_REASON),
                ),
                // FastFlowLM's vision mark, said whether or not FastFlowLM is installed.
                None => (
                    Availability::usable(BackendKind::Cpu),
                    npu.next()
                        .expect("one availability per registered model")
                        .seeing(m.sees_pictures),
                ),
            };
            let selftest = npu
                .usable
                .then(|| fidelity::load(&home.state_dir, &m.name, sha256.as_deref()))
                .flatten()
                .map(|saved| saved.summary());
            LocalModel {
                sha256,
                name: m.name,
                path: m.folder,
                builtin: None,
                is_default: m.is_default,
                backends: vec![cpu, npu],
                selftest,
            }
        })
        .collect();
    // The built-in model last: a downloaded model is the better start.
    models.sort_by_key(|m| (!m.is_default, m.builtin.is_some()));
    models
}

/// Why a linked GGUF file does not run on the NPU: FastFlowLM runs its own Q4NX files.
const LINKED_NPU_REASON: &str = "it is a GGUF file Hearth reads where it lies, on the processor; \
    FastFlowLM runs models on the NPU from its own Q4NX files (download the model's NPU version \
    from the catalog for the NPU)";

/// The local model called `name` (the registry's, or the built-in one). A linked GGUF file
/// that was moved, changed or deleted is refused in plain words (what to do included), before
/// anything tries to read it.
pub fn local_model(home: &Home, name: &str) -> Result<LocalModel> {
    let model = local_models(home)
        .into_iter()
        .find(|m| m.name == name)
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!("There is no model called \"{name}\" on this computer. Open Models to see which ones are, or `hearth list`."),
            )
        })?;
    match model.unavailable() {
        Some(reason) => Err(Error::new(ErrorCode::Model, reason.to_string())
            .detail("linked_gone", &[("name", model.name.clone())])),
        None => Ok(model),
    }
}

/// The model to open at start: the registry's default, else the first registered one, else the
/// built-in model; a linked model whose file is gone is passed over while another can open.
pub fn pick_start_model(models: &[LocalModel]) -> Option<LocalModel> {
    let opens = |m: &&LocalModel| m.unavailable().is_none();
    models
        .iter()
        .filter(opens)
        .find(|m| m.is_default)
        .or_else(|| models.iter().find(opens))
        .or_else(|| models.first())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_models_come_before_the_demo_and_unregistered_folders_are_not_models() {
        let dir = tempfile::tempdir().unwrap();
        let demo = dir.path().join("demo-src");
        std::fs::create_dir_all(&demo).unwrap();
        std::fs::write(demo.join("config.json"), "{}").unwrap();
        let home = Home {
            data_dir: dir.path().join("data"),
            config_dir: dir.path().join("config"),
            state_dir: dir.path().join("state"),
            builtin: Some(BuiltinModel {
                kind: BuiltinKind::Demo,
                folder: demo,
                sha256: None,
            }),
            system_root: PathBuf::from("/"),
        };
        let models = local_models(&home);
        assert_eq!(models.len(), 1, "only the demo when nothing is installed");
        assert_eq!(models[0].builtin, Some(BuiltinKind::Demo));
        // A folder under models/ that the registry does not name is not a model (the store's
        // rule: it is a leftover), even with a config.json.
        let stray = home.data_dir.join("models/half-copied");
        std::fs::create_dir_all(&stray).unwrap();
        std::fs::write(stray.join("config.json"), "{}").unwrap();
        let models = local_models(&home);
        assert_eq!(
            models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["demo"]
        );
        assert_eq!(pick_start_model(&models).unwrap().name, "demo");
        assert_eq!(
            local_model(&home, "gone").unwrap_err().code,
            ErrorCode::NotFound
        );
    }

    /// A GGUF file linked where it lay and then moved away (issue 49): listed, with the plain
    /// words on the processor and the NPU; opening it says the same words, never a crash; the
    /// start passes over it; found again, it opens.
    #[test]
    fn a_linked_model_whose_file_moved_is_listed_unavailable_with_plain_words() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/gguf/tiny-llama3-q8_0.gguf");
        let file = dir.path().join("tiny.gguf");
        std::fs::copy(&fixture, &file).unwrap();
        let home = Home {
            data_dir: dir.path().join("data"),
            config_dir: dir.path().join("config"),
            state_dir: dir.path().join("state"),
            builtin: None,
            system_root: PathBuf::from("/"),
        };
        let store = home.store();
        let options = hearth_hub::GgufImportOptions {
            name: Some("tiny".into()),
            threads: None,
        };
        store.link_gguf(&file, &options, &mut |_| {}).unwrap();
        let model = local_model(&home, "tiny").expect("opens while the file is there");
        assert_eq!(model.unavailable(), None);
        assert!(!model.runs_on_npu());
        assert!(
            model.npu_reason().unwrap().contains("GGUF file"),
            "{:?}",
            model.npu_reason()
        );

        let moved = dir.path().join("moved.gguf");
        std::fs::rename(&file, &moved).unwrap();
        let listed = local_models(&home);
        assert_eq!(listed.len(), 1, "still listed");
        let words = listed[0].unavailable().expect("unavailable").to_string();
        assert!(
            words.ends_with("was moved or changed since you added it: find it, or remove it"),
            "{words}"
        );
        assert_eq!(listed[0].npu_reason(), Some(words.as_str()));
        let error = local_model(&home, "tiny").unwrap_err();
        assert_eq!(error.code, ErrorCode::Model);
        assert_eq!(error.message, words);
        assert_eq!(error.detail.as_deref(), Some("linked_gone"));
        // Nothing else to open: the start still picks it, and its load says the same words.
        assert_eq!(pick_start_model(&listed).unwrap().name, "tiny");

        store.relink("tiny", &moved).unwrap();
        assert_eq!(local_model(&home, "tiny").unwrap().unavailable(), None);
    }

    /// FastFlowLM's `vlm` mark in the registry says a model sees pictures on the NPU, read from
    /// the file whether or not FastFlowLM is here (so the picker and the model's card say it
    /// before it is opened); the processor reads text only, and a model without the mark sees
    /// nothing anywhere.
    #[test]
    fn the_registrys_vlm_mark_makes_the_npu_choice_see_pictures() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            data_dir: dir.path().join("data"),
            config_dir: dir.path().join("config"),
            state_dir: dir.path().join("state"),
            builtin: None,
            system_root: PathBuf::from("/"),
        };
        let store = home.store();
        let entry = |name: &str, family: &str, vlm: Option<bool>| {
            let mut entry = serde_json::json!({
                "name": name, "files": ["model.q4nx"], "default_context_length": 4096,
                "details": {"family": family}
            });
            if let Some(vlm) = vlm {
                entry["vlm"] = vlm.into();
            }
            entry
        };
        let registry = serde_json::json!({
            "model_path": store.models_dir(),
            "models": {
                "gemma3": {"4b": entry("Gemma3-4B-NPU2", "gemma3", Some(true))},
                "lfm2": {"1.2b": entry("LFM2-1.2B-NPU2", "lfm2", Some(false))},
                "qwen3": {"1.7b": entry("Qwen3-1.7B-NPU2", "qwen3", None)}
            }
        });
        std::fs::create_dir_all(&home.data_dir).unwrap();
        std::fs::write(store.registry_path(), registry.to_string()).unwrap();

        let models = local_models(&home);
        let sees = |name: &str, kind: BackendKind| {
            let model = models.iter().find(|m| m.name == name).expect(name);
            let backend = model.backends.iter().find(|b| b.kind == kind).unwrap();
            backend.sees_pictures
        };
        assert!(sees("Gemma3-4B-NPU2", BackendKind::Npu));
        assert!(
            !sees("Gemma3-4B-NPU2", BackendKind::Cpu),
            "the engine reads text"
        );
        for name in ["LFM2-1.2B-NPU2", "Qwen3-1.7B-NPU2"] {
            assert!(!sees(name, BackendKind::Npu), "{name}");
            assert!(!sees(name, BackendKind::Cpu), "{name}");
        }
        // The UI reads it as each backend's `sees_pictures`.
        let json = serde_json::to_value(&models).unwrap();
        assert!(
            json.to_string().contains("\"sees_pictures\":true"),
            "{json}"
        );
    }

    #[test]
    fn the_start_passes_over_a_linked_model_whose_file_is_gone() {
        let usable = |name: &str, is_default: bool| LocalModel {
            is_default,
            ..LocalModel::folder(PathBuf::from(name))
        };
        let mut gone = usable("gone", true);
        gone.backends = vec![Availability::unusable(
            BackendKind::Cpu,
            "x was moved or changed since you added it: find it, or remove it",
        )];
        let models = [gone, usable("other", false)];
        assert_eq!(pick_start_model(&models).unwrap().name, "other");
    }
}
