//! Writes GGUF files: small ones built by tests (hand-made blocks, malformed tables) and the
//! fuzz target. The converter only reads GGUF; this is the other half of the same layout.

use crate::gguf::{GgmlType, Value, DEFAULT_ALIGNMENT};

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
        Value::Array(items) => {
            // An empty array's element type is arbitrary: say u8.
            let element = items.first().map_or(0, type_of);
            out.extend_from_slice(&element.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}
