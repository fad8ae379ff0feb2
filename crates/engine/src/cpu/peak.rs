//! Measures how many multiply-adds per second this machine's cores can do: the ceiling of an
//! arithmetic-bound pass (a long prefill), as [`super::bandwidth`] measures the ceiling of a
//! memory-bound one (a decode step).
//!
//! Two kinds, the ones the kernels spend their time in: f32 fused multiply-adds (attention) and
//! int8 dot products (the matmuls, on quantized activations). Each thread runs independent
//! chains of one instruction on registers, enough chains to hide its latency, so the figure is
//! the instruction's throughput with nothing else in the way: no loads, no shuffles. Chunks of
//! work are claimed from the pool like the matmul chunks; the figure is the median over
//! repetitions.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use super::bandwidth::median;
use super::pool::ThreadPool;

/// Loop iterations of one chunk; each thread claims about [`CHUNKS_PER_THREAD`] chunks. On a
/// Zen 4 core this is about 2 ms of f32 multiply-adds per chunk.
const ITERATIONS: usize = 1 << 18;
const CHUNKS_PER_THREAD: usize = 8;

/// One arithmetic kind this CPU can run, measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeakRate {
    /// The instruction measured, e.g. `"vpdpbusd zmm (AVX-512 VNNI)"`.
    pub instruction: &'static str,
    /// Median over the repetitions, in 10^9 multiply-adds per second (all threads).
    pub gmacs: f64,
    /// Every repetition's figure, in measurement order.
    pub samples_gmacs: Vec<f64>,
}

/// The result of [`measure_peak`]; a kind is None where this CPU has no SIMD instruction for it
/// (a scalar loop would measure the compiler, not the machine).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArithmeticPeak {
    /// f32 multiply-adds: `vfmadd231ps` on 512-bit vectors with AVX-512F, else 256-bit (FMA).
    pub f32: Option<PeakRate>,
    /// int8 products summed into wider integers: `vpdpbusd` with AVX-512 VNNI, else AVX2
    /// `vpmaddubsw` (each followed by the `vpaddw` that a kernel sums its pairs with).
    pub int8: Option<PeakRate>,
    /// BF16 pairs summed into f32: `vdpbf16ps` with AVX-512 BF16 (what attention over a
    /// quantized model's cache may use, see [`bf16_dot_pays`]).
    pub bf16: Option<PeakRate>,
    /// Threads that computed.
    pub threads: usize,
}

impl ArithmeticPeak {
    /// This measurement and a `later` one of the same pool as one: every sample, in order, and
    /// the median of all (as `hearth bench` does with its probes before and after its runs).
    pub fn merge(self, later: ArithmeticPeak) -> ArithmeticPeak {
        let join = |a: Option<PeakRate>, b: Option<PeakRate>| match (a, b) {
            (Some(mut a), Some(b)) => {
                a.samples_gmacs.extend(b.samples_gmacs);
                a.gmacs = median(&a.samples_gmacs);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        ArithmeticPeak {
            f32: join(self.f32, later.f32),
            int8: join(self.int8, later.int8),
            bf16: join(self.bf16, later.bf16),
            threads: self.threads,
        }
    }
}

/// Measures both kinds `repetitions` times with every thread of `pool` (after one untimed pass
/// that wakes the cores up).
pub fn measure_peak(pool: &ThreadPool, repetitions: usize) -> ArithmeticPeak {
    let kinds = kernels();
    let measure = |kernel: Option<Kernel>| {
        kernel.map(|kernel| {
            let samples_gmacs = measure_kernel(pool, &kernel, repetitions);
            PeakRate {
                instruction: kernel.instruction,
                gmacs: median(&samples_gmacs),
                samples_gmacs,
            }
        })
    };
    ArithmeticPeak {
        f32: measure(kinds.f32),
        int8: measure(kinds.int8),
        bf16: measure(kinds.bf16),
        threads: pool.threads(),
    }
}

/// Whether BF16 dot products multiply at least 1.25 times as fast as f32 multiply-adds on this
/// CPU (products per second, one thread), measured once per process: the loops alternate five
/// times, about 0.1 ms each, and the fastest of each counts. It decides whether attention over a
/// quantized model's cache uses them by default ([`super::CpuContext`]). `vdpbf16ps` does twice
/// the products of `vfmadd231ps` per instruction, but not every core issues it as often: on the
/// Intel Xeon (Sapphire Rapids class) this was built on, a quarter as often, so half the
/// products per second (bench/README.md). The two rates differ by a factor of two either way,
/// so the answer does not flip with noise.
pub fn bf16_dot_pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| {
        let kinds = kernels();
        let (Some(f32), Some(bf16)) = (kinds.f32, kinds.bf16) else {
            return false;
        };
        const ITERATIONS: usize = 1 << 12;
        let seconds_per_mac = |kernel: &Kernel| {
            let start = Instant::now();
            std::hint::black_box((kernel.run)(ITERATIONS));
            start.elapsed().as_secs_f64() / (ITERATIONS * kernel.macs_per_iteration) as f64
        };
        let (mut f32_best, mut bf16_best) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            f32_best = f32_best.min(seconds_per_mac(&f32));
            bf16_best = bf16_best.min(seconds_per_mac(&bf16));
        }
        f32_best >= 1.25 * bf16_best
    })
}

/// One measuring loop: `run(iterations)` does `macs_per_iteration` multiply-adds per iteration
/// and returns a value that depends on all of them (so none can be optimized away).
#[derive(Clone, Copy)]
struct Kernel {
    instruction: &'static str,
    macs_per_iteration: usize,
    run: fn(usize) -> u32,
}

struct Kernels {
    f32: Option<Kernel>,
    int8: Option<Kernel>,
    bf16: Option<Kernel>,
}

/// The loops this CPU can run, best first.
fn kernels() -> Kernels {
    #[cfg(target_arch = "x86_64")]
    {
        let f32 = if is_x86_feature_detected!("avx512f") {
            Some(Kernel {
                instruction: "vfmadd231ps zmm (AVX-512F)",
                macs_per_iteration: x86::CHAINS * 16,
                // SAFETY: AVX-512F was detected just above.
                run: |n| unsafe { x86::fma_avx512(n) },
            })
        } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            Some(Kernel {
                instruction: "vfmadd231ps ymm (FMA)",
                macs_per_iteration: x86::CHAINS * 8,
                // SAFETY: AVX2 and FMA were detected just above.
                run: |n| unsafe { x86::fma_avx2(n) },
            })
        } else {
            None
        };
        let int8 = if is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512f")
        {
            Some(Kernel {
                instruction: "vpdpbusd zmm (AVX-512 VNNI)",
                macs_per_iteration: x86::CHAINS * 64,
                // SAFETY: AVX-512F and VNNI were detected just above.
                run: |n| unsafe { x86::dpbusd_avx512(n) },
            })
        } else if is_x86_feature_detected!("avx2") {
            Some(Kernel {
                instruction: "vpmaddubsw + vpaddw ymm (AVX2)",
                macs_per_iteration: x86::CHAINS * 32,
                // SAFETY: AVX2 was detected just above.
                run: |n| unsafe { x86::maddubs_avx2(n) },
            })
        } else {
            None
        };
        let bf16 = (is_x86_feature_detected!("avx512bf16") && is_x86_feature_detected!("avx512f"))
            .then_some(Kernel {
                instruction: "vdpbf16ps zmm (AVX-512 BF16)",
                macs_per_iteration: x86::CHAINS * 32,
                // SAFETY: AVX-512F and BF16 were detected just above.
                run: |n| unsafe { x86::dpbf16_avx512(n) },
            });
        Kernels { f32, int8, bf16 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    Kernels {
        f32: None,
        int8: None,
        bf16: None,
    }
}

/// `repetitions` timed passes of `kernel` over the pool, in 10^9 multiply-adds per second.
fn measure_kernel(pool: &ThreadPool, kernel: &Kernel, repetitions: usize) -> Vec<f64> {
    let chunks = pool.threads() * CHUNKS_PER_THREAD;
    let sink = AtomicU32::new(0);
    let pass = || {
        pool.run(chunks, &|_| {
            sink.fetch_add((kernel.run)(ITERATIONS), Ordering::Relaxed);
        })
    };
    pass();
    let macs = (chunks * ITERATIONS * kernel.macs_per_iteration) as f64;
    let samples = (0..repetitions.max(1))
        .map(|_| {
            let start = Instant::now();
            pass();
            macs / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    std::hint::black_box(sink.load(Ordering::Relaxed));
    samples
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The loops are written in `asm!`: LLVM folds intrinsics on constant operands (it turned
    //! the multiply-add chains into a constant), and an instruction's throughput is what is
    //! measured here, so each loop is exactly its 12 instructions (24 for AVX2's pairs).

    use std::arch::asm;
    use std::arch::x86_64::*;

    /// Independent accumulators per loop: more than latency x throughput of any of these
    /// instructions on current cores (4-5 cycles x 2 per cycle), and few enough to stay in the
    /// 16 registers AVX2 has, beside the two operands and two temporaries.
    pub const CHAINS: usize = 12;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma_avx512(iterations: usize) -> u32 {
        // acc += m * b: small steps, never overflowing or denormal.
        let (m, b) = (_mm512_set1_ps(1e-3), _mm512_set1_ps(1e-3));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            // SAFETY: register-only arithmetic on AVX-512F, which the caller checked.
            asm!(
                "vfmadd231ps {a0}, {m}, {b}",
                "vfmadd231ps {a1}, {m}, {b}",
                "vfmadd231ps {a2}, {m}, {b}",
                "vfmadd231ps {a3}, {m}, {b}",
                "vfmadd231ps {a4}, {m}, {b}",
                "vfmadd231ps {a5}, {m}, {b}",
                "vfmadd231ps {a6}, {m}, {b}",
                "vfmadd231ps {a7}, {m}, {b}",
                "vfmadd231ps {a8}, {m}, {b}",
                "vfmadd231ps {a9}, {m}, {b}",
                "vfmadd231ps {a10}, {m}, {b}",
                "vfmadd231ps {a11}, {m}, {b}",
                a0 = inout(zmm_reg) acc[0],
                a1 = inout(zmm_reg) acc[1],
                a2 = inout(zmm_reg) acc[2],
                a3 = inout(zmm_reg) acc[3],
                a4 = inout(zmm_reg) acc[4],
                a5 = inout(zmm_reg) acc[5],
                a6 = inout(zmm_reg) acc[6],
                a7 = inout(zmm_reg) acc[7],
                a8 = inout(zmm_reg) acc[8],
                a9 = inout(zmm_reg) acc[9],
                a10 = inout(zmm_reg) acc[10],
                a11 = inout(zmm_reg) acc[11],
                m = in(zmm_reg) m,
                b = in(zmm_reg) b,
                options(nomem, nostack, preserves_flags),
            );
        }
        let total = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, a| _mm512_add_ps(s, *a));
        _mm512_reduce_add_ps(total).to_bits()
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn dpbf16_avx512(iterations: usize) -> u32 {
        // acc += m · b over pairs of BF16 0.001 (0x3a83): small steps, as for f32.
        let (m, b) = (
            _mm512_set1_epi32(0x3a83_3a83),
            _mm512_set1_epi32(0x3a83_3a83),
        );
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            // SAFETY: register-only arithmetic on AVX-512 BF16, which the caller checked.
            asm!(
                "vdpbf16ps {a0}, {m}, {b}",
                "vdpbf16ps {a1}, {m}, {b}",
                "vdpbf16ps {a2}, {m}, {b}",
                "vdpbf16ps {a3}, {m}, {b}",
                "vdpbf16ps {a4}, {m}, {b}",
                "vdpbf16ps {a5}, {m}, {b}",
                "vdpbf16ps {a6}, {m}, {b}",
                "vdpbf16ps {a7}, {m}, {b}",
                "vdpbf16ps {a8}, {m}, {b}",
                "vdpbf16ps {a9}, {m}, {b}",
                "vdpbf16ps {a10}, {m}, {b}",
                "vdpbf16ps {a11}, {m}, {b}",
                a0 = inout(zmm_reg) acc[0],
                a1 = inout(zmm_reg) acc[1],
                a2 = inout(zmm_reg) acc[2],
                a3 = inout(zmm_reg) acc[3],
                a4 = inout(zmm_reg) acc[4],
                a5 = inout(zmm_reg) acc[5],
                a6 = inout(zmm_reg) acc[6],
                a7 = inout(zmm_reg) acc[7],
                a8 = inout(zmm_reg) acc[8],
                a9 = inout(zmm_reg) acc[9],
                a10 = inout(zmm_reg) acc[10],
                a11 = inout(zmm_reg) acc[11],
                m = in(zmm_reg) m,
                b = in(zmm_reg) b,
                options(nomem, nostack, preserves_flags),
            );
        }
        let total = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, a| _mm512_add_ps(s, *a));
        _mm512_reduce_add_ps(total).to_bits()
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_avx2(iterations: usize) -> u32 {
        let (m, b) = (_mm256_set1_ps(1e-3), _mm256_set1_ps(1e-3));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iterations {
            // SAFETY: register-only arithmetic on AVX2 and FMA, which the caller checked.
            asm!(
                "vfmadd231ps {a0}, {m}, {b}",
                "vfmadd231ps {a1}, {m}, {b}",
                "vfmadd231ps {a2}, {m}, {b}",
                "vfmadd231ps {a3}, {m}, {b}",
                "vfmadd231ps {a4}, {m}, {b}",
                "vfmadd231ps {a5}, {m}, {b}",
                "vfmadd231ps {a6}, {m}, {b}",
                "vfmadd231ps {a7}, {m}, {b}",
                "vfmadd231ps {a8}, {m}, {b}",
                "vfmadd231ps {a9}, {m}, {b}",
                "vfmadd231ps {a10}, {m}, {b}",
                "vfmadd231ps {a11}, {m}, {b}",
                a0 = inout(ymm_reg) acc[0],
                a1 = inout(ymm_reg) acc[1],
                a2 = inout(ymm_reg) acc[2],
                a3 = inout(ymm_reg) acc[3],
                a4 = inout(ymm_reg) acc[4],
                a5 = inout(ymm_reg) acc[5],
                a6 = inout(ymm_reg) acc[6],
                a7 = inout(ymm_reg) acc[7],
                a8 = inout(ymm_reg) acc[8],
                a9 = inout(ymm_reg) acc[9],
                a10 = inout(ymm_reg) acc[10],
                a11 = inout(ymm_reg) acc[11],
                m = in(ymm_reg) m,
                b = in(ymm_reg) b,
                options(nomem, nostack, preserves_flags),
            );
        }
        let total = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, a| _mm256_add_ps(s, *a));
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), total);
        lanes.iter().sum::<f32>().to_bits()
    }

    #[target_feature(enable = "avx512f,avx512vnni")]
    pub unsafe fn dpbusd_avx512(iterations: usize) -> u32 {
        // The sums wrap in i32, which changes nothing about the work done.
        let (u, s) = (_mm512_set1_epi8(0x5A), _mm512_set1_epi8(-0x33));
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        for _ in 0..iterations {
            // SAFETY: register-only arithmetic on AVX-512 VNNI, which the caller checked.
            asm!(
                "vpdpbusd {a0}, {u}, {s}",
                "vpdpbusd {a1}, {u}, {s}",
                "vpdpbusd {a2}, {u}, {s}",
                "vpdpbusd {a3}, {u}, {s}",
                "vpdpbusd {a4}, {u}, {s}",
                "vpdpbusd {a5}, {u}, {s}",
                "vpdpbusd {a6}, {u}, {s}",
                "vpdpbusd {a7}, {u}, {s}",
                "vpdpbusd {a8}, {u}, {s}",
                "vpdpbusd {a9}, {u}, {s}",
                "vpdpbusd {a10}, {u}, {s}",
                "vpdpbusd {a11}, {u}, {s}",
                a0 = inout(zmm_reg) acc[0],
                a1 = inout(zmm_reg) acc[1],
                a2 = inout(zmm_reg) acc[2],
                a3 = inout(zmm_reg) acc[3],
                a4 = inout(zmm_reg) acc[4],
                a5 = inout(zmm_reg) acc[5],
                a6 = inout(zmm_reg) acc[6],
                a7 = inout(zmm_reg) acc[7],
                a8 = inout(zmm_reg) acc[8],
                a9 = inout(zmm_reg) acc[9],
                a10 = inout(zmm_reg) acc[10],
                a11 = inout(zmm_reg) acc[11],
                u = in(zmm_reg) u,
                s = in(zmm_reg) s,
                options(nomem, nostack, preserves_flags),
            );
        }
        let total = acc
            .iter()
            .fold(_mm512_setzero_si512(), |t, a| _mm512_add_epi32(t, *a));
        _mm512_reduce_add_epi32(total) as u32
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn maddubs_avx2(iterations: usize) -> u32 {
        let (u, s) = (_mm256_set1_epi8(0x5A), _mm256_set1_epi8(-0x33));
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        for _ in 0..iterations {
            // SAFETY: register-only arithmetic on AVX2, which the caller checked.
            asm!(
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a0}, {a0}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a1}, {a1}, {t1}",
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a2}, {a2}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a3}, {a3}, {t1}",
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a4}, {a4}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a5}, {a5}, {t1}",
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a6}, {a6}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a7}, {a7}, {t1}",
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a8}, {a8}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a9}, {a9}, {t1}",
                "vpmaddubsw {t0}, {u}, {s}",
                "vpaddw {a10}, {a10}, {t0}",
                "vpmaddubsw {t1}, {u}, {s}",
                "vpaddw {a11}, {a11}, {t1}",
                a0 = inout(ymm_reg) acc[0],
                a1 = inout(ymm_reg) acc[1],
                a2 = inout(ymm_reg) acc[2],
                a3 = inout(ymm_reg) acc[3],
                a4 = inout(ymm_reg) acc[4],
                a5 = inout(ymm_reg) acc[5],
                a6 = inout(ymm_reg) acc[6],
                a7 = inout(ymm_reg) acc[7],
                a8 = inout(ymm_reg) acc[8],
                a9 = inout(ymm_reg) acc[9],
                a10 = inout(ymm_reg) acc[10],
                a11 = inout(ymm_reg) acc[11],
                u = in(ymm_reg) u,
                s = in(ymm_reg) s,
                t0 = out(ymm_reg) _,
                t1 = out(ymm_reg) _,
                options(nomem, nostack, preserves_flags),
            );
        }
        let total = acc
            .iter()
            .fold(_mm256_setzero_si256(), |t, a| _mm256_add_epi16(t, *a));
        let mut lanes = [0u32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), total);
        lanes.iter().fold(0u32, |t, l| t.wrapping_add(*l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_reports_a_positive_rate_for_each_kind_the_cpu_has() {
        let pool = ThreadPool::fixed(2);
        let peak = measure_peak(&pool, 2);
        assert_eq!(peak.threads, 2);
        for rate in [&peak.f32, &peak.int8, &peak.bf16].into_iter().flatten() {
            assert_eq!(rate.samples_gmacs.len(), 2, "{}", rate.instruction);
            assert!(
                rate.gmacs > 0.0 && rate.gmacs.is_finite(),
                "{}",
                rate.instruction
            );
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            assert!(
                peak.f32.is_some() && peak.int8.is_some(),
                "AVX2 has both kinds"
            );
        }
    }

    #[test]
    fn merge_keeps_every_sample_and_takes_the_median_of_all() {
        let rate = |samples: &[f64]| PeakRate {
            instruction: "test",
            gmacs: median(samples),
            samples_gmacs: samples.to_vec(),
        };
        let first = ArithmeticPeak {
            f32: Some(rate(&[1.0, 2.0, 9.0])),
            int8: None,
            bf16: None,
            threads: 2,
        };
        let later = ArithmeticPeak {
            f32: Some(rate(&[3.0, 4.0])),
            int8: Some(rate(&[5.0])),
            bf16: None,
            threads: 2,
        };
        let merged = first.merge(later);
        let f32 = merged.f32.unwrap();
        assert_eq!(f32.samples_gmacs, [1.0, 2.0, 9.0, 3.0, 4.0]);
        assert_eq!(f32.gmacs, 3.0);
        assert_eq!(
            merged.int8.unwrap().gmacs,
            5.0,
            "a kind measured once stays"
        );
    }

    /// The loops compute what their arithmetic says (so the work cannot have been dropped).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn loops_compute_what_they_multiply() {
        // Each vpmaddubsw lane: 0x5A * -0x33 twice = -9180; 12 chains, 3 iterations, 16 lanes.
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            let got = unsafe { x86::maddubs_avx2(3) };
            let lane = (-9180i16).wrapping_mul(36); // 12 chains x 3 iterations, wrapping in i16
            let pair = (lane as u16 as u32) | ((lane as u16 as u32) << 16);
            assert_eq!(got, pair.wrapping_mul(8));
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            let got = f32::from_bits(unsafe { x86::fma_avx512(3) });
            // 16 lanes x 12 chains, each 1 + 3 x 1e-3 x 1e-3.
            assert!((got - 192.0 * (1.0 + 3e-6)).abs() < 1e-3, "{got}");
        }
        if is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F and VNNI were detected just above.
            let got = unsafe { x86::dpbusd_avx512(3) };
            // 4 products of 90 * -51 per lane, 16 lanes, 12 chains, 3 iterations.
            assert_eq!(got as i32, 4 * 90 * -51 * 16 * 12 * 3);
        }
        if is_x86_feature_detected!("avx512bf16") && is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F and BF16 were detected just above.
            let got = f32::from_bits(unsafe { x86::dpbf16_avx512(3) });
            // 16 lanes x 12 chains, each 1 + 3 x 2 products of BF16 0.001 (0.00100040...).
            let step = f32::from_bits(0x3a83_0000).powi(2);
            assert!((got - 192.0 * (1.0 + 6.0 * step)).abs() < 1e-3, "{got}");
        }
    }
}
