//! Matrix products: [`Linear`], the one type every weight matrix of the model goes through.
//!
//! A matrix borrows its weights from the loaded file (or its huge-page copy) in the form they
//! are stored: Q4_1 or Q8 tiles, a GGUF file's own row-major blocks, or a dense float matrix. [`Linear::matmul`] computes
//! `x W^T` for one or more tokens on the model's [`CpuContext`], at its kernel level:
//! - tiles: the activations are quantized once per call to int8 blocks (so results differ from
//!   the f32 reference by that rounding, bounded in the tests below), then the tile kernels of
//!   [`crate::cpu`] run over row blocks of 32 rows split over the thread pool, up to 8 tokens
//!   per pass, a prefill's whole groups of 8 through the interleaved batch kernel;
//! - GGUF blocks ([`gguf`]): the same quantized activations, then [`crate::cpu::gguf::dot_rows`]
//!   over chunks of rows split over the pool, up to 8 tokens per call;
//! - dense: each row converted to f32 and dotted with every token, rows split over the pool
//!   (same sums, same order per output).
//!
//! [`Linear::matmul_shared_input`] runs matrices that read the same input (q, k and v; gate and
//! up) in one run of the pool. [`Linear::row_f32`] reads one row, which is also how embeddings
//! are looked up.

use std::cell::RefCell;

use q4nx::dtype::decode_f32;
use q4nx::layout::padded_cols;
use q4nx::tile::TILE_ROWS;
use q4nx::{DenseTensor, Dtype, GgufMatrix, Tensor, TileMatrix};

use crate::cpu::pool::{SharedMut, ThreadPool};
use crate::cpu::q4_1::{self, MAX_TOKENS};
use crate::cpu::q8;
use crate::cpu::quant::{quantize_row, QuantizedActivations, BATCH, BLOCK};
use crate::cpu::{CpuContext, KernelLevel};

mod gguf;

/// A dense weight matrix `W[rows, cols]` borrowed from the weight file, row-major, in its stored
/// dtype (BF16, F16 or F32, little-endian; [`Dtype::is_float`]).
#[derive(Debug, Clone, Copy)]
pub struct DenseMatrix<'w> {
    /// Output features (N).
    pub rows: usize,
    /// Input features (K).
    pub cols: usize,
    /// Element type of `bytes`: a float type.
    pub dtype: Dtype,
    /// `rows * cols` elements.
    pub bytes: &'w [u8],
}

/// A weight matrix `W[rows, cols]` in HF orientation (rows = output features).
#[derive(Debug)]
pub enum Linear<'w> {
    /// Unquantized weights.
    Dense(DenseMatrix<'w>),
    /// Q4_1 tiles; `cols` is the logical K (the tiles hold K padded to 256).
    Q4_1 {
        /// The tiles.
        matrix: TileMatrix<'w>,
        /// Logical input features.
        cols: usize,
    },
    /// Q8 tiles; `cols` is the logical K.
    Q8 {
        /// The tiles.
        matrix: TileMatrix<'w>,
        /// Logical input features.
        cols: usize,
    },
    /// A GGUF file's own blocks, row-major (K = `matrix.cols`, unpadded).
    Gguf(GgufMatrix<'w>),
}

/// Why a tensor cannot be used as a matrix of the expected shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl<'w> Linear<'w> {
    /// Wraps a tensor from the weight file as a `[rows, cols]` matrix, checking its shape and dtype.
    pub fn new(tensor: Tensor<'w>, rows: usize, cols: usize) -> Result<Self, ShapeError> {
        match tensor {
            Tensor::Dense(dense) => dense_matrix(&dense, rows, cols).map(Linear::Dense),
            Tensor::Q4_1(matrix) => {
                check_tiles(&matrix, rows, cols)?;
                Ok(Linear::Q4_1 { matrix, cols })
            }
            Tensor::Q8(matrix) => {
                check_tiles(&matrix, rows, cols)?;
                Ok(Linear::Q8 { matrix, cols })
            }
            Tensor::Gguf(matrix) => gguf::check(&matrix, rows, cols).map(|()| Linear::Gguf(matrix)),
        }
    }

    /// Output features (N).
    pub fn rows(&self) -> usize {
        match self {
            Linear::Dense(d) => d.rows,
            Linear::Q4_1 { matrix, .. } | Linear::Q8 { matrix, .. } => matrix.rows,
            Linear::Gguf(matrix) => matrix.rows,
        }
    }

    /// Logical input features (K, unpadded).
    pub fn cols(&self) -> usize {
        match self {
            Linear::Dense(d) => d.cols,
            Linear::Q4_1 { cols, .. } | Linear::Q8 { cols, .. } => *cols,
            Linear::Gguf(matrix) => matrix.cols,
        }
    }

    /// Writes row `row` of W as f32 into `out[..cols]` (dense conversion or reference dequant).
    /// This is also how embeddings are looked up.
    pub fn row_f32(&self, row: usize, out: &mut [f32]) {
        match self {
            Linear::Dense(d) => {
                let size = d.dtype.size();
                let start = row * d.cols * size;
                decode_f32(
                    d.dtype,
                    &d.bytes[start..start + d.cols * size],
                    &mut out[..d.cols],
                );
            }
            Linear::Q4_1 { matrix, cols } | Linear::Q8 { matrix, cols } => {
                let mut padded = vec![0.0f32; matrix.cols];
                matrix.dequantize_row(row, &mut padded);
                out[..*cols].copy_from_slice(&padded[..*cols]);
            }
            Linear::Gguf(matrix) => matrix.dequantize_row(row, &mut out[..matrix.cols]),
        }
    }

    /// `out[t, n] = sum_k x[t, k] * W[n, k]` for `t` in `0..tokens`; `x` is `[tokens, cols]`
    /// row-major and `out` is `[tokens, rows]` row-major. Runs on `cpu`'s pool at its level.
    pub fn matmul(&self, cpu: &CpuContext, x: &[f32], tokens: usize, out: &mut [f32]) {
        let (rows, cols) = (self.rows(), self.cols());
        assert_eq!(
            x.len(),
            tokens * cols,
            "linear: input is not [tokens, cols]"
        );
        assert_eq!(
            out.len(),
            tokens * rows,
            "linear: output is not [tokens, rows]"
        );
        let (matrix, kernel) = match self {
            Linear::Q4_1 { matrix, .. } => (matrix, TileKernel::Q4_1),
            Linear::Q8 { matrix, .. } => (matrix, TileKernel::Q8),
            Linear::Dense(_) => return self.matmul_rows(x, tokens, out, cpu.pool()),
            Linear::Gguf(matrix) => {
                let jobs = [Job::new(*matrix, out, 0, tokens)];
                return gguf::matmul(cpu, &jobs, x, tokens, cols);
            }
        };
        let jobs = [Job::new(*matrix, out, 0, tokens)];
        matmul_tiles(cpu, kernel, &jobs, x, tokens, cols);
    }

    /// `outs[i] = x W_i^T` for matrices that read the same input `x` (q, k and v; gate and
    /// up), each as [`Linear::matmul`] computes it. When all are Q4_1, or all in GGUF blocks,
    /// `x` is quantized once and their rows share one run of the thread pool: a decode step
    /// then waits for the pool half as often.
    pub fn matmul_shared_input(
        cpu: &CpuContext,
        pairs: &mut [(&Linear<'_>, &mut [f32])],
        x: &[f32],
        tokens: usize,
    ) {
        let cols = pairs.first().map_or(0, |(linear, _)| linear.cols());
        let mut jobs = [const { Job::EMPTY_TILES }; MAX_SHARED];
        let mut all_q4_1 = pairs.len() <= MAX_SHARED && x.len() == tokens * cols;
        for ((linear, out), job) in pairs.iter_mut().zip(&mut jobs) {
            match linear {
                Linear::Q4_1 { matrix, cols: c }
                    if *c == cols && out.len() == tokens * matrix.rows =>
                {
                    *job = Job::new(*matrix, out, 0, tokens);
                }
                _ => all_q4_1 = false,
            }
        }
        if all_q4_1 {
            matmul_tiles(cpu, TileKernel::Q4_1, &jobs[..pairs.len()], x, tokens, cols);
        } else if let Some(jobs) = gguf::shared_jobs(pairs, x, tokens) {
            gguf::matmul(cpu, &jobs, x, tokens, cols);
        } else {
            // Other kinds (reference models), or sizes matmul's checks will report: one by one.
            for (linear, out) in pairs.iter_mut() {
                linear.matmul(cpu, x, tokens, out);
            }
        }
    }

    /// `products[i].2 = x[t_i] W_i^T` for `products[i] = (W_i, t_i, out_i)`: each matrix against
    /// one row (token) of `x` (`[tokens, cols]`), as [`Linear::matmul`] computes it. The chosen
    /// experts of a decode step run this way: when every matrix is in GGUF blocks, or all are
    /// tiles of one type, `x` is quantized once and all their rows share one run of the thread
    /// pool, so a step waits for the pool once per layer and projection instead of once per
    /// expert (and each thread streams whole runs of several experts' rows).
    pub fn matmul_each(
        cpu: &CpuContext,
        x: &[f32],
        tokens: usize,
        products: &mut [(&Linear<'_>, usize, &mut [f32])],
    ) {
        let cols = products.first().map_or(0, |(linear, _, _)| linear.cols());
        let fits = x.len() == tokens * cols
            && products.len() <= MAX_JOBS
            && products.iter().all(|(linear, t, out)| {
                linear.cols() == cols && *t < tokens && out.len() == linear.rows()
            });
        if fits {
            // All in GGUF blocks, or all tiles of one type: one run of the pool.
            let gguf: Option<Vec<_>> = products
                .iter_mut()
                .map(|(linear, t, out)| match linear {
                    Linear::Gguf(m) => Some(Job::new(*m, out, *t, 1)),
                    _ => None,
                })
                .collect();
            if let Some(jobs) = gguf {
                return gguf::matmul(cpu, &jobs, x, tokens, cols);
            }
            for kernel in [TileKernel::Q4_1, TileKernel::Q8] {
                let tiles: Option<Vec<_>> = products
                    .iter_mut()
                    .map(|(linear, t, out)| match (linear, kernel) {
                        (Linear::Q4_1 { matrix, .. }, TileKernel::Q4_1)
                        | (Linear::Q8 { matrix, .. }, TileKernel::Q8) => {
                            Some(Job::new(*matrix, out, *t, 1))
                        }
                        _ => None,
                    })
                    .collect();
                if let Some(jobs) = tiles {
                    return matmul_tiles(cpu, kernel, &jobs, x, tokens, cols);
                }
            }
        }
        // Other kinds (reference models), or sizes matmul's checks will report: one by one.
        for (linear, t, out) in products.iter_mut() {
            let row = x.get(*t * cols..(*t + 1) * cols).unwrap_or(&[]);
            linear.matmul(cpu, row, 1, out);
        }
    }

    /// The plain path of dense matrices: each row converted to f32, dotted with every token;
    /// rows split in chunks over the pool.
    fn matmul_rows(&self, x: &[f32], tokens: usize, out: &mut [f32], pool: &ThreadPool) {
        const CHUNK: usize = 64;
        let (rows, cols) = (self.rows(), self.cols());
        let out = SharedMut(out.as_mut_ptr());
        pool.run(rows.div_ceil(CHUNK), &|chunk| {
            let mut w = vec![0.0f32; cols];
            for n in chunk * CHUNK..rows.min((chunk + 1) * CHUNK) {
                self.row_f32(n, &mut w);
                for t in 0..tokens {
                    let value = dot(&x[t * cols..(t + 1) * cols], &w[..cols]);
                    // SAFETY: `out` has tokens * rows elements (asserted by `matmul`) and each
                    // (t, n) is written by the one chunk that owns row n.
                    unsafe { out.at(t * rows + n).write(value) };
                }
            }
        });
    }
}

/// In 16 independent sums (the encoder's), which the compiler vectorizes: one running sum
/// kept dense models (bf16 Qwen3-Embedding-0.6B) at one multiply-add per cycle.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    crate::encoder::dot(a, b)
}

thread_local! {
    /// Quantized activations, reused by every matmul on this thread (no allocation once warm).
    static ACTIVATIONS: RefCell<QuantizedActivations> = RefCell::new(QuantizedActivations::new());
}

/// The most matrices [`Linear::matmul_shared_input`] takes at once (q, k and v).
const MAX_SHARED: usize = 3;

/// The most matrices one pool run takes ([`Linear::matmul_each`]: a decode step's experts).
pub const MAX_JOBS: usize = 32;

/// One matrix's part of a pool run: its rows against tokens `t0 .. t0 + tokens` of the input
/// (quantized once for every job of the run), written to `out` as `[tokens, rows]`.
struct Job<M> {
    matrix: M,
    out: SharedMut<f32>,
    t0: usize,
    tokens: usize,
}

impl<M> Job<M> {
    fn new(matrix: M, out: &mut [f32], t0: usize, tokens: usize) -> Self {
        let out = SharedMut(out.as_mut_ptr());
        Job {
            matrix,
            out,
            t0,
            tokens,
        }
    }
}

impl Job<TileMatrix<'static>> {
    /// A matrix with no rows: the unused places of a shared-input run (it has no chunks).
    const EMPTY_TILES: Self = Job {
        matrix: TileMatrix {
            name: "",
            rows: 0,
            cols: 0,
            last_groups: q4nx::tile::GROUPS_PER_TILE,
            bytes: &[],
        },
        out: SharedMut(std::ptr::null_mut()),
        t0: 0,
        tokens: 0,
    };
}

/// The tile kernels [`matmul_tiles`] runs: one per quantized tile type.
#[derive(Debug, Clone, Copy)]
enum TileKernel {
    Q4_1,
    Q8,
}

impl TileKernel {
    fn prefetch_start(self, tiles: &[u8], narrow: bool, acts: &QuantizedActivations) {
        match self {
            TileKernel::Q4_1 => q4_1::prefetch_start(tiles, narrow, acts),
            TileKernel::Q8 => {} // its kernels ask for the bytes ahead as they go
        }
    }

    fn row_block(
        self,
        level: KernelLevel,
        tiles: &[u8],
        narrow: bool,
        acts: &QuantizedActivations,
        t0: usize,
        out: &mut [f32],
    ) {
        match self {
            TileKernel::Q4_1 => q4_1::row_block(level, tiles, narrow, acts, t0, out),
            TileKernel::Q8 => q8::row_block(level, tiles, narrow, acts, t0, out),
        }
    }
}

/// Tiles with the SIMD kernels: quantize `x` (`[tokens, cols]`) once, then the row blocks of
/// every matrix of `jobs` (each against its tokens, written to its output) in chunks over one
/// run of `cpu`'s pool, at its level.
fn matmul_tiles(
    cpu: &CpuContext,
    kernel: TileKernel,
    jobs: &[Job<TileMatrix<'_>>],
    x: &[f32],
    tokens: usize,
    cols: usize,
) {
    assert!(jobs.len() <= MAX_JOBS);
    let (pool, level) = (cpu.pool(), cpu.level());
    let row_blocks: usize = jobs.iter().map(|j| j.matrix.rows / TILE_ROWS).sum();
    // One token streams every tile once, bound by memory: each thread gets one long run of
    // each matrix (up to 16 row blocks per chunk), so the prefetchers follow long streams
    // instead of restarting at every short chunk (SmolLM2-135M's 2-thread decode step took 12%
    // less time than with 8 chunks per thread). Several tokens are bound by arithmetic: about 8
    // chunks per thread, so early finishers take over the rest.
    let one_token = jobs.iter().all(|j| j.tokens == 1);
    let per_thread = if one_token { 1 } else { 8 };
    let per_chunk = (row_blocks / (per_thread * pool.threads())).clamp(1, 16);
    // Chunk c belongs to job i where first_chunk[i] <= c < first_chunk[i + 1].
    let mut first_chunk = [0; MAX_JOBS + 1];
    for (i, job) in jobs.iter().enumerate() {
        first_chunk[i + 1] = first_chunk[i] + (job.matrix.rows / TILE_ROWS).div_ceil(per_chunk);
    }
    let first_chunk = &first_chunk[..=jobs.len()];
    ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        quantize(&mut acts, x, tokens, cols, cpu);
        // A prefill's tokens in whole groups of 8 go through the batch kernel, the rest
        // (fewer than 8) through `row_block`.
        let all_tokens = jobs.iter().all(|j| j.t0 == 0 && j.tokens == tokens);
        if matches!(kernel, TileKernel::Q4_1)
            && all_tokens
            && tokens >= 2 * MAX_TOKENS
            && cpu.interleaved_batches()
        {
            acts.interleave(tokens / MAX_TOKENS * MAX_TOKENS);
        }
        let acts = &*acts;
        pool.run(first_chunk[jobs.len()], &|chunk| {
            let i = first_chunk.partition_point(|&first| first <= chunk) - 1;
            let Job {
                matrix,
                out,
                t0: first_token,
                tokens,
            } = &jobs[i];
            let (rows, block_bytes, narrow) =
                (matrix.rows, matrix.row_block_bytes(), matrix.is_narrow());
            let first = (chunk - first_chunk[i]) * per_chunk;
            let end = (rows / TILE_ROWS).min(first + per_chunk);
            let run = &matrix.bytes[first * block_bytes..end * block_bytes];
            kernel.prefetch_start(run, narrow, acts);
            // Zeroing the buffer is a visible cost in decode (once per chunk), so one token
            // gets one row block's worth.
            let (mut one, mut batch);
            let block: &mut [f32] = if *tokens == 1 {
                one = [0.0f32; TILE_ROWS];
                &mut one
            } else {
                batch = [0.0f32; TILE_ROWS * BATCH];
                &mut batch
            };
            for rb in first..end {
                let tiles = &matrix.bytes[rb * block_bytes..(rb + 1) * block_bytes];
                // Tokens t0 .. t0 + tokens of the input; t counts from 0 in the output.
                let mut t = 0;
                while t < *tokens {
                    let t0 = first_token + t;
                    // The interleaved batches first (none unless asked for above).
                    let n = if t0 < acts.interleaved() {
                        let n = (acts.interleaved() - t0).min(BATCH);
                        let part = &mut block[..n * TILE_ROWS];
                        q4_1::row_block_interleaved(level, tiles, narrow, acts, t0 / BATCH, part);
                        n
                    } else {
                        let n = (tokens - t).min(MAX_TOKENS);
                        kernel.row_block(
                            level,
                            tiles,
                            narrow,
                            acts,
                            t0,
                            &mut block[..n * TILE_ROWS],
                        );
                        n
                    };
                    for u in 0..n {
                        let src = &block[u * TILE_ROWS..(u + 1) * TILE_ROWS];
                        // SAFETY: rows rb*32..rb*32+32 of output token t+u lie inside this
                        // output (tokens * rows elements) and belong to this chunk alone.
                        unsafe {
                            let dst = out.at((t + u) * rows + rb * TILE_ROWS);
                            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, TILE_ROWS);
                        }
                    }
                    t += n;
                }
            }
        });
    });
}

/// Quantizes the activations, several tokens in parallel when there are several.
fn quantize(
    acts: &mut QuantizedActivations,
    x: &[f32],
    tokens: usize,
    cols: usize,
    cpu: &CpuContext,
) {
    let (pool, level) = (cpu.pool(), cpu.level());
    if tokens < 4 {
        acts.quantize(level, x, tokens, cols);
        return;
    }
    acts.resize(tokens, cols);
    let padded = acts.cols_padded();
    let blocks = padded / BLOCK;
    let (xq, scale, sum) = acts.parts_mut();
    let (xq, scale, sum) = (
        SharedMut(xq.as_mut_ptr()),
        SharedMut(scale.as_mut_ptr()),
        SharedMut(sum.as_mut_ptr()),
    );
    pool.run(tokens, &|t| {
        // SAFETY: token t's slices are disjoint from every other token's and inside the
        // buffers, which `resize` made tokens * padded (values) and tokens * blocks long.
        let (xq, scale, sum) = unsafe {
            (
                std::slice::from_raw_parts_mut(xq.at(t * padded), padded),
                std::slice::from_raw_parts_mut(scale.at(t * blocks), blocks),
                std::slice::from_raw_parts_mut(sum.at(t * blocks), blocks),
            )
        };
        quantize_row(level, &x[t * cols..(t + 1) * cols], xq, scale, sum);
    });
}

fn dense_matrix<'w>(
    dense: &DenseTensor<'w>,
    rows: usize,
    cols: usize,
) -> Result<DenseMatrix<'w>, ShapeError> {
    let dtype = dense.dtype;
    if !dtype.is_float() {
        return Err(ShapeError(format!("dtype {dtype} is not BF16, F16 or F32")));
    }
    if dense.shape != [rows, cols] {
        return Err(ShapeError(format!(
            "shape is {:?}, expected [{rows}, {cols}]",
            dense.shape
        )));
    }
    if dense.bytes.len() != rows * cols * dtype.size() {
        return Err(ShapeError(format!(
            "holds {} bytes, expected {}",
            dense.bytes.len(),
            rows * cols * dtype.size()
        )));
    }
    Ok(DenseMatrix {
        rows,
        cols,
        dtype,
        bytes: dense.bytes,
    })
}

fn check_tiles(matrix: &TileMatrix<'_>, rows: usize, cols: usize) -> Result<(), ShapeError> {
    let padded = padded_cols(cols);
    if matrix.rows != rows || matrix.cols != padded {
        return Err(ShapeError(format!(
            "quantized shape is [{}, {}], expected [{rows}, {padded}] (K={cols} padded to 256)",
            matrix.rows, matrix.cols
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use q4nx::tile::{GROUPS_PER_TILE, Q4_1_TILE_BYTES, Q8_TILE_BYTES, TILE_COLS};

    fn cpu() -> CpuContext {
        CpuContext::best(3)
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn dense_matmul_matches_hand_computation() {
        let cpu = cpu();
        // W = [[1, 2, 3], [4, 5, 6]], x = [[1, 0, -1], [2, 1, 0]]
        let bytes = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let linear = Linear::Dense(DenseMatrix {
            rows: 2,
            cols: 3,
            dtype: Dtype::F32,
            bytes: &bytes,
        });
        let mut out = [0.0; 4];
        linear.matmul(&cpu, &[1.0, 0.0, -1.0, 2.0, 1.0, 0.0], 2, &mut out);
        assert_eq!(out, [-2.0, -2.0, 4.0, 13.0]);
    }

    #[test]
    fn bf16_and_f16_rows_convert_exactly() {
        let values = [1.5f32, -2.25, 0.0, 65504.0];
        let bf16: Vec<u8> = values
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
            .collect();
        let f16: Vec<u8> = values
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        let rows = |dtype, bytes: &[u8]| {
            let linear = Linear::Dense(DenseMatrix {
                rows: 1,
                cols: 4,
                dtype,
                bytes,
            });
            let mut out = [0.0; 4];
            linear.row_f32(0, &mut out);
            out
        };
        assert_eq!(rows(Dtype::F16, &f16), values);
        assert_eq!(rows(Dtype::Bf16, &bf16)[..3], values[..3]);
    }

    #[test]
    fn q4_1_matmul_equals_dense_matmul_on_dequantized_weights() {
        let cpu = cpu();
        let (rows, cols) = (32, 40);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        let tiles = q4nx::quantize_q4_1_tiles(&w, rows, cols);
        let matrix = TileMatrix {
            name: "w",
            rows,
            cols: 256,
            last_groups: GROUPS_PER_TILE,
            bytes: &tiles,
        };
        let dequantized: Vec<f32> = matrix
            .dequantize()
            .chunks(256)
            .flat_map(|row| row[..cols].to_vec())
            .collect();
        let dense_bytes = f32_bytes(&dequantized);
        let dense = Linear::Dense(DenseMatrix {
            rows,
            cols,
            dtype: Dtype::F32,
            bytes: &dense_bytes,
        });
        let quantized = Linear::Q4_1 { matrix, cols };
        let x: Vec<f32> = (0..2 * cols).map(|i| (i as f32 * 0.37).sin()).collect();
        let (mut a, mut b) = (vec![0.0; 2 * rows], vec![0.0; 2 * rows]);
        dense.matmul(&cpu, &x, 2, &mut a);
        quantized.matmul(&cpu, &x, 2, &mut b);
        for t in 0..2 {
            for n in 0..rows {
                let bound = quantization_bound(
                    &dequantized[n * cols..(n + 1) * cols],
                    &x[t * cols..(t + 1) * cols],
                );
                let (a, b) = (a[t * rows + n], b[t * rows + n]);
                assert!(
                    (a - b).abs() <= bound,
                    "row {n} token {t}: {a} vs {b}, bound {bound}"
                );
            }
        }
    }

    /// How far int8 activations may move a dot product: each activation moves by at most half
    /// its block's step (max|x| / 254), times the weight it meets, plus f32 rounding.
    fn quantization_bound(w: &[f32], x: &[f32]) -> f32 {
        let mut bound = 1e-4;
        for (wb, xb) in w.chunks(32).zip(x.chunks(32)) {
            let step = xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 254.0;
            bound += step * wb.iter().map(|v| v.abs()).sum::<f32>() * 1.01;
        }
        bound
    }

    /// The tiles of a 96 x 300 Q4_1 matrix of fixed weights: 3 row blocks of 2 column tiles,
    /// the second padded (K = 300 of 512).
    fn tiles_96_by_300() -> Vec<u8> {
        let w: Vec<f32> = (0..96 * 300)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 70.0)
            .collect();
        q4nx::quantize_q4_1_tiles(&w, 96, 300)
    }

    fn linear_96_by_300(tiles: &[u8]) -> Linear<'_> {
        let matrix = TileMatrix {
            name: "w",
            rows: 96,
            cols: 512,
            last_groups: GROUPS_PER_TILE,
            bytes: tiles,
        };
        Linear::Q4_1 { matrix, cols: 300 }
    }

    #[test]
    fn q4_1_matmul_on_many_rows_and_tokens_is_within_the_quantization_bound() {
        let tiles = tiles_96_by_300();
        assert_matmul_within_quantization_bound(&linear_96_by_300(&tiles), MAX_TOKENS + 3);
    }

    #[test]
    fn interleaved_batches_change_no_bit_of_a_matmul() {
        // 2 whole batches and one of 8 tokens, then 3 tokens `row_block` computes: the same
        // bits with the batch kernel (where this CPU has it) as without.
        let tokens = 2 * BATCH + MAX_TOKENS + 3;
        let tiles = tiles_96_by_300();
        let linear = linear_96_by_300(&tiles);
        assert_matmul_within_quantization_bound(&linear, tokens);
        let x: Vec<f32> = (0..tokens * 300).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut cpu = cpu();
        let mut run = |interleave: bool| {
            cpu.set_interleaved_batches(interleave);
            let mut out = vec![f32::NAN; tokens * 96];
            linear.matmul(&cpu, &x, tokens, &mut out);
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(run(true), run(false));
    }

    /// `linear`'s matmul of `tokens` tokens of a fixed input is, for every row and token, within
    /// [`quantization_bound`] of the f32 product with its dequantized weights.
    fn assert_matmul_within_quantization_bound(linear: &Linear<'_>, tokens: usize) {
        let (rows, cols) = (linear.rows(), linear.cols());
        let mut dequantized = vec![0.0; rows * cols];
        for (n, row) in dequantized.chunks_exact_mut(cols).enumerate() {
            linear.row_f32(n, row);
        }
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| (i as f32 * 0.61).cos() * 3.0)
            .collect();
        let mut out = vec![f32::NAN; tokens * rows];
        linear.matmul(&cpu(), &x, tokens, &mut out);
        for t in 0..tokens {
            for n in 0..rows {
                let (wr, xr) = (
                    &dequantized[n * cols..(n + 1) * cols],
                    &x[t * cols..(t + 1) * cols],
                );
                let exact = dot(xr, wr);
                let bound = quantization_bound(wr, xr);
                let got = out[t * rows + n];
                assert!(
                    (got - exact).abs() <= bound,
                    "row {n} token {t}: {got} vs {exact}, bound {bound}"
                );
            }
        }
    }

    #[test]
    fn q8_matmul_on_many_rows_and_tokens_is_within_the_quantization_bound() {
        use half::bf16;
        use q4nx::tile::{pack_q8_tile, GROUPS_PER_TILE};
        let (rows, cols, tokens): (usize, usize, usize) = (96, 300, 11); // 3 row blocks, 2 column tiles, 8 + 3 tokens
        let mut bytes = Vec::new();
        for rb in 0..rows / TILE_ROWS {
            for ct in 0..2 {
                let mut values = [[0i8; TILE_COLS]; TILE_ROWS];
                let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
                let width = TILE_COLS.min(cols.saturating_sub(ct * TILE_COLS)); // the rest is padding
                for (r, (row, scales)) in values.iter_mut().zip(&mut d).enumerate() {
                    for (c, v) in row[..width].iter_mut().enumerate() {
                        *v = (((rb * 32 + r) * 7919 + c * 31 + ct) % 255) as u8 as i8;
                    }
                    for (g, scale) in scales.iter_mut().enumerate() {
                        *scale = bf16::from_f32(0.001 * (1 + (r + g) % 7) as f32);
                    }
                }
                let mut tile = vec![0u8; Q8_TILE_BYTES];
                pack_q8_tile(&values, &d, &mut tile);
                bytes.extend(tile);
            }
        }
        let matrix = TileMatrix {
            name: "w",
            rows,
            cols: 512,
            last_groups: GROUPS_PER_TILE,
            bytes: &bytes,
        };
        assert_matmul_within_quantization_bound(&Linear::Q8 { matrix, cols }, tokens);
    }

    #[test]
    fn shared_input_matmuls_equal_separate_ones() {
        let cpu = cpu();
        // q, k and v of different heights; 3 tokens; then a dense matrix among them.
        let cols = 300;
        let w = |rows: usize, seed: usize| -> Vec<u8> {
            let values: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919 + seed) % 211) as f32 / 70.0 - 1.5)
                .collect();
            q4nx::quantize_q4_1_tiles(&values, rows, cols)
        };
        let tiles = [w(96, 1), w(32, 2), w(64, 3)];
        let linears: Vec<Linear> = tiles
            .iter()
            .map(|bytes| {
                let rows = bytes.len() / (2 * Q4_1_TILE_BYTES) * TILE_ROWS;
                let matrix = TileMatrix {
                    name: "w",
                    rows,
                    cols: 512,
                    last_groups: GROUPS_PER_TILE,
                    bytes,
                };
                Linear::Q4_1 { matrix, cols }
            })
            .collect();
        let tokens = 3;
        let x: Vec<f32> = (0..tokens * cols)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let separate: Vec<Vec<f32>> = linears
            .iter()
            .map(|l| {
                let mut out = vec![0.0; tokens * l.rows()];
                l.matmul(&cpu, &x, tokens, &mut out);
                out
            })
            .collect();
        let mut outs: Vec<Vec<f32>> = separate.iter().map(|o| vec![f32::NAN; o.len()]).collect();
        let [a, b, c] = &mut outs[..] else {
            unreachable!()
        };
        Linear::matmul_shared_input(
            &cpu,
            &mut [
                (&linears[0], &mut a[..]),
                (&linears[1], &mut b[..]),
                (&linears[2], &mut c[..]),
            ],
            &x,
            tokens,
        );
        assert_eq!(outs, separate);

        let dense_values = vec![0.25f32; 32 * cols];
        let dense_bytes = f32_bytes(&dense_values);
        let dense = Linear::Dense(DenseMatrix {
            rows: 32,
            cols,
            dtype: Dtype::F32,
            bytes: &dense_bytes,
        });
        let (mut d, mut q) = (vec![f32::NAN; tokens * 32], vec![f32::NAN; tokens * 96]);
        Linear::matmul_shared_input(
            &cpu,
            &mut [(&dense, &mut d[..]), (&linears[0], &mut q[..])],
            &x,
            tokens,
        );
        assert_eq!(q, separate[0]);
        let mut expected = vec![0.0; tokens * 32];
        dense.matmul(&cpu, &x, tokens, &mut expected);
        assert_eq!(d, expected);
    }

    #[test]
    fn each_matrix_against_its_own_token_equals_separate_matmuls() {
        let cpu = cpu();
        let cols = 256;
        let x: Vec<f32> = (0..3 * cols).map(|i| (i as f32 * 0.61).cos()).collect();
        let token = |t: usize| &x[t * cols..(t + 1) * cols];
        let alone = |l: &Linear<'_>, t: usize| {
            let mut out = vec![0.0; l.rows()];
            l.matmul(&cpu, token(t), 1, &mut out);
            out
        };
        let check = |a: &Linear<'_>, b: &Linear<'_>| {
            let (mut o0, mut o1, mut o2) = (
                vec![f32::NAN; a.rows()],
                vec![f32::NAN; b.rows()],
                vec![f32::NAN; a.rows()],
            );
            let mut products = [
                (a, 2, &mut o0[..]),
                (b, 0, &mut o1[..]),
                (a, 1, &mut o2[..]),
            ];
            Linear::matmul_each(&cpu, &x, 3, &mut products);
            assert_eq!([o0, o1, o2], [alone(a, 2), alone(b, 0), alone(a, 1)]);
        };
        let values = |rows: usize, seed: usize| -> Vec<f32> {
            (0..rows * cols)
                .map(|i| ((i * 7919 + seed) % 211) as f32 / 70.0 - 1.5)
                .collect()
        };
        // Q4_1 tiles.
        let tiles = [96, 64].map(|rows| q4nx::quantize_q4_1_tiles(&values(rows, rows), rows, cols));
        let [a, b] = [0, 1].map(|i| Linear::Q4_1 {
            matrix: TileMatrix {
                name: "w",
                rows: [96, 64][i],
                cols,
                last_groups: GROUPS_PER_TILE,
                bytes: &tiles[i],
            },
            cols,
        });
        check(&a, &b);
        // GGUF blocks (Q8_0: an f16 scale and 32 codes per block).
        let q8_0 = |rows: usize| -> Vec<u8> {
            (0..rows * cols / 32)
                .flat_map(|block| {
                    let scale = half::f16::from_f32(0.01 + (block % 7) as f32 * 1e-3);
                    let codes = (0..32).map(move |i| ((block * 31 + i * 17) % 255) as u8);
                    scale.to_le_bytes().into_iter().chain(codes)
                })
                .collect()
        };
        let blocks = [q8_0(48), q8_0(16)];
        let [c, d] = [0, 1].map(|i| {
            Linear::Gguf(GgufMatrix {
                name: "w",
                kind: q4nx::gguf::GgmlType::Q8_0,
                rows: [48, 16][i],
                cols,
                bytes: &blocks[i],
                grouped: false,
            })
        });
        check(&c, &d);
        // Kinds that cannot share a run: one by one, the same values.
        let dense_bytes = f32_bytes(&values(32, 5));
        let dense = Linear::Dense(DenseMatrix {
            rows: 32,
            cols,
            dtype: Dtype::F32,
            bytes: &dense_bytes,
        });
        check(&a, &dense);
        check(&dense, &c);
    }
}
