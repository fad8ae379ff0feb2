//! hearth-hub's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking them once
//! instead of eleven times is most of what a cold build of these tests cost. Run one module's
//! tests with a name filter: `cargo test -p hearth-hub --test hub pull::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state. `tests/endpoint_env.rs` stays a binary of its own: it sets
//! `HF_ENDPOINT` and `HF_HUB_OFFLINE`, which every download here would read. The imitation of
//! the Hub in `tests/common/` is shared with it and with hearth-cli's tests, so it stays there.

#[path = "../common/mod.rs"]
mod common;

mod embedding_model;
mod found;
mod fuzz_registry;
mod gguf_import;
mod gguf_link;
mod import_sources;
mod layering;
mod pull;
mod speech_pull;
mod store;
mod voices;
