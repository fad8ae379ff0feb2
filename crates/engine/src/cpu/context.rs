//! What one loaded model computes with on the CPU: its own thread pool and its kernel level.
//!
//! Both are chosen when the model loads and passed to every kernel (matmuls, attention, the
//! f16 widening of the KV cache, SiLU), so two models loaded side by side never resize or
//! re-level each other, and a level forced for a benchmark reaches every kernel.

use super::level::KernelLevel;
use super::pool::ThreadPool;

/// The threads and the kernel level of one model.
#[derive(Debug)]
pub struct CpuContext {
    pool: ThreadPool,
    level: KernelLevel,
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
        CpuContext { pool, level }
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

    /// Threads in the pool (the caller included).
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}
