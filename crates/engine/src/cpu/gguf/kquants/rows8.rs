//! Q4_K in groups of 8 rows ([`q4nx::gguf::rows8`] holds the layout) against int8 activations,
//! at the AVX2 level (also the AVX-512 levels'): a 32-byte vector holds the same 4 code bytes
//! of the group's 8 rows, so row `r`'s sums stay in lane `r` from the products to the result and
//! nothing is reduced across lanes until the end; the scales and mins of the 8 rows come out of
//! 3 vectors with byte operations, and `d`, `dmin` by `vcvtph2ps`.
//!
//! Per sub-block `j` and token: `vpmaddubsw` of each of the 8 code vectors with the token's 4
//! activation bytes that meet them (broadcast), added as 16-bit words (at most 8 * 2 * 15 * 127
//! = 30480: never saturated), then `vpmaddwd` with ones gives row `r`'s `isum_j` in lane `r`.
//! Vector `A_j` holds lane `a_j` of the 8 rows (and `M_j` lane `m_j`), updated with the scalar
//! twin's operations in its order; the rows' results are the vector-wise
//! `((A0 + A4) + (A2 + A6)) + ((A1 + A5) + (A3 + A7))` minus the same of the `M_j`: the twin's
//! bits, row by row.

use std::arch::x86_64::*;

use q4nx::gguf::rows8::{GROUP_BLOCK_BYTES, ROWS};

use super::{QK, SUBS};
use crate::cpu::quant::QuantizedActivations;

/// How far ahead of the super-block being computed the kernel requests lines into L1, in
/// bytes (the groups are one stream).
const PREFETCH_BYTES: usize = 2 * GROUP_BLOCK_BYTES;

/// See [`super::dot_groups`].
///
/// # Safety
/// AVX2, FMA and F16C are present; the lengths were checked by the caller.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_groups(
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match tokens {
        1 => groups_n::<1>(groups, cols, acts, t0, out),
        2 => groups_n::<2>(groups, cols, acts, t0, out),
        3 => groups_n::<3>(groups, cols, acts, t0, out),
        4 => groups_n::<4>(groups, cols, acts, t0, out),
        5 => groups_n::<5>(groups, cols, acts, t0, out),
        6 => groups_n::<6>(groups, cols, acts, t0, out),
        7 => groups_n::<7>(groups, cols, acts, t0, out),
        _ => groups_n::<8>(groups, cols, acts, t0, out),
    }
}

/// Every group of `groups` against tokens `t0 .. t0 + N`: each super-block's scales are
/// unpacked once for all of them, its codes once per pair of sub-blocks.
#[inline(always)]
unsafe fn groups_n<const N: usize>(
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    let blocks = cols / QK;
    let group_bytes = blocks * GROUP_BLOCK_BYTES;
    let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
    let scales: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
    let sums: [*const f32; N] = std::array::from_fn(|t| acts.sums(t0 + t).as_ptr());
    let low4 = _mm256_set1_epi8(0x0f);
    let ones = _mm256_set1_epi16(1);
    for (group, y) in groups
        .chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(ROWS * N))
    {
        let mut acc = [[_mm256_setzero_ps(); SUBS]; N];
        let mut accm = [[_mm256_setzero_ps(); SUBS]; N];
        for i in 0..blocks {
            let sb = group.as_ptr().add(i * GROUP_BLOCK_BYTES);
            let ahead = sb.wrapping_add(PREFETCH_BYTES);
            for line in (0..GROUP_BLOCK_BYTES).step_by(64) {
                // A hint: it never faults, even past the end of the mapping.
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let (dsc, dm) = factors(sb);
            for t in 0..N {
                let s = sums[t].add(i * SUBS);
                for (j, m) in accm[t].iter_mut().enumerate() {
                    *m = _mm256_add_ps(*m, _mm256_mul_ps(dm[j], _mm256_set1_ps(*s.add(j))));
                }
            }
            for n in 0..4 {
                // Sub-blocks 2n (low nibbles) and 2n + 1 (high nibbles) of the 8 rows.
                let codes = sb.add(128 + 256 * n);
                let v: [__m256i; 8] =
                    std::array::from_fn(|c| _mm256_loadu_si256(codes.add(32 * c).cast()));
                let lo = v.map(|v| _mm256_and_si256(v, low4));
                let hi = v.map(|v| _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4));
                for t in 0..N {
                    let x = xq[t].add(i * QK + 64 * n);
                    let word =
                        |at: usize| _mm256_set1_epi32(x.add(at).cast::<i32>().read_unaligned());
                    let (mut p0, mut p1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                    for c in 0..8 {
                        p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(lo[c], word(4 * c)));
                        p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(hi[c], word(32 + 4 * c)));
                    }
                    let s = scales[t].add(i * SUBS);
                    for (h, p) in [p0, p1].into_iter().enumerate() {
                        let j = 2 * n + h;
                        let isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                        let f = _mm256_mul_ps(dsc[j], _mm256_set1_ps(*s.add(j)));
                        acc[t][j] = _mm256_add_ps(acc[t][j], _mm256_mul_ps(isum, f));
                    }
                }
            }
        }
        for t in 0..N {
            let rows = _mm256_sub_ps(halving(&acc[t]), halving(&accm[t]));
            let mut lanes = [0f32; ROWS];
            _mm256_storeu_ps(lanes.as_mut_ptr(), rows);
            for (r, v) in lanes.into_iter().enumerate() {
                y[r * N + t] = v;
            }
        }
    }
}

/// `((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))` lane by lane: the scalar twin's `hsum8`
/// of each row's lanes.
#[inline(always)]
unsafe fn halving(v: &[__m256; SUBS]) -> __m256 {
    let add = |a, b| _mm256_add_ps(a, b);
    add(
        add(add(v[0], v[4]), add(v[2], v[6])),
        add(add(v[1], v[5]), add(v[3], v[7])),
    )
}

/// Per sub-block `j`, lane `r`: `d_r * f32(sc_j)` and `dmin_r * f32(m_j)` of row `r` of the
/// group's super-block at `sb` (the twin's `factors`). The 96 scale bytes are 3 vectors with
/// byte `k` of row `r` in lane `8 (k % 4) + r` of vector `k / 4`.
#[inline(always)]
unsafe fn factors(sb: *const u8) -> ([__m256; SUBS], [__m256; SUBS]) {
    let d = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
    let dmin = _mm256_cvtph_ps(_mm_loadu_si128(sb.add(16).cast()));
    let v0 = _mm256_loadu_si256(sb.add(32).cast());
    let v1 = _mm256_loadu_si256(sb.add(64).cast());
    let v2 = _mm256_loadu_si256(sb.add(96).cast());
    let (low6, low4, bits45) = (
        _mm256_set1_epi8(63),
        _mm256_set1_epi8(15),
        _mm256_set1_epi8(0x30),
    );
    // `(b >> 6) << 4` of each byte is `(b >> 2) & 0x30`; the 16-bit shifts carry bits of the
    // next byte only into bits the masks drop.
    let top2 = |v| _mm256_and_si256(_mm256_srli_epi16::<2>(v), bits45);
    let sc = [
        _mm256_and_si256(v0, low6),
        _mm256_or_si256(_mm256_and_si256(v2, low4), top2(v0)),
    ];
    let m = [
        _mm256_and_si256(v1, low6),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(v2), low4), top2(v1)),
    ];
    // Sub-block j's 8 bytes are lanes 8 (j % 4) .. 8 (j % 4) + 8 of vector j / 4.
    let floats = |v: &[__m256i; 2], j: usize| {
        let v = v[j / 4];
        let half = match (j % 4) / 2 {
            0 => _mm256_castsi256_si128(v),
            _ => _mm256_extracti128_si256::<1>(v),
        };
        let bytes = match j % 2 {
            0 => half,
            _ => _mm_srli_si128::<8>(half),
        };
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
    };
    (
        std::array::from_fn(|j| _mm256_mul_ps(d, floats(&sc, j))),
        std::array::from_fn(|j| _mm256_mul_ps(dmin, floats(&m, j))),
    )
}
