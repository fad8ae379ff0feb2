//! `hearth serve` driven by the official `ollama` and `openai` Python packages
//! (tests/api_clients.py): chat and generate streamed and not, show, ps, tags, version,
//! keep_alive, JSON mode and a schema, an allowed and a refused origin, the errors, and
//! embeddings with both clients when the bundled embedding model has been made
//! (`scripts/embedding-model.sh`, which the server finds in the source tree).
//!
//! Needs `HEARTH_LLAMA_PYTHON` set to the python of the venv `scripts/python-tools.sh` makes
//! (it prints the path); without it the test says SKIPPED and passes. The server serves the
//! installed models on demand from a private home whose built-in model is the starter when
//! `models/starter` exists (`scripts/starter-model.sh`), else the demo model; it listens on a
//! free loopback port and is killed when the test ends.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

const ALLOWED_ORIGIN: &str = "app://obsidian.md";

fn builtin_model() -> PathBuf {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let starter = models.join("starter");
    if starter.join("config.json").is_file() {
        starter
    } else {
        models.join("demo")
    }
}

/// The embedding model's name when `models/embedding` has been made, else "" (the script then
/// checks that embeddings are refused plainly).
fn embedding_model() -> &'static str {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/embedding");
    if folder.join("config.json").is_file() {
        "all-minilm-l6-v2"
    } else {
        ""
    }
}

/// Kills the server however the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn official_python_clients_talk_to_hearth_serve() {
    let Some(python) = std::env::var_os("HEARTH_LLAMA_PYTHON").filter(|p| !p.is_empty()) else {
        // Straight to stderr, past the test harness's capture, so a run shows it was skipped.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: set HEARTH_LLAMA_PYTHON (scripts/python-tools.sh)"
        );
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let d = home.path();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hearth"))
        // A short context: JSON mode's answers run to its end (tests/api_clients.py), and the
        // script's prompts and answers need well under 128 tokens.
        .args(["serve", "--port", "0", "--context", "128"])
        .env("HOME", d)
        .env("XDG_DATA_HOME", d.join("data"))
        .env("XDG_CONFIG_HOME", d.join("config"))
        .env("XDG_STATE_HOME", d.join("state"))
        .env("HEARTH_DEMO_MODEL", builtin_model())
        .env("HEARTH_ORIGINS", ALLOWED_ORIGIN)
        .env_remove("HEARTH_PORT")
        .env_remove("HEARTH_KEEP_ALIVE")
        .env_remove("HEARTH_FLM")
        .env_remove("HEARTH_EMBEDDING_MODEL")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("hearth serve starts");
    let stdout = child.stdout.take().unwrap();
    let server = Server(child);
    // "Hearth is serving NAME at http://127.0.0.1:PORT (OpenAI-compatible at ...".
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).unwrap();
    let base = first
        .split(" at ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the server says where it listens: {first:?}"))
        .to_owned();

    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api_clients.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(&base)
        .arg(ALLOWED_ORIGIN)
        .arg(embedding_model())
        .output()
        .expect("python runs");
    drop(server);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all client checks passed"), "{stdout}");
}
