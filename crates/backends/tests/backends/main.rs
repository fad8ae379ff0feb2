//! hearth-backends' integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking them once
//! instead of eight times is most of what a cold build of these tests cost. Run one module's
//! tests with a name filter: `cargo test -p hearth-backends --test backends remote::`.
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state: the servers they start listen on ports of their own, and the FastFlowLM
//! stand-ins each live in a folder of their own.

mod common;

mod bounded_streams;
mod cpu_answer;
mod kept_conversations;
mod llama_cpp_server;
mod misbehaving_flm;
mod remote;
mod remote_pictures;
mod structured_output;
