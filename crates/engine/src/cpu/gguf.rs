//! Kernels that compute straight from a GGUF file's own blocks, row-major as llama.cpp writes
//! them (one row of `W[rows, cols]` is `cols / block_len` consecutive blocks), so a model is read
//! where it lies instead of being quantized a second time.
//!
//! Every kernel pairs the weights with the same activations as the Q4_1 tiles:
//! [`QuantizedActivations`](super::quant::QuantizedActivations), int8 blocks of 32 with one f32
//! scale and the block's quantized sum each. A 32-weight block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
//! meets exactly one activation block; a K-quant super-block of 256 (Q4_K, Q5_K, Q6_K) meets
//! eight, one per 32-weight sub-block (Q6_K's two 16-weight scales share one activation block).
//! The integer products `Σ q * xq` of each block are what the SIMD levels compute, exactly equal
//! to their scalar twins'.
//!
//! - [`blocks32`]: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0.
//! - [`kquants`]: Q4_K, Q5_K and Q6_K.
//! - [`mxfp4`]: MXFP4 (gpt-oss's experts): E2M1 values and a power-of-two scale per 32.

#[clippy::msrv = "1.89"]
pub(crate) mod blocks32;
#[clippy::msrv = "1.89"]
pub(crate) mod kquants;
#[clippy::msrv = "1.89"]
pub(crate) mod mxfp4;

use q4nx::gguf::GgmlType;

use crate::cpu::level::KernelLevel;
use crate::cpu::quant::QuantizedActivations;

/// Most tokens one [`dot_rows`] call computes (every module's).
pub(crate) const MAX_TOKENS: usize = min(
    min(blocks32::MAX_TOKENS, kquants::MAX_TOKENS),
    mxfp4::MAX_TOKENS,
);

const fn min(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}

/// Whether [`dot_rows`] has a kernel for `kind` (every block type; not F32, F16 or BF16,
/// which are read as dense matrices).
pub(crate) fn has_kernel(kind: GgmlType) -> bool {
    !matches!(kind, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

/// `out[r * tokens + t] = Σ_k W[r, k] * x[t0 + t, k]` for every whole row `r` of `rows`
/// (row-major blocks of `kind`, `rows.len() == n * kind.bytes_for(cols)`), `tokens <=
/// MAX_TOKENS`: the module of `kind`'s blocks computes it ([`blocks32`], [`kquants`] or
/// [`mxfp4`]).
/// Panics on a kind without a kernel ([`has_kernel`]) or lengths that do not fit.
#[allow(clippy::too_many_arguments)] // the shared interface of the GGUF kernels
pub(crate) fn dot_rows(
    level: KernelLevel,
    kind: GgmlType,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match kind {
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
            kquants::dot_rows(level, kind, rows, cols, acts, t0, tokens, out)
        }
        mxfp4::KIND => mxfp4::dot_rows(level, rows, cols, acts, t0, tokens, out),
        _ => blocks32::dot_rows(level, kind, rows, cols, acts, t0, tokens, out),
    }
}

/// [`dot_rows`] on rows grouped in 8 ([`q4nx::gguf::rows8`], the kinds it has a layout for):
/// the scalar twin's bits, by [`kquants::dot_groups`] or [`mxfp4::dot_groups`]. Panics on
/// another kind or lengths that do not fit.
#[allow(clippy::too_many_arguments)] // the shared interface of the GGUF kernels
pub(crate) fn dot_groups(
    level: KernelLevel,
    kind: GgmlType,
    groups: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    match kind {
        mxfp4::KIND => mxfp4::dot_groups(level, groups, cols, acts, t0, tokens, out),
        _ => kquants::dot_groups(level, kind, groups, cols, acts, t0, tokens, out),
    }
}
