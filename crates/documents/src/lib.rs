//! The user's own files: their text, extracted per format with the place each part came from
//! (`extract`), cut into passages that keep their character ranges (`passages`), stored in the
//! library's database with a keyword (FTS5) and a vector index (`library`, filled by `index`),
//! and searched so that an answer can cite them (`search`), the best passages judged again by a
//! language model (`rerank`).

pub mod embedding;
pub mod extract;
pub mod index;
pub mod library;
pub mod passages;
pub mod rerank;
pub mod search;

pub use embedding::{find_embedding_model, EmbeddingModel, EngineEmbedding};
pub use extract::{extract, ExtractError, ExtractLimits, Extracted, Format, Place, Section};
pub use index::{
    embed_missing, index, FileReport, IndexReport, IndexSettings, Outcome, Progress, Stage,
};
pub use library::{Document, DocumentId, Failure, Library, LibraryError};
pub use passages::PassageLimits;
pub use rerank::{is_reranker_folder, rerank, EngineReranker, PromptStyle, Reranker, RERANK_DEPTH};
pub use search::{search, Hit, Ranking};
