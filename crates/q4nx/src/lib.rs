//! The Q4NX model format, as FastFlowLM runs it on the NPU: read it by memory map (no copy of
//! weight bytes), validate it with precise errors, and write it from Hugging Face safetensors.
//!
//! `model.q4nx` is a safetensors file. Linear weights are stored as FastFlowLM tiles of
//! 32 rows x 256 columns (Q4_1: 5120 bytes, Q8: 8704 bytes), dtype `I8`, row-block major; the
//! embedding and the norms are BF16. See [`tile`] for the byte layout.
//!
//! Reading: [`Weights::open`] a folder, [`Weights::get`] a [`Tensor`], [`validate`] against a
//! [`ModelConfig`]. Writing: [`quantize_q4_1_tiles`] and [`convert`]; random models of any shape:
//! [`synthetic::write_random_model`]. The format's facts (tile layout in [`tile`], float
//! decoding in [`dtype`], config checks in [`ModelConfig::from_path`]) live here and nowhere else.

mod config;
pub mod container;
mod convert;
pub mod dtype;
mod error;
mod gemma3;
pub mod gguf;
mod gpt_oss;
mod gpt_oss_experts;
mod json_field;
pub mod layout;
mod lfm2;
mod moe;
mod phi3;
pub mod quantize;
mod rope_scaling;
pub mod synthetic;
mod tensor;
pub mod tile;
mod validate;
mod weights;

pub use config::{Family, ModelConfig, MAX_CONFIG_BYTES, MAX_HIDDEN_SIZE, MAX_INTERMEDIATE_SIZE};
pub use convert::{convert, ConvertOptions, ConvertProgress, ConvertReport, Variant};
pub use dtype::Dtype;
pub use error::Error;
pub use gemma3::Gemma3Params;
pub use gpt_oss::GptOssParams;
pub use lfm2::Lfm2Params;
pub use moe::MoeParams;
pub use phi3::Phi3Params;
pub use quantize::quantize_q4_1_tiles;
pub use rope_scaling::RopeScaling;
pub use tensor::{DenseTensor, GgufMatrix, Tensor, TileMatrix};
pub use validate::{validate, validate_dir};
pub use weights::{WeightFormat, Weights};
