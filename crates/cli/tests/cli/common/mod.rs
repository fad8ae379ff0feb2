//! What the command-line tests share: `hearth` run with every folder it reads or writes inside a
//! temporary home, so a test never touches the real one.

#![allow(dead_code)] // each test file uses part of this

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// `hearth` with `home` as its HOME and XDG data, config and state folders, no NPU (an empty
/// system root) and no demo model from the environment. Add the arguments and run it.
pub fn hearth(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hearth"));
    command
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .env("HEARTH_NPU_ROOT", home.join("no-npu"))
        .env_remove("HEARTH_DEMO_MODEL");
    command
}

/// Imports the engine's tiny random Qwen3-Embedding-shaped fixture (standing in for
/// Qwen3-Embedding-0.6B, which tests never download) into `home`'s store as `name`, and checks
/// that the import succeeded.
pub fn import_tiny_qwen3_embedding(home: &Path, name: &str) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine/tiny-qwen3-embedding");
    let import = hearth(home)
        .args(["import", "--name", name])
        .arg(fixture)
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
}

/// Runs `command`, typing `stdin` into it, and waits for its output.
pub fn run_typing(command: &mut Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hearth starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("hearth runs")
}

/// A running `hearth serve`, killed when dropped.
pub struct Served {
    child: Child,
    /// Where it listens, as it printed it: `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Served {
    /// `host:port`, for a raw HTTP request.
    pub fn address(&self) -> &str {
        self.url.trim_start_matches("http://")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` (a `hearth serve --port 0 ...`) and waits for the line that says where it
/// listens: "Hearth is serving ... at http://127.0.0.1:PORT/v1 (OpenAI-compatible). ...".
pub fn serve(mut command: Command) -> Served {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hearth serve starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Keep reading what it prints: a closed pipe would end it at its next line.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .trim_end_matches("/v1")
        .to_owned();
    Served { child, url }
}
