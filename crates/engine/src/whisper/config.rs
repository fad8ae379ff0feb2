//! A Whisper model's sizes and decoding lists, read from its weights and `config.json`.
//!
//! Sizes come from the weights' shapes (width from the token embedding, mel bins from the first
//! convolution, layers by counting, positions from the position tables), so the two folder
//! forms agree by construction; the head counts come from `config.json`
//! (`encoder_attention_heads`, transformers) or the `num_heads` scalars (`model.bin`). The
//! suppressed tokens come from `generation_config.json` or `config.json` (`suppress_tokens`,
//! `begin_suppress_tokens`; CTranslate2's `suppress_ids`, `suppress_ids_begin`).

use std::path::Path;

use serde::Deserialize;

use super::source::{Format, TensorSource};
use crate::Error;

/// The most layers, width, heads Hearth accepts: well above whisper large (32 layers of 1280).
const MAX_LAYERS: usize = 64;
const MAX_WIDTH: usize = 8192;
/// The most `config.json`/`generation_config.json` bytes read.
const MAX_JSON_BYTES: u64 = 16 << 20;

/// What a loaded Whisper model is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WhisperInfo {
    /// The size by Whisper's names when it matches one ("tiny", "base", "small", "medium",
    /// "large", "large-v3", "large-v3-turbo"), else "custom".
    pub size: String,
    /// "ctranslate2" (model.bin) or "safetensors".
    pub format: String,
    /// Mel bins of the front end (80, or 128 from large-v3 on).
    pub n_mels: usize,
    /// Tokens in the vocabulary (51,865; 51,866 from large-v3 on; 51,864 English-only).
    pub vocab_size: usize,
    /// Whether the model knows many languages (its vocabulary has language tokens beyond
    /// English).
    pub multilingual: bool,
    /// The language codes the model can be told or can detect.
    pub languages: Vec<String>,
    /// Weights in the model.
    pub parameters: usize,
    /// Encoder and decoder layers.
    pub encoder_layers: usize,
    /// Decoder layers.
    pub decoder_layers: usize,
    /// Width of the model.
    pub d_model: usize,
}

/// The numbers the forward pass and the decoding rules need.
#[derive(Debug, Clone)]
pub(crate) struct WhisperConfig {
    pub(crate) format: Format,
    pub(crate) n_mels: usize,
    pub(crate) d_model: usize,
    pub(crate) encoder_layers: usize,
    pub(crate) decoder_layers: usize,
    pub(crate) encoder_heads: usize,
    pub(crate) decoder_heads: usize,
    pub(crate) encoder_ffn: usize,
    pub(crate) decoder_ffn: usize,
    /// Encoder positions (1500: 30 s after the stride-2 convolution).
    pub(crate) max_source_positions: usize,
    /// Decoder positions (448).
    pub(crate) max_target_positions: usize,
    pub(crate) vocab_size: usize,
    /// Tokens never written (`None`: the folder does not say).
    pub(crate) suppress_tokens: Option<Vec<u32>>,
    /// Tokens not written first.
    pub(crate) begin_suppress_tokens: Option<Vec<u32>>,
}

/// The parts of transformers' `config.json`/`generation_config.json` and CTranslate2's
/// `config.json` that are read.
#[derive(Debug, Default, Deserialize)]
struct JsonConfig {
    encoder_attention_heads: Option<usize>,
    decoder_attention_heads: Option<usize>,
    suppress_tokens: Option<Vec<i64>>,
    begin_suppress_tokens: Option<Vec<i64>>,
    suppress_ids: Option<Vec<i64>>,
    suppress_ids_begin: Option<Vec<i64>>,
}

fn read_json(dir: &Path, file: &str) -> Result<Option<JsonConfig>, Error> {
    let path = dir.join(file);
    if !path.is_file() {
        return Ok(None);
    }
    let bad = |reason: String| Error::invalid_model(dir, format!("{file}: {reason}"));
    let len = std::fs::metadata(&path)
        .map_err(|e| bad(e.to_string()))?
        .len();
    if len > MAX_JSON_BYTES {
        return Err(bad(format!("is {len} bytes, far more than a config takes")));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| bad(format!("is not a config Hearth can read ({e})")))
}

impl WhisperConfig {
    pub(crate) fn read(dir: &Path, source: &TensorSource) -> Result<WhisperConfig, Error> {
        let invalid = |reason: String| Error::invalid_model(dir, reason);
        let config = read_json(dir, "config.json")?.unwrap_or_default();
        let generation = read_json(dir, "generation_config.json")?.unwrap_or_default();
        let shape = |name: &str| {
            source.shape(name).ok_or_else(|| {
                invalid(format!(
                    "the weights have no {name}; is this a Whisper model?"
                ))
            })
        };
        let embed = shape("decoder/embeddings/weight")?;
        let conv1 = shape("encoder/conv1/weight")?;
        let enc_pos = shape("encoder/position_encodings/encodings")?;
        let dec_pos = shape("decoder/position_encodings/encodings")?;
        let [vocab_size, d_model] = embed[..] else {
            return Err(invalid(format!(
                "the token embedding has shape {embed:?}, not 2-D"
            )));
        };
        let [conv_out, n_mels, 3] = conv1[..] else {
            return Err(invalid(format!(
                "the first convolution has shape {conv1:?}, not [width, mel bins, 3]"
            )));
        };
        if conv_out != d_model || d_model == 0 || d_model > MAX_WIDTH {
            return Err(invalid(format!(
                "the width is {d_model} (token embedding) and {conv_out} (convolution); \
                 they must agree and be at most {MAX_WIDTH}"
            )));
        }
        if !(1..=512).contains(&n_mels) || !(50_258..=1 << 20).contains(&vocab_size) {
            return Err(invalid(format!(
                "{n_mels} mel bins and {vocab_size} tokens are not a Whisper model's"
            )));
        }
        let positions = |s: &[usize], what: &str| -> Result<usize, Error> {
            match s {
                [n, d] if *d == d_model && (1..=1 << 16).contains(n) => Ok(*n),
                _ => Err(invalid(format!(
                    "the {what} position table has shape {s:?}"
                ))),
            }
        };
        let max_source_positions = positions(&enc_pos, "encoder")?;
        let max_target_positions = positions(&dec_pos, "decoder")?;
        let count = |stack: &str| {
            (0..=MAX_LAYERS)
                .take_while(|i| {
                    source
                        .shape(&format!("{stack}/layer_{i}/self_attention/linear_1/weight"))
                        .is_some()
                })
                .count()
        };
        let (encoder_layers, decoder_layers) = (count("encoder"), count("decoder"));
        if encoder_layers == 0 || decoder_layers == 0 || encoder_layers > MAX_LAYERS {
            return Err(invalid(format!(
                "{encoder_layers} encoder and {decoder_layers} decoder layers found; a Whisper \
                 model has 1 to {MAX_LAYERS} of each"
            )));
        }
        let ffn = |stack: &str| -> Result<usize, Error> {
            match shape(&format!("{stack}/layer_0/ffn/linear_0/weight"))?[..] {
                [f, d] if d == d_model && (1..=4 * MAX_WIDTH).contains(&f) => Ok(f),
                ref s => Err(invalid(format!(
                    "{stack} layer 0's first MLP matrix has shape {s:?}"
                ))),
            }
        };
        let heads = |stack: &str, json: Option<usize>| -> Result<usize, Error> {
            let n = match source.format() {
                Format::Ct2 => source
                    .scalar(&format!("{stack}/num_heads"))
                    .and_then(|n| usize::try_from(n).ok()),
                Format::Safetensors => json,
            }
            .ok_or_else(|| {
                invalid(format!(
                    "the {stack}'s number of attention heads is not given ({})",
                    match source.format() {
                        Format::Ct2 => format!("model.bin has no {stack}/num_heads"),
                        Format::Safetensors =>
                            format!("config.json has no {stack}_attention_heads"),
                    }
                ))
            })?;
            if n == 0 || d_model % n != 0 {
                return Err(invalid(format!(
                    "{n} {stack} attention heads do not divide the width {d_model}"
                )));
            }
            Ok(n)
        };
        let list = |values: Option<Vec<i64>>| -> Result<Option<Vec<u32>>, Error> {
            values
                .map(|v| {
                    v.into_iter()
                        .filter(|&t| t >= 0)
                        .map(|t| {
                            u32::try_from(t)
                                .ok()
                                .filter(|&t| (t as usize) < vocab_size)
                                .ok_or_else(|| {
                                    invalid(format!(
                                        "suppressed token {t} is outside the vocabulary of {vocab_size}"
                                    ))
                                })
                        })
                        .collect()
                })
                .transpose()
        };
        Ok(WhisperConfig {
            format: source.format(),
            n_mels,
            d_model,
            encoder_layers,
            decoder_layers,
            encoder_heads: heads("encoder", config.encoder_attention_heads)?,
            decoder_heads: heads("decoder", config.decoder_attention_heads)?,
            encoder_ffn: ffn("encoder")?,
            decoder_ffn: ffn("decoder")?,
            max_source_positions,
            max_target_positions,
            vocab_size,
            suppress_tokens: list(
                generation
                    .suppress_tokens
                    .or(config.suppress_tokens)
                    .or(config.suppress_ids),
            )?,
            begin_suppress_tokens: list(
                generation
                    .begin_suppress_tokens
                    .or(config.begin_suppress_tokens)
                    .or(config.suppress_ids_begin),
            )?,
        })
    }

    /// Whisper's name for these sizes.
    fn size_name(&self) -> &'static str {
        match (
            self.d_model,
            self.encoder_layers,
            self.decoder_layers,
            self.n_mels,
        ) {
            (384, 4, 4, 80) => "tiny",
            (512, 6, 6, 80) => "base",
            (768, 12, 12, 80) => "small",
            (1024, 24, 24, 80) => "medium",
            (1280, 32, 32, 80) => "large",
            (1280, 32, 32, 128) => "large-v3",
            (1280, 32, 4, 128) => "large-v3-turbo",
            _ => "custom",
        }
    }

    pub(crate) fn info(&self, parameters: usize, languages: Vec<String>) -> WhisperInfo {
        WhisperInfo {
            size: self.size_name().to_string(),
            format: match self.format {
                Format::Ct2 => "ctranslate2",
                Format::Safetensors => "safetensors",
            }
            .to_string(),
            n_mels: self.n_mels,
            vocab_size: self.vocab_size,
            multilingual: languages.len() > 1,
            languages,
            parameters,
            encoder_layers: self.encoder_layers,
            decoder_layers: self.decoder_layers,
            d_model: self.d_model,
        }
    }
}
