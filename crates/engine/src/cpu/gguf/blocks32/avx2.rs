//! The AVX2 level: one block per 256-bit vector, `vpmaddubsw` + `vpmaddwd` into 8 i32 lane sums
//! (4 products each). Q4_1's and Q5_1's unsigned codes meet the signed activations directly;
//! the signed weights (Q4_0, Q5_0, Q8_0) as `|w|` against `x` with `w`'s sign (`vpsignb`).
//! Each block's `d` (and `m`) is read with F16C. One token (a decode step) goes 8 rows at a
//! time ([`rows8`]): the float work of a block, one multiply-add of its sum by `d * sx`, is then
//! done once for 8 rows, the 8 rows' `d` converted together.

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

/// The codes of the block at `p` and what meets the activations in `vpmaddubsw`: the codes
/// themselves when unsigned (formats with a min), else their magnitudes (the sign goes to `x`).
#[inline(always)]
unsafe fn operands(format: Format, p: *const u8) -> (__m256i, __m256i) {
    let q = codes(format, p);
    let a = if format.has_min() {
        q
    } else {
        _mm256_abs_epi8(q)
    };
    (q, a)
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
    let (q, a) = operands(format, p);
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

/// Rows [`rows8`] computes at once.
const ROWS: usize = 8;

/// The f16 at `p` and at the same place of the 7 rows after it (`row_bytes` apart), as 8 f32.
#[inline(always)]
unsafe fn f16_of_rows(p: *const u8, row_bytes: usize) -> __m256 {
    // A pointer closure only (no intrinsic inside it).
    let h = |r: usize| i32::from(p.add(r * row_bytes).cast::<u16>().read_unaligned());
    let mut v = _mm_cvtsi32_si128(h(0));
    v = _mm_insert_epi16::<1>(v, h(1));
    v = _mm_insert_epi16::<2>(v, h(2));
    v = _mm_insert_epi16::<3>(v, h(3));
    v = _mm_insert_epi16::<4>(v, h(4));
    v = _mm_insert_epi16::<5>(v, h(5));
    v = _mm_insert_epi16::<6>(v, h(6));
    v = _mm_insert_epi16::<7>(v, h(7));
    _mm256_cvtph_ps(v)
}

/// The 8 lane sums of the block at `p` against `x`.
#[inline(always)]
unsafe fn block_lanes(format: Format, p: *const u8, x: __m256i) -> __m256i {
    let (q, a) = operands(format, p);
    lane_sums(format, q, a, x)
}

/// Block `b` of the 8 rows at `base` (`row_bytes` apart) against activation block `b`: its 8
/// integer sums as floats, its 8 `d * sx`, and where the block starts in row 0. A function, not
/// a closure, so that it is inlined into the entry point's CPU features.
#[inline(always)]
unsafe fn block8(
    format: Format,
    base: *const u8,
    row_bytes: usize,
    b: usize,
    xq: *const i8,
    scales: *const f32,
) -> (__m256, __m256, *const u8) {
    let p = base.add(b * format.bytes());
    let x = _mm256_loadu_si256(xq.add(b * BLOCK).cast());
    let l = |r: usize| p.add(r * row_bytes);
    let h01 = _mm256_hadd_epi32(block_lanes(format, l(0), x), block_lanes(format, l(1), x));
    let h23 = _mm256_hadd_epi32(block_lanes(format, l(2), x), block_lanes(format, l(3), x));
    let h45 = _mm256_hadd_epi32(block_lanes(format, l(4), x), block_lanes(format, l(5), x));
    let h67 = _mm256_hadd_epi32(block_lanes(format, l(6), x), block_lanes(format, l(7), x));
    // Rows 0..4 (4..8): the first half of each row's lanes in the low 128 bits, the second in
    // the high.
    let lo = _mm256_hadd_epi32(h01, h23);
    let hi = _mm256_hadd_epi32(h45, h67);
    let isums = _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(lo, hi),
        _mm256_permute2x128_si256::<0x31>(lo, hi),
    );
    let dsx = _mm256_mul_ps(f16_of_rows(p, row_bytes), _mm256_set1_ps(*scales.add(b)));
    (_mm256_cvtepi32_ps(isums), dsx, p)
}

/// 8 rows (`w`, `row_bytes` each) times token `t` of `acts`, into `y`: each block's 8 integer
/// sums end up side by side in one vector (a transposing tree of `vphaddd`), so the float work
/// of a block (its scales converted, multiplied by the activation scale, one multiply-add) is
/// done once for 8 rows instead of once per row. Even and odd blocks add to separate sums.
///
/// SAFETY (caller): AVX2, FMA and F16C are present; `w` holds 8 rows of `blocks` blocks and
/// `acts` as many activation blocks for token `t`.
#[inline(always)]
unsafe fn rows8(
    format: Format,
    w: &[u8],
    row_bytes: usize,
    blocks: usize,
    acts: &QuantizedActivations,
    t: usize,
    y: &mut [f32],
) {
    let (xq, scales, sums) = (
        acts.xq(t).as_ptr(),
        acts.scales(t).as_ptr(),
        acts.sums(t).as_ptr(),
    );
    let base = w.as_ptr();
    // The next 8 rows are requested into L1 as these are computed, an equal share per block
    // (they follow these in memory; past the last rows the hints fall beyond the matrix, where
    // a prefetch never faults).
    let (ahead, share) = (base.wrapping_add(ROWS * row_bytes), ROWS * format.bytes());
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut min_acc = _mm256_setzero_ps();
    let mut b = 0;
    while b < blocks {
        for (half, acc) in acc.iter_mut().enumerate().take(blocks - b) {
            for line in (0..share).step_by(64) {
                let at = ahead.wrapping_add((b + half) * share + line);
                _mm_prefetch::<_MM_HINT_T0>(at.cast());
            }
            let (isums, dsx, p) = block8(format, base, row_bytes, b + half, xq, scales);
            *acc = _mm256_fmadd_ps(isums, dsx, *acc);
            if format.has_min() {
                let m = f16_of_rows(p.add(2), row_bytes);
                min_acc = _mm256_fmadd_ps(m, _mm256_set1_ps(*sums.add(b + half)), min_acc);
            }
        }
        b += 2;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), min_acc);
    _mm256_storeu_ps(y.as_mut_ptr(), sum);
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
    let (mut rows, mut out) = (rows, out);
    if tokens == 1 {
        // One token (a decode step): 8 rows at a time, their sums side by side in one vector.
        let whole = rows.len() / (ROWS * row_bytes) * ROWS;
        let (eights, rest) = rows.split_at(whole * row_bytes);
        let (y8, y_rest) = out.split_at_mut(whole);
        for (w, y) in eights
            .chunks_exact(ROWS * row_bytes)
            .zip(y8.chunks_exact_mut(ROWS))
        {
            rows8(format, w, row_bytes, blocks, acts, t0, y);
        }
        (rows, out) = (rest, y_rest);
    }
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
