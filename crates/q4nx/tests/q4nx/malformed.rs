//! Every malformed model the issue lists is refused with a message naming the file, the tensor
//! and what was expected vs found. (Container-level cases also have unit tests in
//! `container.rs`; the property tests in `fuzz_header.rs` check nothing panics.)

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{tiny_llama_json, write_hf_folder, Raw};
use q4nx::{container, convert, validate_dir, ConvertOptions, Dtype, Weights};

/// A converted tiny model, and its tensors as (entry, bytes) for rewriting.
fn converted() -> (
    tempfile::TempDir,
    PathBuf,
    Vec<Raw>,
    BTreeMap<String, String>,
) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("model");
    write_hf_folder(&src, &tiny_llama_json(false));
    convert(&src, &dst, &ConvertOptions::default(), &mut |_| {}).unwrap();
    let bytes = std::fs::read(dst.join("model.q4nx")).unwrap();
    let header = container::parse(&bytes, Path::new("model.q4nx")).unwrap();
    let raws = header
        .tensors
        .iter()
        .map(|t| Raw {
            name: t.name.clone(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            bytes: bytes[t.range.clone()].to_vec(),
        })
        .collect();
    (tmp, dst, raws, header.metadata)
}

fn rewrite(dst: &Path, raws: &[Raw], metadata: &BTreeMap<String, String>) -> String {
    common::write_safetensors(&dst.join("model.q4nx"), raws, metadata);
    validate_dir(dst).unwrap_err().to_string()
}

#[test]
fn the_unmodified_model_validates() {
    let (_tmp, dst, raws, meta) = converted();
    common::write_safetensors(&dst.join("model.q4nx"), &raws, &meta);
    validate_dir(&dst).unwrap();
}

#[test]
fn missing_tensor() {
    let (_tmp, dst, mut raws, meta) = converted();
    raws.retain(|r| r.name != "model.layers.1.mlp.up_proj.weight");
    let e = rewrite(&dst, &raws, &meta);
    assert!(
        e.contains("model.q4nx") && e.contains("missing tensor model.layers.1.mlp.up_proj.weight"),
        "{e}"
    );
}

#[test]
fn tile_count_not_matching_the_config() {
    let (_tmp, dst, mut raws, mut meta) = converted();
    let name = "model.layers.0.mlp.gate_proj.weight"; // [96, 64] -> 3 x 1 tiles
    meta.remove(&format!("hearth.shape.{name}"));
    let r = raws.iter_mut().find(|r| r.name == name).unwrap();
    assert_eq!(r.shape, vec![3, 5120]);
    r.shape = vec![2, 5120];
    r.bytes.truncate(2 * 5120);
    let e = rewrite(&dst, &raws, &meta);
    assert!(
        e.contains(name) && e.contains("expected 3 tiles") && e.contains("found 2 tiles"),
        "{e}"
    );
}

#[test]
fn tiles_disagreeing_with_their_recorded_shape() {
    let (_tmp, dst, raws, mut meta) = converted();
    meta.insert(
        "hearth.shape.model.layers.0.mlp.gate_proj.weight".into(),
        "128,64".into(),
    );
    let e = rewrite(&dst, &raws, &meta);
    assert!(e.contains("expected 4 tiles for [128 x 256]"), "{e}");
}

#[test]
fn rows_not_a_multiple_of_32() {
    let (_tmp, dst, raws, mut meta) = converted();
    meta.insert("hearth.shape.lm_head.weight".into(), "100,64".into());
    let e = rewrite(&dst, &raws, &meta);
    assert!(
        e.contains("lm_head.weight") && e.contains("multiple of 32") && e.contains("N = 100"),
        "{e}"
    );
}

#[test]
fn embedding_in_the_wrong_dtype() {
    let (_tmp, dst, mut raws, meta) = converted();
    let r = raws
        .iter_mut()
        .find(|r| r.name == "model.embed_tokens.weight")
        .unwrap();
    r.dtype = Dtype::F16;
    let e = rewrite(&dst, &raws, &meta);
    assert!(
        e.contains("model.embed_tokens.weight: expected BF16 [96, 64], found F16 [96, 64]"),
        "{e}"
    );
}

#[test]
fn norm_with_the_wrong_shape() {
    let (_tmp, dst, mut raws, meta) = converted();
    let r = raws
        .iter_mut()
        .find(|r| r.name == "model.norm.weight")
        .unwrap();
    r.shape = vec![32];
    r.bytes.truncate(64);
    let e = rewrite(&dst, &raws, &meta);
    assert!(e.contains("expected BF16 [64], found BF16 [32]"), "{e}");
}

#[test]
fn linear_stored_dense_in_q4nx() {
    let (_tmp, dst, mut raws, meta) = converted();
    let r = raws
        .iter_mut()
        .find(|r| r.name == "model.layers.0.self_attn.o_proj.weight")
        .unwrap();
    r.dtype = Dtype::U8;
    let e = rewrite(&dst, &raws, &meta);
    assert!(e.contains("o_proj.weight: expected Q4_1 tiles"), "{e}");
}

#[test]
fn truncated_model_file_names_the_tensor_cut_off() {
    let (_tmp, dst, _raws, _meta) = converted();
    let path = dst.join("model.q4nx");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let e = Weights::open(&dst).unwrap_err().to_string();
    assert!(
        e.contains("model.q4nx: file is truncated: tensor lm_head.weight needs bytes"),
        "{e}"
    );
}

#[test]
fn header_length_past_the_end_of_the_file() {
    let (_tmp, dst, _raws, _meta) = converted();
    let path = dst.join("model.q4nx");
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len() as u64;
    bytes[..8].copy_from_slice(&len.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let e = Weights::open(&dst).unwrap_err().to_string();
    assert!(
        e.contains("truncated") && e.contains("header length says"),
        "{e}"
    );
}

#[test]
fn malformed_json_header() {
    let (_tmp, dst, _raws, _meta) = converted();
    let path = dst.join("model.q4nx");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = b'[';
    std::fs::write(&path, &bytes).unwrap();
    let e = Weights::open(&dst).unwrap_err().to_string();
    assert!(e.contains("model.q4nx: malformed header"), "{e}");
}

#[test]
fn config_that_does_not_match_the_weights() {
    let (_tmp, dst, _raws, _meta) = converted();
    let config =
        tiny_llama_json(false).replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3");
    std::fs::write(dst.join("config.json"), config).unwrap();
    let e = validate_dir(&dst).unwrap_err().to_string();
    assert!(e.contains("missing tensor model.layers.2."), "{e}");
}
