//! Tests of [`super`]: the scalar twin against ggml's reference dequantization, every level's
//! integer sums against the twin's (exactly) and its rows against the twin's (float rounding),
//! and the length checks.

use super::*;
use crate::cpu::test_data::{extreme_xq, Lcg};

const KINDS: [GgmlType; 5] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
];

fn f16_bytes(v: f32) -> [u8; 2] {
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

/// `blocks` blocks of `kind` with random codes (every bit pattern) and small random scales and
/// mins.
fn random_blocks(kind: GgmlType, blocks: usize, rng: &mut Lcg) -> Vec<u8> {
    let format = Format::of(kind).unwrap();
    let mut bytes = Vec::with_capacity(blocks * format.bytes());
    for _ in 0..blocks {
        let start = bytes.len();
        bytes.extend((0..format.bytes()).map(|_| rng.next() as u8));
        bytes[start..start + 2].copy_from_slice(&f16_bytes(rng.unit() * 0.02));
        if format.has_min() {
            bytes[start + 2..start + 4].copy_from_slice(&f16_bytes(rng.unit() * 0.1));
        }
    }
    bytes
}

/// Quantizes `w` (whole blocks of 32) to `kind` the way ggml's reference quantizers do (scale
/// from the largest magnitude, or from the range for the types with a min): real blocks.
fn quantize_blocks(kind: GgmlType, w: &[f32]) -> Vec<u8> {
    let format = Format::of(kind).unwrap();
    let mut bytes = Vec::new();
    for block in w.chunks_exact(BLOCK) {
        let mut out = vec![0u8; format.bytes()];
        let (codes, d, m): (Vec<i32>, f32, Option<f32>) = match format {
            Format::Q8_0 => {
                let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d > 0.0 { 1.0 / d } else { 0.0 };
                (
                    block.iter().map(|v| (v * id).round() as i32).collect(),
                    d,
                    None,
                )
            }
            Format::Q4_0 | Format::Q5_0 => {
                let levels = if format == Format::Q4_0 { 8.0 } else { 16.0 };
                let max = block
                    .iter()
                    .copied()
                    .fold(0.0f32, |a, v| if v.abs() > a.abs() { v } else { a });
                let d = max / -levels;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let top = 2.0 * levels - 1.0;
                let codes = block
                    .iter()
                    .map(|v| (v * id + levels + 0.5).min(top) as i32)
                    .collect();
                (codes, d, None)
            }
            Format::Q4_1 | Format::Q5_1 => {
                let top = if format == Format::Q4_1 { 15.0 } else { 31.0 };
                let min = block.iter().copied().fold(f32::INFINITY, f32::min);
                let max = block.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let d = (max - min) / top;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let codes = block
                    .iter()
                    .map(|v| ((v - min) * id + 0.5).min(top) as i32)
                    .collect();
                (codes, d, Some(min))
            }
        };
        out[0..2].copy_from_slice(&f16_bytes(d));
        if let Some(m) = m {
            out[2..4].copy_from_slice(&f16_bytes(m));
        }
        let at = format.codes_at();
        if format == Format::Q8_0 {
            for (j, c) in codes.iter().enumerate() {
                out[at + j] = *c as i8 as u8;
            }
        } else {
            let mut qh = 0u32;
            for j in 0..16 {
                out[at + j] = (codes[j] & 15) as u8 | (((codes[j + 16] & 15) as u8) << 4);
            }
            for (j, c) in codes.iter().enumerate() {
                qh |= (((c >> 4) & 1) as u32) << j;
            }
            if let Some(h) = format.high_bits_at() {
                out[h..h + 4].copy_from_slice(&qh.to_le_bytes());
            }
        }
        bytes.extend_from_slice(&out);
    }
    bytes
}

fn activations(x: &[f32], tokens: usize, cols: usize) -> QuantizedActivations {
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, x, tokens, cols);
    acts
}

/// `Σ_k dequantize(row)[k] * xq[k] * sx[k / 32]` in f64, with the row's `Σ |terms|`.
fn dequantized_dot(
    kind: GgmlType,
    row: &[u8],
    acts: &QuantizedActivations,
    t: usize,
) -> (f64, f64) {
    let cols = row.len() / kind.block_bytes() * BLOCK;
    let mut w = vec![0.0f32; cols];
    q4nx::gguf::dequantize(kind, row, &mut w);
    let (xq, scales) = (acts.xq(t), acts.scales(t));
    let (mut dot, mut size) = (0.0f64, 0.0f64);
    for k in 0..cols {
        let term = f64::from(w[k]) * f64::from(xq[k]) * f64::from(scales[k / BLOCK]);
        dot += term;
        size += term.abs();
    }
    (dot, size)
}

#[test]
fn the_twin_equals_ggmls_dequantization_times_the_same_activations() {
    let mut rng = Lcg(21);
    let cols = 7 * BLOCK;
    for kind in KINDS {
        let random = random_blocks(kind, 3 * 7, &mut rng);
        let weights: Vec<f32> = (0..3 * cols).map(|_| rng.unit() * 0.3).collect();
        let real = quantize_blocks(kind, &weights);
        let x: Vec<f32> = (0..2 * cols).map(|_| rng.unit()).collect();
        let acts = activations(&x, 2, cols);
        for rows in [&random, &real] {
            let mut out = vec![f32::NAN; 3 * 2];
            dot_rows(KernelLevel::Scalar, kind, rows, cols, &acts, 0, 2, &mut out);
            let row_bytes = kind.bytes_for(cols);
            for r in 0..3 {
                for t in 0..2 {
                    let (exact, size) =
                        dequantized_dot(kind, &rows[r * row_bytes..(r + 1) * row_bytes], &acts, t);
                    let got = f64::from(out[r * 2 + t]);
                    assert!(
                        (got - exact).abs() <= 1e-5 * size.max(1e-3),
                        "{kind} row {r} token {t}: {got} against {exact} (terms' size {size})"
                    );
                }
            }
        }
    }
}

#[test]
fn the_quantizer_here_round_trips_through_ggmls_dequantization() {
    // The "real blocks" are real: dequantized, they come back near the weights they encode.
    let mut rng = Lcg(4);
    let w: Vec<f32> = (0..4 * BLOCK).map(|_| rng.unit()).collect();
    for kind in KINDS {
        let bytes = quantize_blocks(kind, &w);
        let mut back = vec![0.0f32; w.len()];
        q4nx::gguf::dequantize(kind, &bytes, &mut back);
        let bits = if kind == GgmlType::Q8_0 {
            8
        } else if matches!(kind, GgmlType::Q5_0 | GgmlType::Q5_1) {
            5
        } else {
            4
        };
        let step = 2.0 / ((1 << bits) - 1) as f32;
        for (a, b) in w.iter().zip(&back) {
            assert!((a - b).abs() <= step, "{kind}: {a} came back as {b}");
        }
    }
}

#[test]
fn scalar_codes_follow_the_documented_layout() {
    // Q5_1, weight 20: the high nibble of qs[4], plus 16 from bit 20 of qh.
    let mut block = vec![0u8; 24];
    block[8 + 4] = 0x70;
    block[4..8].copy_from_slice(&(1u32 << 20).to_le_bytes());
    assert_eq!(code(Format::Q5_1, &block, 20), 7 + 16);
    assert_eq!(code(Format::Q5_1, &block, 4), 0);
    // Q8_0 codes are signed.
    let mut block = vec![0u8; 34];
    block[2 + 31] = 0x80;
    assert_eq!(code(Format::Q8_0, &block, 31), -128);
}

/// Every level's integer sums on `row` (blocks of `kind`) against token `t`, checked equal to
/// the scalar twin's.
fn assert_isums_agree(kind: GgmlType, row: &[u8], acts: &QuantizedActivations, what: &str) {
    let reference = row_isums(KernelLevel::Scalar, kind, row, acts, 0);
    for level in KernelLevel::supported() {
        assert_eq!(
            row_isums(level, kind, row, acts, 0),
            reference,
            "{level}, {kind}, {what}: integer sums differ from the scalar twin"
        );
    }
}

#[test]
fn integer_sums_equal_the_scalar_twin_at_every_level() {
    let mut rng = Lcg(7);
    for kind in KINDS {
        // 9 blocks: an odd count, so the 512-bit levels' last block is a single one.
        for blocks in [8, 9] {
            let cols = blocks * BLOCK;
            let random = random_blocks(kind, blocks, &mut rng);
            let weights: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
            let real = quantize_blocks(kind, &weights);
            let mut ones = random.clone();
            for block in ones.chunks_exact_mut(kind.block_bytes()) {
                let at = Format::of(kind).unwrap().codes_at();
                // All codes at their top (0xFF nibbles and fifth bits); Q8_0's at -1.
                block[2..].fill(0xFF);
                if at == 4 {
                    block[2..4].copy_from_slice(&f16_bytes(0.5));
                }
            }
            let mut most_negative = random.clone();
            if kind == GgmlType::Q8_0 {
                for block in most_negative.chunks_exact_mut(34) {
                    block[2..].fill(0x80);
                }
            }
            let x: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
            let random_acts = activations(&x, 1, cols);
            let mut extreme_acts = QuantizedActivations::new();
            extreme_acts.resize(1, cols);
            let extreme = extreme_xq();
            for (k, q) in extreme_acts.token_mut(0).0.iter_mut().enumerate() {
                *q = extreme[k % extreme.len()];
            }
            for (row, name) in [
                (&random, "random codes"),
                (&real, "real blocks"),
                (&ones, "top codes"),
                (&most_negative, "most negative codes"),
            ] {
                assert_isums_agree(kind, row, &random_acts, name);
                assert_isums_agree(kind, row, &extreme_acts, name);
            }
        }
    }
}

/// `out` of every level against the scalar twin's: within `1e-5` of the size of each row's
/// terms, `Σ_b |d sx| Σ_j |code_j xq_j| + |m sum|` (the module doc's bound).
fn assert_rows_agree(
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
) {
    let n = rows.len() / kind.bytes_for(cols);
    let mut reference = vec![f32::NAN; n * tokens];
    dot_rows(
        KernelLevel::Scalar,
        kind,
        rows,
        cols,
        acts,
        t0,
        tokens,
        &mut reference,
    );
    let format = Format::of(kind).unwrap();
    let row_bytes = kind.bytes_for(cols);
    for level in KernelLevel::supported() {
        let mut out = vec![f32::NAN; n * tokens];
        dot_rows(level, kind, rows, cols, acts, t0, tokens, &mut out);
        for r in 0..n {
            for t in 0..tokens {
                let row = &rows[r * row_bytes..(r + 1) * row_bytes];
                let (xq, scales, sums) = (acts.xq(t0 + t), acts.scales(t0 + t), acts.sums(t0 + t));
                let size: f32 = row
                    .chunks_exact(format.bytes())
                    .enumerate()
                    .map(|(b, block)| {
                        let xq = &xq[b * BLOCK..(b + 1) * BLOCK];
                        let magnitude: i32 = (0..BLOCK)
                            .map(|j| (code(format, block, j) * i32::from(xq[j])).abs())
                            .sum();
                        let (d, m) = scale_and_min(format, block);
                        (d * scales[b]).abs() * magnitude as f32 + (m * sums[b]).abs()
                    })
                    .sum();
                let (a, b) = (out[r * tokens + t], reference[r * tokens + t]);
                assert!(
                    (a - b).abs() <= 1e-5 * size.max(1e-6),
                    "{level}, {kind}, {n} rows of {cols}, row {r} token {t} of {tokens}: {a} against the twin's {b}"
                );
            }
        }
    }
}

#[test]
fn every_level_matches_the_twin_at_every_token_count() {
    let mut rng = Lcg(11);
    for kind in KINDS {
        // 5 rows: row by row; 19: two groups of 8 (one token's path) and 3 more.
        for (blocks, n) in [(1, 5), (2, 5), (7, 5), (28, 5), (1, 19), (7, 19), (28, 19)] {
            let cols = blocks * BLOCK;
            let rows = random_blocks(kind, n * blocks, &mut rng);
            let all = MAX_TOKENS + 2;
            let x: Vec<f32> = (0..all * cols).map(|_| rng.unit()).collect();
            let acts = activations(&x, all, cols);
            for tokens in 1..=MAX_TOKENS {
                assert_rows_agree(kind, &rows, cols, &acts, 1, tokens);
            }
            let weights: Vec<f32> = (0..n * cols).map(|_| rng.unit() * 0.2).collect();
            let real = quantize_blocks(kind, &weights);
            assert_rows_agree(kind, &real, cols, &acts, 2, 1);
            assert_rows_agree(kind, &real, cols, &acts, 0, MAX_TOKENS);
        }
    }
}

#[test]
fn every_level_reads_the_requested_tokens() {
    let mut rng = Lcg(3);
    let cols = 4 * BLOCK;
    for kind in KINDS {
        let rows = random_blocks(kind, 3 * 4, &mut rng);
        let x: Vec<f32> = (0..4 * cols).map(|_| rng.unit()).collect();
        let acts = activations(&x, 4, cols);
        for level in KernelLevel::supported() {
            let (mut all, mut last_two) = (vec![0.0; 3 * 4], vec![0.0; 3 * 2]);
            dot_rows(level, kind, &rows, cols, &acts, 0, 4, &mut all);
            dot_rows(level, kind, &rows, cols, &acts, 2, 2, &mut last_two);
            // The same sums, up to the order of additions (a call's tokens are computed in
            // groups of 8, 4, 2 or 1, which may keep their sums in different orders).
            for r in 0..3 {
                for t in 0..2 {
                    let (a, b) = (all[r * 4 + 2 + t], last_two[r * 2 + t]);
                    assert!(
                        (a - b).abs() <= 1e-5 * (a.abs() + 1e-3),
                        "{level} {kind} row {r} token {t}: {a} against {b}"
                    );
                }
            }
        }
    }
}

fn small_case() -> (Vec<u8>, QuantizedActivations) {
    let mut rng = Lcg(1);
    let rows = random_blocks(GgmlType::Q5_0, 2 * 2, &mut rng);
    let x: Vec<f32> = (0..2 * 64).map(|_| rng.unit()).collect();
    (rows, activations(&x, 2, 64))
}

#[test]
#[should_panic(expected = "not whole rows")]
fn a_truncated_row_panics() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 2];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows[..rows.len() - 1],
        64,
        &acts,
        0,
        1,
        &mut out,
    );
}

#[test]
#[should_panic(expected = "not whole blocks")]
fn columns_that_are_not_whole_blocks_panic() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 2];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows,
        63,
        &acts,
        0,
        1,
        &mut out,
    );
}

#[test]
#[should_panic(expected = "out holds")]
fn a_wrong_output_length_panics() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 3];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows,
        64,
        &acts,
        0,
        1,
        &mut out,
    );
}

#[test]
#[should_panic(expected = "at most 8")]
fn too_many_tokens_panic() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 2 * 9];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows,
        64,
        &acts,
        0,
        9,
        &mut out,
    );
}

#[test]
#[should_panic(expected = "quantized for 64 columns")]
fn activations_of_another_width_panic() {
    let (_, acts) = small_case();
    let rows = vec![0u8; 22 * 4];
    let mut out = vec![0.0; 1];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows,
        128,
        &acts,
        0,
        1,
        &mut out,
    );
}

#[test]
#[should_panic(expected = "not a 32-weight block type")]
fn a_k_quant_panics() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 2];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &rows,
        64,
        &acts,
        0,
        1,
        &mut out,
    );
}

#[test]
#[should_panic]
fn tokens_past_the_quantized_ones_panic() {
    let (rows, acts) = small_case();
    let mut out = vec![0.0; 2 * 2];
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_0,
        &rows,
        64,
        &acts,
        1,
        2,
        &mut out,
    );
}

/// Gigabytes of weights read per second by one thread at every SIMD level, per type, for one
/// token (decode) and for 8 (prefill), on rows of K = 896 and 4864 (Qwen2.5-0.5B's widths):
/// 256 MiB of rows (more than the caches hold) and 256 KiB (in L2, the arithmetic's own speed).
/// The Q4NX Q4_1 tile kernel on as many bytes is measured with them, as a yardstick on the same
/// machine at the same moment. Prints only; run it alone on a quiet machine:
/// `cargo test --release -p hearth-engine --lib blocks32::tests::speed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn speed() {
    use crate::cpu::q4_1;
    use q4nx::tile::Q4_1_TILE_BYTES;
    use std::time::Instant;
    let levels: Vec<_> = KernelLevel::supported()
        .into_iter()
        .filter(|&level| level != KernelLevel::Scalar)
        .collect();
    let time = |reps: usize, bytes: usize, mut run: Box<dyn FnMut() + '_>| {
        run();
        let start = Instant::now();
        for _ in 0..reps {
            run();
        }
        (reps * bytes) as f64 / start.elapsed().as_secs_f64() / 1e9
    };
    let mut rng = Lcg(99);
    for total in [256usize << 20, 256 << 10] {
        let (size, reps) = match total > 1 << 20 {
            true => ("256 MiB", 4),
            false => ("256 KiB", 1000),
        };
        // The yardstick: Q4_1 tiles of K = 1024, one row block (32 rows) per call.
        let cols = 1024;
        let tiles: Vec<u8> = (0..total).map(|_| rng.next() as u8).collect();
        let x: Vec<f32> = (0..cols).map(|_| rng.unit()).collect();
        let acts = activations(&x, 1, cols);
        let block_bytes = 4 * Q4_1_TILE_BYTES;
        let mut line = format!("Q4NX Q4_1 tiles K 1024 {size} 1 token:");
        for &level in &levels {
            let mut out = vec![0.0; 32];
            let gbs = time(
                reps,
                total / block_bytes * block_bytes,
                Box::new(|| {
                    for block in tiles.chunks_exact(block_bytes) {
                        q4_1::row_block(level, block, false, &acts, 0, &mut out);
                    }
                }),
            );
            line += &format!(" {level} {gbs:.1}");
        }
        println!("{line} GB/s");
        for kind in KINDS {
            for cols in [896, 4864] {
                let n = total / kind.bytes_for(cols);
                let rows = random_blocks(kind, n * cols / BLOCK, &mut rng);
                let x: Vec<f32> = (0..MAX_TOKENS * cols).map(|_| rng.unit()).collect();
                let acts = activations(&x, MAX_TOKENS, cols);
                // One token through calls of 7 rows: the row-by-row path, not 8 rows at once.
                let row_bytes = kind.bytes_for(cols);
                let mut line = format!("{kind} K {cols:>4} {size} 1 token, 7-row calls:");
                for &level in &levels {
                    let mut out = vec![0.0; n];
                    let gbs = time(
                        reps,
                        rows.len(),
                        Box::new(|| {
                            for (w, y) in rows.chunks(7 * row_bytes).zip(out.chunks_mut(7)) {
                                dot_rows(level, kind, w, cols, &acts, 0, 1, y)
                            }
                        }),
                    );
                    line += &format!(" {level} {gbs:.1}");
                }
                println!("{line} GB/s");
                for tokens in [1, MAX_TOKENS] {
                    let mut line = format!("{kind} K {cols:>4} {size} {tokens} token(s):");
                    for &level in &levels {
                        let mut out = vec![0.0; n * tokens];
                        let gbs = time(
                            reps,
                            rows.len(),
                            Box::new(|| {
                                dot_rows(level, kind, &rows, cols, &acts, 0, tokens, &mut out)
                            }),
                        );
                        line += &format!(" {level} {gbs:.1}");
                    }
                    println!("{line} GB/s");
                }
            }
        }
    }
}
