//! Q4_K and Q6_K in groups of 8 rows ([`q4nx::gguf::rows8`] holds the layouts) against int8
//! activations, at the AVX2 level (also the AVX-512 levels'): a 32-byte vector holds the same 4
//! code bytes of the group's 8 rows, so row `r`'s sums stay in lane `r` from the products to the
//! result and nothing is reduced across lanes until the end; Q4_K's scales and mins of the 8
//! rows come out of 3 vectors with byte operations, and `d`, `dmin` by `vcvtph2ps`.
//!
//! Per sub-block `j` and token: `vpmaddubsw` of each of the 8 code vectors with the token's 4
//! activation bytes that meet them (broadcast), added as 16-bit words (at most 8 * 2 * 15 * 127
//! = 30480: never saturated), then `vpmaddwd` with ones gives row `r`'s `isum_j` in lane `r`.
//! Vector `A_j` holds lane `a_j` of the 8 rows (and `M_j` lane `m_j`), updated with the scalar
//! twin's operations in its order; the rows' results are the vector-wise
//! `((A0 + A4) + (A2 + A6)) + ((A1 + A5) + (A3 + A7))` minus the same of the `M_j`: the twin's
//! bits, row by row.
//!
//! Q6_K: one vector of `ql` and one of `qh` give the 6-bit codes of the same 4 weights of the 8
//! rows (the layout's module doc). Per sub-block and token, `vpmaddubsw` of the codes with the
//! token's 4 activation bytes (broadcast), two added as words (each at most 2 * 63 * 127, so at
//! most 32004: never wrapped), then `vpmaddwd` with the 8 rows' scale of that half of 16 weights
//! as 16-bit pairs gives `Σ sc q x` of row `r` in lane `r`; the `-32` is `32 Σ sc x`, one more
//! `vpmaddwd` of the pairs `(sc_2j, sc_2j+1)` with the halves' activation sums (computed once a
//! call). The difference is the twin's `isum_j`, the same integer, and the floats follow the
//! twin's order as for Q4_K.

use std::arch::x86_64::*;

use q4nx::gguf::rows8::{GROUP_BLOCK_BYTES, GROUP_BLOCK_BYTES_Q6_K, ROWS};
use q4nx::gguf::GgmlType;

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
    kind: GgmlType,
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match tokens {
        1 => kind_n::<1>(kind, groups, cols, acts, t0, out),
        2 => kind_n::<2>(kind, groups, cols, acts, t0, out),
        3 => kind_n::<3>(kind, groups, cols, acts, t0, out),
        4 => kind_n::<4>(kind, groups, cols, acts, t0, out),
        5 => kind_n::<5>(kind, groups, cols, acts, t0, out),
        6 => kind_n::<6>(kind, groups, cols, acts, t0, out),
        7 => kind_n::<7>(kind, groups, cols, acts, t0, out),
        _ => kind_n::<8>(kind, groups, cols, acts, t0, out),
    }
}

/// The kernel of `kind` for `N` tokens.
#[inline(always)]
unsafe fn kind_n<const N: usize>(
    kind: GgmlType,
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    match kind {
        GgmlType::Q6_K => q6_k_n::<N>(groups, cols, acts, t0, out),
        _ => q4_k_n::<N>(groups, cols, acts, t0, out),
    }
}

/// Every group of `groups` against tokens `t0 .. t0 + N`: each super-block's scales are
/// unpacked once for all of them, its codes once per pair of sub-blocks.
#[inline(always)]
unsafe fn q4_k_n<const N: usize>(
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

/// [`q4_k_n`] for Q6_K: each super-block's `d` is read once for all the tokens,
/// its codes and scales once per quarter (`m` of half `n`). The helpers are functions inlined
/// always, not closures: a closure the compiler does not inline loses the target features and
/// calls every intrinsic.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // the indices are the layout's, as documented
unsafe fn q6_k_n<const N: usize>(
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    let blocks = cols / QK;
    let group_bytes = blocks * GROUP_BLOCK_BYTES_Q6_K;
    let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
    let scales: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
    // Per token and sub-block, the sums of its two halves' activations as the 16-bit pair
    // `(Σ x of weights 0..16, Σ x of 16..32)` (each at most 16 * 127): the same for every group.
    let mut xsums = vec![0i32; N * cols / 32];
    for (t, sums) in xsums.chunks_exact_mut(cols / 32).enumerate() {
        for (sum, x) in sums
            .iter_mut()
            .zip(acts.xq(t0 + t)[..cols].chunks_exact(32))
        {
            let half = |x: &[i8]| x.iter().map(|&x| i32::from(x)).sum::<i32>() as u16 as u32;
            *sum = (half(&x[..16]) | half(&x[16..]) << 16) as i32;
        }
    }
    for (group, y) in groups
        .chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(ROWS * N))
    {
        let mut acc = [[_mm256_setzero_ps(); SUBS]; N];
        for i in 0..blocks {
            let sb = group.as_ptr().add(i * GROUP_BLOCK_BYTES_Q6_K);
            let ahead = sb.wrapping_add(2 * GROUP_BLOCK_BYTES_Q6_K);
            for line in (0..GROUP_BLOCK_BYTES_Q6_K).step_by(64) {
                // A hint: it never faults, even past the end of the mapping.
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let d = _mm256_cvtph_ps(_mm_loadu_si128(sb.cast()));
            for n in 0..2 {
                for m in 0..2 {
                    // Sub-blocks 4n + m (low nibbles, qh bits 2m) and 4n + m + 2 (high
                    // nibbles, bits 2m + 4).
                    let mut q = [[_mm256_setzero_si256(); 8]; 2];
                    for c in 0..8 {
                        let l = _mm256_loadu_si256(sb.add(144 + 512 * n + 256 * m + 32 * c).cast());
                        let h = _mm256_loadu_si256(sb.add(1168 + 256 * n + 32 * c).cast());
                        if m == 0 {
                            q[0][c] = codes::<0>(l, h);
                            q[1][c] = codes::<2>(l, h);
                        } else {
                            q[0][c] = codes::<1>(l, h);
                            q[1][c] = codes::<3>(l, h);
                        }
                    }
                    for (h, q) in q.iter().enumerate() {
                        let j = 4 * n + m + 2 * h;
                        // Sub-block j's two scales of the 8 rows as 16-bit pairs.
                        let (s0, s1) = (
                            _mm256_cvtepi8_epi32(_mm_loadl_epi64(sb.add(16 + 16 * j).cast())),
                            _mm256_cvtepi8_epi32(_mm_loadl_epi64(sb.add(24 + 16 * j).cast())),
                        );
                        // (sc_2j, sc_2j), (sc_2j+1, sc_2j+1) and (sc_2j, sc_2j+1) per row.
                        let sc = [pair(s0, s0), pair(s1, s1), pair(s0, s1)];
                        for t in 0..N {
                            let x = xq[t].add(i * QK + 32 * j);
                            let xsum = xsums[t * (cols / 32) + i * SUBS + j];
                            let isum = isum_q6_k(q, x, xsum, &sc);
                            let f = _mm256_mul_ps(d, _mm256_set1_ps(*scales[t].add(i * SUBS + j)));
                            acc[t][j] = _mm256_add_ps(
                                acc[t][j],
                                _mm256_mul_ps(_mm256_cvtepi32_ps(isum), f),
                            );
                        }
                    }
                }
            }
        }
        for t in 0..N {
            let mut lanes = [0f32; ROWS];
            _mm256_storeu_ps(lanes.as_mut_ptr(), halving(&acc[t]));
            for (r, v) in lanes.into_iter().enumerate() {
                y[r * N + t] = v;
            }
        }
    }
}

/// The codes of sub-block `4n + K` from the vectors `l` (`ql`, `m = K % 2`) and `h`
/// (`qh`) of one quarter: the low (`K < 2`) or high nibbles of `l` with bits `2K, 2K + 1` of `h`
/// above them. The 16-bit shifts carry bits of the next byte only into bits the masks drop.
#[inline(always)]
unsafe fn codes<const K: usize>(l: __m256i, h: __m256i) -> __m256i {
    let low4 = _mm256_set1_epi8(0x0f);
    let low = match K < 2 {
        true => _mm256_and_si256(l, low4),
        false => _mm256_and_si256(_mm256_srli_epi16::<4>(l), low4),
    };
    let top = match K {
        0 => _mm256_slli_epi16::<4>(h),
        1 => _mm256_slli_epi16::<2>(h),
        2 => h,
        _ => _mm256_srli_epi16::<2>(h),
    };
    let top = _mm256_and_si256(top, _mm256_set1_epi8(0x30));
    _mm256_or_si256(low, top)
}

/// Lane `r` of `a` and of `b` (i32 holding i16 values) as the 16-bit pair `(a_r, b_r)`.
#[inline(always)]
unsafe fn pair(a: __m256i, b: __m256i) -> __m256i {
    let low = _mm256_set1_epi32(0xffff);
    _mm256_or_si256(_mm256_and_si256(a, low), _mm256_slli_epi32::<16>(b))
}

/// Row `r`'s `isum_j` in lane `r`: the codes `q` of sub-block `j` (vector `c` weights
/// `4c .. 4c + 4`) against its 32 activations `x`, whose halves sum to the pair `xsum`, as
/// `Σ sc q x - 32 Σ sc x`. `vpmaddubsw` of the codes with `x`, two added as words (each at most
/// 2 * 63 * 127, so at most 32004: never wrapped), then `vpmaddwd` by the scales `sc[0]`,
/// `sc[1]` of the half; the offset is `vpmaddwd` of the pair of scales `sc[2]` with `xsum`.
#[inline(always)]
unsafe fn isum_q6_k(q: &[__m256i; 8], x: *const i8, xsum: i32, sc: &[__m256i; 3]) -> __m256i {
    let mut sum = _mm256_setzero_si256();
    for c in (0..8).step_by(2) {
        let (x0, x1) = (
            x.add(4 * c).cast::<i32>().read_unaligned(),
            x.add(4 * c + 4).cast::<i32>().read_unaligned(),
        );
        let p = _mm256_add_epi16(
            _mm256_maddubs_epi16(q[c], _mm256_set1_epi32(x0)),
            _mm256_maddubs_epi16(q[c + 1], _mm256_set1_epi32(x1)),
        );
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, sc[c / 4]));
    }
    let offset = _mm256_madd_epi16(sc[2], _mm256_set1_epi32(xsum));
    _mm256_sub_epi32(sum, _mm256_slli_epi32::<5>(offset))
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
