//! The NPU commands through Tauri's real IPC layer, reading a fixture laptop
//! (`tests/fixtures/npu/strix-ready`, through `HEARTH_NPU_ROOT`), and the energy an answer from
//! the tiny real model carries on its receipt.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hearth_desktop::paths::Paths;
use serde_json::{json, Value};
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::{App, WebviewWindow, WebviewWindowBuilder};

/// One temporary home for the process, and the fixture laptop as the system root.
fn setup() -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        std::env::set_var("XDG_DATA_HOME", dir.path().join("data"));
        std::env::set_var("XDG_CONFIG_HOME", dir.path().join("config"));
        std::env::set_var("HOME", dir.path());
        let laptop =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/npu/strix-ready");
        std::env::set_var("HEARTH_NPU_ROOT", laptop);
        dir
    })
    .path()
}

struct TestApp {
    _app: App<MockRuntime>,
    webview: WebviewWindow<MockRuntime>,
    _data: tempfile::TempDir,
}

fn app() -> TestApp {
    setup();
    let data = tempfile::tempdir().unwrap();
    let demo: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/engine/tiny-llama");
    let paths = Paths {
        data_dir: data.path().to_path_buf(),
        demo_model: Some(demo),
    };
    let app = hearth_desktop::configure(mock_builder(), Some(paths))
        .build(tauri::generate_context!())
        .expect("the app builds");
    let webview = WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .expect("the main window builds");
    TestApp {
        _app: app,
        webview,
        _data: data,
    }
}

fn invoke(app: &TestApp, cmd: &str, args: Value) -> Result<Value, Value> {
    get_ipc_response(
        &app.webview,
        InvokeRequest {
            cmd: cmd.into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            url: "tauri://localhost".parse().unwrap(),
            body: InvokeBody::Json(args),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .map(|body| body.deserialize::<Value>().expect("response is JSON"))
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
