//! Tests of [`super`]: the scalar twin against gguf-py's decoding of real MXFP4 bytes
//! (`tests/fixtures/gguf/mxfp4-cases.bin`), every level's integer sums against the twin's
//! (exactly) and its rows against the twin's (float rounding), and the length checks.

use super::*;
use crate::cpu::test_data::{extreme_xq, Lcg};

/// The blocks and gguf-py's values of `mxfp4-cases.bin` (see `write_mxfp4_cases.py`): 256
/// blocks with every scale byte, then 40 blocks gguf-py quantized from normal values.
pub(super) fn cases() -> (Vec<u8>, Vec<f32>) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/gguf/mxfp4-cases.bin"
    );
    let bytes = std::fs::read(path).expect("mxfp4-cases.bin");
    let n = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
    let values = bytes[4 + n * BLOCK_BYTES..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (bytes[4..4 + n * BLOCK_BYTES].to_vec(), values)
}

fn activations(x: &[f32], tokens: usize, cols: usize) -> QuantizedActivations {
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, x, tokens, cols);
    acts
}

/// `blocks` random blocks (every code) with scales near 1 (e from 120 to 135).
pub(super) fn random_blocks(blocks: usize, rng: &mut Lcg) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..blocks * BLOCK_BYTES)
        .map(|_| rng.next() as u8)
        .collect();
    for block in bytes.chunks_exact_mut(BLOCK_BYTES) {
        block[0] = 120 + (rng.next() % 16) as u8;
    }
    bytes
}

#[test]
fn the_twin_computes_gguf_py_values_times_the_activations() {
    // gguf-py's own quantization of normal values: 40 blocks, 5 rows of 256 columns.
    let (blocks, values) = cases();
    let (blocks, values) = (&blocks[256 * BLOCK_BYTES..], &values[256 * BLOCK..]);
    let (rows, cols) = (5, 8 * BLOCK);
    let mut rng = Lcg(39);
    let x: Vec<f32> = (0..2 * cols).map(|_| rng.unit() * 3.0).collect();
    let acts = activations(&x, 2, cols);
    for level in KernelLevel::supported() {
        let mut out = vec![0.0; rows * 2];
        dot_rows(level, blocks, cols, &acts, 0, 2, &mut out);
        for r in 0..rows {
            for t in 0..2 {
                let (xq, sx) = (acts.xq(t), acts.scales(t));
                let (mut want, mut size) = (0.0f64, 0.0f64);
                for k in 0..cols {
                    let term = f64::from(values[r * cols + k])
                        * f64::from(xq[k])
                        * f64::from(sx[k / BLOCK]);
                    want += term;
                    size += term.abs();
                }
                let got = f64::from(out[r * 2 + t]);
                assert!(
                    (got - want).abs() <= 1e-5 * size,
                    "{level}: row {r} token {t}: {got} against {want} (size {size})"
                );
            }
        }
    }
}

#[test]
fn the_twin_reads_each_nibble_as_gguf_py_does() {
    // Every scale byte: the integer sum is the decoded values over the scale, exactly (the
    // subnormal and largest scales included, where the value is finite).
    let (blocks, values) = cases();
    let mut rng = Lcg(7);
    let xq: Vec<i8> = (0..BLOCK).map(|_| (rng.next() % 255) as i8).collect();
    for (b, block) in blocks.chunks_exact(BLOCK_BYTES).enumerate() {
        let d = e8m0_half(block[0]);
        let want: Option<i32> = values[b * BLOCK..(b + 1) * BLOCK]
            .iter()
            .zip(&xq)
            .map(|(v, &x)| (v / d).is_finite().then(|| (v / d) as i32 * i32::from(x)))
            .sum();
        if let Some(want) = want {
            assert_eq!(
                block_isum(block, &xq),
                want,
                "block {b} (scale byte {})",
                block[0]
            );
        }
    }
}

#[test]
fn every_level_sums_integers_exactly_as_the_twin() {
    let (blocks, _) = cases();
    let mut rng = Lcg(11);
    let random = random_blocks(64, &mut rng);
    let cols = 64 * BLOCK;
    let x: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
    let random_acts = activations(&x, 1, cols);
    let mut extreme_acts = QuantizedActivations::new();
    extreme_acts.resize(1, cols);
    let extreme = extreme_xq();
    for (k, q) in extreme_acts.token_mut(0).0.iter_mut().enumerate() {
        *q = extreme[k % extreme.len()];
    }
    let mut top = random.clone();
    for block in top.chunks_exact_mut(BLOCK_BYTES) {
        block[1..].fill(0xFF); // -12 everywhere, the largest magnitude
    }
    let real = &blocks[..64 * BLOCK_BYTES];
    for level in KernelLevel::supported() {
        for (row, name) in [(&random[..], "random"), (real, "real"), (&top[..], "top")] {
            for acts in [&random_acts, &extreme_acts] {
                assert_eq!(
                    row_isums(level, row, acts, 0),
                    row_isums(KernelLevel::Scalar, row, acts, 0),
                    "{level}: {name} blocks"
                );
            }
        }
    }
}

#[test]
fn every_level_computes_the_twins_rows() {
    let mut rng = Lcg(5);
    for (rows, cols) in [(1, 32), (3, 96), (9, 2880), (17, 256)] {
        let w = random_blocks(rows * cols / BLOCK, &mut rng);
        for tokens in 1..=MAX_TOKENS {
            let x: Vec<f32> = (0..(tokens + 1) * cols).map(|_| rng.unit()).collect();
            let acts = activations(&x, tokens + 1, cols);
            let mut want = vec![0.0; rows * tokens];
            dot_rows(KernelLevel::Scalar, &w, cols, &acts, 1, tokens, &mut want);
            for level in KernelLevel::supported() {
                let mut got = vec![0.0; rows * tokens];
                dot_rows(level, &w, cols, &acts, 1, tokens, &mut got);
                for r in 0..rows {
                    let row = &w[r * cols / BLOCK * BLOCK_BYTES..][..cols / BLOCK * BLOCK_BYTES];
                    for t in 0..tokens {
                        let (xq, sx) = (acts.xq(1 + t), acts.scales(1 + t));
                        let size: f32 = row
                            .chunks_exact(BLOCK_BYTES)
                            .enumerate()
                            .map(|(b, block)| {
                                let mags: i32 = (0..BLOCK)
                                    .map(|j| {
                                        let q = if j < 16 {
                                            block[1 + j] & 0x0F
                                        } else {
                                            block[1 + j - 16] >> 4
                                        };
                                        i32::from(MXFP4_VALUES[usize::from(q)]).abs()
                                            * i32::from(xq[b * BLOCK + j]).abs()
                                    })
                                    .sum();
                                (e8m0_half(block[0]) * sx[b]).abs() * mags as f32
                            })
                            .sum();
                        let (g, e) = (got[r * tokens + t], want[r * tokens + t]);
                        assert!(
                            (g - e).abs() <= 1e-5 * size,
                            "{level}: {rows}x{cols}, row {r} token {t} of {tokens}: {g} against {e}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "are not whole rows of 64 MXFP4 columns (34 bytes each)")]
fn partial_rows_panic() {
    let acts = activations(&[0.0; 64], 1, 64);
    dot_rows(KernelLevel::Scalar, &[0; 35], 64, &acts, 0, 1, &mut [0.0]);
}

#[test]
#[should_panic(expected = "quantized for 64 columns, the rows have 96")]
fn activations_of_another_width_panic() {
    let acts = activations(&[0.0; 64], 1, 64);
    dot_rows(KernelLevel::Scalar, &[0; 51], 96, &acts, 0, 1, &mut [0.0]);
}

#[test]
#[should_panic(expected = "9 tokens, at most 8 per call")]
fn too_many_tokens_panic() {
    let acts = activations(&[0.0; 9 * 32], 9, 32);
    dot_rows(
        KernelLevel::Scalar,
        &[0; 17],
        32,
        &acts,
        0,
        9,
        &mut [0.0; 9],
    );
}

#[test]
#[should_panic(expected = "out holds 1 values, 2 rows x 1 tokens need 2")]
fn a_short_output_panics() {
    let acts = activations(&[0.0; 32], 1, 32);
    dot_rows(KernelLevel::Scalar, &[0; 34], 32, &acts, 0, 1, &mut [0.0]);
}
