//! Where Hearth keeps things on this machine: the one place the XDG base directories are
//! resolved (the `directories` crate, which reads `XDG_DATA_HOME`, `XDG_CONFIG_HOME` and
//! `XDG_STATE_HOME` and falls back under `HOME`), and the model store built on them.

use std::path::{Path, PathBuf};

use hearth_hub::{BuiltinModel, Store};

use crate::error::{Error, ErrorCode, Result};

/// The folders Hearth reads and writes, and the model that came with it.
#[derive(Debug, Clone)]
pub struct Home {
    /// `$XDG_DATA_HOME/hearth`: models, the registry, conversations, exports.
    pub data_dir: PathBuf,
    /// `$XDG_CONFIG_HOME/hearth`: the remote server's settings.
    pub config_dir: PathBuf,
    /// `$XDG_STATE_HOME/hearth`: FastFlowLM's log, the NPU self-test results.
    pub state_dir: PathBuf,
    /// The model that came with Hearth (the starter assistant or the demo), if found.
    pub builtin: Option<BuiltinModel>,
    /// Where the NPU and power sensors are read: `/`, or a fixture tree from
    /// `tests/fixtures/npu/` (`HEARTH_NPU_ROOT`) to see Hearth as on a Ryzen AI laptop.
    pub system_root: PathBuf,
}

impl Home {
    /// This user's folders (XDG base directories) with the given built-in model.
    pub fn for_user(builtin: Option<BuiltinModel>) -> Result<Self> {
        let base = directories::BaseDirs::new().ok_or_else(|| {
            Error::new(
                ErrorCode::Storage,
                "cannot find your home folder (HOME is not set), so Hearth has nowhere to keep its data. Set HOME or XDG_DATA_HOME",
            )
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

    /// The document library: the user's files' text, passages and vectors.
    pub fn documents_db(&self) -> PathBuf {
        self.data_dir.join("documents.db")
    }

    /// The model registry (FastFlowLM's schema, so `flm` reads it through `FLM_CONFIG_PATH`).
    pub fn registry(&self) -> PathBuf {
        self.store().registry_path()
    }

    /// The model store (registry and models folder), showing the built-in model. Every model
    /// is checked before it is registered: a chat template that would hang or exhaust memory
    /// is refused at download and import (`hearth_backends::check_chat_template`).
    pub fn store(&self) -> Store {
        let store = Store::at(self.data_dir.clone()).with_model_check(|dir, name| {
            hearth_backends::check_chat_template(dir, name).map_err(|e| e.to_string())
        });
        match &self.builtin {
            Some(model) => store.with_builtin(model.name(), model.folder.clone()),
            None => store,
        }
    }

    /// Where a save dialog opens first: the user's Documents folder (XDG user dirs), else the
    /// home folder; None without a home folder.
    pub fn documents_dir(&self) -> Option<PathBuf> {
        let user = directories::UserDirs::new()?;
        let documents = user.document_dir().filter(|d| d.is_dir());
        Some(documents.unwrap_or(user.home_dir()).to_path_buf())
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
