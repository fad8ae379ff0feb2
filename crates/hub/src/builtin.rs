//! The model that comes with Hearth, so that it answers on first start with nothing downloaded.
//! The app and the .deb bundle the starter assistant, SmolLM2-135M-Instruct, which
//! `scripts/starter-model.sh` makes from a published GGUF; a source tree, or a build made
//! without it, has the tiny demo model that the tests use. One finder for the CLI and the app.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The demo model's name in the store.
pub const DEMO_MODEL_NAME: &str = "demo";
/// The starter assistant's name in the store.
pub const STARTER_MODEL_NAME: &str = "smollm2-135m";
/// The file `scripts/starter-model.sh` leaves in the starter's folder: how the finder knows it.
pub const STARTER_MARKER: &str = "hearth-starter.txt";
/// The weights' sha256 as `sha256sum` writes it, recorded when the folder was made, so that
/// the app need not hash the weights at every start (a built-in model has no registry entry).
pub const WEIGHTS_SHA256_FILE: &str = "model.q4nx.sha256";

/// Which model came with Hearth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum BuiltinKind {
    /// SmolLM2-135M-Instruct: a real, very small assistant (it makes many mistakes).
    Starter,
    /// The 5 M-parameter toy trained on the Rust books: it only shows how the app works.
    Demo,
}

/// The built-in model: what it is and where its folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinModel {
    pub kind: BuiltinKind,
    pub folder: PathBuf,
    /// sha256 of `model.q4nx` from [`WEIGHTS_SHA256_FILE`], when the folder records it.
    pub sha256: Option<String>,
}

impl BuiltinModel {
    /// Its name in the store.
    pub fn name(&self) -> &'static str {
        match self.kind {
            BuiltinKind::Starter => STARTER_MODEL_NAME,
            BuiltinKind::Demo => DEMO_MODEL_NAME,
        }
    }

    /// A model folder, known as the starter by its marker file.
    fn at(folder: PathBuf) -> BuiltinModel {
        let kind = if folder.join(STARTER_MARKER).is_file() {
            BuiltinKind::Starter
        } else {
            BuiltinKind::Demo
        };
        let sha256 = recorded_sha256(&folder.join(WEIGHTS_SHA256_FILE));
        let folder = folder.canonicalize().unwrap_or(folder);
        BuiltinModel {
            kind,
            folder,
            sha256,
        }
    }
}

/// The hash a `sha256sum` line holds (`<64 hex digits>  model.q4nx`), if the file is one.
fn recorded_sha256(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let hash = text.split_whitespace().next()?;
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hash.to_ascii_lowercase())
}

/// The built-in model, first match wins: `override_dir` (`HEARTH_DEMO_MODEL`, read by the
/// caller), the app's resource folder (`<resources>/models/starter`, then `models/demo`), next to
/// an installed `hearth` binary (`<exe>/../share/hearth/models/…`), or the source tree's demo in
/// a development build (never a starter there, so tests always meet the same model).
pub fn find_builtin_model(
    override_dir: Option<PathBuf>,
    resource_dir: Option<&Path>,
) -> Option<BuiltinModel> {
    let is_model = |dir: &PathBuf| dir.join("config.json").is_file();
    if let Some(dir) = override_dir {
        return is_model(&dir).then(|| BuiltinModel::at(dir));
    }
    let bundled = |root: PathBuf| ["starter", DEMO_MODEL_NAME].map(|name| root.join(name));
    let installed = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("share/hearth/models")));
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(DEMO_MODEL_NAME);
    resource_dir
        .map(|r| r.join("models"))
        .into_iter()
        .chain(installed)
        .flat_map(bundled)
        .chain([source_tree])
        .find(is_model)
        .map(BuiltinModel::at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_without_a_model_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_builtin_model(Some(dir.path().into()), None), None);
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let found = find_builtin_model(Some(dir.path().into()), None).unwrap();
        assert_eq!(found.kind, BuiltinKind::Demo);
        assert_eq!(found.name(), DEMO_MODEL_NAME);
    }

    #[test]
    fn the_source_tree_demo_is_found_in_a_development_build() {
        let found = find_builtin_model(None, None).expect("models/demo is in the repository");
        assert!(found.folder.ends_with("models/demo"), "{found:?}");
        assert_eq!(found.kind, BuiltinKind::Demo);
    }

    #[test]
    fn a_bundled_starter_comes_before_the_demo() {
        let resources = tempfile::tempdir().unwrap();
        for name in ["starter", "demo"] {
            let dir = resources.path().join("models").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("config.json"), "{}").unwrap();
        }
        let starter = resources.path().join("models/starter");
        std::fs::write(starter.join(STARTER_MARKER), "SmolLM2-135M-Instruct").unwrap();
        let hash = "ab".repeat(32);
        std::fs::write(
            starter.join(WEIGHTS_SHA256_FILE),
            format!("{hash}  model.q4nx\n"),
        )
        .unwrap();
        let found = find_builtin_model(None, Some(resources.path())).unwrap();
        assert_eq!(found.kind, BuiltinKind::Starter);
        assert_eq!(found.name(), STARTER_MODEL_NAME);
        assert!(found.folder.ends_with("models/starter"), "{found:?}");
        assert_eq!(found.sha256, Some(hash));
    }

    #[test]
    fn a_recorded_hash_that_is_not_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(WEIGHTS_SHA256_FILE);
        for text in [
            "",
            "not a hash  model.q4nx",
            &"g".repeat(64),
            &"a".repeat(63),
        ] {
            std::fs::write(&file, text).unwrap();
            assert_eq!(recorded_sha256(&file), None, "{text:?}");
        }
    }
}
