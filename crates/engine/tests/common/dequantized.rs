//! A Q4NX model written back as f32 safetensors: what the quantized model computes with, for
//! holding the Q4NX path to its own weights.

use std::collections::BTreeMap;
use std::path::Path;

use q4nx::{Tensor, Weights};

/// Writes every tensor of `q4nx_dir` but `skip` to `out/model.safetensors`, the quantized ones
/// dequantized to f32 with their logical shape (K from the `source` tensor), and copies the
/// config.
pub fn write_dequantized(q4nx_dir: &Path, source: &Path, out: &Path, skip: Option<&str>) {
    std::fs::create_dir_all(out).unwrap();
    std::fs::copy(q4nx_dir.join("config.json"), out.join("config.json")).unwrap();
    let weights = Weights::open(q4nx_dir).unwrap();
    let original = Weights::open(source).unwrap();
    let (mut header, mut data) = (BTreeMap::new(), Vec::new());
    for name in weights.names().into_iter().filter(|n| Some(*n) != skip) {
        let (dtype, shape, bytes) = match weights.get(name).unwrap() {
            Tensor::Dense(t) => (t.dtype.name().to_owned(), t.shape.clone(), t.bytes.to_vec()),
            Tensor::Q4_1(m) | Tensor::Q8(m) => {
                let cols = original.get(name).unwrap().shape()[1];
                let bytes: Vec<u8> = m
                    .dequantize()
                    .chunks(m.cols)
                    .flat_map(|row| row[..cols].iter().flat_map(|v| v.to_le_bytes()))
                    .collect();
                ("F32".to_owned(), vec![m.rows, cols], bytes)
            }
            Tensor::Gguf(_) => unreachable!("a conversion writes no GGUF blocks"),
        };
        let start = data.len();
        data.extend_from_slice(&bytes);
        header.insert(
            name.to_owned(),
            serde_json::json!({ "dtype": dtype, "shape": shape, "data_offsets": [start, data.len()] }),
        );
    }
    let mut json = serde_json::to_vec(&header).unwrap();
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&json);
    file.extend_from_slice(&data);
    std::fs::write(out.join("model.safetensors"), file).unwrap();
}
