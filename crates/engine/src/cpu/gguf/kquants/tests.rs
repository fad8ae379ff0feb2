//! Tests of the K-quant kernels: every level's integer sums against the scalar twin's, the
//! scalar twin against ggml's dequantization, and every level's rows against the scalar twin.

use super::*;
use crate::cpu::test_data::{extreme_xq, Lcg};

const KINDS: [GgmlType; 3] = [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K];

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

/// `count` super-blocks of `kind` with random codes, scales and mins and small positive
/// f16 factors.
pub(super) fn random_blocks(kind: GgmlType, count: usize, rng: &mut Lcg) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(count * kind.block_bytes());
    for _ in 0..count {
        let start = bytes.len();
        bytes.extend((0..kind.block_bytes()).map(|_| rng.next() as u8));
        let block = &mut bytes[start..];
        let (d, dmin) = (0.001 + rng.unit().abs() * 0.01, rng.unit().abs() * 0.01);
        match kind {
            GgmlType::Q6_K => block[208..210].copy_from_slice(&f16_bytes(d)),
            _ => {
                block[0..2].copy_from_slice(&f16_bytes(d));
                block[2..4].copy_from_slice(&f16_bytes(dmin));
            }
        }
    }
    bytes
}

/// A block whose codes are all at their largest (15, 31, 63) and scales at their extremes.
fn extreme_block(kind: GgmlType) -> Vec<u8> {
    let mut block = vec![0xFFu8; kind.block_bytes()];
    match kind {
        GgmlType::Q6_K => {
            block[192..208].fill(0x80); // scale -128
            block[208..210].copy_from_slice(&f16_bytes(0.01));
        }
        _ => {
            block[0..2].copy_from_slice(&f16_bytes(0.01));
            block[2..4].copy_from_slice(&f16_bytes(0.01));
        }
    }
    block
}

#[test]
fn integer_sums_equal_the_scalar_twin_at_every_level() {
    let mut rng = Lcg(17);
    for kind in KINDS {
        let random = random_blocks(kind, 4, &mut rng);
        let mut zero_codes = extreme_block(kind);
        match kind {
            GgmlType::Q6_K => zero_codes[..192].fill(0),
            GgmlType::Q5_K => zero_codes[16..176].fill(0),
            _ => zero_codes[16..144].fill(0),
        }
        let mut cases: Vec<(Vec<u8>, Vec<i8>)> = vec![
            (extreme_block(kind), extreme_xq()),
            (zero_codes, extreme_xq()),
            (extreme_block(kind), vec![-127; 256]),
        ];
        for block in random.chunks_exact(kind.block_bytes()) {
            let xq: Vec<i8> = (0..256).map(|_| (rng.next() % 255) as i8).collect();
            cases.push((block.to_vec(), xq));
            cases.push((block.to_vec(), extreme_xq()));
        }
        for (block, xq) in &cases {
            let reference = block_isums(KernelLevel::Scalar, kind, block, xq);
            for level in KernelLevel::supported() {
                assert_eq!(
                    block_isums(level, kind, block, xq),
                    reference,
                    "{kind} at {level}: integer sums differ from the scalar twin"
                );
            }
        }
    }
}

#[test]
#[allow(clippy::needless_range_loop)] // `j` indexes the sums and the weights' ranges
fn scalar_isums_follow_the_documented_layout() {
    let xq: Vec<i8> = (0..256).map(|i| (i % 7) as i8 - 3).collect();
    let mut rng = Lcg(23);
    for kind in KINDS {
        // The integer sums from ggml's dequantization with d = 1 (dmin = 0): a Q4_K/Q5_K
        // sub-block's weights are sc_j * q, so isum_j = Σ w x / sc_j; Q6_K's are its isum.
        let mut block = random_blocks(kind, 1, &mut rng);
        match kind {
            GgmlType::Q6_K => block[208..210].copy_from_slice(&f16_bytes(1.0)),
            _ => {
                block[0..2].copy_from_slice(&f16_bytes(1.0));
                block[2..4].copy_from_slice(&f16_bytes(0.0));
                // Every scale 1 and min 0, so the dequantized values are the codes.
                block[4..16].copy_from_slice(&[1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
                assert_eq!(scales_mins(&block[4..16]), ([1; 8], [0; 8]));
            }
        }
        let mut w = vec![0f32; 256];
        q4nx::gguf::dequantize(kind, &block, &mut w);
        let isums = block_isums(KernelLevel::Scalar, kind, &block, &xq);
        for j in 0..8 {
            let exact: f32 = (32 * j..32 * j + 32).map(|k| w[k] * f32::from(xq[k])).sum();
            assert_eq!(isums[j] as f32, exact, "{kind} sub-block {j}");
        }
    }
}

/// `W · x` for every row of `rows` against the activations as quantized (`xq * s`), from
/// ggml's dequantization, in f64.
fn reference_dots(
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t: usize,
) -> Vec<f64> {
    let xq = acts.xq(t);
    let s = acts.scales(t);
    rows.chunks_exact(kind.bytes_for(cols))
        .map(|row| {
            let mut w = vec![0f32; cols];
            q4nx::gguf::dequantize(kind, row, &mut w);
            (0..cols)
                .map(|k| f64::from(w[k]) * f64::from(xq[k]) * f64::from(s[k / 32]))
                .sum()
        })
        .collect()
}

#[test]
fn the_scalar_twin_matches_ggml_dequantization() {
    let mut rng = Lcg(29);
    let (cols, n) = (768, 5);
    for kind in KINDS {
        let rows = random_blocks(kind, n * cols / 256, &mut rng);
        for tokens in [1, 3, MAX_TOKENS] {
            let x: Vec<f32> = (0..(tokens + 1) * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens + 1, cols);
            let mut out = vec![f32::NAN; n * tokens];
            dot_rows(
                KernelLevel::Scalar,
                kind,
                &rows,
                cols,
                &acts,
                1,
                tokens,
                &mut out,
            );
            for t in 0..tokens {
                let reference = reference_dots(kind, &rows, cols, &acts, 1 + t);
                let scale: f64 = reference.iter().map(|v| v.abs()).fold(1.0, f64::max);
                for r in 0..n {
                    let got = f64::from(out[r * tokens + t]);
                    assert!(
                        (got - reference[r]).abs() <= 1e-5 * scale,
                        "{kind} row {r} token {t}: {got} vs {}",
                        reference[r]
                    );
                }
            }
        }
    }
}

#[test]
fn every_level_gives_the_bits_of_the_scalar_twin() {
    let mut rng = Lcg(31);
    // Up to 8 rows: row by row; from 8 on, one token takes 8 rows at a time and the rest row
    // by row.
    for (n, kind) in (1..=17).flat_map(|n| KINDS.map(|kind| (n, kind))) {
        for cols in [256, 768, 2048] {
            let rows = random_blocks(kind, n * cols / 256, &mut rng);
            let total = MAX_TOKENS + 2;
            let mut x: Vec<f32> = (0..total * cols).map(|_| rng.unit()).collect();
            x[..cols].fill(-1.0); // a token of extreme values
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, total, cols);
            for tokens in 1..=MAX_TOKENS {
                for t0 in [0, total - tokens] {
                    let mut reference = vec![f32::NAN; n * tokens];
                    dot_rows(
                        KernelLevel::Scalar,
                        kind,
                        &rows,
                        cols,
                        &acts,
                        t0,
                        tokens,
                        &mut reference,
                    );
                    for level in KernelLevel::supported() {
                        let mut out = vec![f32::NAN; n * tokens];
                        dot_rows(level, kind, &rows, cols, &acts, t0, tokens, &mut out);
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&out),
                            bits(&reference),
                            "{kind} {level} {n} rows, K {cols}, {tokens} tokens from {t0}"
                        );
                    }
                }
            }
        }
    }
}

fn acts_for(cols: usize, tokens: usize) -> QuantizedActivations {
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, &vec![0.5; cols * tokens], tokens, cols);
    acts
}

#[test]
#[should_panic(expected = "not a K-quant")]
fn a_32_weight_type_is_refused() {
    let acts = acts_for(256, 1);
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q8_0,
        &[0; 272],
        256,
        &acts,
        0,
        1,
        &mut [0.0],
    );
}

#[test]
#[should_panic(expected = "are not 2 rows")]
fn rows_of_the_wrong_length_are_refused() {
    let acts = acts_for(256, 1);
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &[0; 144 * 3],
        256,
        &acts,
        0,
        1,
        &mut [0.0; 2],
    );
}

#[test]
#[should_panic(expected = "not a multiple of 256")]
fn columns_not_whole_super_blocks_are_refused() {
    let acts = acts_for(512, 1);
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q6_K,
        &[0; 210],
        300,
        &acts,
        0,
        1,
        &mut [0.0],
    );
}

#[test]
#[should_panic(expected = "tokens, expected 1..=8")]
fn too_many_tokens_are_refused() {
    let acts = acts_for(256, 9);
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &[0; 144],
        256,
        &acts,
        0,
        9,
        &mut [0.0; 9],
    );
}

#[test]
#[should_panic(expected = "activations hold 256 columns")]
fn activations_narrower_than_the_rows_are_refused() {
    let acts = acts_for(256, 1);
    dot_rows(
        KernelLevel::Scalar,
        GgmlType::Q5_K,
        &[0; 352],
        512,
        &acts,
        0,
        1,
        &mut [0.0],
    );
}

/// Decode speed (one token) of every kind at every level on one thread, in GB/s of weights
/// read, on a matrix of about 100 MB (larger than the caches). Run with
/// `cargo test -p hearth-engine --release --lib kquants::tests::decode_speed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run it by hand in --release"]
fn decode_speed() {
    let (cols, n) = (4096, 24 * 1024);
    let mut rng = Lcg(37);
    let x: Vec<f32> = (0..MAX_TOKENS * cols).map(|_| rng.unit()).collect();
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, &x, MAX_TOKENS, cols);
    for kind in KINDS {
        let rows = random_blocks(kind, n * cols / 256, &mut rng);
        for level in KernelLevel::supported() {
            for tokens in [1, MAX_TOKENS] {
                let mut out = vec![0.0; n * tokens];
                let mut best = f64::MAX;
                for _ in 0..if level == KernelLevel::Scalar { 1 } else { 5 } {
                    let start = std::time::Instant::now();
                    dot_rows(level, kind, &rows, cols, &acts, 0, tokens, &mut out);
                    best = best.min(start.elapsed().as_secs_f64());
                }
                println!(
                    "{kind} {level:>10} {tokens} token(s): {:6.2} GB/s of weights, {:7.1} ms",
                    rows.len() as f64 / best / 1e9,
                    best * 1e3
                );
            }
        }
    }
}

/// The first rows of every K-quant tensor of the real models in `target/real-models`, when
/// they are there (they are not in CI: the test then checks nothing): every level gives the
/// scalar twin's bits, and the scalar twin agrees with ggml's dequantization.
#[test]
fn real_model_blocks_agree_at_every_level() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/real-models");
    let names = [
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ];
    let mut rng = Lcg(41);
    for name in names {
        let Ok(file) = q4nx::gguf::GgufFile::open(&dir.join(name)) else {
            eprintln!("skipped {name}: not in target/real-models");
            continue;
        };
        let mut checked = 0;
        for tensor in &file.header().tensors {
            if !KINDS.contains(&tensor.kind) {
                continue;
            }
            let cols = tensor.row_len();
            let n = tensor.rows().min(8);
            let rows = &file.data(tensor)[..n * tensor.kind.bytes_for(cols)];
            let tokens = 2;
            let x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
            let mut acts = QuantizedActivations::new();
            acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
            let mut reference = vec![f32::NAN; n * tokens];
            dot_rows(
                KernelLevel::Scalar,
                tensor.kind,
                rows,
                cols,
                &acts,
                0,
                tokens,
                &mut reference,
            );
            for t in 0..tokens {
                let exact = reference_dots(tensor.kind, rows, cols, &acts, t);
                let scale: f64 = exact.iter().map(|v| v.abs()).fold(1e-3, f64::max);
                for r in 0..n {
                    let got = f64::from(reference[r * tokens + t]);
                    assert!(
                        (got - exact[r]).abs() <= 1e-4 * scale,
                        "{name} {} row {r}: {got} vs {}",
                        tensor.name,
                        exact[r]
                    );
                }
            }
            for level in KernelLevel::supported() {
                let mut out = vec![f32::NAN; n * tokens];
                dot_rows(level, tensor.kind, rows, cols, &acts, 0, tokens, &mut out);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&out),
                    bits(&reference),
                    "{name} {} at {level}",
                    tensor.name
                );
            }
            checked += 1;
        }
        eprintln!("{name}: {checked} K-quant tensors checked");
    }
}
