//! hearth-engine's integration tests, as one test binary (see "One test binary per crate" in
//! docs/ARCHITECTURE.md): each module here was a test binary of its own, and linking them once
//! instead of twenty-six times is most of what a cold build of these tests cost. Run one
//! module's tests with a name filter: `cargo test -p hearth-engine --test engine gpt_oss::`
//! (the opt-in ones with `-- --ignored`, as before).
//!
//! The tests share this process and run on parallel threads, so none of them may change
//! process-wide state; none does (they only read `HEARTH_LLAMA_PYTHON`, `HEARTH_THREADS` and
//! the like), so every former binary is a module here. The helpers they share are in
//! `tests/common/`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod decoder_embedding_reference;
mod encoder_reference;
mod flm_layouts;
mod fuzz_chat_template;
mod fuzz_model_files;
mod gemma3_template;
mod generation;
mod gguf_link;
mod gpt_oss;
mod harmony;
mod hostile_templates;
mod kv_store;
mod lfm2;
mod llama_cpp_fidelity;
mod llama_cpp_tiny;
mod moe_gguf;
mod phi3;
mod q4nx_weights;
mod qwen3_tokenizer;
mod qwen3moe;
mod reference;
mod structured_output;
mod whisper_bad_input;
mod whisper_real;
mod whisper_reference;
