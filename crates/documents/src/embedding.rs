//! What the index needs from a sentence-embedding model (its name, its count of word pieces to
//! cut passages it reads whole, a unit vector per text, a question's vector), and the engine's
//! models behind it: the bundled BERT encoder (all-MiniLM-L6-v2, English) or a downloaded Qwen3
//! decoder (Qwen3-Embedding-0.6B, multilingual, last-token pooling).

use std::path::{Path, PathBuf};

/// A sentence-embedding model, as the library uses one.
pub trait EmbeddingModel {
    /// Names the model: vectors of different models are stored apart and never compared.
    fn model_id(&self) -> &str;

    /// Word pieces the model's tokenizer makes of `word` (no [CLS]/[SEP]).
    fn pieces(&self, word: &str) -> usize;

    /// One vector per text, each of length 1 (so that a dot product is the cosine).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;

    /// The vector a question is searched with. By default the question's own, as `embed` gives
    /// it; a model trained with an instruction before queries adds it here (passages are
    /// embedded without one).
    fn embed_query(&self, question: &str) -> Result<Vec<f32>, String> {
        let mut vectors = self.embed(&[question])?;
        vectors
            .pop()
            .ok_or_else(|| "no vector for the question".to_owned())
    }
}

/// What Qwen3-Embedding reads before a question, in its model card's form
/// (`Instruct: {task}\nQuery:{question}`, no space after the colon); passages get nothing.
pub const QWEN3_QUERY_INSTRUCTION: &str =
    "Instruct: Given a question, retrieve passages that answer it\nQuery:";

/// The engine's sentence-embedding models: a BERT encoder (all-MiniLM-L6-v2 as bundled) or a
/// Qwen3 decoder (Qwen3-Embedding-0.6B, downloaded), told apart by the folder's config.json.
pub struct EngineEmbedding {
    model: Engine,
    id: String,
}

/// Boxed: each holds its run state and thread pool, kilobytes apart.
enum Engine {
    /// Mean pooling over at most 256 word pieces; questions as they are.
    Encoder(Box<hearth_engine::Embedder>),
    /// Last-token pooling over at most 512 tokens; questions after
    /// [`QWEN3_QUERY_INSTRUCTION`].
    Decoder(Box<hearth_engine::DecoderEmbedder>),
}

impl EngineEmbedding {
    /// Loads the model folder `dir` to run on `threads` threads (`None`: one per physical
    /// core): a Qwen3 model when config.json's `architectures` or `model_type` names one
    /// (config.json, safetensors or Q4NX weights, tokenizer.json), else a BERT encoder
    /// (config.json, model.safetensors, tokenizer.json).
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<Self, hearth_engine::Error> {
        let (model, name, dimension) = if hearth_engine::DecoderEmbedder::is_qwen3_folder(dir) {
            let model = hearth_engine::DecoderEmbedder::load(dir, threads)?;
            let (name, dimension) = (model.name().to_owned(), model.dimension());
            (Engine::Decoder(Box::new(model)), name, dimension)
        } else {
            let model = hearth_engine::Embedder::load(dir, threads)?;
            let (name, dimension) = (model.name().to_owned(), model.dimension());
            (Engine::Encoder(Box::new(model)), name, dimension)
        };
        let id = format!("{name}-{dimension}d");
        Ok(Self { model, id })
    }

    /// Tokens (or word pieces) of a text the model reads; the rest is cut off: 256 for the
    /// BERT encoder, 512 for a Qwen3 decoder (or its `max_position_embeddings`, if fewer).
    pub fn max_tokens(&self) -> usize {
        match &self.model {
            Engine::Encoder(m) => m.max_pieces() + 2,
            Engine::Decoder(m) => m.max_tokens(),
        }
    }

    /// Length of every vector: 384 for all-MiniLM-L6-v2, 1024 for Qwen3-Embedding-0.6B.
    pub fn dimension(&self) -> usize {
        match &self.model {
            Engine::Encoder(m) => m.dimension(),
            Engine::Decoder(m) => m.dimension(),
        }
    }

    /// Tokens the model would read of `text` if nothing were cut: its word pieces with `[CLS]`
    /// and `[SEP]`, or its tokens with `<|endoftext|>`. Above [`EngineEmbedding::max_tokens`]
    /// the text is cut.
    pub fn count_tokens(&self, text: &str) -> Result<usize, String> {
        match &self.model {
            Engine::Encoder(m) => m.count_pieces(text).map(|n| n + 2),
            Engine::Decoder(m) => m.count_tokens(text).map(|n| n + 1),
        }
        .map_err(|e| e.to_string())
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let vectors = match &self.model {
            Engine::Encoder(m) => m.embed(texts),
            Engine::Decoder(m) => m.embed(texts),
        }
        .map_err(|e| e.to_string())?;
        if vectors.len() != texts.len() {
            return Err(format!(
                "{} vectors for {} texts",
                vectors.len(),
                texts.len()
            ));
        }
        Ok(vectors)
    }
}

impl EmbeddingModel for EngineEmbedding {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn pieces(&self, word: &str) -> usize {
        let count = match &self.model {
            Engine::Encoder(m) => m.count_pieces(word),
            Engine::Decoder(m) => m.count_tokens(word),
        };
        // A word the tokenizer cannot read is counted by the estimate.
        count.unwrap_or_else(|_| crate::passages::estimate_pieces(word))
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.embed_texts(texts)
    }

    fn embed_query(&self, question: &str) -> Result<Vec<f32>, String> {
        let instructed;
        let text = match &self.model {
            Engine::Encoder(_) => question,
            Engine::Decoder(_) => {
                instructed = format!("{QWEN3_QUERY_INSTRUCTION}{question}");
                &instructed
            }
        };
        let mut vectors = self.embed_texts(&[text])?;
        vectors
            .pop()
            .ok_or_else(|| "no vector for the question".to_owned())
    }
}

/// The bundled embedding model's folder: `override_dir` when given (it must hold a
/// config.json), else `models/embedding` under the app's resources (`resource_dir`), beside an
/// installed program (`<prefix>/share/hearth/models/embedding`), or in the source tree.
pub fn find_embedding_model(
    override_dir: Option<PathBuf>,
    resource_dir: Option<&Path>,
) -> Option<PathBuf> {
    let is_model = |dir: &PathBuf| dir.join("config.json").is_file();
    if let Some(dir) = override_dir {
        return is_model(&dir).then_some(dir);
    }
    let installed = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("share/hearth/models")));
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
    resource_dir
        .map(|r| r.join("models"))
        .into_iter()
        .chain(installed)
        .chain([source_tree])
        .map(|models| models.join("embedding"))
        .find(is_model)
}
