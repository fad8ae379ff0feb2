//! The desktop app's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and each of those
//! linked the whole Tauri stack. Run one module's tests with a name filter: `cargo test -p
//! hearth-desktop --test desktop share_ipc::`; the IPC bindings are written with `npm run bindings`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state. The modules here share one private home with no other variables
//! (`common::private_home(&[])`, whose first call wins). These stay binaries of their own,
//! because each sets variables for the whole process that the others must not see:
//! `tests/found_ipc.rs` (`HEARTH_OFFLINE`, `OLLAMA_MODELS`, `XDG_CACHE_HOME`, and removes the
//! Hugging Face cache's), `tests/models_ipc.rs` (`HEARTH_OFFLINE`), `tests/npu_ipc.rs`
//! (`HEARTH_NPU_ROOT`), `tests/npu_known_issue_ipc.rs` and `tests/npu_models_ipc.rs`
//! (`HEARTH_FLM` and `HEARTH_NPU_ROOT`), and `tests/voice_ipc.rs` (the test microphone's
//! `HEARTH_TEST_MIC_WAV` and `HEARTH_TEST_MIC_SPEED`). The helpers they share stay in
//! `tests/common/`.

#[path = "../common/mod.rs"]
mod common;

mod bindings;
mod commands;
mod ipc;
mod remote_ipc;
mod share_ipc;
