//! Writes GGUF files: small ones built by tests (hand-made blocks, malformed tables) and the
//! fuzz target. The converter only reads GGUF; this is the other half of the same layout.

use crate::gguf::{Array, GgmlType, Value, DEFAULT_ALIGNMENT};

/// A GGUF file under construction, kept in memory.
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    kvs: Vec<(String, Value)>,
    tensors: Vec<TensorToWrite>,
}

/// One tensor table entry: name, dims, type id, a fixed offset (or None: next aligned one), data.
type TensorToWrite = (String, Vec<u64>, u32, Option<u64>, Vec<u8>);

impl GgufWriter {
    /// An empty file of GGUF `version`.
    pub fn new(version: u32) -> Self {
        GgufWriter {
            version,
            kvs: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Adds a metadata key/value.
    pub fn kv(&mut self, key: &str, value: Value) -> &mut Self {
        self.kvs.push((key.to_string(), value));
        self
    }

    /// Adds a tensor of `dims` (innermost first) with its encoded bytes, placed after the
    /// previous one at the next aligned offset.
    pub fn tensor(&mut self, name: &str, dims: &[u64], kind: GgmlType, data: &[u8]) -> &mut Self {
        self.tensors.push((
            name.to_string(),
            dims.to_vec(),
            kind.id(),
            None,
            data.to_vec(),
        ));
        self
    }

    /// Adds a tensor table entry with any type id and data offset, and no data (for tests of
    /// malformed files).
    pub fn tensor_raw(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.tensors.push((
            name.to_string(),
            dims.to_vec(),
            type_id,
            Some(offset),
            Vec::new(),
        ));
        self
    }

    /// The file's bytes.
    pub fn finish(&self) -> Vec<u8> {
        let alignment = self
            .kvs
            .iter()
            .find(|(k, _)| k == "general.alignment")
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(DEFAULT_ALIGNMENT)
            .max(1);
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.kvs.len() as u64).to_le_bytes());
        for (key, value) in &self.kvs {
            put_string(&mut out, key);
            out.extend_from_slice(&type_of(value).to_le_bytes());
            put_value(&mut out, value);
        }
        let mut offset = 0u64;
        let mut data = Vec::new();
        for (name, dims, type_id, fixed, bytes) in &self.tensors {
            put_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&type_id.to_le_bytes());
            let at = fixed.unwrap_or(offset);
            out.extend_from_slice(&at.to_le_bytes());
            if fixed.is_none() {
                data.extend_from_slice(bytes);
                offset += bytes.len() as u64;
                let padded = offset.div_ceil(alignment) * alignment;
                data.resize(padded as usize, 0);
                offset = padded;
            }
        }
        let start = (out.len() as u64).div_ceil(alignment) * alignment;
        out.resize(start as usize, 0);
        out.extend_from_slice(&data);
        out
    }
}

/// Bytes of `rows` rows of `cols` values in `kind`: constant codes after finite f16 scales.
fn blocks(kind: GgmlType, cols: u64, rows: u64) -> Vec<u8> {
    let per_row = kind.bytes_for(cols as usize);
    let mut out = vec![0x21u8; per_row * rows as usize];
    for block in out.chunks_exact_mut(kind.block_bytes()) {
        // d = 0.01 (and m = -0.05 for Q4_1): finite scales.
        block[0..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        if kind == GgmlType::Q4_1 {
            block[2..4].copy_from_slice(&half::f16::from_f32(-0.05).to_le_bytes());
        }
    }
    out
}

/// A tiny but complete model of `architecture` (the `{architecture}.*` keys of a Llama):
/// one layer, hidden size 64, a 32-token vocabulary with a byte-level BPE tokenizer and a chat
/// template, Q4_1 linears, a Q8_0 tied embedding and F32 norms. With `"llama"` Hearth imports
/// it (with `"phi3"`, its fused linears, once LongRoPE's factors are added); add keys before
/// [`GgufWriter::finish`] to make other cases.
pub fn tiny_model(architecture: &str) -> GgufWriter {
    let (hidden, ffn, vocab, kv) = (64u64, 64u64, 32u64, 32u64);
    let s = |t: &str| Value::String(t.into());
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", s(architecture));
    w.kv("general.name", s("tiny"));
    w.kv(
        &format!("{architecture}.embedding_length"),
        Value::U32(hidden as u32),
    );
    w.kv(&format!("{architecture}.block_count"), Value::U32(1));
    w.kv(
        &format!("{architecture}.attention.head_count"),
        Value::U32(2),
    );
    w.kv(
        &format!("{architecture}.attention.head_count_kv"),
        Value::U32(1),
    );
    w.kv(
        &format!("{architecture}.feed_forward_length"),
        Value::U32(ffn as u32),
    );
    w.kv(&format!("{architecture}.context_length"), Value::U32(256));
    w.kv(
        &format!("{architecture}.rope.freq_base"),
        Value::F32(10000.0),
    );
    w.kv(
        &format!("{architecture}.attention.layer_norm_rms_epsilon"),
        Value::F32(1e-5),
    );
    w.kv("tokenizer.ggml.model", s("gpt2"));
    w.kv("tokenizer.ggml.pre", s("smollm"));
    let tokens: Vec<String> = (0..vocab)
        .map(|i| {
            if i == 0 {
                "<|end|>".to_string()
            } else {
                format!("t{i}")
            }
        })
        .collect();
    w.kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)));
    let types: Vec<i32> = (0..vocab).map(|i| if i == 0 { 3 } else { 1 }).collect();
    w.kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)));
    w.kv(
        "tokenizer.ggml.merges",
        Value::Array(Array::String(vec!["t 1".into()])),
    );
    w.kv("tokenizer.ggml.eos_token_id", Value::U32(0));
    w.kv(
        "tokenizer.chat_template",
        s("{% for m in messages %}{{ m.content }}{% endfor %}"),
    );
    let f32s = |n: u64| {
        vec![0u8; 4 * n as usize]
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if i % 4 == 3 {
                    0x3f
                } else if i % 4 == 2 {
                    0x80
                } else {
                    0
                }
            })
            .collect::<Vec<u8>>()
    };
    w.tensor(
        "token_embd.weight",
        &[hidden, vocab],
        GgmlType::Q8_0,
        &blocks(GgmlType::Q8_0, hidden, vocab),
    );
    w.tensor(
        "blk.0.attn_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    w.tensor(
        "blk.0.ffn_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    let linears = if architecture == "phi3" {
        // Phi-3's fused q|k|v and gate|up, as llama.cpp keeps them.
        vec![
            ("attn_qkv", hidden, hidden + 2 * kv),
            ("attn_output", hidden, hidden),
            ("ffn_up", hidden, 2 * ffn),
            ("ffn_down", ffn, hidden),
        ]
    } else {
        vec![
            ("attn_q", hidden, hidden),
            ("attn_k", hidden, kv),
            ("attn_v", hidden, kv),
            ("attn_output", hidden, hidden),
            ("ffn_gate", hidden, ffn),
            ("ffn_up", hidden, ffn),
            ("ffn_down", ffn, hidden),
        ]
    };
    for (name, cols, rows) in linears {
        w.tensor(
            &format!("blk.0.{name}.weight"),
            &[cols, rows],
            GgmlType::Q4_1,
            &blocks(GgmlType::Q4_1, cols, rows),
        );
    }
    w.tensor(
        "output_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    w
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn type_of(value: &Value) -> u32 {
    match value {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn put_array(out: &mut Vec<u8>, array: &Array) {
    out.extend_from_slice(&array.element_type().to_le_bytes());
    out.extend_from_slice(&(array.len() as u64).to_le_bytes());
    match array {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => out.extend(v.iter().map(|&x| x as u8)),
        Array::U16(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::I16(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::U32(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::I32(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::F32(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::Bool(v) => out.extend(v.iter().map(|&x| u8::from(x))),
        Array::String(v) => v.iter().for_each(|s| put_string(out, s)),
        Array::Array(v) => v.iter().for_each(|a| put_array(out, a)),
        Array::U64(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::I64(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
        Array::F64(v) => out.extend(v.iter().flat_map(|x| x.to_le_bytes())),
    }
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.push(*v as u8),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(u8::from(*v)),
        Value::String(s) => put_string(out, s),
        Value::Array(items) => put_array(out, items),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}
