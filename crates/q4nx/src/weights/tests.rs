//! Tests of opening, reading and copying weights.

use super::*;
use crate::container::{encode_header, EntryToWrite};

fn write(path: &Path, entries: &[EntryToWrite], meta: &BTreeMap<String, String>) {
    let mut bytes = encode_header(entries, meta);
    for e in entries {
        bytes.extend((0..e.byte_len()).map(|i| (i % 251) as u8));
    }
    std::fs::write(path, bytes).unwrap();
}

fn entry(name: &str, dtype: Dtype, shape: &[usize]) -> EntryToWrite {
    EntryToWrite {
        name: name.into(),
        dtype,
        shape: shape.to_vec(),
    }
}

#[test]
fn single_file_with_metadata_shape() {
    let dir = tempfile::tempdir().unwrap();
    let meta = BTreeMap::from([(format!("{SHAPE_KEY_PREFIX}w"), "64,300".to_string())]);
    write(
        &dir.path().join(Q4NX_FILE),
        &[
            entry("w", Dtype::I8, &[4, 5120]),
            entry("n", Dtype::Bf16, &[8]),
        ],
        &meta,
    );
    let w = Weights::open(dir.path()).unwrap();
    assert_eq!(w.format(), WeightFormat::Q4nx);
    assert_eq!(w.names(), vec!["n", "w"]);
    match w.get("w").unwrap() {
        Tensor::Q4_1(m) => assert_eq!((m.rows, m.cols, m.tile_bytes()), (64, 512, 5120)),
        other => panic!("expected Q4_1, got {}", other.describe()),
    }
    match w.get("n").unwrap() {
        Tensor::Dense(d) => assert_eq!(d.len(), 8),
        other => panic!("expected dense, got {}", other.describe()),
    }
    let e = w.get("nope").unwrap_err().to_string();
    assert!(
        e.contains("missing tensor nope") && e.contains("model.q4nx"),
        "{e}"
    );
}

#[test]
fn a_copy_in_huge_pages_holds_the_same_tensors_and_a_changed_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Q4NX_FILE);
    let meta = BTreeMap::from([
        (format!("{SHAPE_KEY_PREFIX}w"), "64,300".to_string()),
        (format!("{SHAPE_KEY_PREFIX}h"), "64,300".to_string()),
        (format!("{SHAPE_KEY_PREFIX}x"), "32,512".to_string()),
    ]);
    let entries = [
        entry("w", Dtype::I8, &[4, 5120]),
        entry("h", Dtype::I8, &[4, 8704]),
        entry("x", Dtype::I8, &[2, 5120]),
        entry("n", Dtype::Bf16, &[8]),
    ];
    write(&path, &entries, &meta);
    let mapped = Weights::open(dir.path()).unwrap();
    let mut copied = Weights::open(dir.path()).unwrap();
    copied.copy_into_huge_pages().unwrap();
    fn tiles<'a>(w: &'a Weights, name: &str) -> TileMatrix<'a> {
        match w.get(name).unwrap() {
            Tensor::Q4_1(m) | Tensor::Q8(m) => m,
            other => panic!("unexpected {}", other.describe()),
        }
    }
    // K = 300 in two tiles: the copy keeps 2 of the last tile's 8 groups (columns 256..320)
    // and the same values there; the columns it dropped read as 0.
    for (name, whole, group) in [("w", 5120, 640), ("h", 8704, 1088)] {
        let (file, copy) = (tiles(&mapped, name), tiles(&copied, name));
        assert_eq!((file.last_groups, copy.last_groups), (8, 2), "{name}");
        assert_eq!(copy.bytes.len(), 2 * (whole + 2 * group), "{name}");
        assert_eq!(copy.tile_bytes(), whole, "{name}");
        let (file, copy) = (file.dequantize(), copy.dequantize());
        for (r, (a, b)) in file.chunks(512).zip(copy.chunks(512)).enumerate() {
            assert_eq!(a[..320], b[..320], "{name} row {r}");
            assert!(b[320..].iter().all(|v| *v == 0.0), "{name} row {r}");
        }
    }
    // K = 512 has no padding, and a dense tensor is never narrowed.
    assert_eq!(tiles(&copied, "x").bytes, tiles(&mapped, "x").bytes);
    let dense = |w: &Weights| match w.get("n").unwrap() {
        Tensor::Dense(d) => d.bytes.to_vec(),
        other => panic!("unexpected {}", other.describe()),
    };
    assert_eq!(dense(&mapped), dense(&copied));

    // The file is rewritten shorter after it was opened: the copy is refused and the map
    // stays (its pages past the new end would fault, so only its header is read here).
    let mut opened = Weights::open(dir.path()).unwrap();
    let full = std::fs::read(&path).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(full.len() as u64 - 100)
        .unwrap();
    let err = opened.copy_into_huge_pages().unwrap_err().to_string();
    assert!(err.contains("while it was loading"), "{err}");

    // Same length, another header (a tensor's recorded shape).
    std::fs::write(&path, &full).unwrap();
    let mut opened = Weights::open(dir.path()).unwrap();
    let mut changed = full.clone();
    let at = full.windows(6).position(|w| w == b"64,300").unwrap();
    changed[at..at + 6].copy_from_slice(b"64,299");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .write_all_at(&changed, 0)
        .unwrap();
    let err = opened.copy_into_huge_pages().unwrap_err().to_string();
    assert!(err.contains("header changed"), "{err}");
}

#[test]
fn absurd_metadata_shapes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for shape in [
        "18446744073709551615,64",
        "64,18446744073709551615",
        "64",
        "a,b",
    ] {
        let meta = BTreeMap::from([(format!("{SHAPE_KEY_PREFIX}w"), shape.to_string())]);
        let path = dir.path().join("x.q4nx");
        write(&path, &[entry("w", Dtype::I8, &[1, 5120])], &meta);
        let w = Weights::open_file(&path, None).unwrap();
        let e = w.get("w").unwrap_err().to_string();
        assert!(e.contains("not \"N,K\""), "{shape}: {e}");
    }
}

#[test]
fn three_d_tiles_and_q8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.q4nx");
    write(
        &path,
        &[entry("w", Dtype::I8, &[2, 1, 8704])],
        &BTreeMap::new(),
    );
    let w = Weights::open_file(&path, None).unwrap();
    match w.get("w").unwrap() {
        Tensor::Q8(m) => assert_eq!((m.rows, m.cols), (64, 256)),
        other => panic!("expected Q8, got {}", other.describe()),
    }
}

#[test]
fn two_d_tiles_without_config_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.q4nx");
    write(
        &path,
        &[entry("w", Dtype::I8, &[2, 5120])],
        &BTreeMap::new(),
    );
    let w = Weights::open_file(&path, None).unwrap();
    let e = w.get("w").unwrap_err().to_string();
    assert!(e.contains("no config.json"), "{e}");
}

#[test]
fn sharded_weights() {
    let dir = tempfile::tempdir().unwrap();
    let none = BTreeMap::new();
    write(
        &dir.path().join("a.safetensors"),
        &[entry("x", Dtype::F32, &[2])],
        &none,
    );
    write(
        &dir.path().join("b.safetensors"),
        &[entry("y", Dtype::F16, &[3])],
        &none,
    );
    std::fs::write(
        dir.path().join(SHARD_INDEX_FILE),
        r#"{"metadata": {}, "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}"#,
    )
    .unwrap();
    let w = Weights::open(dir.path()).unwrap();
    assert_eq!(w.format(), WeightFormat::Safetensors);
    assert_eq!(w.names(), vec!["x", "y"]);
    std::fs::write(
        dir.path().join(SHARD_INDEX_FILE),
        r#"{"weight_map": {"x": "b.safetensors"}}"#,
    )
    .unwrap();
    let e = Weights::open(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("missing tensor x") && e.contains("b.safetensors"),
        "{e}"
    );
    std::fs::write(
        dir.path().join(SHARD_INDEX_FILE),
        r#"{"weight_map": {"x": "../a.safetensors"}}"#,
    )
    .unwrap();
    let e = Weights::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("not a file in this folder"), "{e}");
}

/// Qwen3-Embedding is saved from `Qwen3Model`: `norm.weight` answers for `model.norm.weight`,
/// while a name stored with its prefix wins and other prefixes are not stripped.
#[test]
fn names_without_the_model_prefix_are_found_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAFETENSORS_FILE);
    write(
        &path,
        &[
            entry("norm.weight", Dtype::F32, &[2]),
            entry("embed_tokens.weight", Dtype::F32, &[3]),
            entry("model.embed_tokens.weight", Dtype::F32, &[4]),
        ],
        &BTreeMap::new(),
    );
    let w = Weights::open(dir.path()).unwrap();
    assert!(w.contains("model.norm.weight") && w.contains("norm.weight"));
    let shape = |name| match w.get(name).unwrap() {
        Tensor::Dense(d) => d.shape,
        other => panic!("{name}: {}", other.describe()),
    };
    assert_eq!(shape("model.norm.weight"), vec![2]);
    assert_eq!(shape("model.embed_tokens.weight"), vec![4]);
    assert!(!w.contains("lm.norm.weight"));
    let e = w.get("model.lm_head.weight").unwrap_err().to_string();
    assert!(e.contains("model.lm_head.weight"), "{e}");
}

#[test]
fn empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    let e = Weights::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("no model weights found"), "{e}");
}
