//! Hearth's model engine: it loads a model folder (Q4NX or plain safetensors weights, config,
//! tokenizer, chat template) and runs MiniCPM5 (Llama family) and Qwen3 on the CPU exactly as
//! Hugging Face transformers computes them. It is the reference every other backend is checked
//! against.
//!
//! ```no_run
//! use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role};
//! # fn main() -> Result<(), hearth_engine::Error> {
//! let mut model = Model::load("models/demo".as_ref(), &LoadOptions::default())?;
//! let messages = [ChatMessage::new(Role::User, "Hello!")];
//! let stats = model.chat(&messages, &ChatOptions::default(), &mut |piece| {
//!     print!("{piece}");
//!     std::ops::ControlFlow::Continue(())
//! })?;
//! eprintln!("{} tokens in {:.2} s", stats.generated_tokens, stats.decode_secs);
//! # Ok(()) }
//! ```
//!
//! Layout: `model` reads the folder, and `weights_memory` decides whether its weights are
//! copied into huge pages; `transformer` holds the weights, the run state and the
//! forward pass; `linear` is the one type every matrix product goes through; `kv_cache`;
//! `sampler`; `tokenizer` and `chat_template` (`strftime_now` in `template_date`);
//! `harmony` reads gpt-oss's channels back as `<think>…</think>answer`; `draft` guesses
//! tokens from the conversation so far; `runner` drives prefill and decode (verifying
//! guesses in one pass); [`cpu`] has the kernels and the [`cpu::CpuContext`] (threads and
//! kernel level) each model owns.
//! Structured output: `json_schema` compiles a [`ResponseFormat`] into a grammar,
//! `json_automaton` follows it byte by byte, and `constraint` tells the sampler which tokens
//! keep an answer on it.
//! Sentence embeddings: [`Embedder`] loads a BERT encoder folder (all-MiniLM-L6-v2);
//! `wordpiece` makes its tokens, `encoder` runs it and `pooling` averages and normalizes.
//! [`DecoderEmbedder`] runs a Qwen3 folder (Qwen3-Embedding-0.6B) through `transformer`'s
//! forward pass and gives the last token's final normed state (last-token pooling).

mod chat_template;
mod constraint;
pub mod cpu;
mod decoder_embedder;
mod draft;
mod embedder;
mod encoder;
mod error;
mod fused;
mod harmony;
mod json_automaton;
mod json_file;
mod json_schema;
mod kv_cache;
mod kv_store;
mod linear;
mod model;
mod pooling;
mod rope;
mod runner;
mod sampler;
mod template_date;
mod template_program;
mod template_values;
mod tokenizer;
mod transformer;
mod weights_memory;
pub mod whisper;
mod wordpiece;

pub use chat_template::{
    check_chat_template, template_source, ChatMessage, ChatTemplate, Picture, PictureFormat, Role,
};
pub use decoder_embedder::{DecoderEmbedder, MAX_DECODER_EMBEDDING_TOKENS};
pub use embedder::{Embedder, MAX_EMBEDDING_TOKENS};
pub use error::Error;
pub use harmony::{HarmonyStream, HarmonyTokens};
pub use json_schema::ResponseFormat;
pub use kv_store::Origin as KvOrigin;
pub use model::{LoadOptions, Model, ModelInfo, DEFAULT_CONTEXT_LENGTH};
pub use runner::{ChatOptions, GenerationStats, PrefillProgress, StopReason};
pub use sampler::SamplingParams;
pub use template_values::limits as template_limits;
pub use tokenizer::TextTokenizer;
pub use weights_memory::WeightsMemory;
