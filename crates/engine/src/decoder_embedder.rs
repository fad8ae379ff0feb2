//! Sentence embeddings from a decoder (Qwen3-Embedding-0.6B): a Qwen3 model folder run by the
//! same forward pass as chat, turned into one unit vector per text by last-token pooling, as the
//! model card computes it: the text's tokens with `<|endoftext|>` appended (what its tokenizer's
//! post-processor does), truncated to [`MAX_DECODER_EMBEDDING_TOKENS`] with that token kept
//! last, the final normed hidden state at that token, L2-normalized. Instructions (a query's
//! task) are the caller's: they are part of the text.

use std::path::Path;
use std::sync::Mutex;

use q4nx::ModelConfig;

use crate::json_file::read_json;
use crate::model::{LoadOptions, Model};
use crate::Error;

/// The most tokens an embedding reads from one text, `<|endoftext|>` included (the model reads
/// 32768; Hearth's passages are about 120 words, and the KV cache, allocated once for this
/// length, takes 117 MB at 512 for Qwen3-Embedding-0.6B in f32). The rest of a longer text is
/// cut off.
pub const MAX_DECODER_EMBEDDING_TOKENS: usize = 512;

/// The token whose final state is a text's vector, appended to every text.
const END_OF_TEXT: &str = "<|endoftext|>";

/// A loaded decoder embedding model. `embed` takes `&self`: texts of several threads take turns
/// on the one model (its KV cache and buffers).
pub struct DecoderEmbedder {
    name: String,
    dimension: usize,
    max_tokens: usize,
    end_of_text: u32,
    model: Mutex<Model>,
}

impl std::fmt::Debug for DecoderEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecoderEmbedder")
            .field("name", &self.name)
            .field("dimension", &self.dimension)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl DecoderEmbedder {
    /// Whether `dir`'s `config.json` names a Qwen3 model (`architectures` or `model_type`), the
    /// architecture this embedder is for; a BERT folder is [`crate::Embedder`]'s. Only the
    /// names are read: a broken config still says which loader should explain what is wrong.
    pub fn is_qwen3_folder(dir: &Path) -> bool {
        let Ok(Some(config)) = read_json(&dir.join("config.json")) else {
            return false;
        };
        let architecture = config
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(|a| a.as_str());
        let model_type = config.get("model_type").and_then(|m| m.as_str());
        architecture.is_some_and(|a| a.starts_with("Qwen3")) || model_type == Some("qwen3")
    }

    /// Loads the model in `dir` (`config.json` of a Qwen3 or Llama model, its weights as
    /// [`Model::load`] reads them: safetensors with or without the `model.` prefix, or Q4NX;
    /// `tokenizer.json` with `<|endoftext|>`) with a pool of `threads` threads (by default one
    /// per physical core).
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<DecoderEmbedder, Error> {
        let config =
            ModelConfig::from_path(&dir.join("config.json")).map_err(|source| Error::Load {
                dir: dir.to_path_buf(),
                source,
            })?;
        let max_tokens = MAX_DECODER_EMBEDDING_TOKENS.min(config.max_position_embeddings.max(2));
        let options = LoadOptions {
            context_length: Some(max_tokens),
            threads,
            ..LoadOptions::default()
        };
        let model = Model::load(dir, &options)?;
        let tokenizer = model.tokenizer().ok_or_else(|| Error::NoTokenizer {
            dir: dir.to_path_buf(),
        })?;
        let end_of_text = tokenizer.token_to_id(END_OF_TEXT).ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!(
                    "tokenizer.json has no {END_OF_TEXT} token, whose state a last-token \
                     embedding model (Qwen3-Embedding) gives as the vector; this folder is \
                     not such a model"
                ),
            )
        })?;
        let embedder = DecoderEmbedder {
            name: model.info().name.clone(),
            dimension: config.hidden_size,
            max_tokens,
            end_of_text,
            model: Mutex::new(model),
        };
        tracing::info!(
            model = %embedder.name, dimension = embedder.dimension, max_tokens,
            "decoder embedding model loaded"
        );
        Ok(embedder)
    }

    /// The model folder's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Length of every vector (the model's hidden size: 1024 for Qwen3-Embedding-0.6B).
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Tokens of a text the model reads, `<|endoftext|>` included (the rest is cut off).
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokens of `text` without `<|endoftext|>` and without truncation: a text is read whole
    /// when this is below [`DecoderEmbedder::max_tokens`].
    pub fn count_tokens(&self, text: &str) -> Result<usize, Error> {
        Ok(self.lock().require_tokenizer()?.encode(text, false)?.len())
    }

    /// The token ids the model reads for `text`: its first `max_tokens - 1` tokens, then
    /// `<|endoftext|>` (as the model card's tokenizer call with truncation makes them).
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut tokens = self.lock().require_tokenizer()?.encode(text, false)?;
        tokens.truncate(self.max_tokens - 1);
        tokens.push(self.end_of_text);
        Ok(tokens)
    }

    /// One unit vector of [`DecoderEmbedder::dimension`] floats per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        texts
            .iter()
            .map(|text| {
                let tokens = self.tokens(text)?;
                self.lock().last_token_embedding(&tokens)
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Model> {
        // A pass that panicked leaves nothing half-written that the next one reads: each pass
        // starts from an empty context.
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }
}
