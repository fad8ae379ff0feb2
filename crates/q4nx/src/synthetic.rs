//! Random-weight Q4NX models of any shape, for benchmarks and tests that need a model's size and
//! layout but not its answers (`hearth bench --shape`).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::container::{encode_header, EntryToWrite};
use crate::layout::{expected_tensors, padded_cols, Role};
use crate::tile::{Q4_1_TILE_BYTES, TILE_COLS, TILE_ROWS};
use crate::{Dtype, Error, ModelConfig};

/// Writes `dir/model.q4nx` with every tensor `config` implies, random but deterministic per
/// `seed`: Q4_1 tiles whose weights `q * d + m` are centred with a spread of about `1 / sqrt(K)`
/// (so activations stay finite through all layers), a random BF16 embedding, all-ones norms, and
/// the other dense matrices (a Qwen3-MoE router, LFM2's convolution kernels) random with a spread
/// of about `1 / sqrt(K)` too, so a router's choice of experts varies from token to token.
///
/// The file is written beside as `model.q4nx.partial` and renamed when complete, so a reader
/// never sees half a model. `config.json` is the caller's to write (it knows the model's own
/// spelling of it).
pub fn write_random_model(dir: &Path, config: &ModelConfig, seed: u64) -> Result<(), Error> {
    let partial = dir.join("model.q4nx.partial");
    let path = dir.join("model.q4nx");
    write_random_q4nx(&partial, config, seed).map_err(|e| Error::io(&partial, e))?;
    fs::rename(&partial, &path).map_err(|e| Error::io(&path, e))
}

fn write_random_q4nx(path: &Path, config: &ModelConfig, seed: u64) -> std::io::Result<()> {
    let tensors = expected_tensors(config);
    let entries: Vec<EntryToWrite> = tensors
        .iter()
        .map(|t| match t.role {
            Role::Linear => {
                let (n, k) = (t.shape[0], padded_cols(t.shape[1]));
                EntryToWrite {
                    name: t.name.clone(),
                    dtype: Dtype::I8,
                    shape: vec![n / TILE_ROWS * (k / TILE_COLS), Q4_1_TILE_BYTES],
                }
            }
            Role::Embedding | Role::Norm => EntryToWrite {
                name: t.name.clone(),
                dtype: Dtype::Bf16,
                shape: t.shape.clone(),
            },
        })
        .collect();
    let mut file = BufWriter::with_capacity(1 << 22, fs::File::create(path)?);
    file.write_all(&encode_header(&entries, &Default::default()))?;
    let mut rng = XorShift(seed | 1); // xorshift never leaves 0
    for t in &tensors {
        match t.role {
            Role::Norm if t.shape.len() == 1 => {
                for _ in 0..t.shape[0] {
                    file.write_all(&bf16_bits(1.0).to_le_bytes())?;
                }
            }
            Role::Norm => {
                let k = *t.shape.last().expect("a matrix has dimensions");
                let spread = 2.0 / (k as f32).sqrt();
                for _ in 0..t.shape.iter().product::<usize>() {
                    let v = (rng.unit() - 0.5) * spread;
                    file.write_all(&bf16_bits(v).to_le_bytes())?;
                }
            }
            Role::Embedding => {
                let mut row = vec![0u8; t.shape[1] * 2];
                for _ in 0..t.shape[0] {
                    for pair in row.chunks_exact_mut(2) {
                        let v = rng.unit() - 0.5;
                        pair.copy_from_slice(&bf16_bits(v * 0.1).to_le_bytes());
                    }
                    file.write_all(&row)?;
                }
            }
            Role::Linear => {
                let (n, k) = (t.shape[0], padded_cols(t.shape[1]));
                let mut tile = vec![0u8; Q4_1_TILE_BYTES];
                for _ in 0..n / TILE_ROWS * (k / TILE_COLS) {
                    random_q4_1_tile(&mut rng, t.shape[1], &mut tile);
                    file.write_all(&tile)?;
                }
            }
        }
    }
    file.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// One tile of weights spread about `1 / sqrt(k)` around 0: random scales `d` near the step,
/// mins `-7.5 d` (codes 0..15 centred), random nibbles.
fn random_q4_1_tile(rng: &mut XorShift, k: usize, tile: &mut [u8]) {
    use crate::tile::{Q4_1_MINS_AT, Q4_1_NIBBLES_AT, SCALES_AT};
    // Uniform codes 0..15 have a standard deviation of 4.6.
    let step = 1.0 / (4.6 * (k as f32).sqrt());
    for j in 0..TILE_ROWS * (TILE_COLS / crate::tile::GROUP) {
        let d = step * (0.75 + 0.5 * rng.unit());
        let d = f32::from_bits(u32::from(bf16_bits(d)) << 16);
        let (scale, min) = (SCALES_AT + 2 * j, Q4_1_MINS_AT + 2 * j);
        tile[scale..scale + 2].copy_from_slice(&bf16_bits(d).to_le_bytes());
        tile[min..min + 2].copy_from_slice(&bf16_bits(-7.5 * d).to_le_bytes());
    }
    for chunk in tile[Q4_1_NIBBLES_AT..].chunks_exact_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes());
    }
}

/// BF16 bits of `v`, rounded half up (plenty for random weights).
fn bf16_bits(v: f32) -> u16 {
    ((v.to_bits() + 0x8000) >> 16) as u16
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A float in `[0, 1)` from the top 24 bits.
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{validate, Tensor, Weights};

    const TINY: &str = r#"{"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "intermediate_size": 512, "vocab_size": 1024}"#;

    fn tiny() -> ModelConfig {
        ModelConfig::from_json(TINY).unwrap()
    }

    #[test]
    fn a_random_model_is_a_valid_q4nx_model() {
        let dir = tempfile::tempdir().unwrap();
        let config = tiny();
        write_random_model(dir.path(), &config, 7).unwrap();
        assert!(!dir.path().join("model.q4nx.partial").exists());
        // The reader takes the tile matrices' shapes from config.json, the caller's to write.
        fs::write(dir.path().join("config.json"), TINY).unwrap();
        let weights = Weights::open(dir.path()).unwrap();
        validate(&weights, &config).expect("valid against its config");
        let Tensor::Q4_1(m) = weights.get("model.layers.1.mlp.down_proj.weight").unwrap() else {
            panic!("linears are Q4_1");
        };
        let mut row = vec![0.0; m.cols];
        m.dequantize_row(0, &mut row);
        assert!(row.iter().all(|v| v.is_finite() && v.abs() < 1.0));
    }

    #[test]
    fn a_random_mixture_of_experts_has_a_random_router() {
        const MOE: &str = r#"{"model_type": "qwen3_moe", "hidden_size": 256,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "intermediate_size": 512, "vocab_size": 1024, "num_experts": 8,
            "num_experts_per_tok": 2, "moe_intermediate_size": 64}"#;
        let config = ModelConfig::from_json(MOE).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_random_model(dir.path(), &config, 7).unwrap();
        fs::write(dir.path().join("config.json"), MOE).unwrap();
        let weights = Weights::open(dir.path()).unwrap();
        validate(&weights, &config).expect("valid against its config");
        let Tensor::Dense(router) = weights.get("model.layers.1.mlp.gate.weight").unwrap() else {
            panic!("the router is dense");
        };
        let mut values = vec![0.0; 8 * 256];
        crate::dtype::decode_f32(router.dtype, router.bytes, &mut values);
        let spread = 1.0 / 16.0;
        assert!(
            values.iter().all(|v| v.abs() <= spread),
            "about 1 / sqrt(K)"
        );
        assert!(values.iter().filter(|v| v.abs() > spread / 4.0).count() > 1000);
    }

    #[test]
    fn the_same_seed_writes_the_same_bytes() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_random_model(a.path(), &tiny(), 3).unwrap();
        write_random_model(b.path(), &tiny(), 3).unwrap();
        let read = |d: &tempfile::TempDir| fs::read(d.path().join("model.q4nx")).unwrap();
        assert!(read(&a) == read(&b));
    }
}
