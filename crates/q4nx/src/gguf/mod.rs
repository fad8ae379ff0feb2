//! GGUF, llama.cpp's model file: read it ([`GgufFile`]), decode its tensor types to f32 exactly
//! as ggml does ([`dequantize`]), and turn a Llama, Qwen2, Qwen3, Qwen3-MoE, Gemma 3, Phi-3 or
//! LFM2 GGUF into a model folder with a `tokenizer.json` built from its vocabulary: a Q4NX copy
//! ([`import_gguf`]) or a link that reads the file where it lies ([`link_gguf`]).

mod dequant;
mod experts;
mod family_config;
mod file;
mod import;
mod link;
mod link_file;
pub(crate) mod model;
pub mod rows8;
mod tokenizer;
pub mod write;

pub use dequant::{dequantize, e8m0_half, GgmlType, MXFP4_VALUES};
pub use file::{
    is_read_key, parse, Array, GgufFile, Header, TensorInfo, Value, DEFAULT_ALIGNMENT, MAGIC,
    MAX_ARRAY_LEN, MAX_METADATA_BYTES, MAX_TENSORS,
};
pub use import::{check_header, import_gguf, GgufImportReport};
pub use link::{link_gguf, GgufLinkReport};
pub use link_file::{GgufLink, LINK_FILE};
pub use tokenizer::{tokenizer_files, TokenizerFiles};
