//! MXFP4 in groups of 8 rows ([`q4nx::gguf::rows8`] holds the layout) against int8 activations,
//! at the AVX2 level (also the AVX-512 levels'): a 32-byte vector holds the same 4 code bytes of
//! the group's 8 rows, so row `r`'s sums stay in lane `r` from the products to the result and
//! nothing is reduced across lanes.
//!
//! Per block of 32 columns: the 4 code vectors become 8 vectors of the weights' values plus 12
//! (low and high nibbles, one `vpshufb` each through [`OFFSET_VALUES`]: 0 to 24, unsigned as
//! `vpmaddubsw` wants its first operand), once for all tokens. Per token: `vpmaddubsw` of each
//! with the token's 4 activation bytes that meet it (broadcast), the low nibbles' 4 and the
//! high nibbles' 4 added as 16-bit words (each at most 4 * 2 * 24 * 127 = 24384: never
//! saturated), `vpmaddwd` with ones, then minus `12 Σ xq` of the block (computed once a call)
//! gives row `r`'s integer sum of the block in lane `r`, the twin's `isum`. The 8 rows' scales
//! `d` come out of their 8 E8M0 bytes as [`e8m0_half`] computes them, and lane `r` of the
//! token's sum takes `(d * sx) * isum` with the twin's two roundings, block after block: the
//! twin's bits.

use std::arch::x86_64::*;
use std::cell::RefCell;

use q4nx::gguf::rows8::{GROUP_BLOCK_BYTES_MXFP4, ROWS};

use super::{e8m0_half, QuantizedActivations, BLOCK, MXFP4_VALUES};

/// MXFP4's values plus 12, by 4-bit code.
const OFFSET_VALUES: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (MXFP4_VALUES[i] + 12) as u8;
        i += 1;
    }
    t
};

/// How far ahead of the block being computed the kernel requests lines into L1, in bytes
/// (the groups are one stream). Measured by `mxfp4_rows8_speed` on gpt-oss's experts, one
/// token, on a Zen 3: 1536 bytes a sixth faster than none, and 3072 the best (9.6 to 9.8 GB/s
/// against 8.3 to 8.6 at 768, 1536, 4608 and 6144).
const PREFETCH_BYTES: usize = 3072;

thread_local! {
    /// Each worker's `12 Σ xq` of every block of a call's tokens (token-major).
    static OFFSETS: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// See [`super::dot_groups`].
///
/// # Safety
/// AVX2 and FMA are present; the lengths were checked by the caller.
#[target_feature(enable = "avx2,fma")]
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

/// The scales `d` of the 8 rows of the group's block at `p`, lane `r` row `r`'s:
/// [`q4nx::gguf::e8m0_half`] of its byte. `e << 23` as f32 bits is `2^(e - 127)`, halved
/// exactly, for every byte but 0 (whose bits are 0.0) and 255 (infinity): blocks with either,
/// which real weights do not hold, take the scalar function.
#[inline(always)]
unsafe fn scales(p: *const u8) -> __m256 {
    let bytes = p.cast::<u64>().read_unaligned();
    let has_zero = |v: u64| v.wrapping_sub(0x0101_0101_0101_0101) & !v & 0x8080_8080_8080_8080;
    if has_zero(bytes) | has_zero(!bytes) != 0 {
        let d: [f32; ROWS] = std::array::from_fn(|r| e8m0_half(*p.add(r)));
        return _mm256_loadu_ps(d.as_ptr());
    }
    let e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64));
    _mm256_mul_ps(
        _mm256_castsi256_ps(_mm256_slli_epi32::<23>(e)),
        _mm256_set1_ps(0.5),
    )
}

/// Every group of `groups` against tokens `t0 .. t0 + N`: each block's values are looked up
/// once for all of them.
#[inline(always)]
unsafe fn groups_n<const N: usize>(
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    let blocks = cols / BLOCK;
    let group_bytes = blocks * GROUP_BLOCK_BYTES_MXFP4;
    let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
    let sx: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
    let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(OFFSET_VALUES.as_ptr().cast()));
    let low4 = _mm256_set1_epi8(0x0f);
    let ones = _mm256_set1_epi16(1);
    // Taken out of the thread's cell, not used in a closure: a closure would not inherit this
    // function's target features, and its intrinsics would become calls.
    let mut offsets = OFFSETS.take();
    offsets.clear();
    for t in 0..N {
        let x = &acts.xq(t0 + t)[..cols];
        offsets.extend(
            x.chunks_exact(BLOCK)
                .map(|b| 12 * b.iter().map(|&q| i32::from(q)).sum::<i32>()),
        );
    }
    let offset: [*const i32; N] = std::array::from_fn(|t| offsets[t * blocks..].as_ptr());
    for (group, y) in groups
        .chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(ROWS * N))
    {
        let mut acc = [_mm256_setzero_ps(); N];
        for b in 0..blocks {
            let p = group.as_ptr().add(b * GROUP_BLOCK_BYTES_MXFP4);
            let ahead = p.wrapping_add(PREFETCH_BYTES);
            for line in [0, 64, 128] {
                // A hint: it never faults, even past the end of the mapping.
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let d = scales(p);
            let codes: [__m256i; 4] =
                std::array::from_fn(|c| _mm256_loadu_si256(p.add(8 + 32 * c).cast()));
            // Weights 4c .. 4c + 4 (low nibbles) and 16 + 4c .. (high) of the 8 rows.
            let lo = codes.map(|v| _mm256_shuffle_epi8(table, _mm256_and_si256(v, low4)));
            let hi = codes.map(|v| {
                let v = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low4);
                _mm256_shuffle_epi8(table, v)
            });
            for t in 0..N {
                let x = xq[t].add(b * BLOCK);
                let word = |at: usize| _mm256_set1_epi32(x.add(at).cast::<i32>().read_unaligned());
                let (mut p_lo, mut p_hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
                for c in 0..4 {
                    p_lo = _mm256_add_epi16(p_lo, _mm256_maddubs_epi16(lo[c], word(4 * c)));
                    p_hi = _mm256_add_epi16(p_hi, _mm256_maddubs_epi16(hi[c], word(16 + 4 * c)));
                }
                let sums =
                    _mm256_add_epi32(_mm256_madd_epi16(p_lo, ones), _mm256_madd_epi16(p_hi, ones));
                let isum = _mm256_sub_epi32(sums, _mm256_set1_epi32(*offset[t].add(b)));
                let f = _mm256_mul_ps(d, _mm256_set1_ps(*sx[t].add(b)));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(isum), f));
            }
        }
        // `y` is `[8 rows, N tokens]`.
        for (t, acc) in acc.iter().enumerate() {
            let mut lanes = [0.0f32; ROWS];
            _mm256_storeu_ps(lanes.as_mut_ptr(), *acc);
            for (r, v) in lanes.into_iter().enumerate() {
                y[r * N + t] = v;
            }
        }
    }
    OFFSETS.set(offsets);
}
