//! What the x86 levels share: the row loop (super-block by super-block, every token's 8 lanes
//! of f32 sums, in the order the module doc gives), the scale and min factors, the f16
//! conversion, the halving sum and the look-ahead (one token: 8 rows at a time, [`rows8`]). A
//! level brings its [`Codes`]: how it unpacks a super-block's codes into registers and how it
//! turns them into the 8 integer sums.

use std::arch::x86_64::*;

use q4nx::gguf::GgmlType;

use super::{QK, SUBS};
use crate::cpu::quant::QuantizedActivations;

/// The kinds, as the const parameter of the generic kernels.
pub(super) const Q4K: u8 = 0;
pub(super) const Q5K: u8 = 1;
pub(super) const Q6K: u8 = 2;

/// How far ahead of the super-block being computed the kernels request lines into L1, in bytes
/// (the rows are one stream: row after row, block after block).
const PREFETCH_BYTES: usize = 2048;

/// A level's way with a super-block's codes.
pub(super) trait Codes {
    /// The unpacked codes of one super-block (and Q6_K's scales), held in registers.
    type W;
    /// Unpacks the super-block of kind `K` at `block`.
    ///
    /// # Safety
    /// `block` points at a whole block of `K`; the level's CPU features are present.
    unsafe fn unpack<const K: u8>(block: *const u8) -> Self::W;
    /// The 8 integer sums `isum_j` (module doc), in sub-block order, against the 256
    /// activations at `xq`.
    ///
    /// # Safety
    /// `xq` points at 256 readable values; the level's CPU features are present.
    unsafe fn isums<const K: u8>(w: &Self::W, xq: *const i8) -> __m256i;
}

/// The const parameter of `kind`.
#[inline(always)]
fn kind_code(kind: GgmlType) -> u8 {
    match kind {
        GgmlType::Q4_K => Q4K,
        GgmlType::Q5_K => Q5K,
        GgmlType::Q6_K => Q6K,
        _ => unreachable!("{kind} is not a K-quant: checked by dot_rows"),
    }
}

/// Bytes per block of `K`.
#[inline(always)]
const fn block_bytes(k: u8) -> usize {
    match k {
        Q4K => 144,
        Q5K => 176,
        _ => 210,
    }
}

/// [`super::dot_rows`] with the codes of level `C`; inlined into the level's entry point,
/// which enables its CPU features.
///
/// # Safety
/// The level's CPU features are present; the lengths were checked by [`super::dot_rows`].
#[inline(always)]
pub(super) unsafe fn dot_rows<C: Codes>(
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match kind_code(kind) {
        Q4K => by_tokens::<C, Q4K>(rows, cols, acts, t0, tokens, out),
        Q5K => by_tokens::<C, Q5K>(rows, cols, acts, t0, tokens, out),
        _ => by_tokens::<C, Q6K>(rows, cols, acts, t0, tokens, out),
    }
}

/// [`super::block_isums`] with the codes of level `C`.
///
/// # Safety
/// As [`Codes::unpack`] and [`Codes::isums`].
#[cfg(test)]
#[inline(always)]
pub(super) unsafe fn block_isums<C: Codes>(kind: GgmlType, block: &[u8], xq: &[i8]) -> [i32; 8] {
    let sums = match kind_code(kind) {
        Q4K => C::isums::<Q4K>(&C::unpack::<Q4K>(block.as_ptr()), xq.as_ptr()),
        Q5K => C::isums::<Q5K>(&C::unpack::<Q5K>(block.as_ptr()), xq.as_ptr()),
        _ => C::isums::<Q6K>(&C::unpack::<Q6K>(block.as_ptr()), xq.as_ptr()),
    };
    let mut out = [0i32; 8];
    _mm256_storeu_si256(out.as_mut_ptr().cast(), sums);
    out
}

#[inline(always)]
unsafe fn by_tokens<C: Codes, const K: u8>(
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match tokens {
        1 => rows_n::<C, K, 1>(rows, cols, acts, t0, out),
        2 => rows_n::<C, K, 2>(rows, cols, acts, t0, out),
        3 => rows_n::<C, K, 3>(rows, cols, acts, t0, out),
        4 => rows_n::<C, K, 4>(rows, cols, acts, t0, out),
        5 => rows_n::<C, K, 5>(rows, cols, acts, t0, out),
        6 => rows_n::<C, K, 6>(rows, cols, acts, t0, out),
        7 => rows_n::<C, K, 7>(rows, cols, acts, t0, out),
        _ => rows_n::<C, K, 8>(rows, cols, acts, t0, out),
    }
}

/// Every row of `rows` against tokens `t0 .. t0 + N`: each super-block is unpacked once for
/// all of them.
#[inline(always)]
unsafe fn rows_n<C: Codes, const K: u8, const N: usize>(
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    out: &mut [f32],
) {
    let bb = block_bytes(K);
    let blocks = cols / QK;
    let xq: [*const i8; N] = std::array::from_fn(|t| acts.xq(t0 + t).as_ptr());
    let scales: [*const f32; N] = std::array::from_fn(|t| acts.scales(t0 + t).as_ptr());
    let sums: [*const f32; N] = std::array::from_fn(|t| acts.sums(t0 + t).as_ptr());
    let row_bytes = blocks * bb;
    let (mut rows, mut out) = (rows, out);
    if N == 1 {
        // One token (a decode step): 8 rows at a time; the rows after the last 8 go below.
        let whole = rows.len() / (ROWS * row_bytes) * ROWS;
        let (eights, rest) = rows.split_at(whole * row_bytes);
        let (y8, y_rest) = out.split_at_mut(whole);
        for (w, y) in eights
            .chunks_exact(ROWS * row_bytes)
            .zip(y8.chunks_exact_mut(ROWS))
        {
            rows8::<C, K>(w, row_bytes, blocks, xq[0], scales[0], sums[0], y);
        }
        (rows, out) = (rest, y_rest);
    }
    for (row, out) in rows.chunks_exact(row_bytes).zip(out.chunks_exact_mut(N)) {
        let mut acc = [_mm256_setzero_ps(); N];
        let mut accm = [_mm256_setzero_ps(); N];
        let mut block = row.as_ptr();
        for i in 0..blocks {
            prefetch::<K>(block);
            let w = C::unpack::<K>(block);
            let (dsc, dm) = factors::<K>(block);
            for t in 0..N {
                let isum = _mm256_cvtepi32_ps(C::isums::<K>(&w, xq[t].add(i * QK)));
                let s = _mm256_loadu_ps(scales[t].add(i * SUBS));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(isum, _mm256_mul_ps(dsc, s)));
                if K != Q6K {
                    let sum = _mm256_loadu_ps(sums[t].add(i * SUBS));
                    accm[t] = _mm256_add_ps(accm[t], _mm256_mul_ps(dm, sum));
                }
            }
            // One past the row's end after its last block: never read.
            block = block.wrapping_add(bb);
        }
        for t in 0..N {
            out[t] = match K {
                Q6K => hsum(acc[t]),
                _ => hsum(acc[t]) - hsum(accm[t]),
            };
        }
    }
}

/// Rows [`rows8`] computes at once.
const ROWS: usize = 8;

/// 8 rows (`w`, `row_bytes` each, `blocks` super-blocks) against one token (`xq`, `scales`,
/// `sums`), into `y`: super-block `i` of the 8 rows in turn, so the token's scales and sums of
/// that super-block are read once for the 8 rows, the 8 rows are 8 streams in flight, and the
/// next 8 rows are requested into L1 as these are computed (an equal share per super-block;
/// past the matrix's end the hints fall outside it, where a prefetch never faults). Each row
/// keeps its own lanes, summed in the twin's order, so the result is the twin's to the bit.
#[inline(always)]
unsafe fn rows8<C: Codes, const K: u8>(
    w: &[u8],
    row_bytes: usize,
    blocks: usize,
    xq: *const i8,
    scales: *const f32,
    sums: *const f32,
    y: &mut [f32],
) {
    let bb = block_bytes(K);
    let base = w.as_ptr();
    let (ahead, share) = (base.wrapping_add(ROWS * row_bytes), ROWS * bb);
    let mut acc = [_mm256_setzero_ps(); ROWS];
    let mut accm = [_mm256_setzero_ps(); ROWS];
    for i in 0..blocks {
        for line in (0..share).step_by(64) {
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(i * share + line).cast());
        }
        let x = xq.add(i * QK);
        let s = _mm256_loadu_ps(scales.add(i * SUBS));
        let sum = _mm256_loadu_ps(sums.add(i * SUBS));
        for r in 0..ROWS {
            let block = base.add(r * row_bytes + i * bb);
            let (dsc, dm) = factors::<K>(block);
            let isum = _mm256_cvtepi32_ps(C::isums::<K>(&C::unpack::<K>(block), x));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(isum, _mm256_mul_ps(dsc, s)));
            if K != Q6K {
                accm[r] = _mm256_add_ps(accm[r], _mm256_mul_ps(dm, sum));
            }
        }
    }
    for r in 0..ROWS {
        y[r] = match K {
            Q6K => hsum(acc[r]),
            _ => hsum(acc[r]) - hsum(accm[r]),
        };
    }
}

/// Requests the lines of the block [`PREFETCH_BYTES`] ahead of `block` into L1.
#[inline(always)]
unsafe fn prefetch<const K: u8>(block: *const u8) {
    let ahead = block.wrapping_add(PREFETCH_BYTES);
    for line in (0..block_bytes(K)).step_by(64) {
        // A hint: it never faults, even past the end of the mapping.
        _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
    }
}

/// Per sub-block: `(d * f32(sc_j), dmin * f32(m_j))` of a Q4_K/Q5_K super-block, `(d, 0)` of a
/// Q6_K one (the scalar twin's `factors`). The 6-bit scales and mins come out of their 12
/// bytes as 3 words: bytes `j < 4` of the first two, and the nibbles of the third with the top
/// 2 bits of the first two above them.
#[inline(always)]
unsafe fn factors<const K: u8>(block: *const u8) -> (__m256, __m256) {
    let word = |at: usize| block.add(at).cast::<u32>().read_unaligned();
    if K == Q6K {
        let d = f16_to_f32(block.add(208).cast::<u16>().read_unaligned());
        return (_mm256_set1_ps(d), _mm256_setzero_ps());
    }
    let d = f16_to_f32(block.cast::<u16>().read_unaligned());
    let dmin = f16_to_f32(block.add(2).cast::<u16>().read_unaligned());
    let (a, b, c) = (word(4), word(8), word(12));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let sc = [a & LOW6, (c & LOW4) | (((a >> 6) & LOW2) << 4)];
    let m = [b & LOW6, ((c >> 4) & LOW4) | (((b >> 6) & LOW2) << 4)];
    let floats = |v: [u32; 2]| {
        let bytes = _mm_set_epi32(0, 0, v[1] as i32, v[0] as i32);
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes))
    };
    (
        _mm256_mul_ps(_mm256_set1_ps(d), floats(sc)),
        _mm256_mul_ps(_mm256_set1_ps(dmin), floats(m)),
    )
}

/// An IEEE half as f32 (exact; the same value `half` gives), without a branch on the common
/// path: the magnitude's bits moved into f32 place and rescaled by 2^112 (which also makes
/// subnormals right), infinities and NaNs kept as such.
#[inline(always)]
fn f16_to_f32(h: u16) -> f32 {
    let magnitude = u32::from(h & 0x7fff);
    let value = if magnitude >= 0x7c00 {
        f32::from_bits(0x7f80_0000 | ((magnitude & 0x3ff) << 13))
    } else {
        f32::from_bits(magnitude << 13) * f32::from_bits(0x7780_0000)
    };
    f32::from_bits(value.to_bits() | (u32::from(h & 0x8000) << 16))
}

/// `((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))`, the scalar twin's `hsum8`.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps::<1>(q, q)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_conversion_agrees_with_half_on_every_value() {
        for bits in 0..=u16::MAX {
            let want = half::f16::from_bits(bits).to_f32();
            let got = f16_to_f32(bits);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{bits:#06x}: {got} vs {want}"
            );
        }
    }
}
