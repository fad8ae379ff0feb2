//! What the index needs from a sentence-embedding model: its name, its count of word pieces (to
//! cut passages it reads whole) and a normalized vector per text.

/// A sentence-embedding model, as the library uses one.
pub trait EmbeddingModel {
    /// Names the model and its revision: vectors of different models are stored apart and
    /// never compared.
    fn model_id(&self) -> &str;

    /// Word pieces the model's tokenizer makes of `word` (no [CLS]/[SEP]).
    fn pieces(&self, word: &str) -> usize;

    /// One vector per text, each of length 1 (so that a dot product is the cosine).
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}
