//! hearth-app's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own. Run one module's tests
//! with a name filter: `cargo test -p hearth-app --test app turn::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state. These stay binaries of their own, because they set environment
//! variables the app reads: `tests/ask.rs`, `tests/documents.rs` and `tests/files.rs` point
//! `HEARTH_EMBEDDING_MODEL` at nothing (keyword search only), `tests/indexing.rs` points it at
//! the tiny BERT encoder, `tests/pictures_npu.rs` sets `HEARTH_FLM`, and
//! `tests/speech_download.rs` sets `HF_ENDPOINT`, `HEARTH_OFFLINE` and the test microphone's
//! variables.

mod pictures;
mod read_aloud;
mod session_policy;
mod turn;
