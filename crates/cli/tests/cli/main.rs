//! The `hearth` command's integration tests, as one test binary (see "One test binary per
//! crate" in docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking
//! them once instead of nineteen times is most of what a cold build of these tests cost. Run one
//! module's tests with a name filter: `cargo test -p hearth-cli --test cli kill::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state (environment variables, the current folder): each `hearth` they start
//! gets its own home and variables through its `Command`.

mod common;
/// hearth-hub's imitation of the Hugging Face Hub, for the downloads.
#[path = "../../../hub/tests/common/mod.rs"]
mod mockhub;

mod api_clients;
mod backends;
mod bench;
mod chat_saves;
mod doctor_flm_env;
mod engine_verbs;
mod files;
mod found;
mod hostile_input;
mod import;
mod kill;
mod log_redaction;
mod pictures;
mod pull_speech;
mod search;
mod search_embedding_model;
mod serve_embeddings;
mod transcribe;
