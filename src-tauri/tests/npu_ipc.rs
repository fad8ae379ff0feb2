//! The NPU commands through Tauri's real IPC layer, reading a fixture laptop
//! (`tests/fixtures/npu/strix-ready`, through `HEARTH_NPU_ROOT`), and the energy an answer from
//! the tiny real model carries on its receipt.
//!
//! Its private home has `HEARTH_NPU_ROOT` for the whole process, so it is a test binary of its own,
//! not a module of `tests/desktop/`.

mod common;

use common::{build_app, fixture, invoke, private_home, TestApp};
use serde_json::json;

/// The app on the fixture laptop as the system root, with the tiny real model as its demo.
fn app() -> TestApp {
    private_home(&[("HEARTH_NPU_ROOT", fixture("npu/strix-ready").into())]);
    build_app(
        tempfile::tempdir().unwrap(),
        Some(fixture("engine/tiny-llama")),
    )
}

#[test]
fn npu_status_reports_the_fixture_laptop_ready() {
    let app = app();
    let d = invoke(&app, "npu_status", json!({})).unwrap();
    assert_eq!(d["ready"], true, "{d}");
    assert_eq!(d["summary"], "NPU ready: NPU Strix (XDNA 2)");
    assert_eq!(d["checks"][0]["id"], "device");
}

#[test]
fn power_sample_carries_values_with_sources_and_reasons() {
    let app = app();
    let p = invoke(&app, "power_sample", json!({})).unwrap();
    assert_eq!(p["package_watts"]["value"], 14.8);
    assert_eq!(
        p["package_watts"]["source"],
        "amdgpu hwmon4 power1_input (PPT)"
    );
    assert_eq!(p["npu_watts"]["value"], 1.63);
    let again = invoke(&app, "power_sample", json!({})).unwrap();
    assert!(
        again["cpu_percent"]["unavailable"]
            .as_str()
            .unwrap()
            .contains("no CPU time"),
        "a fixed /proc/stat gives a reason, not 0: {again}"
    );
}

#[test]
fn an_answer_receipt_has_its_energy() {
    let app = app();
    invoke(&app, "app_status", json!({})).unwrap();
    let c = invoke(&app, "create_conversation", json!({})).unwrap();
    let mut settings = c["settings"].clone();
    settings["max_tokens"] = json!(6);
    invoke(
        &app,
        "update_conversation_settings",
        json!({"id": c["id"], "settings": settings}),
    )
    .unwrap();
    invoke(
        &app,
        "start_answer",
        json!({"conversationId": c["id"], "action": {"kind": "send", "content": "Hello"}, "onEvent": "__CHANNEL__:9"}),
    )
    .unwrap();
    let c = invoke(&app, "get_conversation", json!({"id": c["id"]})).unwrap();
    let energy = &c["messages"][1]["receipt"]["energy"];
    assert_eq!(energy["meter"], "package", "{energy}");
    assert_eq!(
        energy["source"],
        "package power: amdgpu hwmon4 power1_input (PPT)"
    );
    let total = energy["total_joules"].as_f64().unwrap();
    let secs = energy["prefill_secs"].as_f64().unwrap() + energy["decode_secs"].as_f64().unwrap();
    assert!(
        (total - 14.8 * secs).abs() < 1e-6,
        "a flat 14.8 W over {secs} s, got {total} J"
    );
    assert!(
        energy["battery"]["percent_per_hour"].as_f64().unwrap() > 0.0,
        "on battery in the fixture"
    );
}
