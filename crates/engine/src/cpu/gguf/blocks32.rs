//! GGUF's 32-weight blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) against int8 activation blocks, at
//! every [`KernelLevel`]: [`dot_rows`] computes whole rows of `W[rows, cols]` as llama.cpp
//! writes them, block after block, for up to [`MAX_TOKENS`] tokens at once.
//!
//! # Block layout (little-endian, as ggml writes it)
//!
//! | type | bytes | fields                                   | weight `j` (0..32)             |
//! |------|-------|------------------------------------------|--------------------------------|
//! | Q4_0 | 18    | `d: f16, qs: [u8; 16]`                   | `d * (q - 8)`                  |
//! | Q4_1 | 20    | `d: f16, m: f16, qs: [u8; 16]`           | `d * q + m`                    |
//! | Q5_0 | 22    | `d: f16, qh: u32, qs: [u8; 16]`          | `d * (q + 16 h - 16)`          |
//! | Q5_1 | 24    | `d: f16, m: f16, qh: u32, qs: [u8; 16]`  | `d * (q + 16 h) + m`           |
//! | Q8_0 | 34    | `d: f16, qs: [i8; 32]`                   | `d * qs[j]`                    |
//!
//! For the 4- and 5-bit types `q` is the low nibble of `qs[j]` for `j < 16` and the high nibble
//! of `qs[j - 16]` after, and `h` is bit `j` of `qh`.
//!
//! # Activation pairing
//!
//! Block `b` of a row meets activation block `b` of [`QuantizedActivations`] (`x ≈ xq * sx`,
//! `sum = sx * Σ xq`). Each block's *integer sum* is `isum = Σ_j w[j] * xq[j]` with `w` the
//! weight's integer: signed `q - 8` (Q4_0), `q + 16 h - 16` (Q5_0) or the byte (Q8_0), unsigned
//! `q` (Q4_1) or `q + 16 h` (Q5_1). A block's float term is `c = (d * sx) * isum`, plus
//! `m * sum` for the types with a min (Q4_1, Q5_1). The integer sums are exactly equal at every
//! level. (The SIMD levels multiply signed weights as `|w|` against `xq` negated where `w < 0`.)
//!
//! # Accumulation order
//!
//! The scalar twin adds each block's `c` (computed in the order written above) to the row's sum
//! block by block. The SIMD levels split `isum` into 8 lanes of 4 products per block and add
//! `lane * (d * sx)` to vectors of lane sums per token (AVX2: even and odd blocks to two of them
//! when it computes fewer than 4 tokens at once), and the `m * sum` terms to a vector of their
//! own (AVX-512: `m * sum / 8` in each of the block's lanes) or to scalar sums (AVX2); they add
//! it all up at the end of the row. A last odd block at the AVX-512 levels (which take blocks in
//! pairs) is added as the twin adds it. AVX2 with one token (a decode step) takes 8 rows at a
//! time: each block's 8 integer sums `isum` (one per row) side by side in one vector, then one
//! `isum * (d * sx)` multiply-add for the 8 rows into the sums of even or of odd blocks, and the
//! `m * sum` terms into a third; the rows that remain after the last 8 go as above. So the
//! levels agree with the twin to float rounding:
//! within `1e-5` of the size of the row's terms, `Σ_b (|d sx| Σ_j |w_j xq_j| + |m sum|)`
//! (tested; lanes cancel, so the bound is on their magnitudes, not on `Σ |c|`).

use q4nx::gguf::GgmlType;

use crate::cpu::level::KernelLevel;
use crate::cpu::quant::{QuantizedActivations, BLOCK};

/// Most tokens one call computes.
pub const MAX_TOKENS: usize = 8;

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
    let format = Format::of(kind)
        .unwrap_or_else(|| panic!("blocks32::dot_rows: {kind} is not a 32-weight block type"));
    let n = check(format, rows, cols, acts, t0, tokens, out);
    assert!(
        level.is_supported(),
        "blocks32::dot_rows: kernel level {level} is not supported by this CPU"
    );
    if n == 0 || tokens == 0 {
        return;
    }
    simd::dot_rows(level, format, rows, cols, acts, t0, tokens, out);
}

/// Checks the lengths [`dot_rows`] relies on and returns the number of rows.
fn check(
    format: Format,
    rows: &[u8],
    cols: usize,
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &[f32],
) -> usize {
    assert!(
        cols.is_multiple_of(BLOCK),
        "blocks32::dot_rows: {cols} columns are not whole blocks of {BLOCK}"
    );
    let row_bytes = cols / BLOCK * format.bytes();
    assert!(
        row_bytes > 0 && rows.len().is_multiple_of(row_bytes),
        "blocks32::dot_rows: {} bytes are not whole rows of {cols} {} columns ({row_bytes} bytes each)",
        rows.len(),
        format.kind()
    );
    let n = rows.len() / row_bytes;
    assert!(
        tokens <= MAX_TOKENS,
        "blocks32::dot_rows: {tokens} tokens, at most {MAX_TOKENS} per call"
    );
    assert_eq!(
        out.len(),
        n * tokens,
        "blocks32::dot_rows: out holds {} values, {n} rows x {tokens} tokens need {}",
        out.len(),
        n * tokens
    );
    assert_eq!(
        acts.groups() * BLOCK,
        cols,
        "blocks32::dot_rows: the activations were quantized for {} columns, the rows have {cols}",
        acts.groups() * BLOCK
    );
    if tokens > 0 {
        // Reading the last token's values panics here, plainly, if it was not quantized.
        let _ = acts.xq(t0 + tokens - 1);
    }
    n
}

/// The block types of this module, with their layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Format {
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
}

impl Format {
    /// The format whose discriminant is `id` (how the SIMD code names it as a constant).
    const fn from_id(id: u8) -> Format {
        match id {
            0 => Format::Q4_0,
            1 => Format::Q4_1,
            2 => Format::Q5_0,
            3 => Format::Q5_1,
            4 => Format::Q8_0,
            _ => panic!("blocks32: no format with this id"),
        }
    }

    fn of(kind: GgmlType) -> Option<Format> {
        Some(match kind {
            GgmlType::Q4_0 => Format::Q4_0,
            GgmlType::Q4_1 => Format::Q4_1,
            GgmlType::Q5_0 => Format::Q5_0,
            GgmlType::Q5_1 => Format::Q5_1,
            GgmlType::Q8_0 => Format::Q8_0,
            _ => return None,
        })
    }

    fn kind(self) -> GgmlType {
        match self {
            Format::Q4_0 => GgmlType::Q4_0,
            Format::Q4_1 => GgmlType::Q4_1,
            Format::Q5_0 => GgmlType::Q5_0,
            Format::Q5_1 => GgmlType::Q5_1,
            Format::Q8_0 => GgmlType::Q8_0,
        }
    }

    /// Bytes per block.
    const fn bytes(self) -> usize {
        match self {
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q5_0 => 22,
            Format::Q5_1 => 24,
            Format::Q8_0 => 34,
        }
    }

    /// Where the codes (`qs`) start in a block.
    const fn codes_at(self) -> usize {
        match self {
            Format::Q4_0 | Format::Q8_0 => 2,
            Format::Q4_1 => 4,
            Format::Q5_0 => 6,
            Format::Q5_1 => 8,
        }
    }

    /// Where the fifth bits (`qh`) are, for Q5_0 and Q5_1.
    const fn high_bits_at(self) -> Option<usize> {
        match self {
            Format::Q5_0 => Some(2),
            Format::Q5_1 => Some(4),
            _ => None,
        }
    }

    /// Whether the block stores a min `m` (after `d`); the others' weights are signed.
    const fn has_min(self) -> bool {
        matches!(self, Format::Q4_1 | Format::Q5_1)
    }
}

/// The f16 at `at` of `bytes`.
#[inline(always)]
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// A block's `d` and the `m` that multiplies its activation block's sum (0 without a min).
#[inline(always)]
fn scale_and_min(format: Format, block: &[u8]) -> (f32, f32) {
    let d = f16_at(block, 0);
    let m = if format.has_min() {
        f16_at(block, 2)
    } else {
        0.0
    };
    (d, m)
}

/// The integer `w` of weight `j` of a block (see the module doc).
#[inline(always)]
fn code(format: Format, block: &[u8], j: usize) -> i32 {
    let qs = &block[format.codes_at()..];
    if format == Format::Q8_0 {
        return i32::from(qs[j] as i8);
    }
    let q = if j < 16 {
        qs[j] & 0x0F
    } else {
        qs[j - 16] >> 4
    };
    let high = match format.high_bits_at() {
        Some(at) => {
            let qh = u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]]);
            ((qh >> j) & 1) as i32 * 16
        }
        None => 0,
    };
    let offset = match format {
        Format::Q4_0 => 8,
        Format::Q5_0 => 16,
        _ => 0,
    };
    i32::from(q) + high - offset
}

/// One block's integer sum `Σ w[j] * xq[j]` (the scalar twin's).
fn block_isum(format: Format, block: &[u8], xq: &[i8]) -> i32 {
    (0..BLOCK)
        .map(|j| code(format, block, j) * i32::from(xq[j]))
        .sum()
}

/// One block's float term `c = (d * sx) * isum (+ m * sum)` (the module doc's).
#[inline(always)]
fn block_term(format: Format, block: &[u8], isum: i32, sx: f32, sum: f32) -> f32 {
    let (d, m) = scale_and_min(format, block);
    let c = (d * sx) * isum as f32;
    if format.has_min() {
        c + m * sum
    } else {
        c
    }
}

/// The integer sums of every block of one row against token `t` of `acts`, in block order.
/// Only the tests call it (to compare the levels' integer sums exactly).
#[cfg(test)]
pub(crate) fn row_isums(
    level: KernelLevel,
    kind: GgmlType,
    row: &[u8],
    acts: &QuantizedActivations,
    t: usize,
) -> Vec<i32> {
    let format = Format::of(kind).expect("a 32-weight block type");
    let blocks = row.len() / format.bytes();
    assert_eq!(blocks * format.bytes(), row.len());
    assert!(level.is_supported());
    simd::row_isums(level, format, row, &acts.xq(t)[..blocks * BLOCK])
}

/// The reference twin: plain loops in the order the module doc describes.
mod scalar {
    use super::*;

    pub(super) fn dot_rows(
        format: Format,
        rows: &[u8],
        cols: usize,
        acts: &QuantizedActivations,
        t0: usize,
        tokens: usize,
        out: &mut [f32],
    ) {
        let row_bytes = cols / BLOCK * format.bytes();
        for (row, y) in rows
            .chunks_exact(row_bytes)
            .zip(out.chunks_exact_mut(tokens))
        {
            for (t, y) in y.iter_mut().enumerate() {
                let (xq, scales, sums) = (acts.xq(t0 + t), acts.scales(t0 + t), acts.sums(t0 + t));
                *y = row_sum(format, row, xq, scales, sums, 0);
            }
        }
    }

    /// The row's sum of block terms from block `first` on, in block order.
    pub(super) fn row_sum(
        format: Format,
        row: &[u8],
        xq: &[i8],
        scales: &[f32],
        sums: &[f32],
        first: usize,
    ) -> f32 {
        let mut y = 0.0f32;
        for (b, block) in row.chunks_exact(format.bytes()).enumerate().skip(first) {
            let isum = block_isum(format, block, &xq[b * BLOCK..(b + 1) * BLOCK]);
            y += block_term(format, block, isum, scales[b], sums[b]);
        }
        y
    }

    #[cfg(test)]
    pub(super) fn row_isums(format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
        row.chunks_exact(format.bytes())
            .zip(xq.chunks_exact(BLOCK))
            .map(|(block, xq)| block_isum(format, block, xq))
            .collect()
    }
}

/// The dispatch to each level's code.
mod simd {
    use super::*;

    /// Whether the AVX2 level can run here: it also reads f16 scales with F16C (every AVX2 CPU
    /// has it; on one without, the AVX2 level runs the scalar twin).
    #[cfg(target_arch = "x86_64")]
    fn has_f16c() -> bool {
        is_x86_feature_detected!("f16c")
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn dot_rows(
        level: KernelLevel,
        format: Format,
        rows: &[u8],
        cols: usize,
        acts: &QuantizedActivations,
        t0: usize,
        tokens: usize,
        out: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            type Kernel = unsafe fn(&[u8], usize, &QuantizedActivations, usize, usize, &mut [f32]);
            let kernel: Option<Kernel> = match (level, format) {
                (KernelLevel::Avx512Vnni, Format::Q4_0) => Some(avx512::q4_0_vnni),
                (KernelLevel::Avx512Vnni, Format::Q4_1) => Some(avx512::q4_1_vnni),
                (KernelLevel::Avx512Vnni, Format::Q5_0) => Some(avx512::q5_0_vnni),
                (KernelLevel::Avx512Vnni, Format::Q5_1) => Some(avx512::q5_1_vnni),
                (KernelLevel::Avx512Vnni, Format::Q8_0) => Some(avx512::q8_0_vnni),
                (KernelLevel::Avx512Bw, Format::Q4_0) => Some(avx512::q4_0_bw),
                (KernelLevel::Avx512Bw, Format::Q4_1) => Some(avx512::q4_1_bw),
                (KernelLevel::Avx512Bw, Format::Q5_0) => Some(avx512::q5_0_bw),
                (KernelLevel::Avx512Bw, Format::Q5_1) => Some(avx512::q5_1_bw),
                (KernelLevel::Avx512Bw, Format::Q8_0) => Some(avx512::q8_0_bw),
                (KernelLevel::Avx2, _) if !has_f16c() => None,
                (KernelLevel::Avx2, Format::Q4_0) => Some(avx2::q4_0),
                (KernelLevel::Avx2, Format::Q4_1) => Some(avx2::q4_1),
                (KernelLevel::Avx2, Format::Q5_0) => Some(avx2::q5_0),
                (KernelLevel::Avx2, Format::Q5_1) => Some(avx2::q5_1),
                (KernelLevel::Avx2, Format::Q8_0) => Some(avx2::q8_0),
                (KernelLevel::Scalar, _) => None,
            };
            if let Some(kernel) = kernel {
                // SAFETY: the level's features were checked supported by `dot_rows` (and F16C
                // for AVX2 above); `check` made `rows`, `acts` and `out` fit `cols`, `t0` and
                // `tokens`.
                unsafe { kernel(rows, cols, acts, t0, tokens, out) };
                return;
            }
        }
        let _ = level;
        scalar::dot_rows(format, rows, cols, acts, t0, tokens, out)
    }

    #[cfg(test)]
    pub(super) fn row_isums(level: KernelLevel, format: Format, row: &[u8], xq: &[i8]) -> Vec<i32> {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked the level supported; `xq` holds a block per row block.
        unsafe {
            match level {
                KernelLevel::Avx512Vnni => return avx512::row_isums_vnni(format, row, xq),
                KernelLevel::Avx512Bw => return avx512::row_isums_bw(format, row, xq),
                KernelLevel::Avx2 if has_f16c() => return avx2::row_isums(format, row, xq),
                _ => {}
            }
        }
        let _ = level;
        scalar::row_isums(format, row, xq)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;
