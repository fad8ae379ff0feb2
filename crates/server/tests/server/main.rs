//! The HTTP API's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking them once
//! instead of thirteen times is most of what a cold build of these tests cost. Run one module's
//! tests with a name filter: `cargo test -p hearth-server --test server share::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state. `tests/load.rs` stays a binary of its own: it counts the process's open
//! file descriptors and its memory, which the other tests' servers would change under it.

mod api;
mod completions;
mod embeddings;
mod flood;
mod lent;
mod ollama;
mod origins;
mod pictures_body;
mod remote_completions;
mod schemas;
mod share;
mod slow_flood;
mod transcriptions;
