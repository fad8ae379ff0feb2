//! The AVX2 level: one block per 256-bit vector. The 32 nibbles become the weights' values with
//! one `vpshufb` through [`super::MXFP4_VALUES`]; `vpmaddubsw` (`|v|` against `xq` with `v`'s
//! sign) and `vpmaddwd` give 8 i32 lane sums of 4 products each; each block's lanes are added
//! into a vector per token with one multiply-add by `d * sx`. A row's blocks are read once for
//! all of a call's tokens.

use std::arch::x86_64::*;

use super::{e8m0_half, QuantizedActivations, BLOCK, BLOCK_BYTES, MAX_TOKENS, MXFP4_VALUES};

/// Whether this CPU runs this level (AVX2 and FMA).
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The 32 signed weight values of the block at `p` (element j in byte j).
///
/// SAFETY (caller): 17 bytes are readable at `p`; AVX2 is present.
#[inline(always)]
unsafe fn values(p: *const u8) -> __m256i {
    let table = _mm_loadu_si128(MXFP4_VALUES.as_ptr().cast());
    let table = _mm256_set_m128i(table, table);
    let qs = _mm_loadu_si128(p.add(1).cast());
    let codes = _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(qs, 4), qs),
        _mm256_set1_epi8(0x0F),
    );
    _mm256_shuffle_epi8(table, codes)
}

/// The 8 lane sums of the weights `v` (`a` = `|v|`) against the activations `x`.
#[inline(always)]
unsafe fn lane_sums(v: __m256i, a: __m256i, x: __m256i) -> __m256i {
    // Each i16 sums 2 products of at most 12 * 128: no saturation.
    let pairs = _mm256_maddubs_epi16(a, _mm256_sign_epi8(x, v));
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// See [`super::dot_rows`].
///
/// SAFETY (caller): AVX2 and FMA are present; the lengths fit as `super::dot_rows` checks.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot_rows(
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    let blocks = cols / BLOCK;
    let row_bytes = blocks * BLOCK_BYTES;
    let xq: [&[i8]; MAX_TOKENS] = std::array::from_fn(|t| acts.xq(t0 + t.min(tokens - 1)));
    let sx: [&[f32]; MAX_TOKENS] = std::array::from_fn(|t| acts.scales(t0 + t.min(tokens - 1)));
    for (row, y) in rows
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(tokens))
    {
        let mut acc = [_mm256_setzero_ps(); MAX_TOKENS];
        for (b, block) in row.chunks_exact(BLOCK_BYTES).enumerate() {
            let v = values(block.as_ptr());
            let a = _mm256_sign_epi8(v, v);
            let d = e8m0_half(block[0]);
            for t in 0..tokens {
                let x = _mm256_loadu_si256(xq[t].as_ptr().add(b * BLOCK).cast());
                let lanes = _mm256_cvtepi32_ps(lane_sums(v, a, x));
                acc[t] = _mm256_fmadd_ps(lanes, _mm256_set1_ps(d * sx[t][b]), acc[t]);
            }
        }
        for (t, y) in y.iter_mut().enumerate() {
            *y = hsum(acc[t]);
        }
    }
}

/// The integer sum of every block of `row` against `xq`.
///
/// SAFETY (caller): AVX2 is present; `xq` holds 32 values per block of `row`.
#[cfg(test)]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn row_isums(row: &[u8], xq: &[i8]) -> Vec<i32> {
    row.chunks_exact(BLOCK_BYTES)
        .zip(xq.chunks_exact(BLOCK))
        .map(|(block, xq)| {
            let v = values(block.as_ptr());
            let x = _mm256_loadu_si256(xq.as_ptr().cast());
            let lanes = lane_sums(v, _mm256_sign_epi8(v, v), x);
            let mut out = [0i32; 8];
            _mm256_storeu_si256(out.as_mut_ptr().cast(), lanes);
            out.iter().sum()
        })
        .collect()
}
