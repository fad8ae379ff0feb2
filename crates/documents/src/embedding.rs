//! What the index needs from a sentence-embedding model (its name, its count of word pieces to
//! cut passages it reads whole, a unit vector per text), and the engine's model behind it.

use std::path::{Path, PathBuf};

/// A sentence-embedding model, as the library uses one.
pub trait EmbeddingModel {
    /// Names the model: vectors of different models are stored apart and never compared.
    fn model_id(&self) -> &str;

    /// Word pieces the model's tokenizer makes of `word` (no [CLS]/[SEP]).
    fn pieces(&self, word: &str) -> usize;

    /// One vector per text, each of length 1 (so that a dot product is the cosine).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// The engine's BERT sentence encoder (all-MiniLM-L6-v2 as bundled).
pub struct EngineEmbedding {
    model: hearth_engine::Embedder,
    id: String,
}

impl EngineEmbedding {
    /// Loads the model folder `dir` (config.json, model.safetensors, tokenizer.json) to run on
    /// `threads` threads (`None`: one per physical core).
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<Self, hearth_engine::Error> {
        let model = hearth_engine::Embedder::load(dir, threads)?;
        let id = format!("{}-{}d", model.name(), model.dimension());
        Ok(Self { model, id })
    }
}

impl EmbeddingModel for EngineEmbedding {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn pieces(&self, word: &str) -> usize {
        // A word the tokenizer cannot read is counted by the estimate.
        self.model
            .count_pieces(word)
            .unwrap_or_else(|_| crate::passages::estimate_pieces(word))
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let vectors = self.model.embed(texts).map_err(|e| e.to_string())?;
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
