//! Tests of [`dot_groups`], MXFP4 in groups of 8 rows: at every level the scalar twin's bits on
//! the same rows row-major (every scale byte, the largest codes, activations at the ends of
//! their range), lengths that do not fit refused, and (ignored, run by hand) its one-token speed
//! against [`dot_rows`]'s on gpt-oss-20b's expert shapes.

use q4nx::gguf::rows8::interleave_matrix;

use super::tests::{cases, random_blocks};
use super::*;
use crate::cpu::test_data::{two_ways_gbs, Lcg};

fn grouped(rows: &[u8], n: usize, cols: usize) -> Vec<u8> {
    let mut groups = rows.to_vec();
    interleave_matrix(KIND, &mut groups, n, cols);
    groups
}

/// Token 0 at the ends of the int8 range (±127), token 1 at 127 everywhere, the rest random.
fn test_acts(tokens: usize, cols: usize, rng: &mut Lcg) -> QuantizedActivations {
    let mut x: Vec<f32> = (0..tokens * cols).map(|_| rng.unit() * 4.0).collect();
    for (k, x) in x[..cols].iter_mut().enumerate() {
        *x = if k % 3 == 0 { -1.0 } else { 1.0 };
    }
    x[cols..2 * cols].fill(2.5);
    let mut acts = QuantizedActivations::new();
    acts.quantize(KernelLevel::Scalar, &x, tokens, cols);
    acts
}

#[test]
fn every_level_gives_the_twins_bits_on_grouped_rows() {
    let mut rng = Lcg(29);
    let (real, _) = cases();
    for (n, cols) in [(8, 32), (16, 96), (24, 2880), (8, 8192)] {
        let mut rows = random_blocks(n * cols / BLOCK, &mut rng);
        // Row 0: every code -12 (the largest magnitude); row 1: every code 12; row 2: the real
        // blocks with every scale byte (0 and 1 subnormal, 255 the largest), as far as they go.
        let row_bytes = cols / BLOCK * BLOCK_BYTES;
        for (r, code) in [(0, 0xFF), (1, 0x77)] {
            for block in rows[r * row_bytes..][..row_bytes].chunks_exact_mut(BLOCK_BYTES) {
                block[1..].fill(code);
            }
        }
        let len = row_bytes.min(real.len());
        rows[2 * row_bytes..][..len].copy_from_slice(&real[..len]);
        let groups = grouped(&rows, n, cols);
        let acts = test_acts(MAX_TOKENS + 1, cols, &mut rng);
        for tokens in 1..=MAX_TOKENS {
            for t0 in [0, 1] {
                let mut want = vec![0.0; n * tokens];
                scalar::dot_rows(&rows, cols, &acts, t0, tokens, &mut want);
                for level in KernelLevel::supported() {
                    let mut got = vec![f32::NAN; n * tokens];
                    dot_groups(level, &groups, cols, &acts, t0, tokens, &mut got);
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "{level}: {n} x {cols}, tokens {t0}..+{tokens}, row {} token {}: \
                             {g} against the twin's {w}",
                            i / tokens,
                            i % tokens
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[should_panic(
    expected = "272 bytes in and 8 values out are not whole groups of 8 rows of 64 \
                           MXFP4 columns (272 bytes) and their 2 tokens"
)]
fn a_short_output_is_refused() {
    let acts = test_acts(2, 64, &mut Lcg(1));
    dot_groups(
        KernelLevel::detect(),
        &[0; 272],
        64,
        &acts,
        0,
        2,
        &mut [0.0; 8],
    );
}

#[test]
#[should_panic(expected = "136 bytes in and 8 values out are not whole groups of 8 rows of 64")]
fn a_partial_group_is_refused() {
    let acts = test_acts(2, 64, &mut Lcg(1));
    dot_groups(
        KernelLevel::Scalar,
        &[0; 136],
        64,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

#[test]
#[should_panic(expected = "mxfp4::dot_groups: the activations were quantized for 64 columns")]
fn activations_of_another_width_are_refused() {
    let acts = test_acts(2, 64, &mut Lcg(1));
    dot_groups(
        KernelLevel::Scalar,
        &[0; 408],
        96,
        &acts,
        0,
        1,
        &mut [0.0; 8],
    );
}

/// `cargo test --release -p hearth-engine --lib mxfp4_rows8_speed -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: run it by hand in --release on a quiet host"]
fn mxfp4_rows8_speed() {
    let level = KernelLevel::detect();
    let mut rng = Lcg(73);
    // gpt-oss-20b's experts: gate and up [2880, 2880], down [2880, 2880]; 4 used of 32.
    let (n, cols) = (2880, 2880);
    let matrix = n * cols / BLOCK * BLOCK_BYTES;
    let count = (128 << 20) / matrix + 1;
    let rows = random_blocks(count * n * cols / BLOCK, &mut rng);
    let mut groups = rows.clone();
    for m in groups.chunks_exact_mut(matrix) {
        interleave_matrix(KIND, m, n, cols);
    }
    let acts = test_acts(MAX_TOKENS, cols, &mut rng);
    for tokens in [1, 2, MAX_TOKENS] {
        let mut out = vec![0.0; n * tokens];
        let reps = ((1 << 30) / tokens).div_ceil(count * matrix);
        let [old, new] = two_ways_gbs(reps * count * matrix, |way| {
            for m in (0..reps).flat_map(|_| 0..count) {
                let (r, g) = (
                    &rows[m * matrix..][..matrix],
                    &groups[m * matrix..][..matrix],
                );
                match way {
                    0 => dot_rows(level, r, cols, &acts, 0, tokens, &mut out),
                    _ => dot_groups(level, g, cols, &acts, 0, tokens, &mut out),
                }
            }
        });
        println!(
            "{level} MXFP4 {n} x {cols}, {count} matrices, {tokens} token(s): dot_rows {:5.2} \
             GB/s ({:5.2} on the CPU), dot_groups {:5.2} GB/s ({:5.2} on the CPU), median of 7",
            old.0, old.1, new.0, new.1
        );
    }
}
