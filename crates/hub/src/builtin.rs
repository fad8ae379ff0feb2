//! The bundled demo model: a tiny model shipped with Hearth so it answers on first start, listed
//! in the store as built in. One finder for the CLI and the app.

use std::path::{Path, PathBuf};

/// The demo model's name in the store.
pub const DEMO_MODEL_NAME: &str = "demo";

/// Where the demo model is, first match wins: `override_dir` (`HEARTH_DEMO_MODEL`, read by the
/// caller), the app's resource folder (`<resources>/models/demo`), next to an installed `hearth`
/// binary (`<exe>/../share/hearth/models/demo`), or the source tree of a development build.
pub fn find_demo_model(
    override_dir: Option<PathBuf>,
    resource_dir: Option<&Path>,
) -> Option<PathBuf> {
    let is_model = |dir: &PathBuf| dir.join("config.json").is_file();
    if let Some(dir) = override_dir {
        return is_model(&dir).then(|| dir.canonicalize().unwrap_or(dir));
    }
    let installed = std::env::current_exe().ok().and_then(|exe| {
        exe.parent()?
            .parent()
            .map(|p| p.join("share/hearth/models").join(DEMO_MODEL_NAME))
    });
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(DEMO_MODEL_NAME);
    resource_dir
        .map(|r| r.join("models").join(DEMO_MODEL_NAME))
        .into_iter()
        .chain(installed)
        .chain([source_tree])
        .find(is_model)
        .map(|dir| dir.canonicalize().unwrap_or(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_override_without_a_model_finds_nothing() {
        let dir = std::env::temp_dir().join(format!("hearth-demo-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(find_demo_model(Some(dir.clone()), None), None);
        std::fs::write(dir.join("config.json"), "{}").unwrap();
        let found = find_demo_model(Some(dir.clone()), None);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, Some(dir.canonicalize().unwrap_or(dir)));
    }

    #[test]
    fn the_source_tree_demo_is_found_in_a_development_build() {
        let found = find_demo_model(None, None).expect("models/demo is in the repository");
        assert!(found.ends_with("models/demo"), "{}", found.display());
    }
}
