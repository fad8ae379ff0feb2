//! GGUF, llama.cpp's model file: read it ([`GgufFile`]), decode its tensor types to f32 exactly
//! as ggml does ([`dequantize`]), and turn a Llama or Qwen3 GGUF into a Q4NX model folder
//! ([`import_gguf`]) with a `tokenizer.json` built from its vocabulary.

mod dequant;
mod file;
mod import;
mod tokenizer;
pub mod write;

pub use dequant::{dequantize, GgmlType};
pub use file::{
    is_read_key, parse, Array, GgufFile, Header, TensorInfo, Value, DEFAULT_ALIGNMENT, MAGIC,
    MAX_ARRAY_LEN, MAX_METADATA_BYTES, MAX_TENSORS,
};
pub use import::{check_header, import_gguf, GgufImportReport};
pub use tokenizer::{tokenizer_files, TokenizerFiles};
