//! Where Hearth keeps things on this machine, and which models it can open.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// Folder name of the bundled demo model.
pub const DEMO_MODEL_NAME: &str = "demo";

/// The places the desktop app reads and writes.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `$XDG_DATA_HOME/hearth`: models, conversations, exports.
    pub data_dir: PathBuf,
    /// The bundled demo model folder, if found.
    pub demo_model: Option<PathBuf>,
}

impl Paths {
    /// Paths for this user (XDG base directories) with the given demo model folder.
    pub fn for_user(demo_model: Option<PathBuf>) -> Result<Self, String> {
        let base = directories::BaseDirs::new().ok_or_else(|| {
            "cannot find your home folder (HOME is not set), so Hearth has nowhere to keep its data".to_string()
        })?;
        Ok(Self {
            data_dir: base.data_dir().join("hearth"),
            demo_model,
        })
    }

    /// Downloaded models: `<data>/models/<name>/`.
    pub fn models_dir(&self) -> PathBuf {
        self.data_dir.join("models")
    }

    /// The conversation database.
    pub fn conversations_db(&self) -> PathBuf {
        self.data_dir.join("conversations.db")
    }

    /// Where exports go: the user's Downloads folder, else `<data>/exports`.
    pub fn exports_dir(&self) -> PathBuf {
        directories::UserDirs::new()
            .and_then(|u| u.download_dir().map(Path::to_path_buf))
            .filter(|d| d.is_dir())
            .unwrap_or_else(|| self.data_dir.join("exports"))
    }
}

/// The demo model folder: `HEARTH_DEMO_MODEL` if set (for developers), else bundled as a
/// resource in an installed app, else the repository's `models/demo` in a source tree.
pub fn find_demo_model(resource_dir: Option<&Path>) -> Option<PathBuf> {
    let candidates = std::env::var_os("HEARTH_DEMO_MODEL")
        .map(PathBuf::from)
        .into_iter()
        .chain(resource_dir.map(|r| r.join("models").join(DEMO_MODEL_NAME)))
        .chain(std::iter::once(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../models")
                .join(DEMO_MODEL_NAME),
        ));
    for candidate in candidates {
        if candidate.join("config.json").is_file() {
            return Some(candidate.canonicalize().unwrap_or(candidate));
        }
    }
    None
}

/// A model folder Hearth can open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LocalModel {
    /// Folder name, used as the model's name.
    pub name: String,
    /// The folder.
    pub path: PathBuf,
    /// The bundled demo model.
    pub is_demo: bool,
}

/// Downloaded models (newest first), then the demo model.
pub fn local_models(paths: &Paths) -> Vec<LocalModel> {
    let mut found: Vec<(std::time::SystemTime, LocalModel)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(paths.models_dir()) {
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.join("config.json").is_file() {
                continue;
            }
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            let name = entry.file_name().to_string_lossy().into_owned();
            found.push((
                modified,
                LocalModel {
                    name,
                    path,
                    is_demo: false,
                },
            ));
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let mut models: Vec<LocalModel> = found.into_iter().map(|(_, m)| m).collect();
    if let Some(demo) = &paths.demo_model {
        if !models.iter().any(|m| m.name == DEMO_MODEL_NAME) {
            models.push(LocalModel {
                name: DEMO_MODEL_NAME.to_string(),
                path: demo.clone(),
                is_demo: true,
            });
        }
    }
    models
}

/// The model to open at start: the preferred one if present, else the newest download, else the demo.
pub fn pick_start_model(models: &[LocalModel], preferred: Option<&str>) -> Option<LocalModel> {
    preferred
        .and_then(|p| models.iter().find(|m| m.name == p))
        .or_else(|| models.first())
        .cloned()
}

/// The CPU's model name, for showing where a model runs.
pub fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloaded_models_come_before_the_demo() {
        let dir = tempfile::tempdir().unwrap();
        let demo = dir.path().join("demo-src");
        std::fs::create_dir_all(&demo).unwrap();
        let paths = Paths {
            data_dir: dir.path().join("data"),
            demo_model: Some(demo),
        };
        assert_eq!(
            local_models(&paths).len(),
            1,
            "only the demo when nothing is downloaded"
        );
        assert!(local_models(&paths)[0].is_demo);
        let m = paths.models_dir().join("minicpm5-2b");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(m.join("config.json"), "{}").unwrap();
        std::fs::create_dir_all(paths.models_dir().join("half-downloaded")).unwrap();
        let models = local_models(&paths);
        assert_eq!(
            models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["minicpm5-2b", "demo"],
            "folders without config.json are skipped"
        );
        assert_eq!(pick_start_model(&models, None).unwrap().name, "minicpm5-2b");
        assert_eq!(
            pick_start_model(&models, Some("demo")).unwrap().name,
            "demo"
        );
        assert_eq!(
            pick_start_model(&models, Some("gone")).unwrap().name,
            "minicpm5-2b",
            "a missing preferred model falls back"
        );
    }
}
