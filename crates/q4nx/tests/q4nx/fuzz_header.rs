//! Property tests (the fuzz target) for the header and tensor-table parser and the typed views
//! built on it: no input may panic, and whatever is accepted must be safe to slice.
//!
//! CI runs a bounded number of cases; for a long run:
//! `PROPTEST_CASES=200000 cargo test -p q4nx --release --test q4nx fuzz_header::`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts of accepted files and of tile views built, printed with `--nocapture` to show the
/// generator reaches the deep paths.
static ACCEPTED: AtomicUsize = AtomicUsize::new(0);
static TILE_VIEWS: AtomicUsize = AtomicUsize::new(0);

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use q4nx::container::{self, Header};
use q4nx::{ModelConfig, Tensor, Weights};

/// Invariants of an accepted header: every range inside the file, sizes match, no overlap.
fn check_accepted(h: &Header, file_len: usize) {
    let mut cursor = h.data_start;
    for t in &h.tensors {
        assert!(t.range.start >= cursor && t.range.end <= file_len, "{t:?}");
        let n: usize = t.shape.iter().product();
        assert_eq!(t.range.len(), n * t.dtype.size());
        cursor = t.range.end;
    }
    assert_eq!(cursor, file_len, "data area fully described");
}

fn with_prefix(json: &[u8], data: usize) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(json);
    out.resize(out.len() + data, 0xA5);
    out
}

fn dtype_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(vec!["BF16", "F16", "F32", "I8", "U8", "I32", "F64", "BOOL", "F8_E4M3"])
            .prop_map(str::to_string),
        1 => "[A-Z0-9_]{0,6}",
    ]
}

fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => 0u64..70,
        2 => prop::sample::select(vec![5120u64, 8704, 4736, 32, 256]),
        1 => any::<u64>(),
    ]
}

/// Number of cases: `PROPTEST_CASES` if set, else `default` (scaled by `divisor` for the slow
/// file-writing property).
fn cases(default: u32, divisor: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .map_or(default, |n| (n / divisor).max(1))
}

/// Bounded cases from a fixed seed, so every run checks the same inputs; no failure-persistence
/// file (integration tests have no lib.rs beside them).
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x5134_4e58),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const NAMES: &[&str] = &[
    "model.embed_tokens.weight",
    "lm_head.weight",
    "model.norm.weight",
    "model.layers.0.mlp.up_proj.weight",
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "model.layers.0.self_attn.k_proj.weight",
    "x",
];

/// A tensor table that is often valid and often subtly not.
fn table() -> impl Strategy<Value = (String, usize)> {
    let generic = (
        prop::sample::select(NAMES),
        dtype_name(),
        prop::collection::vec(dim(), 0..4),
        prop_oneof![3 => Just(None), 1 => (any::<u32>(), any::<u32>()).prop_map(Some)],
    );
    // I8 tiles shaped like Q4NX linears, with small and sometimes wrong tile counts.
    let tiled = (
        prop::sample::select(NAMES),
        prop::sample::select(vec![5120u64, 8704, 4736]),
        prop_oneof![
            (0u64..5).prop_map(|t| vec![t]),
            (0u64..3, 0u64..3).prop_map(|(a, b)| vec![a, b]),
        ],
        prop_oneof![9 => Just(None), 1 => (any::<u32>(), any::<u32>()).prop_map(Some)],
    )
        .prop_map(|(name, tile, mut dims, offsets)| {
            dims.push(tile);
            (name, "I8".to_string(), dims, offsets)
        });
    let entry = prop_oneof![generic, tiled];
    let metadata = prop::option::of((
        prop::sample::select(NAMES),
        prop::sample::select(vec![
            "64,300",
            "96,64",
            "32,0",
            "0,0",
            "18446744073709551615,1",
            "4294967296,4294967296",
            "32,x",
            "",
        ]),
    ));
    (prop::collection::vec(entry, 0..6), 0usize..64, metadata).prop_map(
        |(entries, slack, metadata)| {
            let mut offset = 0u64;
            let mut parts = Vec::new();
            if let Some((name, shape)) = metadata {
                parts.push(format!(
                    r#""__metadata__": {{"hearth.shape.{name}": "{shape}", "format": "q4nx"}}"#
                ));
            }
            for (name, dtype, shape, offsets) in entries {
                let size = q4nx::Dtype::from_name(&dtype).map_or(1, |d| d.size() as u64);
                let len = shape
                    .iter()
                    .try_fold(size, |a, &d| a.checked_mul(d))
                    .unwrap_or(u64::MAX);
                let (begin, end) = offsets
                    .map(|(a, b)| (u64::from(a) % 70_000, u64::from(b) % 70_000))
                    .unwrap_or((offset, offset.saturating_add(len)));
                offset = end;
                let shape: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
                parts.push(format!(
                    r#""{name}": {{"dtype": "{dtype}", "shape": [{}], "data_offsets": [{begin}, {end}]}}"#,
                    shape.join(", ")
                ));
            }
            let data = (offset as usize).min(70_000) + slack % 3;
            (format!("{{{}}}", parts.join(", ")), data)
        },
    )
}

proptest! {
    #![proptest_config(config(cases(512, 1)))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(h) = container::parse(&bytes, Path::new("fuzz")) {
            check_accepted(&h, bytes.len());
        }
    }

    #[test]
    fn arbitrary_json_after_a_valid_prefix_never_panics(
        json in prop::collection::vec(any::<u8>(), 0..256),
        data in 0usize..64,
    ) {
        let bytes = with_prefix(&json, data);
        if let Ok(h) = container::parse(&bytes, Path::new("fuzz")) {
            check_accepted(&h, bytes.len());
        }
    }

    #[test]
    fn generated_tables_never_panic(
        (json, data) in table(),
        cut in prop::option::of(0usize..4096),
        flip in prop::option::of((0usize..4096, any::<u8>())),
    ) {
        let mut bytes = with_prefix(json.as_bytes(), data);
        if let Some((at, b)) = flip {
            let at = at % bytes.len();
            bytes[at] ^= b;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut.min(bytes.len()));
        }
        if let Ok(h) = container::parse(&bytes, Path::new("fuzz")) {
            check_accepted(&h, bytes.len());
            let n = ACCEPTED.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                eprintln!("generated_tables: {n} accepted so far");
            }
        }
    }
}

proptest! {
    // Each case writes a file; fewer cases, same generator.
    #![proptest_config(config(cases(128, 8)))]

    /// Accepted files must also give typed views (or errors) without panicking, and a tile view
    /// must be fully sliceable and dequantizable.
    #[test]
    fn typed_views_of_accepted_files_never_panic((json, data) in table()) {
        let bytes = with_prefix(json.as_bytes(), data);
        if container::parse(&bytes, Path::new("fuzz")).is_err() {
            return Ok(());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.q4nx");
        std::fs::write(&path, &bytes).unwrap();
        let config = ModelConfig::from_json(
            r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 96, "vocab_size": 64}"#,
        ).unwrap();
        let weights = Weights::open_file(&path, Some(config.clone())).unwrap();
        for name in weights.names() {
            match weights.get(name) {
                Ok(Tensor::Q4_1(t)) | Ok(Tensor::Q8(t)) => {
                    let _ = t.dequantize();
                    let n = TILE_VIEWS.fetch_add(1, Ordering::Relaxed) + 1;
                    if n.is_power_of_two() {
                        eprintln!("typed views: {n} tile matrices dequantized so far");
                    }
                }
                Ok(Tensor::Dense(d)) => {
                    let _ = d.to_f32();
                }
                Ok(Tensor::Gguf(m)) => {
                    let mut row = vec![0f32; m.cols];
                    m.dequantize_row(0, &mut row);
                }
                Err(_) => {}
            }
        }
        let _ = q4nx::validate(&weights, &config);
    }
}
