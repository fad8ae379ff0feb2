//! [`Linear::Gguf`]'s products: a GGUF file's own row-major blocks against the activations
//! quantized once per call (the same int8 blocks of 32 as the tiles'), by
//! [`crate::cpu::gguf::dot_rows`] over chunks of rows split over the thread pool, up to
//! [`MAX_TOKENS`] tokens per call, scattered into `out[t, r]`. A Q4_K, Q6_K or MXFP4 matrix the
//! huge-page copy regrouped in 8 rows ([`GgufMatrix::grouped`]) goes through
//! [`dot_groups`] instead.

use std::cell::RefCell;

use q4nx::gguf::rows8;
use q4nx::GgufMatrix;

use super::{quantize, Job, Linear, ShapeError, ACTIVATIONS, MAX_JOBS, MAX_SHARED};
use crate::cpu::gguf::{dot_groups, dot_rows, has_kernel, MAX_TOKENS};
use crate::cpu::quant::QuantizedActivations;
use crate::cpu::{CpuContext, KernelLevel};

/// Rows of a chunk are a multiple of this (a cache line of f32 outputs).
const ROW_ALIGN: usize = 16;

/// Most rows in one chunk: long enough runs for the prefetchers, short enough for balance.
const MAX_CHUNK_ROWS: usize = 512;

thread_local! {
    /// Each worker's `[rows, tokens]` results of one call before they are scattered.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Checks that a GGUF matrix is `[rows, cols]`, whole, and of a type with a kernel.
pub(super) fn check(m: &GgufMatrix<'_>, rows: usize, cols: usize) -> Result<(), ShapeError> {
    if !has_kernel(m.kind) {
        return Err(ShapeError(format!(
            "GGUF type {} is read as a dense matrix, not as blocks",
            m.kind
        )));
    }
    if m.grouped && (!rows8::groups(m.kind) || !m.rows.is_multiple_of(8)) {
        return Err(ShapeError(format!(
            "{} rows of {} cannot lie in groups of 8 rows (only Q4_K's, Q6_K's and MXFP4's can)",
            m.rows, m.kind
        )));
    }
    if m.rows != rows || m.cols != cols {
        return Err(ShapeError(format!(
            "shape is [{}, {}], expected [{rows}, {cols}]",
            m.rows, m.cols
        )));
    }
    if !cols.is_multiple_of(m.kind.block_len()) || m.bytes.len() != rows * m.row_bytes() {
        return Err(ShapeError(format!(
            "holds {} bytes, [{rows}, {cols}] in {} blocks takes {}",
            m.bytes.len(),
            m.kind,
            rows * m.kind.bytes_for(cols)
        )));
    }
    Ok(())
}

/// The jobs of [`Linear::matmul_shared_input`] when every matrix is in GGUF blocks of the
/// same K and every output fits; else None.
pub(super) fn shared_jobs<'w>(
    pairs: &mut [(&Linear<'w>, &mut [f32])],
    x: &[f32],
    tokens: usize,
) -> Option<Vec<Job<GgufMatrix<'w>>>> {
    let cols = pairs.first()?.0.cols();
    if pairs.len() > MAX_SHARED || x.len() != tokens * cols {
        return None;
    }
    pairs
        .iter_mut()
        .map(|(linear, out)| match linear {
            Linear::Gguf(m) if m.cols == cols && out.len() == tokens * m.rows => {
                Some(Job::new(*m, out, 0, tokens))
            }
            _ => None,
        })
        .collect()
}

/// `out_i[t, r] = Σ_k W_i[r, k] x[t0_i + t, k]` for every matrix of `jobs` (all of K = `cols`,
/// each against its tokens of `x`, `[tokens, cols]`): `x` quantized once, the rows of all
/// matrices in chunks over one run of `cpu`'s pool.
pub(super) fn matmul(
    cpu: &CpuContext,
    jobs: &[Job<GgufMatrix<'_>>],
    x: &[f32],
    tokens: usize,
    cols: usize,
) {
    assert!(jobs.len() <= MAX_JOBS);
    let (pool, level) = (cpu.pool(), cpu.level());
    let all_rows: usize = jobs.iter().map(|j| j.matrix.rows).sum();
    // As the tiles: one long run per thread and matrix for one token (bound by memory), about
    // 8 chunks per thread for several (bound by arithmetic, early finishers take over).
    let per_thread = if jobs.iter().all(|j| j.tokens == 1) {
        1
    } else {
        8
    };
    let chunk_rows = (all_rows / (per_thread * pool.threads()))
        .next_multiple_of(ROW_ALIGN)
        .clamp(ROW_ALIGN, MAX_CHUNK_ROWS);
    let mut first_chunk = [0; MAX_JOBS + 1];
    for (i, job) in jobs.iter().enumerate() {
        first_chunk[i + 1] = first_chunk[i] + job.matrix.rows.div_ceil(chunk_rows);
    }
    let first_chunk = &first_chunk[..=jobs.len()];
    ACTIVATIONS.with(|cell| {
        let mut acts = cell.borrow_mut();
        quantize(&mut acts, x, tokens, cols, cpu);
        let acts = &*acts;
        pool.run(first_chunk[jobs.len()], &|chunk| {
            let i = first_chunk.partition_point(|&first| first <= chunk) - 1;
            let Job {
                matrix: m,
                out,
                t0,
                tokens,
            } = &jobs[i];
            let r0 = (chunk - first_chunk[i]) * chunk_rows;
            let r1 = m.rows.min(r0 + chunk_rows);
            let (row_bytes, n) = (m.row_bytes(), r1 - r0);
            let bytes = &m.bytes[r0 * row_bytes..r1 * row_bytes];
            if *tokens == 1 {
                // out[0, r0..r1] is `[rows, 1]` already.
                // SAFETY: rows r0..r1 of the one token lie inside this output (rows elements)
                // and belong to this chunk alone.
                let dst = unsafe { std::slice::from_raw_parts_mut(out.at(r0), n) };
                dot(level, m, bytes, acts, *t0, 1, dst);
                return;
            }
            SCRATCH.with(|scratch| {
                let mut buf = scratch.borrow_mut();
                buf.resize(n * MAX_TOKENS, 0.0);
                let mut t = 0;
                while t < *tokens {
                    let group = (tokens - t).min(MAX_TOKENS);
                    let part = &mut buf[..n * group];
                    dot(level, m, bytes, acts, t0 + t, group, part);
                    for u in 0..group {
                        for r in 0..n {
                            // SAFETY: (t + u, r0 + r) lies inside this output (tokens * rows
                            // elements) and row r0 + r belongs to this chunk alone.
                            unsafe { out.at((t + u) * m.rows + r0 + r).write(part[r * group + u]) };
                        }
                    }
                    t += group;
                }
            });
        });
    });
}

/// [`dot_rows`] of some of `m`'s rows as they lie in `bytes`: a grouped matrix's through
/// [`dot_groups`] (whole groups: chunks start at multiples of 16 rows and its rows are a
/// multiple of 8).
fn dot(
    level: KernelLevel,
    m: &GgufMatrix<'_>,
    bytes: &[u8],
    acts: &QuantizedActivations,
    t0: usize,
    tokens: usize,
    out: &mut [f32],
) {
    if m.grouped {
        dot_groups(level, m.kind, bytes, m.cols, acts, t0, tokens, out);
    } else {
        dot_rows(level, m.kind, bytes, m.cols, acts, t0, tokens, out);
    }
}
