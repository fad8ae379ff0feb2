//! Dense f32 matrix products for Whisper: `out = a · Wᵀ (+ bias)`, blocked for the encoder's
//! 1500 frames and split over the thread pool.
//!
//! A weight matrix `W[n, k]` is packed once (at load, or per attention head for `K` and `V`)
//! into panels of [`NR`] output columns: panel `p` holds, for each `kk`, the 16 values
//! `W[16p .. 16p + 16][kk]` side by side (zeros past `n`). The micro-kernel keeps a 6 x 16
//! block of outputs in registers (12 AVX2 vectors), reads 16 weights and broadcasts 6 inputs
//! per step of `k`: 12 fused multiply-adds for 8 loads. Each output is one running sum over
//! `k` in order, `acc = a·w + acc` with one rounding (a fused multiply-add), then `+ bias`:
//! the scalar twin does the same operations in the same order (`f32::mul_add`), so every
//! kernel level gives the same bits (tested below).
//!
//! Work is cut into tiles of up to 96 rows by 8 panels (128 columns), which the pool's threads
//! claim; one output is computed by one thread, so thread count never changes a result.

use crate::cpu::pool::SharedMut;
use crate::cpu::{CpuContext, KernelLevel};

/// Output columns per packed panel.
pub(crate) const NR: usize = 16;
/// Rows per micro-kernel call.
const MR: usize = 6;
/// Rows and panels per tile of work.
const TILE_ROWS: usize = 96;
const TILE_PANELS: usize = 8;

/// A matrix `W[n, k]` packed in panels of [`NR`] rows.
#[derive(Debug, Clone)]
pub(crate) struct PackedMatrix {
    pub(crate) n: usize,
    pub(crate) k: usize,
    data: Vec<f32>,
}

impl PackedMatrix {
    /// Packs `w`, row-major `[n, k]` (transformers' `[out, in]` orientation).
    pub(crate) fn from_rows(w: &[f32], n: usize, k: usize) -> PackedMatrix {
        assert_eq!(w.len(), n * k, "matrix is not [n, k]");
        let mut m = PackedMatrix::zeroed(n, k);
        m.pack_rows(w, k);
        m
    }

    /// An all-zero packed matrix to fill with [`PackedMatrix::pack_rows`] or `pack_cols`.
    pub(crate) fn zeroed(n: usize, k: usize) -> PackedMatrix {
        PackedMatrix {
            n,
            k,
            data: vec![0.0; n.div_ceil(NR) * NR * k],
        }
    }

    /// Repacks from `w`: row `r` of W is `w[r * ld .. r * ld + k]`.
    pub(crate) fn pack_rows(&mut self, w: &[f32], ld: usize) {
        let (n, k) = (self.n, self.k);
        for (p, panel) in self.data.chunks_exact_mut(NR * k).enumerate() {
            for j in 0..NR.min(n - p * NR) {
                let row = &w[(p * NR + j) * ld..(p * NR + j) * ld + k];
                for (kk, &v) in row.iter().enumerate() {
                    panel[kk * NR + j] = v;
                }
            }
        }
    }

    /// Repacks from `b`, which holds Wᵀ: `W[c][kk] = b[kk * ld + c]` (V of attention, whose
    /// rows are positions).
    pub(crate) fn pack_cols(&mut self, b: &[f32], ld: usize) {
        let (n, k) = (self.n, self.k);
        for (p, panel) in self.data.chunks_exact_mut(NR * k).enumerate() {
            let width = NR.min(n - p * NR);
            for kk in 0..k {
                panel[kk * NR..kk * NR + width]
                    .copy_from_slice(&b[kk * ld + p * NR..kk * ld + p * NR + width]);
            }
        }
    }

    fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }

    fn panel(&self, p: usize) -> &[f32] {
        &self.data[p * NR * self.k..(p + 1) * NR * self.k]
    }

    /// Row `r` of W into `out[..k]` (an embedding lookup).
    pub(crate) fn row(&self, r: usize, out: &mut [f32]) {
        let (p, j) = (r / NR, r % NR);
        for (o, chunk) in out[..self.k].iter_mut().zip(self.panel(p).chunks_exact(NR)) {
            *o = chunk[j];
        }
    }

    /// Weights held (for parameter counts).
    pub(crate) fn len(&self) -> usize {
        self.n * self.k
    }
}

/// The input rows of a product: row `r` is `data[r * ld .. r * ld + k]`.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) ld: usize,
    pub(crate) m: usize,
}

/// `out[r * ldc + c] = sum_kk a[r][kk] · W[c][kk] + bias[c]` for every row `r < a.m` and
/// column `c < w.n`, on `cpu`'s pool.
pub(crate) fn matmul(
    cpu: &CpuContext,
    a: Rows<'_>,
    w: &PackedMatrix,
    bias: Option<&[f32]>,
    out: &mut [f32],
    ldc: usize,
) {
    check(a, w, bias, out, ldc);
    let tiles_m = a.m.div_ceil(TILE_ROWS);
    let tiles_n = w.panels().div_ceil(TILE_PANELS);
    let shared = SharedMut(out.as_mut_ptr());
    let level = cpu.level();
    cpu.pool().run(tiles_m * tiles_n, &|t| {
        // SAFETY: tiles write disjoint outputs inside `out` (checked above); `run` returns
        // only after all tiles are done, while `out` is still borrowed mutably.
        unsafe { tile(level, a, w, bias, &shared, ldc, t / tiles_n, t % tiles_n) };
    });
}

/// [`matmul`] on the calling thread alone (inside another job of the pool).
pub(crate) fn matmul_here(
    level: KernelLevel,
    a: Rows<'_>,
    w: &PackedMatrix,
    bias: Option<&[f32]>,
    out: &mut [f32],
    ldc: usize,
) {
    check(a, w, bias, out, ldc);
    let tiles_m = a.m.div_ceil(TILE_ROWS);
    let tiles_n = w.panels().div_ceil(TILE_PANELS);
    let shared = SharedMut(out.as_mut_ptr());
    for t in 0..tiles_m * tiles_n {
        // SAFETY: as in `matmul`, on one thread.
        unsafe { tile(level, a, w, bias, &shared, ldc, t / tiles_n, t % tiles_n) };
    }
}

fn check(a: Rows<'_>, w: &PackedMatrix, bias: Option<&[f32]>, out: &[f32], ldc: usize) {
    assert!(a.ld >= w.k, "matmul: input rows shorter than k");
    assert!(
        a.m == 0 || a.data.len() >= (a.m - 1) * a.ld + w.k,
        "matmul: input too short"
    );
    assert!(ldc >= w.n, "matmul: output rows shorter than n");
    assert!(
        a.m == 0 || out.len() >= (a.m - 1) * ldc + w.n,
        "matmul: output too short"
    );
    if let Some(b) = bias {
        assert_eq!(b.len(), w.n, "matmul: bias is not n long");
    }
}

/// One tile: rows `tm * TILE_ROWS ..`, panels `tn * TILE_PANELS ..`.
///
/// # Safety
/// `out` must point at a buffer that `check` accepted, written by no one else in this tile.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    level: KernelLevel,
    a: Rows<'_>,
    w: &PackedMatrix,
    bias: Option<&[f32]>,
    out: &SharedMut<f32>,
    ldc: usize,
    tm: usize,
    tn: usize,
) {
    let rows = tm * TILE_ROWS..a.m.min((tm + 1) * TILE_ROWS);
    for p in tn * TILE_PANELS..w.panels().min((tn + 1) * TILE_PANELS) {
        let panel = w.panel(p);
        let width = NR.min(w.n - p * NR);
        let mut r = rows.start;
        while r < rows.end {
            let h = MR.min(rows.end - r);
            let mut acc = [[0.0f32; NR]; MR];
            let a_rows = &a.data[r * a.ld..];
            run_kernel(level, h, a_rows, a.ld, w.k, panel, &mut acc);
            for (i, acc_row) in acc.iter().enumerate().take(h) {
                for (j, &v) in acc_row.iter().enumerate().take(width) {
                    let c = p * NR + j;
                    let value = match bias {
                        Some(b) => v + b[c],
                        None => v,
                    };
                    // SAFETY: (r + i, c) is inside `out` (checked) and only this tile writes it.
                    unsafe { out.at((r + i) * ldc + c).write(value) };
                }
            }
            r += h;
        }
    }
}

fn run_kernel(
    level: KernelLevel,
    h: usize,
    a: &[f32],
    lda: usize,
    k: usize,
    panel: &[f32],
    acc: &mut [[f32; NR]; MR],
) {
    #[cfg(target_arch = "x86_64")]
    if level != KernelLevel::Scalar {
        // SAFETY: every level above Scalar means the CPU has AVX2 and FMA.
        unsafe {
            match h {
                6 => kernel_fma::<6>(a, lda, k, panel, acc),
                5 => kernel_fma::<5>(a, lda, k, panel, acc),
                4 => kernel_fma::<4>(a, lda, k, panel, acc),
                3 => kernel_fma::<3>(a, lda, k, panel, acc),
                2 => kernel_fma::<2>(a, lda, k, panel, acc),
                _ => kernel_fma::<1>(a, lda, k, panel, acc),
            }
        }
        return;
    }
    let _ = level;
    match h {
        6 => kernel::<6>(a, lda, k, panel, acc),
        5 => kernel::<5>(a, lda, k, panel, acc),
        4 => kernel::<4>(a, lda, k, panel, acc),
        3 => kernel::<3>(a, lda, k, panel, acc),
        2 => kernel::<2>(a, lda, k, panel, acc),
        _ => kernel::<1>(a, lda, k, panel, acc),
    }
}

/// The micro-kernel: `acc[i][j] = fma(a[i][kk], panel[kk][j], acc[i][j])` for kk in order.
#[inline(always)]
fn kernel<const H: usize>(
    a: &[f32],
    lda: usize,
    k: usize,
    panel: &[f32],
    acc: &mut [[f32; NR]; MR],
) {
    let mut sums = [[0.0f32; NR]; H];
    let rows: [&[f32]; H] = std::array::from_fn(|i| &a[i * lda..i * lda + k]);
    for (kk, wv) in panel.chunks_exact(NR).enumerate().take(k) {
        let wv: &[f32; NR] = wv.try_into().expect("panel rows are NR wide");
        for i in 0..H {
            let x = rows[i][kk];
            for j in 0..NR {
                sums[i][j] = x.mul_add(wv[j], sums[i][j]);
            }
        }
    }
    acc[..H].copy_from_slice(&sums);
}

/// [`kernel`] compiled with AVX2 and FMA: the same operations, fused multiply-adds in hardware.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_fma<const H: usize>(
    a: &[f32],
    lda: usize,
    k: usize,
    panel: &[f32],
    acc: &mut [[f32; NR]; MR],
) {
    kernel::<H>(a, lda, k, panel, acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn reference(a: &[f32], m: usize, k: usize, w: &[f32], n: usize, bias: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; m * n];
        for r in 0..m {
            for c in 0..n {
                let mut acc = 0.0f32;
                for kk in 0..k {
                    acc = a[r * k + kk].mul_add(w[c * k + kk], acc);
                }
                out[r * n + c] = acc + bias[c];
            }
        }
        out
    }

    #[test]
    fn every_level_and_thread_count_gives_the_reference_bits() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (7, 17, 5),
            (100, 130, 33),
            (13, 16, 64),
            (200, 40, 3),
        ] {
            let a = data(m * k, 1);
            let w = data(n * k, 2);
            let bias = data(n, 3);
            let want = reference(&a, m, k, &w, n, &bias);
            let packed = PackedMatrix::from_rows(&w, n, k);
            for level in KernelLevel::supported() {
                for threads in [1, 2] {
                    let cpu = CpuContext::new(threads, level);
                    let mut out = vec![0.0; m * n];
                    let rows = Rows { data: &a, ld: k, m };
                    matmul(&cpu, rows, &packed, Some(&bias), &mut out, n);
                    assert_eq!(out, want, "{m}x{n}x{k} at {level} on {threads} threads");
                }
            }
        }
    }

    #[test]
    fn packing_from_columns_equals_packing_rows_of_the_transpose() {
        let (n, k) = (21, 9);
        let w = data(n * k, 4);
        let mut wt = vec![0.0; k * n];
        for c in 0..n {
            for kk in 0..k {
                wt[kk * n + c] = w[c * k + kk];
            }
        }
        let mut from_cols = PackedMatrix::zeroed(n, k);
        from_cols.pack_cols(&wt, n);
        assert_eq!(from_cols.data, PackedMatrix::from_rows(&w, n, k).data);
    }
}
