//! The HTTP wire formats Hearth speaks, as typed serde structs and nothing else: one home for
//! both ends of each API, so the remote client (`hearth-backends`) and Hearth's own server
//! (`hearth-server`) cannot drift apart.
//!
//! - [`openai`]: OpenAI's `/v1/chat/completions`, `/v1/completions`, `/v1/models`,
//!   `/v1/embeddings` and its error body;
//! - [`ollama`]: Ollama's `/api/chat`, `/api/generate`, `/api/show`, `/api/tags`, `/api/ps`,
//!   `/api/embed`, `/api/version` bodies, and [`KeepAlive`], its duration syntax.
//!
//! What the fields *mean* to Hearth (sampling, context, which model) is decided by the server;
//! this crate only says how they are spelled. It depends on serde alone.

pub mod keep_alive;
pub mod ollama;
pub mod openai;

pub use keep_alive::{KeepAlive, DEFAULT_KEEP_ALIVE};
