//! What one loaded model computes with on the CPU: its own thread pool and its kernel level.
//!
//! Both are chosen when the model loads and passed to every kernel (matmuls, attention, the
//! f16 widening of the KV cache, SiLU), so two models loaded side by side never resize or
//! re-level each other, and a level forced for a benchmark reaches every kernel.

use super::level::KernelLevel;
use super::pool::ThreadPool;

/// The threads and the kernel level of one model, and whether its attention may use BF16 dot
/// products.
#[derive(Debug)]
pub struct CpuContext {
    pool: ThreadPool,
    level: KernelLevel,
    bf16_attention: bool,
    /// Forced for a benchmark; None: as attention's probe finds.
    broadcast_in_register: Option<bool>,
    interleave: bool,
}

impl CpuContext {
    /// A context of `threads` threads (at least one; fewer take part while other programs
    /// keep CPUs busy) running the `level` kernels.
    ///
    /// # Panics
    ///
    /// If this CPU cannot run `level` (check [`KernelLevel::is_supported`] first).
    pub fn new(threads: usize, level: KernelLevel) -> CpuContext {
        CpuContext::with_pool(ThreadPool::new(threads), level)
    }

    /// A context running the `level` kernels on `pool`.
    ///
    /// # Panics
    ///
    /// If this CPU cannot run `level`.
    pub fn with_pool(pool: ThreadPool, level: KernelLevel) -> CpuContext {
        assert!(
            level.is_supported(),
            "this CPU cannot run the {level} kernels"
        );
        CpuContext {
            pool,
            level,
            bf16_attention: super::peak::bf16_dot_pays(),
            broadcast_in_register: None,
            interleave: true,
        }
    }

    /// A context of `threads` threads at the best level this CPU has.
    pub fn best(threads: usize) -> CpuContext {
        CpuContext::new(threads, KernelLevel::detect())
    }

    /// Runs the `level` kernels from now on, on the same pool (for benchmarks that alternate
    /// levels step by step on one pool, `hearth bench --ab kernel=...`).
    ///
    /// # Panics
    ///
    /// If this CPU cannot run `level`.
    pub fn set_level(&mut self, level: KernelLevel) {
        assert!(
            level.is_supported(),
            "this CPU cannot run the {level} kernels"
        );
        self.level = level;
    }

    /// The pool every parallel kernel of this model runs on.
    pub fn pool(&self) -> &ThreadPool {
        &self.pool
    }

    /// The SIMD level every kernel of this model runs at.
    pub fn level(&self) -> KernelLevel {
        self.level
    }

    /// Whether attention over a quantized model's f16 cache multiplies in BF16 (with f32 sums,
    /// `cpu::attention`): asked for and the level's kernels have BF16 dot products
    /// ([`KernelLevel::has_bf16_dot`]). By default it is asked for where they are faster than
    /// f32 multiply-adds ([`super::peak::bf16_dot_pays`]). A dense model's f32 cache is always
    /// attended exactly.
    pub fn bf16_attention(&self) -> bool {
        self.bf16_attention && self.level.has_bf16_dot()
    }

    /// Asks for BF16 products in attention where the level has them (`true`), or keeps its
    /// products in f32 (`false`, exact), whichever is faster here (for benchmarks and fidelity
    /// checks).
    pub fn set_bf16_attention(&mut self, allowed: bool) {
        self.bf16_attention = allowed;
    }

    /// Whether attention's AVX-512 f32 kernels were told to broadcast each query or weight
    /// value into a register (`Some(true)`) or from memory (`Some(false)`) for a benchmark; None,
    /// the default, leaves it to attention's own probe (`cpu::attention::broadcast_in_register`
    /// says which one runs).
    pub fn broadcast_override(&self) -> Option<bool> {
        self.broadcast_in_register
    }

    /// Broadcasts into a register (`true`) or from memory (for benchmarks).
    pub fn set_broadcast_in_register(&mut self, in_register: bool) {
        self.broadcast_in_register = Some(in_register);
    }

    /// Whether the 4-bit matmuls of a prefill run their tokens, in batches of up to
    /// [`BATCH`](super::BATCH), through the interleaved-batch kernel
    /// (`q4_1::row_block_interleaved`: the same bits as the 8-token kernel, sooner): asked
    /// for (the default) and the level has it.
    pub fn interleaved_batches(&self) -> bool {
        self.interleave && super::q4_1::has_interleaved_kernel(self.level)
    }

    /// Lets prefill use the interleaved-batch kernel where the level has it (`true`, the
    /// default), or keeps every batch at 8 tokens (`false`, for benchmarks).
    pub fn set_interleaved_batches(&mut self, allowed: bool) {
        self.interleave = allowed;
    }

    /// Threads in the pool (the caller included).
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}
