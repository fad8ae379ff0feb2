//! Checks that a model's weights hold every tensor its config implies, with the right dtype,
//! shape and tile count, before anything runs on them.

use std::path::Path;

use crate::layout::{expected_tensors, padded_cols, Role};
use crate::{Error, ModelConfig, Tensor, WeightFormat, Weights};

/// Every tensor the config implies is present with the right dtype/shape/tile count.
///
/// Q4NX: embedding and norms BF16, linears Q4_1 or Q8 tiles, `lm_head.weight` always present.
/// Safetensors: any of BF16/F16/F32 in the Hugging Face shapes; `lm_head.weight` may be absent
/// when `tie_word_embeddings` is set.
pub fn validate(weights: &Weights, config: &ModelConfig) -> Result<(), Error> {
    let q4nx = weights.format() == WeightFormat::Q4nx;
    for expected in expected_tensors(config) {
        let name = expected.name.as_str();
        if name == "lm_head.weight"
            && !q4nx
            && config.tie_word_embeddings
            && !weights.contains(name)
        {
            continue;
        }
        let tensor = weights.get(name)?;
        let wrong = |what: String| Error::WrongTensor {
            path: weights.path().to_path_buf(),
            tensor: name.to_string(),
            expected: what,
            found: tensor.describe(),
        };
        match (expected.role, &tensor) {
            (Role::Embedding | Role::Norm, Tensor::Dense(d)) => {
                // A tensor computed at open (FastFlowLM's Gemma 3 norms) may be F16 or F32.
                let dtype_ok = if q4nx && !weights.computed_at_open(name) {
                    d.dtype == crate::Dtype::Bf16
                } else {
                    d.dtype.is_float()
                };
                if !dtype_ok || d.shape != expected.shape {
                    return Err(wrong(format!(
                        "{} {:?}",
                        if q4nx { "BF16" } else { "BF16/F16/F32" },
                        expected.shape
                    )));
                }
            }
            (Role::Linear, Tensor::Q4_1(m) | Tensor::Q8(m)) => {
                let (n, k) = (expected.shape[0], expected.shape[1]);
                if m.rows != n || m.cols != padded_cols(k) {
                    return Err(wrong(format!(
                        "tiles [{n} x {}] (K = {k} padded to 256)",
                        padded_cols(k)
                    )));
                }
            }
            (Role::Linear | Role::Embedding, Tensor::Gguf(m)) => {
                if [m.rows, m.cols] != expected.shape[..] {
                    return Err(wrong(format!("GGUF blocks {:?}", expected.shape)));
                }
            }
            (Role::Linear, Tensor::Dense(d)) if !q4nx => {
                if !d.dtype.is_float() || d.shape != expected.shape {
                    return Err(wrong(format!("BF16/F16/F32 {:?}", expected.shape)));
                }
            }
            (Role::Linear, _) => {
                return Err(wrong(format!("Q4_1 tiles for {:?}", expected.shape)));
            }
            (Role::Embedding | Role::Norm, _) => {
                return Err(wrong(format!("BF16 {:?}", expected.shape)));
            }
        }
    }
    Ok(())
}

/// Convenience for hub/import: open `config.json` and the weights of a folder, and validate.
pub fn validate_dir(dir: &Path) -> Result<ModelConfig, Error> {
    let config_path = dir.join("config.json");
    if !config_path.is_file() {
        return Err(Error::Config {
            path: config_path,
            detail: "config.json is missing; a model folder needs it beside the weights".into(),
        });
    }
    let weights = Weights::open(dir)?;
    let config = match weights.config() {
        Some(c) => c.clone(),
        None => ModelConfig::from_path(&config_path)?,
    };
    validate(&weights, &config)?;
    Ok(config)
}
