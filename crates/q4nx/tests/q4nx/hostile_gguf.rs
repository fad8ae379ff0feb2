//! GGUF headers cost what the file costs: the security review's hostile files (issue 39,
//! finding N3), each rebuilt here as a sparse file so that a "256 MiB" file costs nothing to
//! make. Before the reader kept arrays as typed vectors, skipped the keys Hearth never reads and
//! capped what a header may decode, each of these aborted the process on an allocation of
//! gigabytes or took seconds; now each one is read in bounded memory or refused plainly. The
//! same holds for a safetensors header (Q4NX is one), whose limit is 16 MiB.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use q4nx::gguf::{
    check_header, import_gguf, write::GgufWriter, Array, GgufFile, Value, MAX_ARRAY_LEN,
    MAX_METADATA_BYTES,
};

/// A GGUF v3 header with no tensors and the one key/value `key` of type `kind` whose encoded
/// value starts with `value_head`; the file is then extended with `tail` zero bytes (sparse),
/// and the padding to the data area.
fn sparse_gguf(dir: &Path, key: &str, kind: u32, value_head: &[u8], tail: u64) -> PathBuf {
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&(key.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key.as_bytes());
    bytes.extend_from_slice(&kind.to_le_bytes());
    bytes.extend_from_slice(value_head);
    let path = dir.join("evil.gguf");
    let mut f = File::create(&path).unwrap();
    f.write_all(&bytes).unwrap();
    f.set_len(bytes.len() as u64 + tail + 32).unwrap();
    path
}

/// The head of an array value: element type and count.
fn array_head(element: u32, count: u64) -> Vec<u8> {
    let mut out = element.to_le_bytes().to_vec();
    out.extend_from_slice(&count.to_le_bytes());
    out
}

#[test]
fn a_256_mib_byte_array_under_a_key_hearth_never_reads_costs_nothing() {
    // The review's reproduction: `evil.bytes`, u8 array of 2^28 (an 8 GiB Vec<Value> before).
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_gguf(
        tmp.path(),
        "evil.bytes",
        9,
        &array_head(0, 1 << 28),
        1 << 28,
    );
    let file = GgufFile::open(&path).expect("a valid (if useless) header");
    assert!(file.header().get("evil.bytes").is_none(), "skipped unread");
    assert!(file.header().metadata.is_empty());
}

#[test]
fn a_huge_array_under_a_key_hearth_reads_is_refused_by_its_length() {
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_gguf(
        tmp.path(),
        "tokenizer.ggml.token_type",
        9,
        &array_head(0, 1 << 28),
        1 << 28,
    );
    let err = GgufFile::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("268435456 entries") && err.contains(&MAX_ARRAY_LEN.to_string()),
        "{err}"
    );
}

#[test]
fn sixteen_million_empty_arrays_cost_no_memory_or_are_refused() {
    // 2^24 arrays of arrays, each an empty u8 array (12 zero bytes): 727 MB before.
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_gguf(
        tmp.path(),
        "evil.nest",
        9,
        &array_head(9, 1 << 24),
        12 << 24,
    );
    assert!(GgufFile::open(&path).unwrap().header().metadata.is_empty());
    let path = sparse_gguf(
        tmp.path(),
        "general.nest",
        9,
        &array_head(9, 1 << 24),
        12 << 24,
    );
    let err = GgufFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("16777216 entries"), "{err}");
}

#[test]
fn a_ten_million_token_vocabulary_gets_a_plain_refusal() {
    // Ten million empty strings (8 zero bytes each): 4.2 GB and 17 s in `list --found` before.
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_gguf(
        tmp.path(),
        "tokenizer.ggml.tokens",
        9,
        &array_head(8, 10_000_000),
        80_000_000,
    );
    let err = GgufFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("10000000 entries"), "{err}");
}

#[test]
fn decoded_metadata_is_capped_in_all() {
    // One string of MAX_METADATA_BYTES under a key Hearth reads: refused before it is copied.
    let tmp = tempfile::tempdir().unwrap();
    let path = sparse_gguf(
        tmp.path(),
        "general.name",
        8,
        &MAX_METADATA_BYTES.to_le_bytes(),
        MAX_METADATA_BYTES,
    );
    let err = GgufFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("MiB in memory"), "{err}");
}

#[test]
fn typed_arrays_read_back_as_written() {
    let mut w = GgufWriter::new(3);
    w.kv("general.bytes", Value::Array(Array::U8(vec![1, 2, 255])));
    w.kv(
        "tokenizer.ggml.scores",
        Value::Array(Array::F32(vec![0.5, -1.0])),
    );
    w.kv(
        "general.nested",
        Value::Array(Array::Array(vec![Array::I64(vec![-3]), Array::I64(vec![])])),
    );
    let h = q4nx::gguf::parse(&w.finish(), Path::new("t.gguf")).unwrap();
    assert_eq!(
        h.get("general.bytes"),
        Some(&Value::Array(Array::U8(vec![1, 2, 255])))
    );
    let scores = h.get("tokenizer.ggml.scores").unwrap().as_array().unwrap();
    assert_eq!(scores.get(1), Some(Value::F32(-1.0)));
    let nested = h.get("general.nested").unwrap().as_array().unwrap();
    assert_eq!(nested.len(), 2);
    assert_eq!(nested.get(0), Some(Value::Array(Array::I64(vec![-3]))));
}

/// A Llama header (from the tiny model's keys) whose embedding is `hidden` wide and whose
/// tensor data is a sparse file: only the header is real.
fn wide_llama(dir: &Path, hidden: u64) -> PathBuf {
    let mut w = GgufWriter::new(3);
    let tiny = q4nx::gguf::parse(
        &q4nx::gguf::write::tiny_model("llama").finish(),
        Path::new("tiny.gguf"),
    )
    .unwrap();
    for (k, v) in &tiny.metadata {
        if k == "llama.embedding_length" {
            w.kv(k, Value::U32(hidden as u32));
        } else {
            w.kv(k, v.clone());
        }
    }
    // F16 token embedding of [hidden, 32] at data offset 0.
    w.tensor_raw("token_embd.weight", &[hidden, 32], 1, 0);
    let bytes = w.finish();
    let path = dir.join("wide.gguf");
    let mut f = File::create(&path).unwrap();
    f.write_all(&bytes).unwrap();
    f.set_len(bytes.len() as u64 + hidden * 32 * 2 + 64)
        .unwrap();
    path
}

#[test]
fn a_hidden_size_wider_than_the_engine_runs_is_refused_from_the_header() {
    // 2^24 reached 5.6 GB and aborted the import before (a BF16 chunk of 1024 such rows).
    let tmp = tempfile::tempdir().unwrap();
    let path = wide_llama(tmp.path(), 1 << 24);
    let file = GgufFile::open(&path).unwrap();
    let err = check_header(file.header(), &path).unwrap_err().to_string();
    assert!(
        err.contains("hidden_size 16777216") && err.contains("65536"),
        "{err}"
    );
    let out = tmp.path().join("out");
    let err = import_gguf(&path, &out, Some(1), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("hidden_size 16777216"), "{err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_safetensors_header_larger_than_any_real_one_is_refused_unread() {
    // A declared header of 64 MiB (sparse): a model folder in a watched cache could hold one,
    // and its JSON values would take up to 16 times that.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("model.safetensors");
    let mut f = File::create(&path).unwrap();
    f.write_all(&(64u64 << 20).to_le_bytes()).unwrap();
    f.set_len(8 + (64 << 20)).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let err = q4nx::container::parse(&bytes, &path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("limit"), "{err}");
}
