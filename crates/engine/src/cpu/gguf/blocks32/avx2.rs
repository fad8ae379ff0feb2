//! The AVX2 level: one block per 256-bit vector, `vpmaddubsw` + `vpmaddwd` into 8 i32 lane sums
//! (4 products each). Q4_1's and Q5_1's unsigned codes meet the signed activations directly;
//! the signed weights (Q4_0, Q5_0, Q8_0) as `|w|` against `x` with `w`'s sign (`vpsignb`).
//! Each block's `d` (and `m`) is read with F16C.

use std::arch::x86_64::*;

use super::{Format, QuantizedActivations, BLOCK, MAX_TOKENS};

/// How far ahead of the block being computed the rows are prefetched into L1, in bytes.
const PREFETCH_BYTES: usize = 1536;

/// The 32 weight integers `w` of the block at `p` (the module doc's: signed for Q4_0, Q5_0 and
/// Q8_0, unsigned for Q4_1 and Q5_1).
///
/// SAFETY (caller): a whole block is readable at `p`; AVX2 is present.
#[inline(always)]
unsafe fn codes(format: Format, p: *const u8) -> __m256i {
    let at = format.codes_at();
    if format == Format::Q8_0 {
        return _mm256_loadu_si256(p.add(at).cast());
    }
    let qs = _mm_loadu_si128(p.add(at).cast());
    let both = _mm256_set_m128i(_mm_srli_epi16(qs, 4), qs);
    let mut q = _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
    if let Some(h) = format.high_bits_at() {
        // Byte j of the block gets byte j / 8 of qh, then its bit j % 8 as 16 or 0.
        let qh = _mm256_set1_epi32(p.add(h).cast::<i32>().read_unaligned());
        let spread = _mm256_shuffle_epi8(
            qh,
            _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            ),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q = if format.has_min() {
            _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)))
        } else {
            // q + 16 h - 16: where h is 0, q | 0xF0 is q - 16 as a signed byte.
            _mm256_or_si256(q, _mm256_andnot_si256(set, _mm256_set1_epi8(-16)))
        };
    } else if format == Format::Q4_0 {
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    }
    q
}

/// The 8 lane sums of the weights `q` against `x` (`a` = `q`, or `|q|` if signed).
#[inline(always)]
unsafe fn lane_sums(format: Format, q: __m256i, a: __m256i, x: __m256i) -> __m256i {
    let x = if !format.has_min() {
        _mm256_sign_epi8(x, q)
    } else {
        x
    };
    // Each i16 sums 2 products of at most 128 * 127: no saturation.
    _mm256_madd_epi16(_mm256_maddubs_epi16(a, x), _mm256_set1_epi16(1))
}

#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = p.cast::<u16>().read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Block `b` of a row, at `p`, times `T` tokens: adds its code terms to `acc` and its min terms
/// to `min_terms`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block<const T: usize>(
    format: Format,
    p: *const u8,
    b: usize,
    xq: &[&[i8]; T],
    scales: &[&[f32]; T],
    sums: &[&[f32]; T],
    acc: &mut [__m256; T],
    min_terms: &mut [f32; T],
) {
    let q = codes(format, p);
    let a = if format.has_min() {
        q
    } else {
        _mm256_abs_epi8(q)
    };
    let d = f16_at(p);
    for t in 0..T {
        let x = _mm256_loadu_si256(xq[t].as_ptr().add(b * BLOCK).cast());
        let isums = lane_sums(format, q, a, x);
        let dsx = _mm256_set1_ps(d * *scales[t].get_unchecked(b));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isums), dsx, acc[t]);
        if format.has_min() {
            min_terms[t] += f16_at(p.add(2)) * *sums[t].get_unchecked(b);
        }
    }
}

/// Row `row` (`blocks` blocks of `format`) times tokens `t0 .. t0 + T` of `acts`.
///
/// SAFETY (caller): AVX2, FMA and F16C are present; `row` holds `blocks` blocks and `acts` at
/// least as many activation blocks for those tokens.
#[inline(always)]
unsafe fn row<const T: usize>(
    format: Format,
    row: &[u8],
    blocks: usize,
    acts: &QuantizedActivations,
    t0: usize,
) -> [f32; T] {
    let bytes = format.bytes();
    let xq: [&[i8]; T] = std::array::from_fn(|t| acts.xq(t0 + t));
    let scales: [&[f32]; T] = std::array::from_fn(|t| acts.scales(t0 + t));
    let sums: [&[f32]; T] = std::array::from_fn(|t| acts.sums(t0 + t));
    // Even and odd blocks add to separate sums, two dependency chains instead of one.
    let mut acc = [[_mm256_setzero_ps(); T]; 2];
    let mut min_terms = [[0.0f32; T]; 2];
    let base = row.as_ptr();
    for pair in 0..blocks / 2 {
        _mm_prefetch::<_MM_HINT_T0>(
            base.add(2 * pair * bytes)
                .wrapping_add(PREFETCH_BYTES)
                .cast(),
        );
        for half in 0..2 {
            let b = 2 * pair + half;
            // From 4 tokens on, the tokens' sums are chains enough (and 16 registers would not
            // hold twice as many sums).
            let chain = if T >= 4 { 0 } else { half };
            let (acc, min_terms) = (&mut acc[chain], &mut min_terms[chain]);
            block(
                format,
                base.add(b * bytes),
                b,
                &xq,
                &scales,
                &sums,
                acc,
                min_terms,
            );
        }
    }
    if blocks % 2 == 1 {
        let b = blocks - 1;
        block(
            format,
            base.add(b * bytes),
            b,
            &xq,
            &scales,
            &sums,
            &mut acc[0],
            &mut min_terms[0],
        );
    }
    // A plain loop (not a closure), so the reductions stay in this function's features.
    let mut out = [0.0f32; T];
    for t in 0..T {
        out[t] = hsum(_mm256_add_ps(acc[0][t], acc[1][t])) + (min_terms[0][t] + min_terms[1][t]);
    }
    out
}

/// [`super::dot_rows`] at AVX2, for format `F` (a [`Format`] as `u8`).
#[inline(always)]
unsafe fn dot_rows<const F: u8>(
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    let format = Format::from_id(F);
    let blocks = cols / BLOCK;
    let row_bytes = blocks * format.bytes();
    for (w, y) in rows
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(tokens))
    {
        let mut t = 0;
        while t < tokens {
            let step = [1, 1, 2, 2, 4, 4, 4, 4, 8][(tokens - t).min(MAX_TOKENS)];
            match step {
                8 => y[t..t + 8].copy_from_slice(&row::<8>(format, w, blocks, acts, t0 + t)),
                4 => y[t..t + 4].copy_from_slice(&row::<4>(format, w, blocks, acts, t0 + t)),
                2 => y[t..t + 2].copy_from_slice(&row::<2>(format, w, blocks, acts, t0 + t)),
                _ => y[t..t + 1].copy_from_slice(&row::<1>(format, w, blocks, acts, t0 + t)),
            }
            t += step;
        }
    }
}

macro_rules! entry_point {
    ($name:ident, $f:expr) => {
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $name(
            rows: &[u8],
            cols: usize,
            acts: &QuantizedActivations,
            t0: usize,
            tokens: usize,
            out: &mut [f32],
        ) {
            dot_rows::<{ $f as u8 }>(rows, cols, acts, t0, tokens, out)
        }
    };
}

entry_point!(q4_0, Format::Q4_0);
entry_point!(q4_1, Format::Q4_1);
entry_point!(q5_0, Format::Q5_0);
entry_point!(q5_1, Format::Q5_1);
entry_point!(q8_0, Format::Q8_0);

/// The integer sums of each block of `row`.
#[cfg(test)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn row_isums(format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
    let blocks = row.len() / format.bytes();
    (0..blocks)
        .map(|b| {
            let q = codes(format, row.as_ptr().add(b * format.bytes()));
            let a = if format.has_min() {
                q
            } else {
                _mm256_abs_epi8(q)
            };
            let x = _mm256_loadu_si256(xq.as_ptr().add(b * BLOCK).cast());
            let mut lanes = [0i32; 8];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast(), lane_sums(format, q, a, x));
            lanes.iter().sum()
        })
        .collect()
}
