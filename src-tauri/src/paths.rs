//! Where Hearth keeps things on this machine, and which models it can open: the registry's
//! (`hearth_hub::Store`), the same list the Models view and the CLI use.

use std::path::{Path, PathBuf};

use hearth_chat::{Availability, BackendKind};
use hearth_hub::{BuiltinKind, BuiltinModel, Store};
use serde::Serialize;

use crate::fidelity::{self, SelftestSummary};

/// The places the desktop app reads and writes.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `$XDG_DATA_HOME/hearth`: models, registry, conversations, exports.
    pub data_dir: PathBuf,
    /// `$XDG_CONFIG_HOME/hearth`: the remote server's settings.
    pub config_dir: PathBuf,
    /// `$XDG_STATE_HOME/hearth`: FastFlowLM's log, the NPU self-test results.
    pub state_dir: PathBuf,
    /// The model that came with Hearth (the starter assistant or the demo), if found.
    pub builtin: Option<BuiltinModel>,
    /// Where the NPU and power sensors are read: `/`, or a fixture tree from
    /// `tests/fixtures/npu/` (`HEARTH_NPU_ROOT`) to see the app as on a Ryzen AI laptop.
    pub system_root: PathBuf,
}

impl Paths {
    /// Paths for this user (XDG base directories) with the given built-in model.
    pub fn for_user(builtin: Option<BuiltinModel>) -> Result<Self, String> {
        let base = directories::BaseDirs::new().ok_or_else(|| {
            "cannot find your home folder (HOME is not set), so Hearth has nowhere to keep its data".to_string()
        })?;
        Ok(Self {
            data_dir: base.data_dir().join("hearth"),
            config_dir: base.config_dir().join("hearth"),
            state_dir: base
                .state_dir()
                .unwrap_or_else(|| base.data_dir())
                .join("hearth"),
            builtin,
            system_root: system_root_from_env(),
        })
    }

    /// The conversation database.
    pub fn conversations_db(&self) -> PathBuf {
        self.data_dir.join("conversations.db")
    }

    /// The model store (registry and models folder), showing the built-in model.
    /// Every model is checked before it is registered: a chat template that would hang or
    /// exhaust memory is refused at download and import (`hearth_engine::check_chat_template`).
    pub fn store(&self) -> Store {
        let store = Store::at(self.data_dir.clone()).with_model_check(|dir, name| {
            hearth_engine::check_chat_template(dir, name).map_err(|e| e.to_string())
        });
        match &self.builtin {
            Some(model) => store.with_builtin(model.name(), model.folder.clone()),
            None => store,
        }
    }

    /// Where exports go: the user's Downloads folder, else `<data>/exports`.
    pub fn exports_dir(&self) -> PathBuf {
        directories::UserDirs::new()
            .and_then(|u| u.download_dir().map(Path::to_path_buf))
            .filter(|d| d.is_dir())
            .unwrap_or_else(|| self.data_dir.join("exports"))
    }
}

/// The built-in model: `HEARTH_DEMO_MODEL` if set (for developers and tests), else bundled as a
/// resource (the starter, or the demo), else the repository's `models/demo` in a source tree.
pub fn find_builtin_model(resource_dir: Option<&Path>) -> Option<BuiltinModel> {
    hearth_hub::find_builtin_model(
        std::env::var_os("HEARTH_DEMO_MODEL").map(PathBuf::from),
        resource_dir,
    )
}

/// Where the system is read: `HEARTH_NPU_ROOT`, else `/`.
pub fn system_root_from_env() -> PathBuf {
    std::env::var_os("HEARTH_NPU_ROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// A model Hearth can open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ts_rs::TS)]
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
    /// model), then the NPU through FastFlowLM, usable or with the reason why not.
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

    /// Why it cannot run on the NPU (None when it can).
    pub fn npu_reason(&self) -> Option<&str> {
        self.backends
            .iter()
            .find(|b| b.kind == BackendKind::Npu)
            .and_then(|b| b.reason.as_deref())
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
pub fn local_models(paths: &Paths) -> Vec<LocalModel> {
    let installed = match paths.store().list() {
        Ok(list) => list,
        Err(error) => {
            tracing::warn!("models: the registry cannot be read: {error}");
            return paths.builtin.iter().map(builtin_entry).collect();
        }
    };
    let registered: Vec<&str> = installed
        .iter()
        .filter(|m| !m.builtin)
        .map(|m| m.name.as_str())
        .collect();
    let mut npu = if registered.is_empty() {
        Vec::new()
    } else {
        hearth_backends::npu::registry_availabilities(&paths.store().registry_path(), &registered)
    }
    .into_iter();
    let mut models: Vec<LocalModel> = installed
        .into_iter()
        .map(|m| {
            // The store lists a built-in model only when `paths` has one.
            if let Some(builtin) = paths.builtin.as_ref().filter(|_| m.builtin) {
                return LocalModel {
                    is_default: m.is_default,
                    ..builtin_entry(builtin)
                };
            }
            let sha256 = ["model.q4nx", "model.safetensors"]
                .iter()
                .find_map(|f| m.files.get(*f))
                .map(|r| r.sha256.clone());
            let npu = npu.next().expect("one availability per registered model");
            let selftest = npu
                .usable
                .then(|| fidelity::load(&paths.state_dir, &m.name, sha256.as_deref()))
                .flatten()
                .map(|saved| saved.summary());
            LocalModel {
                sha256,
                name: m.name,
                path: m.folder,
                builtin: None,
                is_default: m.is_default,
                backends: vec![Availability::usable(BackendKind::Cpu), npu],
                selftest,
            }
        })
        .collect();
    // The built-in model last: a downloaded model is the better start.
    models.sort_by_key(|m| (!m.is_default, m.builtin.is_some()));
    models
}

/// The model to open at start: the registry's default, else the first registered one, else the
/// built-in model.
pub fn pick_start_model(models: &[LocalModel]) -> Option<LocalModel> {
    models
        .iter()
        .find(|m| m.is_default)
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
        let paths = Paths {
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
        let models = local_models(&paths);
        assert_eq!(models.len(), 1, "only the demo when nothing is installed");
        assert_eq!(models[0].builtin, Some(BuiltinKind::Demo));
        // A folder under models/ that the registry does not name is not a model (the store's
        // rule: it is a leftover), even with a config.json.
        let stray = paths.data_dir.join("models/half-copied");
        std::fs::create_dir_all(&stray).unwrap();
        std::fs::write(stray.join("config.json"), "{}").unwrap();
        let models = local_models(&paths);
        assert_eq!(
            models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["demo"]
        );
        assert_eq!(pick_start_model(&models).unwrap().name, "demo");
    }
}
