//! `hearth doctor` looks for FastFlowLM first in the Python environment chosen in the desktop's
//! Settings › NPU (read from the desktop's settings file) or given with `--flm-env DIR`, and
//! its report names where FastFlowLM was found (or why not: a folder without `bin/flm`).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A stand-in `flm` in `<env>/bin/` (only where it is matters here).
fn python_env_with_flm(env: &Path) {
    let bin = env.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let flm = bin.join("flm");
    std::fs::write(
        &flm,
        "#!/bin/sh\necho '{ \"version\": \"1.0.14\" }'\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn doctor_json(home: &Path, extra: &[&str]) -> serde_json::Value {
    let output = common::hearth(home)
        .args(["doctor", "--json"])
        .args(extra)
        .env_remove("HEARTH_FLM")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn the_settings_choice_and_flm_env_are_where_flm_is_found() {
    let home = tempfile::tempdir().unwrap();
    let env = home.path().join("venv");
    python_env_with_flm(&env);
    let store = home.path().join("data/ai.hearth.desktop");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join("settings.json"),
        serde_json::json!({ "settings": { "flm_python_env": env } }).to_string(),
    )
    .unwrap();
    let report = doctor_json(home.path(), &[]);
    let found = &report["fastflowlm_found"];
    assert_eq!(
        found["path"],
        env.join("bin/flm").to_str().unwrap(),
        "{found}"
    );
    assert!(
        found["place"]
            .as_str()
            .unwrap()
            .contains("chosen in Settings"),
        "{found}"
    );

    // --flm-env wins over Settings; a folder without bin/flm is said plainly.
    let empty = home.path().join("empty-venv");
    std::fs::create_dir_all(&empty).unwrap();
    let report = doctor_json(home.path(), &["--flm-env", empty.to_str().unwrap()]);
    let found = &report["fastflowlm_found"];
    assert!(found["path"].is_null(), "{found}");
    assert!(
        found["place"]
            .as_str()
            .unwrap()
            .contains("holds no FastFlowLM"),
        "{found}"
    );
    assert_eq!(found["python_env_chosen"], empty.to_str().unwrap());
}
