//! GGUF's K-quant super-blocks of 256 weights (Q4_K, Q5_K, Q6_K) against int8 activation
//! blocks, at every [`KernelLevel`](crate::cpu::KernelLevel).
//!
//! # Block layouts (ggml's, byte for byte; `q4nx::gguf::dequantize` is the reference)
//!
//! A row of `W[rows, cols]` is `cols / 256` super-blocks in a row. Each super-block holds 8
//! sub-blocks `j` of 32 weights (weights `32 j .. 32 j + 32`).
//!
//! - Q4_K (144 bytes): `d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128]`. Sub-block `j` has
//!   a 6-bit scale `sc_j` and a 6-bit min `m_j` packed in the 12 bytes (`j < 4`: low 6 bits of
//!   bytes `j` and `j + 4`; `j >= 4`: the nibbles of byte `j + 4` with the top 2 bits of bytes
//!   `j - 4` and `j` above them). Weight `l` of sub-blocks `2n` and `2n + 1` is the low and the
//!   high nibble of `qs[32 n + l]`. `w = d * sc_j * q - dmin * m_j`.
//! - Q5_K (176 bytes): as Q4_K with `qh: [u8; 32]` before `qs`: bit `j` of `qh[l]` is the fifth
//!   bit (16) of weight `l` of sub-block `j`.
//! - Q6_K (210 bytes): `ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16`. Weight `w` lies in
//!   half `n = w / 128`; with `p = w % 128`, `k = p / 32`, `l = p % 32` its low 4 bits are the
//!   (`k < 2`: low, else high) nibble of `ql[64 n + 32 (k % 2) + l]` and its top 2 bits are bits
//!   `2k, 2k + 1` of `qh[32 n + l]`. Its scale is `scales[w / 16]`, and `w = d * sc * (q - 32)`.
//!
//! # Activation pairing
//!
//! Sub-block `j` of super-block `i` meets activation block `b = 8 i + j` of
//! [`QuantizedActivations`] (`x ≈ xq * s_b`, `S_b = s_b * Σ xq`). Its integer sum `isum_j` is
//! `Σ q * xq` for Q4_K and Q5_K (codes `q` unsigned), and for Q6_K
//! `sc_{2j} * Σ (q - 32) xq + sc_{2j+1} * Σ (q - 32) xq` over its two halves of 16. Every level
//! computes exactly these integers ([`block_isums`] in the tests).
//!
//! # Accumulation order (the same at every level, so the results are bit for bit equal)
//!
//! Each token keeps 8 f32 lanes `a_j` (and for Q4_K/Q5_K 8 more, `m_j`), one per sub-block
//! position, summed over the super-blocks in order, with no fused multiply-add:
//! `a_j += f32(isum_j) * ((d * f32(sc_j)) * s_b)` and `m_j += (dmin * f32(m_j)) * S_b` for
//! Q4_K/Q5_K; `a_j += f32(isum_j) * (d * s_b)` for Q6_K. The row's result is `hsum(a) - hsum(m)`
//! (Q6_K: `hsum(a)`), with `hsum(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))`, the
//! order of a 256-bit vector's halving reduction.
//!
//! # Levels
//!
//! [`scalar`] is the twin. `avx2` (also the Avx512Bw level's) holds a sub-block in a 256-bit
//! vector and sums with `vpmaddubsw`/`vpmaddwd`; `avx512` (Avx512Vnni) holds two in a 512-bit
//! one and sums with `vpdpbusd`. Both share `x86`'s row loop: each super-block is unpacked once
//! for every token of the call, and the rows are read as one stream with a look-ahead. With one
//! token (a decode step) it takes 8 rows at a time, super-block `i` of each in turn, and
//! requests the next 8 rows as it goes; each row keeps its own lanes in the order above, so
//! this too is the twin's to the bit. The rows after the last 8 go one by one.
//!
//! [`dot_groups`] reads Q4_K and Q6_K in groups of 8 rows instead ([`q4nx::gguf::rows8`]):
//! `rows8`'s kernels (AVX2, also the AVX-512 levels') keep vector `A_j` of lane `a_j` of the 8
//! rows, lane `r` for row `r`, so each row still sums in the order above, and end with the
//! halving sum done vector-wise across the `A_j`; the scalar level de-interleaves each group
//! and calls the twin.

use half::f16;
use q4nx::gguf::rows8 as layout;
use q4nx::gguf::GgmlType;

use crate::cpu::level::KernelLevel;
use crate::cpu::quant::QuantizedActivations;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod rows8;
#[cfg(test)]
mod rows8_tests;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

/// Most tokens one call computes.
pub const MAX_TOKENS: usize = 8;

/// Weights per super-block.
const QK: usize = 256;
/// Sub-blocks (activation blocks) per super-block.
const SUBS: usize = 8;

/// `out[r * tokens + t] = Σ_k W[r, k] * x[t0 + t, k]` for every whole row `r` in `rows`.
/// `rows`: whole rows of `kind`'s blocks, row-major, `rows.len() == n * kind.bytes_for(cols)`;
/// `cols`: logical K, a multiple of `kind.block_len()`; `acts` quantized for `cols` columns;
/// `tokens <= MAX_TOKENS`; `out.len() == n * tokens`. Panics on a `kind` not of this module, an
/// unsupported level, or lengths that do not fit.
#[allow(clippy::too_many_arguments)] // the shared interface of the GGUF kernels
pub fn dot_rows(
    level: KernelLevel,
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    assert!(
        matches!(kind, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K),
        "kquants::dot_rows: {kind} is not a K-quant (Q4_K, Q5_K, Q6_K)"
    );
    check_call("dot_rows", level, cols, acts, t0, tokens);
    assert!(
        out.len().is_multiple_of(tokens),
        "kquants::dot_rows: out holds {} values, not whole rows of {tokens} tokens",
        out.len()
    );
    let n = out.len() / tokens;
    assert_eq!(
        rows.len(),
        n * kind.bytes_for(cols),
        "kquants::dot_rows: {} bytes are not {n} rows of {cols} {kind} columns",
        rows.len()
    );
    if n == 0 || cols == 0 {
        out.fill(0.0);
        return;
    }
    match level {
        KernelLevel::Scalar => scalar::dot_rows(kind, rows, cols, acts, t0, tokens, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 and FMA are present (the level is supported) and the lengths of `rows`,
        // `out` and the activations were checked above.
        KernelLevel::Avx2 | KernelLevel::Avx512Bw => unsafe {
            avx2::dot_rows(kind, rows, cols, acts, t0, tokens, out)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F/BW/VNNI are present (the level is supported) and the lengths were
        // checked above.
        KernelLevel::Avx512Vnni => unsafe {
            avx512::dot_rows(kind, rows, cols, acts, t0, tokens, out)
        },
        #[cfg(not(target_arch = "x86_64"))]
        _ => scalar::dot_rows(kind, rows, cols, acts, t0, tokens, out),
    }
}

/// [`dot_rows`] for Q4_K or Q6_K (`kind`) in groups of 8 rows ([`q4nx::gguf::rows8`]):
/// `out[r * tokens + t]` for every row `r` of `groups` (8 per group), the scalar twin's bits
/// on the same rows row-major. `groups.len() == n / 8 * layout::group_bytes(kind, cols)`
/// with `out.len() == n * tokens`; the rest as [`dot_rows`]. Panics on another kind, an
/// unsupported level or lengths that do not fit.
#[allow(clippy::too_many_arguments)] // the shared interface of the GGUF kernels, and the kind
pub fn dot_groups(
    level: KernelLevel,
    kind: GgmlType,
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    assert!(
        matches!(kind, GgmlType::Q4_K | GgmlType::Q6_K),
        "kquants::dot_groups: {kind} does not lie in groups of 8 rows (only Q4_K and Q6_K do)"
    );
    check_call("dot_groups", level, cols, acts, t0, tokens);
    let group = layout::ROWS * tokens;
    assert!(
        out.len().is_multiple_of(group),
        "kquants::dot_groups: out holds {} values, not whole groups of {} rows of {tokens} tokens",
        out.len(),
        layout::ROWS
    );
    let groups_n = out.len() / group;
    let group_bytes = layout::group_bytes(kind, cols);
    assert_eq!(
        groups.len(),
        groups_n * group_bytes,
        "kquants::dot_groups: {} bytes are not {groups_n} groups of 8 rows of {cols} {kind} \
         columns",
        groups.len()
    );
    if groups_n == 0 || cols == 0 {
        out.fill(0.0);
        return;
    }
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2, FMA and F16C are present (the level is supported: the AVX-512 levels
        // imply AVX2's) and the kind and the lengths of `groups`, `out` and the activations
        // were checked.
        KernelLevel::Avx2 | KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni => unsafe {
            rows8::dot_groups(kind, groups, cols, acts, t0, tokens, out)
        },
        _ => {
            // The twin on each group back in row-major order.
            let mut rows = vec![0u8; group_bytes];
            for (g, y) in groups
                .chunks_exact(group_bytes)
                .zip(out.chunks_exact_mut(group))
            {
                layout::deinterleave(kind, g, cols, &mut rows);
                scalar::dot_rows(kind, &rows, cols, acts, t0, tokens, y);
            }
        }
    }
}

/// The checks [`dot_rows`] and [`dot_groups`] (named by `what`) share: a supported level,
/// 1 to [`MAX_TOKENS`] tokens, whole super-blocks, activations of at least `cols` columns that
/// hold token `t0 + tokens - 1`.
fn check_call(
    what: &str,
    level: KernelLevel,
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
) {
    assert!(
        level.is_supported(),
        "kquants::{what}: kernel level {level} is not supported by this CPU"
    );
    assert!(
        (1..=MAX_TOKENS).contains(&tokens),
        "kquants::{what}: {tokens} tokens, expected 1..={MAX_TOKENS}"
    );
    assert!(
        cols.is_multiple_of(QK),
        "kquants::{what}: {cols} columns is not a multiple of {QK}"
    );
    assert!(
        acts.cols_padded() >= cols,
        "kquants::{what}: activations hold {} columns, the rows {cols}",
        acts.cols_padded()
    );
    // The last token must be there (its slice panics otherwise).
    let _ = acts.xq(t0 + tokens - 1);
}

/// The integer sums of one super-block of `kind` against 256 quantized activations, in
/// sub-block order (what the module doc calls `isum_j`). Only the tests call it, to compare the
/// levels exactly.
#[cfg(test)]
pub(crate) fn block_isums(level: KernelLevel, kind: GgmlType, block: &[u8], xq: &[i8]) -> [i32; 8] {
    assert!(block.len() >= kind.block_bytes() && xq.len() >= QK);
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported"
    );
    match level {
        KernelLevel::Scalar => scalar::isums(kind, block, xq),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is supported, the slices were checked long enough.
        KernelLevel::Avx2 | KernelLevel::Avx512Bw => unsafe { avx2::block_isums(kind, block, xq) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        KernelLevel::Avx512Vnni => unsafe { avx512::block_isums(kind, block, xq) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => scalar::isums(kind, block, xq),
    }
}

/// The f16 at `bytes[at..at + 2]` as f32.
#[inline(always)]
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// The 6-bit scales and mins of the 8 sub-blocks of a Q4_K/Q5_K super-block, from its 12 packed
/// bytes (ggml's `get_scale_min_k4`).
#[inline(always)]
fn scales_mins(q: &[u8]) -> ([u8; SUBS], [u8; SUBS]) {
    let (mut sc, mut m) = ([0u8; SUBS], [0u8; SUBS]);
    for j in 0..4 {
        sc[j] = q[j] & 63;
        m[j] = q[j + 4] & 63;
    }
    for j in 4..SUBS {
        sc[j] = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
    (sc, m)
}

/// The halving sum of 8 lanes, in the order a 256-bit vector is reduced (module doc).
#[inline(always)]
fn hsum8(v: [f32; SUBS]) -> f32 {
    let h = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
    let q = [h[0] + h[2], h[1] + h[3]];
    q[0] + q[1]
}

/// The scalar twin: every other level computes its integers and floats in its order.
mod scalar {
    use super::*;

    /// See [`super::dot_rows`]; lengths were checked there.
    pub(super) fn dot_rows(
        kind: GgmlType,
        rows: &[u8],
        cols: usize,
        acts: &QuantizedActivations,
        t0: usize,
        tokens: usize,
        out: &mut [f32],
    ) {
        let row_bytes = kind.bytes_for(cols);
        let bb = kind.block_bytes();
        for (row, out) in rows
            .chunks_exact(row_bytes)
            .zip(out.chunks_exact_mut(tokens))
        {
            let mut acc = [[0f32; SUBS]; MAX_TOKENS];
            let mut accm = [[0f32; SUBS]; MAX_TOKENS];
            for (i, block) in row.chunks_exact(bb).enumerate() {
                // Per sub-block: the code factor and the min factor (Q6_K has none).
                let (dsc, dm) = factors(kind, block);
                for t in 0..tokens {
                    let xq = &acts.xq(t0 + t)[i * QK..(i + 1) * QK];
                    let s = &acts.scales(t0 + t)[i * SUBS..(i + 1) * SUBS];
                    let sums = &acts.sums(t0 + t)[i * SUBS..(i + 1) * SUBS];
                    let isums = isums(kind, block, xq);
                    for j in 0..SUBS {
                        acc[t][j] += isums[j] as f32 * (dsc[j] * s[j]);
                        if kind != GgmlType::Q6_K {
                            accm[t][j] += dm[j] * sums[j];
                        }
                    }
                }
            }
            for t in 0..tokens {
                out[t] = match kind {
                    GgmlType::Q6_K => hsum8(acc[t]),
                    _ => hsum8(acc[t]) - hsum8(accm[t]),
                };
            }
        }
    }

    /// `(d * f32(sc_j), dmin * f32(m_j))` of a Q4_K/Q5_K super-block, `(d, 0)` for Q6_K.
    pub(super) fn factors(kind: GgmlType, block: &[u8]) -> ([f32; SUBS], [f32; SUBS]) {
        match kind {
            GgmlType::Q6_K => ([f16_at(block, 208); SUBS], [0.0; SUBS]),
            _ => {
                let (d, dmin) = (f16_at(block, 0), f16_at(block, 2));
                let (sc, m) = scales_mins(&block[4..16]);
                (
                    sc.map(|sc| d * f32::from(sc)),
                    m.map(|m| dmin * f32::from(m)),
                )
            }
        }
    }

    /// The 8 integer sums `isum_j` of one super-block (module doc).
    #[allow(clippy::needless_range_loop)] // the indices are the layout's, as documented
    pub(super) fn isums(kind: GgmlType, block: &[u8], xq: &[i8]) -> [i32; SUBS] {
        let mut out = [0i32; SUBS];
        match kind {
            GgmlType::Q4_K | GgmlType::Q5_K => {
                let q5 = kind == GgmlType::Q5_K;
                let (qh, qs) = match q5 {
                    true => (&block[16..48], &block[48..176]),
                    false => (&block[16..16], &block[16..144]),
                };
                for j in 0..SUBS {
                    let (n, high) = (j / 2, j % 2 == 1);
                    for l in 0..32 {
                        let byte = qs[32 * n + l];
                        let mut q = i32::from(if high { byte >> 4 } else { byte & 15 });
                        if q5 && qh[l] & (1 << j) != 0 {
                            q += 16;
                        }
                        out[j] += q * i32::from(xq[32 * j + l]);
                    }
                }
            }
            GgmlType::Q6_K => {
                let (ql, qh, sc) = (&block[..128], &block[128..192], &block[192..208]);
                for (g, &scale) in sc.iter().enumerate() {
                    let mut sum = 0i32;
                    for w in 16 * g..16 * g + 16 {
                        let (n, p) = (w / 128, w % 128);
                        let (k, l) = (p / 32, p % 32);
                        let byte = ql[64 * n + 32 * (k % 2) + l];
                        let low = if k < 2 { byte & 15 } else { byte >> 4 };
                        let high = (qh[32 * n + l] >> (2 * k)) & 3;
                        let q = i32::from(low | (high << 4)) - 32;
                        sum += q * i32::from(xq[w]);
                    }
                    out[g / 2] += i32::from(scale as i8) * sum;
                }
            }
            _ => unreachable!("{kind} is not a K-quant"),
        }
        out
    }
}
