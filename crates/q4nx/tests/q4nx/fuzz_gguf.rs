//! Property tests (the fuzz target) for the GGUF reader: valid files built by the writer, then
//! truncated, overwritten at random offsets or given random counts, lengths and offsets. No
//! input may panic, and whatever is accepted must be safe to slice and decode.
//!
//! Runs are reproducible: a fixed number of cases from a fixed seed, no failure-persistence
//! file, nothing timed. For a long run:
//! `PROPTEST_CASES=200000 cargo test -p q4nx --release --test q4nx fuzz_gguf::`.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use q4nx::gguf::{dequantize, parse, write::GgufWriter, Array, GgmlType, Header, Value};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `cases` cases from a fixed seed, without a failure-persistence file.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x4747_5546),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i32>().prop_map(Value::I32),
        any::<u32>().prop_map(Value::U32),
        any::<f32>().prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        "[a-z .]{0,12}".prop_map(Value::String),
        any::<u64>().prop_map(Value::U64),
        any::<f64>().prop_map(Value::F64),
    ];
    prop_oneof![
        4 => leaf,
        1 => proptest::collection::vec("[a-z]{0,4}", 0..6).prop_map(|v| Value::Array(Array::String(v))),
        1 => proptest::collection::vec(any::<i32>(), 0..6).prop_map(|v| Value::Array(Array::I32(v))),
        1 => proptest::collection::vec(any::<u8>(), 0..9).prop_map(|v| Value::Array(Array::U8(v))),
        1 => proptest::collection::vec(any::<bool>(), 0..6).prop_map(|v| Value::Array(Array::Bool(v))),
        1 => proptest::collection::vec(any::<f64>(), 0..4).prop_map(|v| Value::Array(Array::F64(v))),
        1 => proptest::collection::vec(proptest::collection::vec(any::<u16>(), 0..3), 0..3)
            .prop_map(|v| Value::Array(Array::Array(v.into_iter().map(Array::U16).collect()))),
    ]
}

/// A key Hearth reads (decoded) or one it skips, with a random tail.
fn key() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["general.", "tokenizer.", "llama.", "other.", ""]),
        "[a-z.]{1,10}",
    )
        .prop_map(|(prefix, tail)| format!("{prefix}{tail}"))
}

/// A valid file: a few key/values and tensors of every type with random bytes; with it, the
/// key/values it holds.
fn valid_file_and_values() -> impl Strategy<Value = (Vec<u8>, Vec<(String, Value)>)> {
    (
        2u32..=3,
        proptest::collection::vec((key(), value()), 0..5),
        proptest::collection::vec((0usize..TYPES.len(), 1u64..3, 1u64..3, any::<u8>()), 0..4),
        prop::sample::select(vec![None, Some(1u32), Some(16), Some(32), Some(64)]),
    )
        .prop_map(|(version, kvs, tensors, alignment)| {
            let mut w = GgufWriter::new(version);
            let mut seen = std::collections::HashSet::new();
            let mut written = Vec::new();
            for (k, v) in kvs {
                if seen.insert(k.clone()) && k != "general.alignment" {
                    w.kv(&k, v.clone());
                    written.push((k, v));
                }
            }
            if let Some(a) = alignment {
                w.kv("general.alignment", Value::U32(a));
            }
            for (i, (t, blocks, rows, fill)) in tensors.into_iter().enumerate() {
                let kind = TYPES[t];
                let dims = [blocks * kind.block_len() as u64, rows];
                let bytes = vec![fill; (blocks * rows) as usize * kind.block_bytes()];
                w.tensor(&format!("t{i}"), &dims, kind, &bytes);
            }
            (w.finish(), written)
        })
}

fn valid_file() -> impl Strategy<Value = Vec<u8>> {
    valid_file_and_values().prop_map(|(bytes, _)| bytes)
}

#[derive(Debug, Clone)]
enum Damage {
    Truncate(usize),
    Byte(usize, u8),
    U64(usize, u64),
    U32(usize, u32),
}

fn damage() -> impl Strategy<Value = Damage> {
    let big = prop_oneof![
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(1u64 << 40),
        0u64..100,
        any::<u64>()
    ];
    prop_oneof![
        any::<usize>().prop_map(Damage::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Damage::Byte(a, b)),
        (any::<usize>(), big).prop_map(|(a, v)| Damage::U64(a, v)),
        (any::<usize>(), any::<u32>()).prop_map(|(a, v)| Damage::U32(a, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    if bytes.is_empty() {
        return;
    }
    match *d {
        Damage::Truncate(at) => bytes.truncate(at % bytes.len()),
        Damage::Byte(at, v) => {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        Damage::U64(at, v) if bytes.len() >= 8 => {
            let at = at % (bytes.len() - 7);
            bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        Damage::U32(at, v) if bytes.len() >= 4 => {
            let at = at % (bytes.len() - 3);
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        _ => {}
    }
}

/// Invariants of an accepted file: every tensor inside it, sized by its type, decodable.
fn check_accepted(h: &Header, bytes: &[u8]) {
    assert!((2..=3).contains(&h.version));
    assert!(h.alignment.is_power_of_two());
    for t in &h.tensors {
        assert!(
            t.range.start >= h.data_start && t.range.end <= bytes.len(),
            "{t:?}"
        );
        let n = t.elements() as usize;
        assert_eq!(t.range.len(), t.kind.bytes_for(n), "{t:?}");
        if n <= 1 << 16 {
            let mut out = vec![0f32; n];
            dequantize(t.kind, &bytes[t.range.clone()], &mut out);
        }
    }
}

proptest! {
    #![proptest_config(config(cases(3000)))]

    #[test]
    fn valid_files_parse((bytes, values) in valid_file_and_values()) {
        let h = parse(&bytes, Path::new("f.gguf")).expect("the writer's files parse");
        check_accepted(&h, &bytes);
        for (key, value) in &values {
            if q4nx::gguf::is_read_key(key) {
                let got = h.get(key).expect("a key Hearth reads is kept");
                // NaN is not equal to itself: compare the encodings.
                prop_assert_eq!(format!("{got:?}"), format!("{value:?}"), "{}", key);
            } else {
                prop_assert!(h.get(key).is_none(), "{key} is skipped, not decoded");
            }
        }
    }

    #[test]
    fn damaged_files_never_panic(bytes in valid_file(), hits in proptest::collection::vec(damage(), 1..4)) {
        let mut bytes = bytes;
        for d in &hits {
            apply(&mut bytes, d);
        }
        if let Ok(h) = parse(&bytes, Path::new("f.gguf")) {
            check_accepted(&h, &bytes);
        }
    }

    /// The tiny Llama with one key Hearth reads given a random value (a wrong type, a count
    /// that disagrees, an id out of range): the import's header check refuses or accepts it,
    /// never panics.
    #[test]
    fn hostile_values_of_the_keys_hearth_reads_never_panic(
        which in 0usize..64,
        replacement in value(),
    ) {
        let tiny = q4nx::gguf::write::tiny_model("llama").finish();
        let parsed = parse(&tiny, Path::new("tiny.gguf")).unwrap();
        let target = which % parsed.metadata.len();
        let mut w = GgufWriter::new(3);
        for (i, (k, v)) in parsed.metadata.iter().enumerate() {
            w.kv(k, if i == target { replacement.clone() } else { v.clone() });
        }
        for t in &parsed.tensors {
            w.tensor(&t.name, &t.dims, t.kind, &tiny[t.range.clone()]);
        }
        let bytes = w.finish();
        if let Ok(h) = parse(&bytes, Path::new("f.gguf")) {
            let _ = q4nx::gguf::check_header(&h, Path::new("f.gguf"));
        }
    }

    #[test]
    fn random_bytes_after_the_magic_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = b"GGUF\x03\x00\x00\x00".to_vec();
        bytes.extend(tail);
        if let Ok(h) = parse(&bytes, Path::new("f.gguf")) {
            check_accepted(&h, &bytes);
        }
    }
}
