//! The 512-bit levels: two blocks per vector (block `b`'s 32 codes in bytes 0..32, block
//! `b + 1`'s in 32..64, each against its 32 activations as they lie in memory). Avx512Vnni sums
//! 4 products per i32 lane with `vpdpbusd`; Avx512Bw with `vpmaddubsw` + `vpmaddwd`, the same
//! lane sums. Q4_1's and Q5_1's unsigned codes meet the signed activations directly; the
//! signed weights (Q4_0, Q5_0, Q8_0) as `|w|` against `x` negated where `w < 0` (`|w| <= 128`,
//! `|x| <= 127`: no i16 overflow).
//! A last odd block is added as the scalar twin adds it.

use std::arch::x86_64::*;

use super::{scalar, Format, QuantizedActivations, BLOCK, MAX_TOKENS};

/// How far ahead of the pair being computed the rows are prefetched into L1, in bytes.
const PREFETCH_BYTES: usize = 1536;

/// The weight integers `w` of the blocks at `p` and `p + format.bytes()`: 64 bytes, signed for
/// Q4_0, Q5_0 and Q8_0, unsigned for Q4_1 and Q5_1 (the module doc's).
///
/// SAFETY (caller): two whole blocks are readable at `p`; AVX-512F/BW are present.
#[inline(always)]
unsafe fn codes_pair(format: Format, p: *const u8) -> __m512i {
    let bytes = format.bytes();
    let at = format.codes_at();
    if format == Format::Q8_0 {
        let lo = _mm256_loadu_si256(p.add(at).cast());
        let hi = _mm256_loadu_si256(p.add(bytes + at).cast());
        return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    // [qs0, qs0, qs1, qs1] in 128-bit lanes; lanes 1 and 3 take the high nibbles.
    let q0 = _mm_loadu_si128(p.add(at).cast());
    let q1 = _mm_loadu_si128(p.add(bytes + at).cast());
    let w = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(q0), 0xFF00, q1);
    let w = _mm512_mask_srli_epi16(w, 0xFF00_FF00, w, 4);
    let mut q = _mm512_and_si512(w, _mm512_set1_epi8(0x0F));
    if let Some(h) = format.high_bits_at() {
        let qh0 = p.add(h).cast::<u32>().read_unaligned();
        let qh1 = p.add(bytes + h).cast::<u32>().read_unaligned();
        let fifth: __mmask64 = u64::from(qh0) | (u64::from(qh1) << 32);
        q = if format.has_min() {
            _mm512_mask_add_epi8(q, fifth, q, _mm512_set1_epi8(16))
        } else {
            // q + 16 h - 16.
            _mm512_mask_sub_epi8(q, !fifth, q, _mm512_set1_epi8(16))
        };
    } else if format == Format::Q4_0 {
        q = _mm512_sub_epi8(q, _mm512_set1_epi8(8));
    }
    q
}

/// What the activations are multiplied with: the weights themselves (unsigned) or `|w|`
/// (signed), and which activations to negate (where `w < 0`).
#[inline(always)]
unsafe fn unsigned_side(format: Format, q: __m512i) -> (__m512i, __mmask64) {
    if format.has_min() {
        (q, 0)
    } else {
        (_mm512_abs_epi8(q), _mm512_movepi8_mask(q))
    }
}

/// The 16 lane sums (4 products each) of `a` (unsigned) against `x` negated where `negate`.
#[inline(always)]
unsafe fn lane_sums<const VNNI: bool>(
    format: Format,
    a: __m512i,
    negate: __mmask64,
    x: __m512i,
) -> __m512i {
    let x = if !format.has_min() {
        _mm512_mask_sub_epi8(x, negate, _mm512_setzero_si512(), x)
    } else {
        x
    };
    if VNNI {
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, x)
    } else {
        // Each i16 sums 2 products of at most 128 * 127: no saturation.
        _mm512_madd_epi16(_mm512_maddubs_epi16(a, x), _mm512_set1_epi16(1))
    }
}

/// `[v0 x 8, v1 x 8]`.
#[inline(always)]
unsafe fn halves(v0: f32, v1: f32) -> __m512 {
    _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(v0), _mm512_set1_ps(v1))
}

/// `[f16 at p x 8, f16 at q x 8]` as f32 (built with AVX2's blend: the 256-bit masked moves
/// would need AVX-512VL, which the levels do not check).
#[inline(always)]
unsafe fn f16_halves(p: *const u8, q: *const u8) -> __m512 {
    let lo = _mm256_set1_epi16(p.cast::<i16>().read_unaligned());
    let hi = _mm256_set1_epi16(q.cast::<i16>().read_unaligned());
    _mm512_cvtph_ps(_mm256_blend_epi32(lo, hi, 0xF0))
}

/// Rows `rows` (`blocks` blocks of `format` each) times tokens `t0 .. t0 + T` of `acts`:
/// `[row][token]`. The `R` rows share each pair's activations (loaded and spread once).
///
/// SAFETY (caller): AVX-512F/BW (and VNNI if `VNNI`) are present; every row holds `blocks`
/// blocks and `acts` at least as many activation blocks for those tokens.
#[inline(always)]
unsafe fn rows<const R: usize, const T: usize, const VNNI: bool>(
    format: Format,
    rows: [&[u8]; R],
    blocks: usize,
    acts: &QuantizedActivations,
    t0: usize,
) -> [[f32; T]; R] {
    let bytes = format.bytes();
    let xq: [&[i8]; T] = std::array::from_fn(|t| acts.xq(t0 + t));
    let scales: [&[f32]; T] = std::array::from_fn(|t| acts.scales(t0 + t));
    let sums: [&[f32]; T] = std::array::from_fn(|t| acts.sums(t0 + t));
    // The code terms and the min terms add to separate sums: two dependency chains per row
    // and token.
    let mut acc = [[_mm512_setzero_ps(); T]; R];
    let mut min_acc = [[_mm512_setzero_ps(); T]; R];
    for pair in 0..blocks / 2 {
        let b = 2 * pair;
        // Each row's pair unpacked (a plain loop: a closure here might not be inlined into
        // the caller's target features).
        let zero = _mm512_setzero_ps();
        let mut weights = [(_mm512_setzero_si512(), 0, zero, zero); R];
        for (r, w) in weights.iter_mut().enumerate() {
            let p = rows[r].as_ptr().add(b * bytes);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_BYTES).cast());
            let (a, negate) = unsigned_side(format, codes_pair(format, p));
            let d = f16_halves(p, p.add(bytes));
            // The min term per lane: each block's 8 lanes add an eighth of it.
            let m = match format.has_min() {
                true => _mm512_mul_ps(
                    f16_halves(p.add(2), p.add(bytes + 2)),
                    _mm512_set1_ps(0.125),
                ),
                false => zero,
            };
            *w = (a, negate, d, m);
        }
        for t in 0..T {
            let x = _mm512_loadu_si512(xq[t].as_ptr().add(b * BLOCK).cast());
            let sx = halves(*scales[t].get_unchecked(b), *scales[t].get_unchecked(b + 1));
            let s = halves(*sums[t].get_unchecked(b), *sums[t].get_unchecked(b + 1));
            for (r, &(a, negate, d, m)) in weights.iter().enumerate() {
                let isums = lane_sums::<VNNI>(format, a, negate, x);
                let lanes = _mm512_cvtepi32_ps(isums);
                acc[r][t] = _mm512_fmadd_ps(lanes, _mm512_mul_ps(d, sx), acc[r][t]);
                if format.has_min() {
                    min_acc[r][t] = _mm512_fmadd_ps(m, s, min_acc[r][t]);
                }
            }
        }
    }
    // Plain loops again (not closures), so the reductions stay in this function's features.
    let mut out = [[0.0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            let mut y = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][t], min_acc[r][t]));
            if blocks % 2 == 1 {
                y += scalar::row_sum(format, rows[r], xq[t], scales[t], sums[t], blocks - 1);
            }
            out[r][t] = y;
        }
    }
    out
}

/// Rows computed together for one token (decode): they share each pair's activations.
const DECODE_ROWS: usize = 4;

/// [`super::dot_rows`] at a 512-bit level, for format `F` (a [`Format`] as `u8`): one token's
/// rows [`DECODE_ROWS`] at a time, several tokens' one row at a time for 8, 4, 2 or 1 tokens
/// at once (each row's blocks are unpacked once per group of tokens).
#[inline(always)]
unsafe fn dot_rows<const F: u8, const VNNI: bool>(
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
    if tokens == 1 {
        let mut groups = rows.chunks_exact(DECODE_ROWS * row_bytes);
        let mut outs = out.chunks_exact_mut(DECODE_ROWS);
        for (w, y) in (&mut groups).zip(&mut outs) {
            let w: [&[u8]; DECODE_ROWS] =
                std::array::from_fn(|r| &w[r * row_bytes..(r + 1) * row_bytes]);
            let sums = self::rows::<DECODE_ROWS, 1, VNNI>(format, w, blocks, acts, t0);
            for (y, sum) in y.iter_mut().zip(sums) {
                *y = sum[0];
            }
        }
        let rest = groups.remainder().chunks_exact(row_bytes);
        for (w, y) in rest.zip(outs.into_remainder()) {
            *y = self::rows::<1, 1, VNNI>(format, [w], blocks, acts, t0)[0][0];
        }
        return;
    }
    for (w, y) in rows
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(tokens))
    {
        let mut t = 0;
        while t < tokens {
            let step = [1, 1, 2, 2, 4, 4, 4, 4, 8][(tokens - t).min(MAX_TOKENS)];
            let at = t0 + t;
            let y = &mut y[t..t + step];
            match step {
                8 => y.copy_from_slice(&self::rows::<1, 8, VNNI>(format, [w], blocks, acts, at)[0]),
                4 => y.copy_from_slice(&self::rows::<1, 4, VNNI>(format, [w], blocks, acts, at)[0]),
                2 => y.copy_from_slice(&self::rows::<1, 2, VNNI>(format, [w], blocks, acts, at)[0]),
                _ => y.copy_from_slice(&self::rows::<1, 1, VNNI>(format, [w], blocks, acts, at)[0]),
            }
            t += step;
        }
    }
}

macro_rules! entry_points {
    ($vnni:ident, $bw:ident, $f:expr) => {
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
        pub(super) unsafe fn $vnni(
            rows: &[u8],
            cols: usize,
            acts: &QuantizedActivations,
            t0: usize,
            tokens: usize,
            out: &mut [f32],
        ) {
            dot_rows::<{ $f as u8 }, true>(rows, cols, acts, t0, tokens, out)
        }

        #[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
        pub(super) unsafe fn $bw(
            rows: &[u8],
            cols: usize,
            acts: &QuantizedActivations,
            t0: usize,
            tokens: usize,
            out: &mut [f32],
        ) {
            dot_rows::<{ $f as u8 }, false>(rows, cols, acts, t0, tokens, out)
        }
    };
}

entry_points!(q4_0_vnni, q4_0_bw, Format::Q4_0);
entry_points!(q4_1_vnni, q4_1_bw, Format::Q4_1);
entry_points!(q5_0_vnni, q5_0_bw, Format::Q5_0);
entry_points!(q5_1_vnni, q5_1_bw, Format::Q5_1);
entry_points!(q8_0_vnni, q8_0_bw, Format::Q8_0);

/// The integer sums of each whole pair of blocks of `row` (the twin's for a last odd block).
#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
pub(super) unsafe fn row_isums_vnni(format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
    row_isums::<true>(format, row, xq)
}

#[cfg(test)]
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
pub(super) unsafe fn row_isums_bw(format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
    row_isums::<false>(format, row, xq)
}

#[cfg(test)]
#[inline(always)]
unsafe fn row_isums<const VNNI: bool>(format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
    let blocks = row.len() / format.bytes();
    let mut out = Vec::with_capacity(blocks);
    for pair in 0..blocks / 2 {
        let b = 2 * pair;
        let (a, negate) = unsigned_side(
            format,
            codes_pair(format, row.as_ptr().add(b * format.bytes())),
        );
        let x = _mm512_loadu_si512(xq.as_ptr().add(b * BLOCK).cast());
        let mut lanes = [0i32; 16];
        _mm512_storeu_si512(
            lanes.as_mut_ptr().cast(),
            lane_sums::<VNNI>(format, a, negate, x),
        );
        out.push(lanes[..8].iter().sum());
        out.push(lanes[8..].iter().sum());
    }
    if blocks % 2 == 1 {
        out.extend(scalar::row_isums(
            format,
            &row[(blocks - 1) * format.bytes()..],
            &xq[(blocks - 1) * BLOCK..],
        ));
    }
    out
}
