//! hearth-documents' integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking them once
//! instead of nine times is most of what a cold build of these tests cost. Run one module's tests
//! with a name filter: `cargo test -p hearth-documents --test documents ocr::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state. `tests/isolation.rs` stays a binary of its own (its own `main`, no test
//! harness): it starts itself again as the extraction child, as `hearth` and the app do, which
//! switches this process's extraction to children. The helpers in `tests/common/` are shared
//! with it, so they stay there.

#[path = "../common/mod.rs"]
mod common;

mod embedding;
mod extract_bad_input;
mod extract_formats;
mod hostile_documents;
mod index;
mod library_migration;
mod library_waiting;
mod ocr;
mod rerank_reference;
