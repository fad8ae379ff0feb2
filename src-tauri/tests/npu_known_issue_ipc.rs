//! A model FastFlowLM is known to fail with (a MiniCPM5 pack, ROCm/FastFlowLM issue 712) through
//! Tauri's real IPC layer, with FastFlowLM played by the imitation in `tests/flm-imitation`
//! (built by `cargo test --workspace` as `target/<profile>/flm`, playing 1.0.6): the Models view
//! offers it on the processor with the reason, `select_model` on the NPU refuses it, and
//! "Try on the NPU anyway" (`npuAnyway: true`) loads it there.
//!
//! Its private home has `HEARTH_FLM` and `HEARTH_NPU_ROOT` for the whole process, so it is a test
//! binary of its own, not a module of `tests/desktop/`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{build_app, fixture, invoke, private_home};
use serde_json::json;

const NAME: &str = "MiniCPM5-Demo";

/// The imitation next to this test's binary (`target/<profile>/deps/..`), if it was built.
fn imitation() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let flm = exe.parent()?.parent()?.join("flm");
    flm.is_file().then_some(flm)
}

#[test]
fn a_model_fastflowlm_fails_with_is_offered_on_the_processor_and_can_be_tried_anyway() {
    let Some(flm) = imitation() else {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built; `cargo test --workspace` builds it"
        );
        return;
    };
    let install = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(install.path().join("xclbins").join(NAME)).unwrap();
    let wrapper = install.path().join("flm");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", flm.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    private_home(&[
        ("HEARTH_FLM", wrapper.clone().into()),
        ("HEARTH_NPU_ROOT", fixture("npu/strix-ready").into()),
    ]);
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/demo");
    let app = build_app(tempfile::tempdir().unwrap(), Some(demo.clone()));
    invoke(
        &app,
        "import_model",
        json!({"path": demo.to_str().unwrap(), "name": NAME, "onProgress": "__CHANNEL__:2"}),
    )
    .unwrap();

    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    let entry = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == NAME)
        .unwrap_or_else(|| panic!("{models}"));
    let npu = &entry["backends"][1];
    assert_eq!(npu["usable"], false, "{entry}");
    let reason = npu["reason"].as_str().unwrap();
    assert!(
        reason.contains("runs on the processor here") && reason.contains("issue 712"),
        "{reason}"
    );

    let refused = invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu"}),
    )
    .expect_err("known not to run on the NPU");
    assert!(refused.to_string().contains("issue 712"), "{refused}");

    let status = invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu", "npuAnyway": true}),
    )
    .unwrap();
    assert_eq!(status["backend_kind"], "npu", "{status}");
}
