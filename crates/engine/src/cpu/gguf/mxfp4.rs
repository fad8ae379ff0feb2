//! GGUF's MXFP4 blocks (ggml type 39, gpt-oss's expert weights) against int8 activation blocks:
//! [`dot_rows`] computes whole rows of `W[rows, cols]` as llama.cpp writes them, block after
//! block, for up to [`MAX_TOKENS`] tokens at once; [`dot_groups`] the same rows regrouped in 8
//! at load ([`q4nx::gguf::rows8`]), where a vector holds 8 rows' codes and nothing is summed
//! across lanes (`rows8.rs`).
//!
//! # Block layout (17 bytes, as ggml writes it)
//!
//! `e: u8` (an E8M0 scale), `qs: [u8; 16]`. Weight `j` is `v(q) * d` with `d =
//! q4nx::gguf::e8m0_half(e)` (2^(e - 128)), `v` ggml's doubled E2M1 values
//! [`MXFP4_VALUES`] (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12), and `q` the low nibble of `qs[j]` for `j <
//! 16`, the high nibble of `qs[j - 16]` after: llama.cpp's order.
//!
//! # Activation pairing and accumulation order
//!
//! Block `b` of a row meets activation block `b` (`x ≈ xq * sx`). Its integer sum is `isum =
//! Σ_j v(q_j) * xq[j]`, its float term `c = (d * sx) * isum`. The scalar twin adds each block's
//! `c` to the row's sum block by block. AVX2 computes the same `isum` in 8 lanes of 4 products
//! (`|v|` against `xq` with `v`'s sign, `vpmaddubsw` + `vpmaddwd`; the integer sums are exactly
//! the twin's) and adds `lane * (d * sx)` into a vector of lane sums per token, summed at the end
//! of the row: equal to the twin to float rounding, within `1e-5` of `Σ_b |d sx| Σ_j |v_j xq_j|`
//! (tested). The AVX-512 levels run the AVX2 code (every AVX-512 CPU has AVX2 and FMA): this
//! machine has no AVX-512 to test a 512-bit version on.

use q4nx::gguf::rows8 as layout;
use q4nx::gguf::{e8m0_half, GgmlType, MXFP4_VALUES};

use crate::cpu::level::KernelLevel;
use crate::cpu::quant::{QuantizedActivations, BLOCK};

/// Most tokens one call computes.
pub const MAX_TOKENS: usize = 8;

/// Bytes per block.
const BLOCK_BYTES: usize = 17;

/// `out[r * tokens + t] = Σ_k W[r, k] * x[t0 + t, k]` for every whole row `r` of `rows`
/// (row-major MXFP4 blocks, `rows.len() == n * cols / 32 * 17`); `cols` a multiple of 32;
/// `acts` quantized for `cols` columns; `tokens <= MAX_TOKENS`; `out.len() == n * tokens`.
/// Panics on lengths that do not fit or an unsupported level.
#[allow(clippy::too_many_arguments)] // the shared interface of the GGUF kernels
pub fn dot_rows(
    level: KernelLevel,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    let row_bytes = check_call("dot_rows", level, cols, acts, t0, tokens);
    assert!(
        rows.len().is_multiple_of(row_bytes),
        "mxfp4::dot_rows: {} bytes are not whole rows of {cols} MXFP4 columns ({row_bytes} bytes each)",
        rows.len()
    );
    let n = rows.len() / row_bytes;
    assert_eq!(
        out.len(),
        n * tokens,
        "mxfp4::dot_rows: out holds {} values, {n} rows x {tokens} tokens need {}",
        out.len(),
        n * tokens
    );
    if n == 0 || tokens == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if level != KernelLevel::Scalar && avx2::available() {
        // SAFETY: AVX2 and FMA are present (checked just above); the lengths were checked to
        // fit `cols`, `t0` and `tokens`.
        unsafe { avx2::dot_rows(rows, cols, acts, t0, tokens, out) };
        return;
    }
    scalar::dot_rows(rows, cols, acts, t0, tokens, out);
}

/// [`dot_rows`] on rows grouped in 8 ([`q4nx::gguf::rows8`]'s MXFP4 layout): `out[r * tokens
/// + t]` for every row `r` of `groups` (8 per group), the scalar twin's bits on the same rows
/// row-major (the row kernel's are only within float rounding of them).
/// `groups.len() == n / 8 * layout::group_bytes(MXFP4, cols)` with `out.len() == n * tokens`;
/// the rest as [`dot_rows`]. Panics on an unsupported level or lengths that do not fit.
pub fn dot_groups(
    level: KernelLevel,
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    let row_bytes = check_call("dot_groups", level, cols, acts, t0, tokens);
    let group_bytes = layout::group_bytes(KIND, cols);
    assert!(
        groups.len().is_multiple_of(group_bytes) && out.len() == groups.len() / row_bytes * tokens,
        "mxfp4::dot_groups: {} bytes in and {} values out are not whole groups of 8 rows of \
         {cols} MXFP4 columns ({group_bytes} bytes) and their {tokens} tokens",
        groups.len(),
        out.len()
    );
    if groups.is_empty() || tokens == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if level != KernelLevel::Scalar && avx2::available() {
        // SAFETY: AVX2 and FMA are present (checked just above); the lengths were checked to
        // fit `cols`, `t0` and `tokens`.
        unsafe { rows8::dot_groups(groups, cols, acts, t0, tokens, out) };
        return;
    }
    // The twin on each group back in row-major order.
    let mut rows = vec![0u8; group_bytes];
    for (g, y) in groups
        .chunks_exact(group_bytes)
        .zip(out.chunks_exact_mut(layout::ROWS * tokens))
    {
        layout::deinterleave(KIND, g, cols, &mut rows);
        scalar::dot_rows(&rows, cols, acts, t0, tokens, y);
    }
}

/// The checks [`dot_rows`] and [`dot_groups`] (named by `what`) share: whole blocks, at most
/// [`MAX_TOKENS`] tokens, activations quantized for `cols` columns that hold the last token, a
/// supported level. Gives the bytes of one row.
fn check_call(
    what: &str,
    level: KernelLevel,
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
) -> usize {
    assert!(
        cols.is_multiple_of(BLOCK) && cols > 0,
        "mxfp4::{what}: {cols} columns are not whole blocks of {BLOCK}"
    );
    assert!(
        tokens <= MAX_TOKENS,
        "mxfp4::{what}: {tokens} tokens, at most {MAX_TOKENS} per call"
    );
    assert_eq!(
        acts.groups() * BLOCK,
        cols,
        "mxfp4::{what}: the activations were quantized for {} columns, the rows have {cols}",
        acts.groups() * BLOCK
    );
    assert!(
        level.is_supported(),
        "mxfp4::{what}: kernel level {level} is not supported by this CPU"
    );
    if tokens > 0 {
        // Reading the last token's values panics here, plainly, if it was not quantized.
        let _ = acts.xq(t0 + tokens - 1);
    }
    cols / BLOCK * BLOCK_BYTES
}

/// The kind this module computes.
pub(crate) const KIND: GgmlType = GgmlType::MXFP4;

/// One block's integer sum `Σ v(q_j) * xq[j]` (the scalar twin's).
fn block_isum(block: &[u8], xq: &[i8]) -> i32 {
    (0..16)
        .map(|j| {
            let lo = i32::from(MXFP4_VALUES[usize::from(block[1 + j] & 0x0F)]);
            let hi = i32::from(MXFP4_VALUES[usize::from(block[1 + j] >> 4)]);
            lo * i32::from(xq[j]) + hi * i32::from(xq[j + 16])
        })
        .sum()
}

/// The integer sums of every block of one row against token `t` of `acts`, in block order, at
/// `level`. Only the tests call it (to compare the levels' integer sums exactly).
#[cfg(test)]
pub(crate) fn row_isums(
    level: KernelLevel,
    row: &[u8],
    acts: &QuantizedActivations,
    t: usize,
) -> Vec<i32> {
    let blocks = row.len() / BLOCK_BYTES;
    let xq = &acts.xq(t)[..blocks * BLOCK];
    #[cfg(target_arch = "x86_64")]
    if level != KernelLevel::Scalar && avx2::available() {
        // SAFETY: AVX2 is present; `xq` holds a block per block of the row.
        return unsafe { avx2::row_isums(row, xq) };
    }
    let _ = level;
    row.chunks_exact(BLOCK_BYTES)
        .zip(xq.chunks_exact(BLOCK))
        .map(|(block, xq)| block_isum(block, xq))
        .collect()
}

/// The reference twin: plain loops in the order the module doc describes.
mod scalar {
    use super::*;

    pub(super) fn dot_rows(
        rows: &[u8],
        cols: usize,
        acts: &QuantizedActivations,
        t0: usize,
        tokens: usize,
        out: &mut [f32],
    ) {
        let row_bytes = cols / BLOCK * BLOCK_BYTES;
        for (row, y) in rows
            .chunks_exact(row_bytes)
            .zip(out.chunks_exact_mut(tokens))
        {
            for (t, y) in y.iter_mut().enumerate() {
                let (xq, scales) = (acts.xq(t0 + t), acts.scales(t0 + t));
                let mut sum = 0.0f32;
                for (b, block) in row.chunks_exact(BLOCK_BYTES).enumerate() {
                    let isum = block_isum(block, &xq[b * BLOCK..(b + 1) * BLOCK]);
                    sum += (e8m0_half(block[0]) * scales[b]) * isum as f32;
                }
                *y = sum;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod rows8;

#[cfg(test)]
mod rows8_tests;
#[cfg(test)]
mod tests;
