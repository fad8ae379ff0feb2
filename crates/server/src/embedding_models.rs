//! The embedding models a server answers with ([`EmbeddingSource`]: a name and a folder), and the
//! one loaded now: at the first request naming it, in place of the one before
//! ([`EmbeddingModels`]). The routes that use them are in `crate::embeddings`.
//!
//! Embedding requests have a line of their own ([`EMBEDDING_PLACES`]), apart from the chat
//! models' queue: however many embedding requests come, a chat request's place is not taken.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hearth_app::documents::EngineEmbedding;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::AppError;

/// An embedding model a server answers with: the name requests use, and its folder (a BERT
/// encoder, or a Qwen3 embedding model: `config.json`, weights, `tokenizer.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddingSource {
    /// What requests name it (`"model"`), compared ignoring case and a `:latest` suffix.
    pub name: String,
    /// Its folder.
    pub folder: PathBuf,
}

/// Embedding requests let in at once: one embedding and one waiting; more get 503.
pub const EMBEDDING_PLACES: usize = 2;

/// The server's embedding models; the one in use is loaded at its first request.
pub(crate) struct EmbeddingModels {
    sources: Vec<EmbeddingSource>,
    /// The model loaded, by its served name.
    loaded: Mutex<Option<(String, Arc<EngineEmbedding>)>>,
    /// One permit per embedding request let in ([`EMBEDDING_PLACES`]).
    admission: Arc<Semaphore>,
}

impl EmbeddingModels {
    pub(crate) fn new(sources: Vec<EmbeddingSource>) -> Self {
        EmbeddingModels {
            sources,
            loaded: Mutex::new(None),
            admission: Arc::new(Semaphore::new(EMBEDDING_PLACES)),
        }
    }

    /// A place in the embedding requests' line, or 503 when it is full.
    pub(crate) fn admit(&self) -> Result<OwnedSemaphorePermit, AppError> {
        Arc::clone(&self.admission)
            .try_acquire_owned()
            .map_err(|_| AppError::Busy {
                queue: EMBEDDING_PLACES - 1,
            })
    }

    /// The model `requested` names, loading it if needed in place of the one loaded (on this
    /// thread: call it from a blocking one), its served name, and how long loading took.
    pub(crate) fn get(
        &self,
        requested: &str,
        is_chat_model: bool,
    ) -> Result<(Arc<EngineEmbedding>, String, Duration), AppError> {
        let source = self.source(requested, is_chat_model)?;
        let name = source.name.clone();
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((loaded_name, embedder)) = loaded.as_ref() {
            if *loaded_name == name {
                return Ok((Arc::clone(embedder), name, Duration::ZERO));
            }
        }
        // The model loaded before is let go first: two in memory could be 3 GB.
        *loaded = None;
        let started = Instant::now();
        let embedder = EngineEmbedding::load(&source.folder, None).map_err(|e| {
            tracing::error!(error = %e, model = %name, "the embedding model did not load");
            AppError::LoadFailed {
                model: name.clone(),
                message: e.to_string(),
            }
        })?;
        let embedder = Arc::new(embedder);
        *loaded = Some((name.clone(), Arc::clone(&embedder)));
        Ok((embedder, name, started.elapsed()))
    }

    /// The source `requested` names, or why none does (naming the embedding models there are;
    /// `is_chat_model`: the name is one of the server's chat models).
    fn source(&self, requested: &str, is_chat_model: bool) -> Result<&EmbeddingSource, AppError> {
        let wanted = requested.strip_suffix(":latest").unwrap_or(requested);
        if let Some(source) = self
            .sources
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(wanted))
        {
            return Ok(source);
        }
        let names = self
            .sources
            .iter()
            .map(|s| format!("\"{}\"", s.name))
            .collect::<Vec<_>>()
            .join(", ");
        if is_chat_model {
            let offer = if self.sources.is_empty() {
                "this server has no embedding model (`hearth serve --embedding-model FOLDER` sets one)".to_owned()
            } else {
                format!("use an embedding model: {names}")
            };
            return Err(AppError::bad_field(
                "model",
                format!("\"{requested}\" is a chat model and does not make embeddings; {offer}"),
            ));
        }
        Err(AppError::ModelNotFound {
            requested: requested.to_owned(),
            served: if self.sources.is_empty() {
                "no embedding model (`hearth pull qwen3-embedding-0.6b` installs one)".to_owned()
            } else {
                format!("the embedding models {names}")
            },
        })
    }
}
