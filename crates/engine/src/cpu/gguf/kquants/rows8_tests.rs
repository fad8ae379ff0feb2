//! Tests of [`dot_groups`], Q4_K and Q6_K in groups of 8 rows: at every level the scalar twin's
//! bits on the same rows row-major, lengths and kinds that do not fit refused, and (ignored, run
//! by hand) its one-token speed against [`dot_rows`]'s on the expert shapes of Qwen3-30B-A3B and
//! Q6_K's of a Q4_K_M file.

use q4nx::gguf::rows8::{group_bytes, interleave_matrix};

use super::tests::random_blocks;
use super::*;
use crate::cpu::test_data::{two_ways_gbs, Lcg};

const ROW_BYTES: usize = 144;

/// The kinds with groups.
const KINDS: [GgmlType; 2] = [GgmlType::Q4_K, GgmlType::Q6_K];

/// `n` random rows of `kind` of `cols` columns, the first ones extreme. Q4_K: every code 15
/// with every scale and min 63 and large `d`, `dmin`; every code 0 with the same; scales and
/// mins 0. Q6_K: every code 63 with every scale 127 and large `d`; every code 63 with scales
/// -128; every code 0 with scales -128; every code 0 with scales 127; scales 0.
fn test_rows(kind: GgmlType, n: usize, cols: usize, rng: &mut Lcg) -> Vec<u8> {
    let mut rows = random_blocks(kind, n * cols / QK, rng);
    let bb = kind.block_bytes();
    let blocks_of = |r: usize| r * cols / QK..(r + 1) * cols / QK;
    let big = |v: f32| f16::from_f32(v).to_le_bytes();
    if kind == GgmlType::Q6_K {
        let rows_of = [
            (0, Some((0xFF, 0x7F))),
            (1, Some((0xFF, 0x80))),
            (2, Some((0x00, 0x80))),
            (3, Some((0x00, 0x7F))),
            (4, None),
        ];
        for (r, extreme) in rows_of {
            for b in blocks_of(r) {
                let block = &mut rows[b * bb..(b + 1) * bb];
                match extreme {
                    Some((code, scale)) => {
                        block[..192].fill(code);
                        block[192..208].fill(scale);
                        block[208..210].copy_from_slice(&big(1000.0));
                    }
                    None => block[192..208].fill(0),
                }
            }
        }
        return rows;
    }
    for (r, codes) in [(0, Some(0xFF)), (1, Some(0x00)), (2, None)] {
        for b in blocks_of(r) {
            let block = &mut rows[b * bb..(b + 1) * bb];
            match codes {
                Some(code) => {
                    block[0..2].copy_from_slice(&big(1000.0));
                    block[2..4].copy_from_slice(&big(-500.0));
                    block[4..16].fill(0xFF);
                    block[16..144].fill(code);
                }
                None => block[4..16].fill(0),
            }
        }
    }
    rows
}

fn grouped(kind: GgmlType, rows: &[u8], n: usize, cols: usize) -> Vec<u8> {
    let mut groups = rows.to_vec();
    interleave_matrix(kind, &mut groups, n, cols);
    groups
}

/// Tokens 0 and 1 at the ends of the int8 range (±127 and 127), the rest random.
fn test_acts(tokens: usize, cols: usize, rng: &mut Lcg) -> QuantizedActivations {
    let mut x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit()).collect();
    for (k, x) in x[..cols].iter_mut().enumerate() {
        *x = if k % 3 == 0 { -1.0 } else { 1.0 };
    }
    x[cols..2 * cols].fill(2.5);
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
    assert!(acts.xq(0).contains(&-127) && acts.xq(1)[..cols].iter().all(|&q| q == 127));
    acts
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn every_level_gives_the_bits_of_the_scalar_twin_on_the_rows() {
    let mut rng = Lcg(43);
    for (kind, n) in KINDS.into_iter().flat_map(|k| [8, 16, 24].map(|n| (k, n))) {
        for cols in [256, 2048] {
            let rows = test_rows(kind, n, cols, &mut rng);
            let groups = grouped(kind, &rows, n, cols);
            let total = MAX_TOKENS + 2;
            let acts = test_acts(total, cols, &mut rng);
            for tokens in 1..=MAX_TOKENS {
                for t0 in [0, 1, total - tokens] {
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
                    assert!(reference.iter().all(|v| v.is_finite()));
                    for level in KernelLevel::supported() {
                        let mut out = vec![f32::NAN; n * tokens];
                        dot_groups(level, kind, &groups, cols, &acts, t0, tokens, &mut out);
                        assert_eq!(
                            bits(&out),
                            bits(&reference),
                            "{level} {kind}: {n} rows, K {cols}, {tokens} tokens from {t0}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn no_rows_give_no_values() {
    let acts = test_acts(2, 256, &mut Lcg(47));
    for level in KernelLevel::supported() {
        for kind in KINDS {
            dot_groups(level, kind, &[], 256, &acts, 0, 2, &mut []);
        }
    }
}

#[test]
#[should_panic(expected = "not whole groups of 8 rows of 1 tokens")]
fn rows_not_whole_groups_are_refused() {
    let acts = test_acts(2, 256, &mut Lcg(53));
    let groups = vec![0u8; 7 * ROW_BYTES];
    dot_groups(
        KernelLevel::detect(),
        GgmlType::Q4_K,
        &groups,
        256,
        &acts,
        0,
        1,
        &mut [0.0; 7],
    );
}

#[test]
#[should_panic(expected = "are not 2 groups of 8 rows of 256 Q4_K columns")]
fn groups_of_the_wrong_length_are_refused() {
    let acts = test_acts(2, 256, &mut Lcg(59));
    let groups = vec![0u8; group_bytes(GgmlType::Q4_K, 256) * 2 - 1];
    dot_groups(
        KernelLevel::detect(),
        GgmlType::Q4_K,
        &groups,
        256,
        &acts,
        0,
        1,
        &mut [0.0; 16],
    );
}

#[test]
#[should_panic(expected = "are not 1 groups of 8 rows of 256 Q6_K columns")]
fn q6_k_groups_of_the_wrong_length_are_refused() {
    let acts = test_acts(2, 256, &mut Lcg(60));
    let groups = vec![0u8; group_bytes(GgmlType::Q4_K, 256)];
    dot_groups(
        KernelLevel::detect(),
        GgmlType::Q6_K,
        &groups,
        256,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

#[test]
#[should_panic(expected = "Q5_K does not lie in groups of 8 rows")]
fn a_kind_without_groups_is_refused() {
    let acts = test_acts(2, 256, &mut Lcg(62));
    dot_groups(
        KernelLevel::detect(),
        GgmlType::Q5_K,
        &[0u8; 8 * 176],
        256,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

#[test]
#[should_panic(expected = "9 tokens, expected 1..=8")]
fn too_many_tokens_for_groups_are_refused() {
    let acts = test_acts(9, 256, &mut Lcg(61));
    let groups = vec![0u8; group_bytes(GgmlType::Q4_K, 256)];
    dot_groups(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &groups,
        256,
        &acts,
        0,
        9,
        &mut [0.0; 72],
    );
}

#[test]
#[should_panic(expected = "300 columns is not a multiple of 256")]
fn group_columns_not_whole_super_blocks_are_refused() {
    let acts = test_acts(2, 512, &mut Lcg(67));
    dot_groups(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &[0; 1152],
        300,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

#[test]
#[should_panic(expected = "activations hold 256 columns, the rows 512")]
fn activations_narrower_than_the_groups_are_refused() {
    let acts = test_acts(2, 256, &mut Lcg(71));
    let groups = vec![0u8; group_bytes(GgmlType::Q4_K, 512)];
    dot_groups(
        KernelLevel::Scalar,
        GgmlType::Q4_K,
        &groups,
        512,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

/// One-token (and 8-token) speed of [`dot_rows`] (row-major) against [`dot_groups`] at the
/// best level on one thread, in GB/s of weights, on Qwen3-30B-A3B's expert shapes (768 x 2048,
/// 2048 x 768) and 4096 x 2048 in Q4_K, and 4096 x 2048 and 8192 x 2048 (a head) in Q6_K: as
/// many different matrices as make about 128 MB per layout (more than the caches: the memory's
/// pace), then about 8 MB (they stay in L3: the kernels' own pace), computed one after another, over and over for about 1 GB (per token) a pass; the
/// median of 7 passes, the two layouts in turn, by the wall clock and on the CPU. Run with
/// `cargo test --release -p hearth-engine --lib rows8_speed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run it by hand in --release"]
fn rows8_speed() {
    let level = KernelLevel::detect();
    let mut rng = Lcg(73);
    let shapes = [
        (GgmlType::Q4_K, 768, 2048),
        (GgmlType::Q4_K, 2048, 768),
        (GgmlType::Q4_K, 4096, 2048),
        (GgmlType::Q6_K, 4096, 2048),
        (GgmlType::Q6_K, 8192, 2048),
    ];
    for (megabytes, (kind, n, cols)) in [128, 8].into_iter().flat_map(|mb| shapes.map(|s| (mb, s)))
    {
        let bb = kind.block_bytes();
        let matrix = n * cols / QK * bb;
        let count = (megabytes << 20) / matrix + 1;
        let mut rows = vec![0u8; count * matrix];
        for byte in rows.iter_mut() {
            *byte = rng.next() as u8;
        }
        for block in rows.chunks_exact_mut(bb) {
            // Small positive d (and dmin): finite sums, as real weights give.
            match kind {
                GgmlType::Q6_K => block[208..210].copy_from_slice(&[0x00, 0x1c]),
                _ => block[0..4].copy_from_slice(&[0x00, 0x1c, 0x00, 0x18]),
            }
        }
        let mut groups = rows.clone();
        for m in groups.chunks_exact_mut(matrix) {
            interleave_matrix(kind, m, n, cols);
        }
        let acts = test_acts(MAX_TOKENS, cols, &mut rng);
        for tokens in [1, MAX_TOKENS] {
            let mut out = vec![0.0; n * tokens];
            // Passes of about 1 GB of weights per token (the on-CPU clock moves in ticks).
            let reps = ((1 << 30) / tokens).div_ceil(count * matrix);
            let [old, new] = two_ways_gbs(reps * count * matrix, |way| {
                for m in (0..reps).flat_map(|_| 0..count) {
                    let (r, g) = (
                        &rows[m * matrix..][..matrix],
                        &groups[m * matrix..][..matrix],
                    );
                    match way {
                        0 => dot_rows(level, kind, r, cols, &acts, 0, tokens, &mut out),
                        _ => dot_groups(level, kind, g, cols, &acts, 0, tokens, &mut out),
                    }
                }
            });
            println!(
                "{level} {kind} {n:>4} x {cols:>4}, {count:>3} matrices, {tokens} token(s): dot_rows \
                 {:5.2} GB/s ({:5.2} on the CPU), dot_groups {:5.2} GB/s ({:5.2} on the CPU)",
                old.0, old.1, new.0, new.1,
            );
        }
    }
}
