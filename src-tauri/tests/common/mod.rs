//! What every IPC test binary shares: a private home for the process, the app built on Tauri's
//! mock runtime with its real capabilities, and `invoke`, which goes through the real IPC layer.
#![allow(dead_code)] // each test binary uses its own part

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hearth_app::Home;
use serde_json::Value;
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{get_ipc_response, mock_builder, MockRuntime, INVOKE_KEY};
use tauri::webview::InvokeRequest;
use tauri::{App, WebviewWindow, WebviewWindowBuilder};

/// Points XDG and HOME at one temporary folder for the whole process (settings and data live
/// there, never in a real home), and sets `extra` variables. The first call wins.
pub fn private_home(extra: &[(&str, OsString)]) -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        std::env::set_var("XDG_DATA_HOME", dir.path().join("data"));
        std::env::set_var("XDG_CONFIG_HOME", dir.path().join("config"));
        std::env::set_var("HOME", dir.path());
        for (name, value) in extra {
            std::env::set_var(name, value);
        }
        dir
    })
    .path()
}

/// A committed fixture: `tests/fixtures/<relative>`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(relative)
}

/// The app and its main window; `data` is removed when the app is dropped.
pub struct TestApp {
    _app: App<MockRuntime>,
    pub webview: WebviewWindow<MockRuntime>,
    _data: tempfile::TempDir,
}

/// The app with its data folder in `data` and `demo` as the bundled demo model. Call
/// [`private_home`] first.
pub fn build_app(data: tempfile::TempDir, demo: Option<PathBuf>) -> TestApp {
    let home = Home {
        data_dir: data.path().to_path_buf(),
        config_dir: data.path().join("config"),
        state_dir: data.path().join("state"),
        builtin: demo.map(|folder| hearth_hub::BuiltinModel {
            kind: hearth_hub::BuiltinKind::Demo,
            folder,
            sha256: None,
        }),
        system_root: hearth_app::home::system_root_from_env(),
    };
    let app = hearth_desktop::configure(mock_builder(), Some(home))
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

impl TestApp {
    /// The app's data folder (its config folder is `config` inside it).
    pub fn data_dir(&self) -> &Path {
        self._data.path()
    }
}

/// Calls command `cmd` with JSON `args` as the web UI would; `Err` holds the command's error.
pub fn invoke(app: &TestApp, cmd: &str, args: Value) -> Result<Value, Value> {
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
