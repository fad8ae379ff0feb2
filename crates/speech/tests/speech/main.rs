//! hearth-speech's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own. Run one module's tests
//! with a name filter: `cargo test -p hearth-speech --test speech decode::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state; none does. The helpers they share, and the fixtures they decode, are in
//! `tests/common/` and `tests/fixtures/`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod decode;
