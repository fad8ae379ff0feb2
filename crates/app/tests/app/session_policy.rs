//! The one rule for where a model runs when the caller does not say (`best_backend`), given
//! the NPU as the doctor sees it (fixture trees from `tests/fixtures/npu/`) and FastFlowLM's
//! known-issues list.

use std::path::{Path, PathBuf};

use hearth_app::best_backend;
use hearth_app::models::LocalModel;
use hearth_app::session::BackendKind;
use hearth_backends::npu::known_issues::known_issue;
use hearth_backends::npu::registry::FlmModel;
use hearth_chat::Availability;

fn npu_fixture(name: &str) -> hearth_npu::Diagnosis {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/npu")
        .join(name);
    hearth_npu::diagnose(&root)
}

/// A registry entry of FastFlowLM's schema.
fn entry(name: &str, family: &str) -> FlmModel {
    serde_json::from_value(serde_json::json!({
        "name": name, "url": "", "size": 1, "flm_min_version": "0.9.22",
        "files": [], "details": {"family": family}
    }))
    .unwrap()
}

/// A registered model whose NPU availability is what FastFlowLM 1.0.6 with its kernels
/// installed gives: unusable when the known-issues list names it.
fn model(name: &str, family: &str) -> LocalModel {
    let npu = match known_issue("1.0.6", &entry(name, family)) {
        Some(issue) => {
            Availability::unusable(BackendKind::Npu, issue.words(name, "FastFlowLM 1.0.6"))
        }
        None => Availability::usable(BackendKind::Npu),
    };
    LocalModel {
        name: name.into(),
        path: PathBuf::from("/models").join(name),
        builtin: None,
        is_default: true,
        sha256: None,
        backends: vec![Availability::usable(BackendKind::Cpu), npu],
        selftest: None,
    }
}

#[test]
fn a_ready_npu_runs_a_model_fastflowlm_can_run() {
    let ready = npu_fixture("strix-ready");
    assert!(ready.ready, "the fixture is a ready NPU: {}", ready.summary);
    assert_eq!(
        best_backend(&model("Qwen3-0.6B", "qwen3"), &ready),
        BackendKind::Npu
    );
}

#[test]
fn a_model_on_the_known_issues_list_runs_on_the_processor_even_on_a_ready_npu() {
    let ready = npu_fixture("strix-ready");
    let minicpm = model("MiniCPM5-2B-NPU2", "llama3");
    assert!(
        minicpm.npu_reason().unwrap().contains("issue 712"),
        "{:?}",
        minicpm.npu_reason()
    );
    assert_eq!(best_backend(&minicpm, &ready), BackendKind::Cpu);
}

#[test]
fn no_usable_npu_means_the_processor() {
    for fixture in ["no-driver-old-kernel", "phoenix"] {
        let diagnosis = npu_fixture(fixture);
        assert!(!diagnosis.ready, "{fixture}: {}", diagnosis.summary);
        assert_eq!(
            best_backend(&model("Qwen3-0.6B", "qwen3"), &diagnosis),
            BackendKind::Cpu,
            "{fixture}"
        );
    }
}
