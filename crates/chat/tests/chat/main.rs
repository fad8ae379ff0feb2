//! hearth-chat's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own. Run one module's tests
//! with a name filter: `cargo test -p hearth-chat --test chat answer_loop::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state; none does. `kill_while_saving` runs this binary again as the process it
//! kills, naming its test with its module (`--exact kill_while_saving::...`), and gives that
//! child its variable on the child's command only.

mod answer_loop;
mod kill_while_saving;
