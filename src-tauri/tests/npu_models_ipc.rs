//! Models on the NPU through Tauri's real IPC layer, with FastFlowLM played by the imitation in
//! `tests/flm-imitation` (built by `cargo test --workspace` as `target/<profile>/flm`) on the
//! fixture laptop `tests/fixtures/npu/strix-ready`.
//!
//! `HEARTH_FLM` names one wrapper script for the whole process; the wrapper reads the fault to
//! play from `imitation-fault` next to the registry FastFlowLM is given (`FLM_CONFIG_PATH`), so
//! each test's app has its own FastFlowLM behaviour.
//!
//! Its private home has `HEARTH_FLM` and `HEARTH_NPU_ROOT` for the whole process, so it is a test
//! binary of its own, not a module of `tests/desktop/`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{build_app, fixture, invoke, private_home, TestApp};
use serde_json::{json, Value};

const NAME: &str = "Demo-NPU2";

/// The imitation next to this test's binary (`target/<profile>/deps/..`), if it was built.
fn imitation() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let flm = exe.parent()?.parent()?.join("flm");
    flm.is_file().then_some(flm)
}

/// FastFlowLM's install as the imitation: the wrapper `flm` next to `xclbins/<NAME>/`.
fn install() -> &'static Path {
    static INSTALL: OnceLock<tempfile::TempDir> = OnceLock::new();
    INSTALL
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("xclbins").join(NAME)).unwrap();
            let wrapper = dir.path().join("flm");
            std::fs::write(
                &wrapper,
                format!(
                    "#!/bin/sh\nFLM_IMITATION_FAULT=$(cat \"$(dirname \"$FLM_CONFIG_PATH\")/imitation-fault\" 2>/dev/null)\nexport FLM_IMITATION_FAULT\nexec '{}' \"$@\"\n",
                    imitation().expect("checked by the caller").display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
            dir
        })
        .path()
}

/// One NPU per process (`NpuBackend` lets one FastFlowLM run at a time), so one test at a time.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static NPU: Mutex<()> = Mutex::new(());
    NPU.lock().unwrap_or_else(|e| e.into_inner())
}

/// The app with the demo model bundled and registered as `NAME`, FastFlowLM playing `fault`;
/// None (and a printed reason) when the imitation is not built.
fn app_with_npu(fault: &str) -> Option<TestApp> {
    if imitation().is_none() {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built; `cargo test --workspace` builds it"
        );
        return None;
    }
    private_home(&[
        ("HEARTH_FLM", install().join("flm").into()),
        ("HEARTH_NPU_ROOT", fixture("npu/strix-ready").into()),
    ]);
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/demo");
    let app = build_app(tempfile::tempdir().unwrap(), Some(demo.clone()));
    std::fs::write(app.data_dir().join("imitation-fault"), fault).unwrap();
    invoke(
        &app,
        "import_model",
        json!({"path": demo.to_str().unwrap(), "name": NAME, "onProgress": "__CHANNEL__:2"}),
    )
    .unwrap();
    Some(app)
}

fn model<'a>(models: &'a Value, name: &str) -> &'a Value {
    models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {models}"))
}

/// Sends `text` in a new conversation; returns the conversation after the answer.
fn chat(app: &TestApp, id: &Value, text: &str) -> Value {
    invoke(
        app,
        "start_answer",
        json!({"conversationId": id, "action": {"kind": "send", "content": text}, "onEvent": "__CHANNEL__:9"}),
    )
    .unwrap();
    invoke(app, "get_conversation", json!({"id": id})).unwrap()
}

fn short_conversation(app: &TestApp) -> Value {
    let c = invoke(app, "create_conversation", json!({})).unwrap();
    let mut settings = c["settings"].clone();
    settings["max_tokens"] = json!(12);
    settings["sampling"]["temperature"] = json!(0.0);
    invoke(
        app,
        "update_conversation_settings",
        json!({"id": c["id"], "settings": settings}),
    )
    .unwrap();
    c["id"].clone()
}

#[test]
fn a_model_loads_onto_the_npu_is_self_tested_answers_there_and_compares_with_the_cpu() {
    let _npu = one_at_a_time();
    let Some(app) = app_with_npu("") else { return };
    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    let npu = &model(&models, NAME)["backends"][1];
    assert_eq!(npu["kind"], "npu");
    assert_eq!(npu["usable"], true, "{models}");
    let demo = &model(&models, "demo")["backends"][1];
    assert_eq!(demo["usable"], false);
    assert!(demo["reason"].as_str().unwrap().contains("processor only"));
    assert!(model(&models, NAME)["selftest"].is_null(), "not run yet");

    let status = invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu"}),
    )
    .unwrap();
    assert_eq!(status["backend_kind"], "npu", "{status}");
    assert_eq!(status["device"], "AMD XDNA 2 NPU");

    // Loading ran the self-test once; the imitation runs Hearth's own engine, so it matches.
    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    let selftest = &model(&models, NAME)["selftest"];
    assert_eq!(selftest["identical"], selftest["total"], "{selftest}");
    assert!(selftest["summary"].as_str().unwrap().contains("exactly"));

    let id = short_conversation(&app);
    let c = chat(&app, &id, "What is a crate?");
    let answer = &c["messages"][1];
    assert_eq!(answer["state"], "complete", "{answer}");
    assert_eq!(answer["receipt"]["backend_kind"], "npu", "{answer}");
    assert!(answer["receipt"]["runtime_version"].is_string());
    assert!(
        answer["receipt"]["energy"]["total_joules"]
            .as_f64()
            .unwrap()
            > 0.0,
        "energy read from the fixture laptop's meters: {answer}"
    );

    let both = invoke(
        &app,
        "compare_backends",
        json!({"name": NAME, "prompt": "What is a crate?"}),
    )
    .unwrap();
    assert_eq!(both["npu"]["receipt"]["backend_kind"], "npu", "{both}");
    assert_eq!(both["cpu"]["receipt"]["backend_kind"], "cpu", "{both}");
    assert_eq!(both["texts_agree"], true, "{both}");
    assert!(
        both["npu"]["receipt"]["tokens_per_second"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn the_demo_cannot_be_put_on_the_npu_and_says_why() {
    let _npu = one_at_a_time();
    let Some(app) = app_with_npu("") else { return };
    let error = invoke(
        &app,
        "select_model",
        json!({"name": "demo", "backend": "npu"}),
    )
    .unwrap_err();
    assert_eq!(error["code"], "unsupported");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("runs on the processor"),
        "{error}"
    );
}

#[test]
fn a_wrong_model_from_fastflowlm_is_refused_and_the_answer_is_written_on_the_cpu() {
    let _npu = one_at_a_time();
    let Some(app) = app_with_npu("wrong-model") else {
        return;
    };
    invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu"}),
    )
    .unwrap();
    let id = short_conversation(&app);
    let c = chat(&app, &id, "What is a crate?");
    let answer = &c["messages"][1];
    assert_eq!(answer["state"], "complete", "{answer}");
    assert_eq!(answer["receipt"]["backend_kind"], "cpu", "{answer}");
    assert!(!answer["content"].as_str().unwrap().is_empty());
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(status["model"]["backend_kind"], "cpu", "{status}");
    assert_eq!(status["model"]["name"], NAME);
}

#[test]
fn a_fastflowlm_that_crashes_in_the_self_test_leaves_answers_to_the_cpu() {
    let _npu = one_at_a_time();
    let Some(app) = app_with_npu("crash-mid-stream") else {
        return;
    };
    invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu"}),
    )
    .unwrap();
    let models = invoke(&app, "list_local_models", json!({})).unwrap();
    let selftest = &model(&models, NAME)["selftest"];
    assert_eq!(
        selftest["identical"], 0,
        "every test answer crashed: {selftest}"
    );
    assert!(
        selftest["summary"]
            .as_str()
            .unwrap()
            .contains("could not answer"),
        "{selftest}"
    );
    // FastFlowLM crashed twice in a row during the self-test and is not started again: the
    // first answer is written on the processor.
    let id = short_conversation(&app);
    let c = chat(&app, &id, "What is a crate?");
    let answer = &c["messages"][1];
    assert_eq!(answer["state"], "complete", "{answer}");
    assert_eq!(answer["receipt"]["backend_kind"], "cpu", "{answer}");
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(status["model"]["backend_kind"], "cpu", "{status}");
}

#[test]
fn a_crash_keeps_the_partial_answer_and_a_second_one_moves_the_model_to_the_cpu() {
    let _npu = one_at_a_time();
    let Some(app) = app_with_npu("crash-mid-stream") else {
        return;
    };
    // A self-test result for this FastFlowLM is already kept, so loading does not run it.
    let installed = hearth_hub::Store::at(app.data_dir().to_path_buf())
        .list()
        .unwrap();
    let sha = installed[0].files["model.q4nx"].sha256.clone();
    let saved = hearth_app::fidelity::SavedSelftest {
        runtime_version: "1.0.6".into(),
        report: hearth_backends::selftest::FidelityReport {
            candidate: "npu".into(),
            reference: "cpu".into(),
            prompts: Vec::new(),
        },
    };
    hearth_app::fidelity::save(&app.data_dir().join("state"), NAME, Some(&sha), &saved).unwrap();
    invoke(
        &app,
        "select_model",
        json!({"name": NAME, "backend": "npu"}),
    )
    .unwrap();

    let id = short_conversation(&app);
    let c = chat(&app, &id, "What is a crate?");
    let first = &c["messages"][1];
    assert_eq!(first["state"], "error", "{first}");
    assert!(
        !first["content"].as_str().unwrap().is_empty(),
        "the text before the crash is kept: {first}"
    );
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(
        status["model"]["backend_kind"], "npu",
        "one crash: FastFlowLM is restarted"
    );

    let c = chat(&app, &id, "And a module?");
    assert_eq!(c["messages"][3]["state"], "error", "{c}");
    // Two crashes in a row: the NPU backend leaves FastFlowLM stopped and refuses the next
    // answer before writing anything (its rule, counted only there), so that answer is
    // written on the processor and the model stays there.
    let c = chat(&app, &id, "Thanks.");
    assert_eq!(c["messages"][5]["state"], "complete", "{c}");
    assert_eq!(c["messages"][5]["receipt"]["backend_kind"], "cpu");
    let status = invoke(&app, "app_status", json!({})).unwrap();
    assert_eq!(
        status["model"]["backend_kind"], "cpu",
        "after the NPU refused, the processor from now on"
    );
}
