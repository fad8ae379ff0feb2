//! q4nx's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own. Run one module's tests
//! with a name filter: `cargo test -p q4nx --test q4nx fuzz_gguf::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state; none does (the fuzzers' counters are their modules' own), so every
//! former binary is a module here. The helpers they share are in `tests/common/`.

#[path = "../common/mod.rs"]
mod common;

mod convert;
mod fuzz_gguf;
mod fuzz_header;
mod gguf_link;
mod gguf_reference;
mod hostile_gguf;
mod malformed;
