//! Whisper speech recognition on Hearth's CPU engine: 16 kHz mono samples in, text out.
//!
//! [`Whisper::load`] reads a model folder in either of the two forms Whisper models are found in:
//! CTranslate2's `model.bin` + `config.json` (faster-whisper's conversion, what the Hugging Face
//! cache of many Linux machines holds; float16, bfloat16, float32 or int8 weights) or
//! transformers' `model.safetensors` + `config.json` (+ `generation_config.json`). Either way
//! the folder's `tokenizer.json` (or CTranslate2's `vocabulary.txt`/`vocabulary.json`) names the
//! tokens. Sizes (layers, width, heads, 80 or 128 mel bins, 51,865 or 51,866 tokens) are read
//! from the weights, never assumed.
//!
//! [`Whisper::transcribe`] cuts the audio in 30 s windows; for each it computes the log-mel
//! spectrogram (`mel`), runs the convolution stem and encoder once (`model`), then decodes
//! greedily (`decode`) with Whisper's rules: `<|startoftranscript|>`, the language token
//! (given, or the most likely language token after `<|startoftranscript|>` in the first
//! window), `<|transcribe|>`, `<|notimestamps|>` unless timestamps are asked for, the model's
//! suppressed tokens at every step and the blank/end-of-text suppression at the first, up to
//! the model's 448 positions or end-of-text. Temperature fallback (0.2 .. 1.0, as OpenAI's and
//! faster-whisper's) runs only when asked for.
//!
//! Precision: weights are widened to f32 at load (float16 and bfloat16 exactly; int8 times its
//! row scale); every product accumulates in f32 (fused multiply-adds where the CPU has them,
//! the same operations in the same order without them, so the same bits); the mel front end
//! computes its Fourier transform and filterbank in f64. "Exact" against transformers' float32
//! computation of the same weights means: the same greedy tokens, mel features within 1e-4,
//! encoder states and logits within 1e-3 absolute (summation order differs, nothing else); see
//! `tests/whisper_reference.rs`.
//!
//! Layout: `ct2` reads CTranslate2's `model.bin`, `source` gives both formats' tensors in one
//! naming, `config` the model's sizes and decoding lists, `vocab` the tokens, `matmul` the packed
//! f32 matrix products, `mel` the front end, `model` the encoder and decoder, `decode` the rules.

mod config;
mod ct2;
mod decode;
mod matmul;
mod mel;
mod model;
mod source;
mod vocab;

use std::ops::ControlFlow;
use std::path::Path;

use crate::cpu::CpuContext;
use crate::Error;

pub use config::WhisperInfo;

/// Samples per second Whisper listens at.
pub const SAMPLE_RATE: usize = 16_000;
/// Samples in one 30 s window.
pub const WINDOW_SAMPLES: usize = 30 * SAMPLE_RATE;

/// A loaded Whisper model and the threads it runs on.
pub struct Whisper {
    config: config::WhisperConfig,
    weights: model::WhisperWeights,
    vocab: vocab::Vocabulary,
    mel_filters: mel::MelFilters,
    cpu: CpuContext,
}

/// How to transcribe.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscribeOptions {
    /// The spoken language as Whisper's code ("en", "zh", "de", "fr", "es", ...); `None`
    /// detects it from the first window.
    pub language: Option<String>,
    /// Whether to ask the model for timestamps: then segments follow the model's own
    /// timestamp tokens; otherwise each 30 s window is one segment.
    pub timestamps: bool,
    /// Whether to decode again at higher temperatures (0.2, 0.4, ... 1.0) when a window's text
    /// repeats itself (gzip-like compression ratio above 2.4) or its average log-probability is
    /// below -1, as OpenAI's Whisper does. Sampling is seeded, so results repeat.
    pub temperature_fallback: bool,
}

/// Where a transcription stands, given to the progress callback after each window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TranscribeProgress {
    /// Seconds of audio transcribed so far.
    pub done_s: f32,
    /// Seconds of audio in all.
    pub total_s: f32,
}

/// The text of some audio.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The language code the text was decoded in (given or detected).
    pub language: String,
    /// All segments' text joined, trimmed.
    pub text: String,
    /// The pieces of text with their times.
    pub segments: Vec<Segment>,
    /// Length of the audio in seconds.
    pub duration_s: f32,
}

/// A piece of the text and when it was said.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Start, seconds from the beginning of the audio.
    pub start_s: f32,
    /// End, seconds from the beginning of the audio.
    pub end_s: f32,
    /// The text (may start with a space, as Whisper writes it).
    pub text: String,
}

impl Whisper {
    /// Loads a Whisper model folder: CTranslate2's `model.bin` + `config.json` +
    /// `tokenizer.json` or `vocabulary.txt` (faster-whisper's conversion), or transformers'
    /// `model.safetensors` + `config.json` + `tokenizer.json`. Runs on `threads` threads
    /// (0: one per physical core).
    pub fn load(dir: &Path, threads: usize) -> Result<Whisper, Error> {
        let threads = if threads == 0 {
            crate::cpu::pool::physical_cores()
        } else {
            threads
        };
        Self::load_with(dir, CpuContext::best(threads))
    }

    /// [`Whisper::load`] on a given CPU context (its threads and kernel level).
    pub fn load_with(dir: &Path, cpu: CpuContext) -> Result<Whisper, Error> {
        let source = source::TensorSource::open(dir)?;
        let config = config::WhisperConfig::read(dir, &source)?;
        let vocab = vocab::Vocabulary::read(dir, config.vocab_size)?;
        let weights = model::WhisperWeights::load(&source, &config, dir)?;
        let mel_filters = mel::MelFilters::new(config.n_mels);
        Ok(Whisper {
            config,
            weights,
            vocab,
            mel_filters,
            cpu,
        })
    }

    /// What the model is: format, sizes, languages.
    pub fn info(&self) -> WhisperInfo {
        self.config
            .info(self.weights.parameter_count(), self.vocab.language_codes())
    }

    /// Transcribes 16 kHz mono samples (any length; 30 s windows). `progress` is called after
    /// each window and may return `ControlFlow::Break(())` to stop: then the result is
    /// [`Error::Cancelled`].
    pub fn transcribe(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
        progress: &mut dyn FnMut(TranscribeProgress) -> ControlFlow<()>,
    ) -> Result<Transcript, Error> {
        decode::transcribe(self, samples, options, progress)
    }

    /// The log-mel features of one window (`n_mels` rows of 3000 frames, row-major), as the
    /// model sees them: for checks against other implementations.
    pub fn log_mel(&self, window: &[f32]) -> Vec<f32> {
        mel::log_mel(&self.mel_filters, self.cpu.pool(), window)
    }

    /// The encoder's output for one window's features (1500 rows of `d_model`, row-major).
    pub fn encode(&self, features: &[f32]) -> Result<Vec<f32>, Error> {
        model::encode(&self.cpu, &self.weights, &self.config, features)
    }

    /// The logits after the decoder has read `tokens` with `encoded` (from
    /// [`Whisper::encode`]): one row of `vocab_size` for the last token.
    pub fn logits(&self, encoded: &[f32], tokens: &[u32]) -> Result<Vec<f32>, Error> {
        let mut state = model::DecoderState::new(&self.cpu, &self.weights, &self.config, encoded);
        let mut logits = vec![0.0; self.config.vocab_size];
        for (position, &token) in tokens.iter().enumerate() {
            if token as usize >= self.config.vocab_size {
                return Err(Error::TokenOutOfRange {
                    token,
                    position,
                    vocab_size: self.config.vocab_size,
                });
            }
        }
        if tokens.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        if tokens.len() > self.config.max_target_positions {
            return Err(Error::ContextFull {
                needed: tokens.len(),
                limit: self.config.max_target_positions,
            });
        }
        state.feed(&self.cpu, &self.weights, tokens, &mut logits);
        Ok(logits)
    }

    /// The greedy token ids (after the prompt) of one window of samples, with the rules of
    /// [`Whisper::transcribe`]; and the language code used. For checks against other
    /// implementations.
    pub fn greedy_tokens(
        &self,
        window: &[f32],
        options: &TranscribeOptions,
    ) -> Result<(String, Vec<u32>), Error> {
        decode::greedy_window_tokens(self, window, options)
    }
}

impl std::fmt::Debug for Whisper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Whisper")
            .field("info", &self.info())
            .finish_non_exhaustive()
    }
}
