//! Helpers shared by the engine's integration tests: fixture paths and reference data.
#![allow(dead_code)]

pub mod dequantized;
pub mod logits;
pub mod moe;
pub mod rows8;

use std::path::PathBuf;

/// `tests/fixtures/engine/<name>` at the repository root.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

/// transformers' outputs for a tiny model (see tests/fixtures/engine/generate.py).
#[derive(serde::Deserialize)]
pub struct Reference {
    pub tokens: Vec<u32>,
    pub logits: Vec<Vec<f32>>,
    pub greedy_prompt: Vec<u32>,
    pub greedy_tokens: Vec<u32>,
}

pub fn reference(model: &str) -> Reference {
    let text =
        std::fs::read_to_string(fixture(model).join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json parses")
}

/// The largest |a - b| in a row over the largest |b| in that row, maximized over rows: an error
/// relative to the scale of the logits (elementwise relative error is meaningless near 0).
pub fn max_relative_error(actual: &[Vec<f32>], expected: &[Vec<f32>]) -> f32 {
    assert_eq!(actual.len(), expected.len(), "row count");
    actual
        .iter()
        .zip(expected)
        .map(|(a, e)| {
            assert_eq!(a.len(), e.len(), "row length");
            let scale = e.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let diff = a
                .iter()
                .zip(e)
                .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            diff / scale
        })
        .fold(0.0, f32::max)
}

/// Copies a fixture model folder into a fresh temporary directory (for tests that break files).
pub fn copy_fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for entry in std::fs::read_dir(fixture(name)).expect("fixture dir") {
        let entry = entry.expect("dir entry");
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copy");
    }
    dir
}

/// Property-test settings that try the same cases on every run: `default_cases` cases from a
/// fixed seed, unless `PROPTEST_CASES` or `PROPTEST_RNG_SEED` ask for a longer or another run.
/// Nothing is written to disk for failures (the seed reproduces them).
pub fn fixed_proptest_config(default_cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let env = |name: &str| std::env::var(name).ok();
    Config {
        cases: env("PROPTEST_CASES")
            .and_then(|v| v.parse().ok())
            .unwrap_or(default_cases),
        rng_seed: RngSeed::Fixed(
            env("PROPTEST_RNG_SEED")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0x4865_6172_7468),
        ),
        failure_persistence: None,
        ..Config::default()
    }
}
