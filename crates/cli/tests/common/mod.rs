//! What the command-line tests share: `hearth` run with every folder it reads or writes inside a
//! temporary home, so a test never touches the real one.

#![allow(dead_code)] // each test file uses part of this

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

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
