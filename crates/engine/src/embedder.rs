//! Sentence embeddings: a BERT encoder folder (`config.json`, `model.safetensors`,
//! `tokenizer.json`, e.g. all-MiniLM-L6-v2) turned into one unit vector per text, as
//! sentence-transformers computes it: WordPiece tokens with `[CLS]` and `[SEP]`, truncated to
//! [`MAX_EMBEDDING_TOKENS`], the encoder's last hidden state, the mean over the text's tokens,
//! L2-normalized. Vectors of two texts compare by their dot product (= cosine).

use std::path::Path;

use q4nx::Weights;

use crate::cpu::{pool, CpuContext, KernelLevel};
use crate::encoder::{self, BertConfig, BertWeights};
use crate::pooling;
use crate::wordpiece::WordPieces;
use crate::Error;

/// The most tokens an embedding reads from one text, `[CLS]` and `[SEP]` included
/// (sentence-transformers' `max_seq_length` of all-MiniLM-L6-v2): the rest of a longer text is
/// cut off, so a passage should fit in [`Embedder::max_pieces`] word pieces.
pub const MAX_EMBEDDING_TOKENS: usize = 256;

/// Tokens per encoder pass when many texts are embedded at once: bounds the activations
/// (about 25 KB per token for all-MiniLM-L6-v2) while keeping matmuls long.
const TOKENS_PER_PASS: usize = 2048;

/// A loaded sentence-embedding model. `embed` takes `&self`: one model can serve several
/// threads (their passes take turns on its thread pool).
pub struct Embedder {
    name: String,
    config: BertConfig,
    weights: BertWeights,
    pieces: WordPieces,
    cpu: CpuContext,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("name", &self.name)
            .field("dimension", &self.dimension())
            .field("max_pieces", &self.max_pieces())
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the encoder in `dir` (`config.json` of a BERT model, `model.safetensors`,
    /// `tokenizer.json`) with a pool of `threads` threads (by default one per physical core).
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<Embedder, Error> {
        if !dir.is_dir() {
            return Err(Error::invalid_model(
                dir,
                "the folder does not exist; check the path (the bundled embedding model is made by scripts/embedding-model.sh)",
            ));
        }
        let config = BertConfig::from_dir(dir)?;
        let weights_path = dir.join("model.safetensors");
        let file = Weights::open_file(&weights_path, None).map_err(|source| Error::Load {
            dir: dir.to_path_buf(),
            source,
        })?;
        let weights = BertWeights::load(&file, &config, dir)?;
        let max_tokens = MAX_EMBEDDING_TOKENS.min(config.max_position_embeddings);
        let pieces = WordPieces::from_dir(dir, max_tokens - 2)?;
        let threads = threads.unwrap_or_else(pool::physical_cores).max(1);
        let embedder = Embedder {
            name: dir.file_name().map_or_else(
                || dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            config,
            weights,
            pieces,
            cpu: CpuContext::new(threads, KernelLevel::detect()),
        };
        tracing::info!(
            model = %embedder.name, dimension = embedder.dimension(), threads,
            parameters = embedder.parameter_count(), "embedding model loaded"
        );
        Ok(embedder)
    }

    /// The model folder's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Length of every vector (the encoder's hidden size: 384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.config.hidden_size
    }

    /// Word pieces of a text the model reads (the rest is cut off): 254 for all-MiniLM-L6-v2,
    /// [`MAX_EMBEDDING_TOKENS`] less `[CLS]` and `[SEP]`.
    pub fn max_pieces(&self) -> usize {
        self.pieces.max_pieces()
    }

    /// Number of weights.
    pub fn parameter_count(&self) -> usize {
        self.weights.parameter_count()
    }

    /// Word pieces of `text`, without `[CLS]`/`[SEP]` and without truncation: a passage fits
    /// when this is at most [`Embedder::max_pieces`].
    pub fn count_pieces(&self, text: &str) -> Result<usize, Error> {
        self.pieces.count(text)
    }

    /// The token ids the model reads for `text`: `[CLS]`, its first
    /// [`Embedder::max_pieces`] word pieces, `[SEP]`.
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>, Error> {
        self.pieces.tokens(text)
    }

    /// One unit vector of [`Embedder::dimension`] floats per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Error> {
        let tokens = texts
            .iter()
            .map(|t| self.tokens(t))
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_tokens(&tokens)
    }

    /// One unit vector per token sequence (as [`Embedder::tokens`] makes them: at most
    /// [`MAX_EMBEDDING_TOKENS`] ids each, within the vocabulary), in order.
    pub fn embed_tokens(&self, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, Error> {
        for sequence in sequences {
            if sequence.is_empty() {
                return Err(Error::EmptyPrompt);
            }
            let limit = self.max_pieces() + 2;
            if sequence.len() > limit {
                return Err(Error::ContextFull {
                    needed: sequence.len(),
                    limit,
                });
            }
            let vocab_size = self.config.vocab_size;
            if let Some((position, &token)) = sequence
                .iter()
                .enumerate()
                .find(|(_, &t)| t as usize >= vocab_size)
            {
                return Err(Error::TokenOutOfRange {
                    token,
                    position,
                    vocab_size,
                });
            }
        }
        let dim = self.dimension();
        let mut vectors = Vec::with_capacity(sequences.len());
        let mut rest = sequences;
        while !rest.is_empty() {
            // As many texts as fit in one pass (at least one).
            let mut count = 0;
            let mut total = 0;
            while count < rest.len() && (count == 0 || total + rest[count].len() <= TOKENS_PER_PASS)
            {
                total += rest[count].len();
                count += 1;
            }
            let pass: Vec<&[u32]> = rest[..count].iter().map(Vec::as_slice).collect();
            let hidden = encoder::forward(&self.config, &self.weights, &self.cpu, &pass);
            let mut start = 0;
            for sequence in &pass {
                let mean = pooling::mean_rows(&hidden, dim, start, sequence.len());
                vectors.push(pooling::normalize(mean));
                start += sequence.len();
            }
            rest = &rest[count..];
        }
        Ok(vectors)
    }
}
