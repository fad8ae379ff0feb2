//! The CPU backend's hot loops: Q4_1 tile kernels at several SIMD levels, activation
//! quantization, grouped-query attention (with a vectorizable `exp`, reading the f16 cache as
//! it is), a persistent thread pool (fewer of its threads take part while other programs keep
//! cores busy), a memory read-bandwidth probe and an arithmetic peak probe. A loaded model owns
//! a [`CpuContext`] (its pool and kernel level) and passes it to every kernel.
//!
//! Decoding reads every weight once per token, so the kernels aim at the memory-bandwidth limit:
//! each activation is quantized once per matmul to int8 blocks of 32 and the products with the
//! 4-bit weights are summed as integers (`vpdpbusd` with AVX-512 VNNI, `vpmaddubsw` with AVX2 /
//! AVX-512BW, plain Rust in the scalar twin). Every level computes exactly the same integer group
//! sums; only the float accumulation order differs.
//!
//! The AVX-512 intrinsics are stable since Rust 1.89, so these modules need 1.89.

#[clippy::msrv = "1.89"]
pub(crate) mod attention;
#[clippy::msrv = "1.89"]
pub mod bandwidth;
pub(crate) mod contention;
pub mod context;
pub(crate) mod exp;
pub(crate) mod gguf;
#[clippy::msrv = "1.89"]
pub mod level;
#[clippy::msrv = "1.89"]
pub mod peak;
#[clippy::msrv = "1.89"]
pub mod pool;
#[clippy::msrv = "1.89"]
pub(crate) mod q4_1;
#[clippy::msrv = "1.89"]
pub(crate) mod q8;
#[clippy::msrv = "1.89"]
pub(crate) mod quant;
#[cfg(test)]
mod test_data;

pub use context::CpuContext;
pub use level::{KernelLevel, UnknownKernelLevel};
pub use pool::ThreadPool;
pub use quant::BATCH;
