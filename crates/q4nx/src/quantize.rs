//! Q4_1 quantization in groups of 32 and packing into FastFlowLM tiles.
//!
//! Per group: `m = min`, `d = (max - min) / 15`, both rounded to BF16 first; then each code is
//! `round((w - m_bf16) / d_bf16)` clamped to 0..=15. Choosing the codes against the *stored*
//! (rounded) `d` and `m` means every weight dequantizes within half a step (`d_bf16 / 2`) of the
//! original, plus only what BF16 rounding of `d` and `m` moved the ends of the range
//! (`|m - m_bf16| + 15 |d - d_bf16|`). Rounding codes against the unrounded `d` and `m` (as GGUF
//! does) can lose up to a further 15 ulps of `d` per weight.

use half::bf16;

use crate::tile::{self, GROUP, GROUPS_PER_TILE, Q4_1_TILE_BYTES, TILE_COLS, TILE_ROWS};

/// One quantized group: BF16 scale and min, and 32 codes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Q4_1Group {
    /// Step between codes.
    pub d: bf16,
    /// Value of code 0.
    pub m: bf16,
    /// Codes 0..=15.
    pub codes: [u8; GROUP],
}

/// Quantizes up to 32 values (fewer for a group cut by the end of a row; missing codes are 0).
/// Non-finite inputs give unspecified codes; callers check finiteness first.
pub fn quantize_group(values: &[f32]) -> Q4_1Group {
    let mut codes = [0u8; GROUP];
    if values.is_empty() {
        return Q4_1Group {
            d: bf16::ZERO,
            m: bf16::ZERO,
            codes,
        };
    }
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for &v in values {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    let d = bf16::from_f32((hi - lo) / 15.0);
    let m = bf16::from_f32(lo);
    let (df, mf) = (d.to_f32(), m.to_f32());
    if df > 0.0 {
        for (code, &v) in codes.iter_mut().zip(values) {
            *code = ((v - mf) / df).round().clamp(0.0, 15.0) as u8;
        }
    }
    Q4_1Group { d, m, codes }
}

/// Quantizes one block of 32 rows (`rows32` is `[32, k]` row-major) into `k.div_ceil(256)`
/// Q4_1 tiles written to `out`.
pub fn quantize_row_block(rows32: &[f32], k: usize, out: &mut [u8]) {
    let col_tiles = k.div_ceil(TILE_COLS);
    assert_eq!(rows32.len(), TILE_ROWS * k, "row block length");
    assert_eq!(out.len(), col_tiles * Q4_1_TILE_BYTES, "output length");
    let mut codes = [[0u8; TILE_COLS]; TILE_ROWS];
    let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
    let mut m = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
    for (ct, tile_out) in out.chunks_exact_mut(Q4_1_TILE_BYTES).enumerate() {
        for r in 0..TILE_ROWS {
            let row = &rows32[r * k..(r + 1) * k];
            for g in 0..GROUPS_PER_TILE {
                let start = (ct * TILE_COLS + g * GROUP).min(k);
                let end = (start + GROUP).min(k);
                let q = quantize_group(&row[start..end]);
                d[r][g] = q.d;
                m[r][g] = q.m;
                codes[r][g * GROUP..(g + 1) * GROUP].copy_from_slice(&q.codes);
            }
        }
        tile::pack_q4_1_tile(&codes, &d, &m, tile_out);
    }
}

/// Quantizes `w[rows, cols]` (row-major, `rows % 32 == 0`) to Q4_1 tiles with K padded to a
/// multiple of 256, row-block major, as FastFlowLM lays them out. Padding columns hold code 0.
///
/// Panics if `rows` is not a multiple of 32 or `w.len() != rows * cols`.
pub fn quantize_q4_1_tiles(w: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(rows % TILE_ROWS, 0, "rows {rows} is not a multiple of 32");
    assert_eq!(w.len(), rows * cols, "weight length");
    let block_bytes = cols.div_ceil(TILE_COLS) * Q4_1_TILE_BYTES;
    let mut out = vec![0u8; rows / TILE_ROWS * block_bytes];
    if block_bytes == 0 {
        return out;
    }
    for (rb, block) in out.chunks_exact_mut(block_bytes).enumerate() {
        let rows32 = &w[rb * TILE_ROWS * cols..(rb + 1) * TILE_ROWS * cols];
        quantize_row_block(rows32, cols, block);
    }
    out
}

/// The largest error [`quantize_group`] may make on a group with this min and max: half a
/// step plus what BF16 rounding of `d` and `m` moved the range, plus f32 rounding slack.
pub fn error_bound(lo: f32, hi: f32) -> f32 {
    let d = (hi - lo) / 15.0;
    let (db, mb) = (bf16::from_f32(d).to_f32(), bf16::from_f32(lo).to_f32());
    let slack = 4.0 * f32::EPSILON * (lo.abs().max(hi.abs()) + 15.0 * db);
    0.5 * db + (lo - mb).abs() + 15.0 * (d - db).abs() + slack
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TileMatrix;
    use proptest::prelude::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    #[test]
    fn constant_group_is_exact() {
        let q = quantize_group(&[0.25; 32]);
        assert_eq!(q.d, bf16::ZERO);
        assert_eq!(q.m.to_f32(), 0.25);
        assert_eq!(q.codes, [0; 32]);
    }

    #[test]
    fn round_trip_within_bound() {
        // 64 x 300: two row blocks, K padded to 512 (two column tiles, a partial group).
        let (rows, cols) = (64, 300);
        let mut seed = 7;
        let w: Vec<f32> = (0..rows * cols).map(|_| lcg(&mut seed) * 0.05).collect();
        let tiles = quantize_q4_1_tiles(&w, rows, cols);
        assert_eq!(tiles.len(), 2 * 2 * 5120);
        let m = TileMatrix {
            name: "w",
            rows,
            cols: 512,
            last_groups: 8,
            bytes: &tiles,
        };
        let deq = m.dequantize();
        for r in 0..rows {
            for g0 in (0..cols).step_by(32) {
                let group = &w[r * cols + g0..r * cols + (g0 + 32).min(cols)];
                let lo = group.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let bound = error_bound(lo, hi);
                for (i, &v) in group.iter().enumerate() {
                    let got = deq[r * 512 + g0 + i];
                    assert!(
                        (got - v).abs() <= bound,
                        "row {r} col {}: {got} vs {v}, bound {bound}",
                        g0 + i
                    );
                }
            }
            assert!(
                deq[r * 512 + 320..r * 512 + 512].iter().all(|&v| v == 0.0),
                "whole padding groups dequantize to 0"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn every_group_is_within_the_bound(
            values in proptest::collection::vec(-1e4f32..1e4f32, 1..=32),
            scale in prop_oneof![Just(1.0f32), Just(1e-3), Just(1e-6), Just(30.0)],
        ) {
            let values: Vec<f32> = values.iter().map(|v| v * scale).collect();
            let q = quantize_group(&values);
            let lo = values.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let bound = error_bound(lo, hi);
            for (i, &v) in values.iter().enumerate() {
                let got = f32::from(q.codes[i]) * q.d.to_f32() + q.m.to_f32();
                prop_assert!((got - v).abs() <= bound, "{got} vs {v}, bound {bound}");
            }
        }
    }
}
