//! `hearth run`, `list`, `doctor` and `selftest` on each backend, end to end through the binary:
//! the CPU engine by an installed model's name, a remote server (`hearth serve` on loopback),
//! and the NPU through the FastFlowLM imitation (`tests/flm-imitation`, built by
//! `cargo test --workspace` next to `hearth`).

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::Served;

fn npu_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/npu")
        .join(name)
}

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

/// A private home: data, config and state folders of its own, and no FastFlowLM unless given.
struct Home {
    dir: tempfile::TempDir,
    flm: Option<PathBuf>,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
            flm: None,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_hearth"));
        let d = self.dir.path();
        c.args(args)
            .env("HOME", d)
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("XDG_STATE_HOME", d.join("state"))
            .env("HEARTH_DEMO_MODEL", demo_model())
            // A Ryzen AI laptop's NPU as the doctor sees it, so the app's rule for the best
            // backend (the NPU when it is ready and FastFlowLM can run the model) can pick it.
            .env("HEARTH_NPU_ROOT", npu_fixture("strix-ready"))
            .env("PATH", "/usr/bin:/bin")
            .env_remove("HEARTH_LOG");
        match &self.flm {
            Some(flm) => c.env("HEARTH_FLM", flm),
            None => c.env_remove("HEARTH_FLM"),
        };
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("hearth runs")
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "hearth {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
    }
}

/// `hearth serve` on a free loopback port, killed when dropped.
fn serve(home: &Home, model: &str) -> Served {
    common::serve(home.command(&["serve", "--model", model, "--port", "0"]))
}

#[test]
fn an_installed_model_is_found_by_name_and_answers_on_the_cpu() {
    let home = Home::new();
    let report = home.json(&[
        "run",
        "--model",
        "demo",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--json",
        "What is a crate?",
    ]);
    assert_eq!(report["backend"], "cpu", "{report}");
    assert_eq!(report["model"], "demo");
    assert!(!report["text"].as_str().unwrap().is_empty());
    assert!(report["generated_tokens"].as_u64().unwrap() >= 1);
    assert_eq!(report["counts_exact"], true);
    for key in [
        "device",
        "prompt_tokens",
        "ttft_secs",
        "decode_tokens_per_s",
        "stop_reason",
    ] {
        assert!(
            report.get(key).is_some(),
            "`hearth run --json` has {key}: {report}"
        );
    }
    let missing = home.run(&["run", "--model", "no-such-model", "hi"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("hearth list"), "says where to look: {err}");
}

#[test]
fn a_remote_answer_says_it_left_this_computer() {
    let home = Home::new();
    let server = serve(&home, "demo");
    let report = home.json(&[
        "run",
        "--url",
        &server.url,
        "--model",
        "demo",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--json",
        "What is a crate?",
    ]);
    assert_eq!(report["backend"], "remote", "{report}");
    assert_eq!(report["device"], server.url.trim_start_matches("http://"));
    assert_eq!(report["receipt"]["backend_kind"], "remote");

    // The same greedy answer as the CPU engine here: the server runs the same engine.
    let local = home.json(&[
        "run",
        "--model",
        "demo",
        "--max-tokens",
        "6",
        "--temperature",
        "0",
        "--json",
        "What is a crate?",
    ]);
    assert_eq!(report["text"], local["text"]);

    let streamed = home.ok(&[
        "run",
        "--url",
        &server.url,
        "--model",
        "demo",
        "--max-tokens",
        "4",
        "hi",
    ]);
    let notice = String::from_utf8_lossy(&streamed.stderr);
    assert!(notice.contains("leaves this computer"), "{notice}");

    let wrong = home.run(&["run", "--url", &server.url, "--model", "other", "hi"]);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("It has: demo"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
}

#[test]
fn without_fastflowlm_models_run_on_the_cpu_and_list_says_why() {
    let home = Home::new();
    let listed = home.json(&["list", "--json"]);
    let demo = &listed[0];
    assert_eq!(demo["name"], "demo");
    assert_eq!(demo["npu"], false);
    // The app's reason (hearth_app::models::local_models), as its model picker says it.
    assert!(
        demo["npu_reason"]
            .as_str()
            .unwrap()
            .contains("the built-in model runs on the processor only"),
        "{demo}"
    );
    let npu = home.run(&["run", "--backend", "npu", "--model", "demo", "hi"]);
    assert!(!npu.status.success());
    assert!(
        String::from_utf8_lossy(&npu.stderr).contains("FastFlowLM is not installed"),
        "{}",
        String::from_utf8_lossy(&npu.stderr)
    );
}

/// FastFlowLM's install as the imitation: a wrapper `flm` next to `xclbins/<name>/`.
fn install_imitation(home: &mut Home, name: &str) -> bool {
    let imitation = Path::new(env!("CARGO_BIN_EXE_hearth")).with_file_name("flm");
    if !imitation.is_file() {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built ({}); `cargo test --workspace` builds it",
            imitation.display()
        );
        return false;
    }
    let install = home.dir.path().join("fastflowlm");
    std::fs::create_dir_all(install.join("xclbins").join(name)).unwrap();
    let flm = install.join("flm");
    std::fs::write(
        &flm,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", imitation.display()),
    )
    .unwrap();
    std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.flm = Some(flm);
    true
}

#[test]
fn an_npu_model_answers_through_fastflowlm_and_matches_the_cpu() {
    let mut home = Home::new();
    const NAME: &str = "Demo-NPU2";
    if !install_imitation(&mut home, NAME) {
        return;
    }
    let demo = demo_model();
    home.ok(&["import", demo.to_str().unwrap(), "--name", NAME]);

    let listed = home.json(&["list", "--json"]);
    let model = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == NAME)
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(model["npu"], true, "{model}");

    // The NPU is the default where it can run the model.
    let report = home.json(&[
        "run",
        "--model",
        NAME,
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--json",
        "What is a crate?",
    ]);
    assert_eq!(report["backend"], "npu", "{report}");
    assert_eq!(report["device"], "AMD XDNA 2 NPU");
    assert!(report["receipt"]["runtime_version"].is_string(), "{report}");
    let cpu = home.json(&[
        "run",
        "--model",
        NAME,
        "--backend",
        "cpu",
        "--max-tokens",
        "8",
        "--temperature",
        "0",
        "--json",
        "What is a crate?",
    ]);
    assert_eq!(
        report["text"], cpu["text"],
        "the imitation runs the same engine"
    );

    let selftest = home.json(&[
        "selftest",
        "--model",
        NAME,
        "--backend",
        "npu",
        "--max-tokens",
        "8",
        "--json",
    ]);
    let prompts = selftest["prompts"].as_array().unwrap();
    assert!(!prompts.is_empty());
    for p in prompts {
        assert!(p["diverges_at_char"].is_null(), "{p}");
    }
    assert!(
        home.run(&["selftest", "--model", NAME, "--backend", "cpu"])
            .stderr
            .starts_with(b"hearth: the CPU engine is the reference"),
        "comparing the CPU with itself is refused"
    );

    let doctor = home.run(&["doctor", "--json"]);
    let doctor: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert!(
        doctor.to_string().contains("FastFlowLM"),
        "the doctor reports FastFlowLM: {doctor}"
    );
}

#[test]
fn a_model_fastflowlm_fails_with_runs_on_the_cpu_unless_tried_anyway() {
    let mut home = Home::new();
    // Named like the MiniCPM5 pack of FastFlowLM issue 712 (the imitation plays 1.0.6).
    const NAME: &str = "MiniCPM5-Demo";
    if !install_imitation(&mut home, NAME) {
        return;
    }
    home.ok(&["import", demo_model().to_str().unwrap(), "--name", NAME]);
    let listed = home.json(&["list", "--json"]);
    let model = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == NAME)
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(model["npu"], false, "{model}");
    let reason = model["npu_reason"].as_str().unwrap();
    assert!(
        reason.contains("runs on the processor here") && reason.contains("issue 712"),
        "{reason}"
    );
    assert_eq!(model["kernels"], "no kernel list", "{model}");

    let refused = home.run(&["run", "--backend", "npu", "--model", NAME, "hi"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("issue 712"), "{stderr}");

    let report = home.json(&[
        "run",
        "--npu-anyway",
        "--model",
        NAME,
        "--max-tokens",
        "4",
        "--json",
        "hi",
    ]);
    assert_eq!(report["backend"], "npu", "{report}");
}
