//! Helpers shared by the integration tests: tiny Hugging Face-shaped model folders.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use half::{bf16, f16};
use q4nx::container::{encode_header, EntryToWrite};
use q4nx::layout::{expected_tensors, Role};
use q4nx::{Dtype, ModelConfig};

/// A tensor to write: name, dtype, shape, raw bytes.
pub struct Raw {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// Writes a safetensors file with the tensors back to back.
pub fn write_safetensors(path: &Path, tensors: &[Raw], metadata: &BTreeMap<String, String>) {
    let entries: Vec<EntryToWrite> = tensors
        .iter()
        .map(|t| EntryToWrite {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
        })
        .collect();
    let mut bytes = encode_header(&entries, metadata);
    for t in tensors {
        assert_eq!(
            t.bytes.len(),
            t.shape.iter().product::<usize>() * t.dtype.size()
        );
        bytes.extend_from_slice(&t.bytes);
    }
    std::fs::write(path, bytes).unwrap();
}

/// Deterministic pseudo-random values in [-scale, scale).
pub fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(2862933555777941757)
        .wrapping_add(3037000493);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Encodes f32 values in a float dtype.
pub fn encode(dtype: Dtype, v: &[f32]) -> Vec<u8> {
    match dtype {
        Dtype::F32 => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Dtype::F16 => v
            .iter()
            .flat_map(|x| f16::from_f32(*x).to_le_bytes())
            .collect(),
        Dtype::Bf16 => v
            .iter()
            .flat_map(|x| bf16::from_f32(*x).to_le_bytes())
            .collect(),
        other => panic!("cannot encode {other}"),
    }
}

/// A tiny Llama config: 8 heads, 2 KV heads, head_dim 32, hidden 64, 2 layers, K = 96 for
/// down_proj (padded to 256), vocab 96.
pub fn tiny_llama_json(tied: bool) -> String {
    format!(
        r#"{{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
  "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 96, "vocab_size": 96,
  "rope_parameters": {{"rope_theta": 500000.0, "rope_type": "default"}},
  "rms_norm_eps": 1e-5, "tie_word_embeddings": {tied}, "bos_token_id": 1,
  "eos_token_id": [2, 3], "torch_dtype": "bfloat16"}}"#
    )
}

/// Writes a Hugging Face-shaped folder for `config_json`, split over two shards with mixed
/// dtypes (F32 embedding, F16 norms, BF16 linears), and returns the source tensors as f32.
pub fn write_hf_folder(dir: &Path, config_json: &str) -> BTreeMap<String, Vec<f32>> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.json"), config_json).unwrap();
    std::fs::write(dir.join("tokenizer.json"), "{\"model\": {}}").unwrap();
    std::fs::write(dir.join("tokenizer_config.json"), "{}").unwrap();
    std::fs::write(dir.join("chat_template.jinja"), "{{ messages }}").unwrap();
    let config = ModelConfig::from_json(config_json).unwrap();
    let mut shards: [Vec<Raw>; 2] = [Vec::new(), Vec::new()];
    let mut originals = BTreeMap::new();
    let mut weight_map = serde_json::Map::new();
    for (i, t) in expected_tensors(&config).into_iter().enumerate() {
        if t.name == "lm_head.weight" && config.tie_word_embeddings {
            continue;
        }
        let n: usize = t.shape.iter().product();
        let (dtype, v) = match t.role {
            Role::Embedding => (Dtype::F32, values(i as u64, n, 1.0)),
            Role::Norm => (
                Dtype::F16,
                values(i as u64, n, 0.5).iter().map(|x| 1.0 + x).collect(),
            ),
            Role::Linear => (Dtype::Bf16, values(i as u64, n, 0.05)),
        };
        // Store what the file holds exactly (the f16/bf16 rounding of v).
        let exact: Vec<f32> = match dtype {
            Dtype::F16 => v.iter().map(|x| f16::from_f32(*x).to_f32()).collect(),
            Dtype::Bf16 => v.iter().map(|x| bf16::from_f32(*x).to_f32()).collect(),
            _ => v.clone(),
        };
        let shard = usize::from(t.name.contains("layers.1") || t.name == "lm_head.weight");
        weight_map.insert(
            t.name.clone(),
            format!("model-0000{}-of-00002.safetensors", shard + 1).into(),
        );
        shards[shard].push(Raw {
            name: t.name.clone(),
            dtype,
            shape: t.shape.clone(),
            bytes: encode(dtype, &v),
        });
        originals.insert(t.name, exact);
    }
    for (k, tensors) in shards.iter().enumerate() {
        write_safetensors(
            &dir.join(format!("model-0000{}-of-00002.safetensors", k + 1)),
            tensors,
            &BTreeMap::new(),
        );
    }
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        serde_json::json!({"metadata": {}, "weight_map": weight_map}).to_string(),
    )
    .unwrap();
    originals
}
