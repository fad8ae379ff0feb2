//! hearth-npu's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own. Run one module's tests
//! with a name filter: `cargo test -p hearth-npu --test npu fixture_trees::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state; none does (`misbehaving_flm` waits for the processes its own `flm`
//! scripts started, by their ids, not for this process's children).

mod fixture_trees;
mod misbehaving_flm;
