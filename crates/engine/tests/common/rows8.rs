//! The huge-page copy's groups of 8 rows (`q4nx::gguf::rows8`), as the GGUF tests check them.

use std::path::Path;

use hearth_engine::{LoadOptions, Model};
use q4nx::Tensor;

/// The logits with the weights copied into huge pages (the default for a model that fits,
/// where Q4_K, Q6_K and MXFP4 matrices are regrouped in 8 rows), or read through the file's map
/// (`map`: every matrix row after row, as the file holds it).
pub fn logits_from(dir: &Path, tokens: &[u32], map: bool) -> Vec<Vec<f32>> {
    let options = LoadOptions {
        threads: Some(2),
        map_weights: map,
        ..LoadOptions::default()
    };
    let mut model = Model::load(dir, &options).expect("load");
    model.logits(tokens).expect("logits")
}

/// Checks that the huge-page copy of the linked folder `dir` regrouped in 8 rows every matrix
/// of a kind with groups whose rows are a multiple of 8, at least one, and nothing else, and
/// that each row reads back as the file's.
pub fn assert_rows_regrouped(dir: &Path) {
    let mapped = q4nx::Weights::open(dir).expect("open");
    let mut copied = q4nx::Weights::open(dir).expect("open");
    copied.copy_into_huge_pages().expect("copy");
    let mut regrouped = 0;
    for name in mapped.names() {
        let (Ok(Tensor::Gguf(file)), Ok(Tensor::Gguf(copy))) = (mapped.get(name), copied.get(name))
        else {
            continue;
        };
        assert!(!file.grouped, "{name}: grouped in the map");
        let groups = q4nx::gguf::rows8::groups(copy.kind) && copy.rows % 8 == 0;
        assert_eq!(copy.grouped, groups, "{name}: {}", copy.kind);
        regrouped += usize::from(copy.grouped);
        let (mut a, mut b) = (vec![0.0; file.cols], vec![0.0; file.cols]);
        for row in [0, 5, file.rows - 1] {
            file.dequantize_row(row, &mut a);
            copy.dequantize_row(row, &mut b);
            assert_eq!(a, b, "{name} row {row}");
        }
    }
    assert!(regrouped > 0, "no matrix was regrouped");
}
