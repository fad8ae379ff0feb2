//! `exp` in plain float arithmetic that the compiler vectorizes, for softmax, SiLU and GELU: libm's
//! `expf` is a call per value, and a decoded token of MiniCPM5-2B takes about 260 000 of them
//! for SiLU and 670 per context position for softmax (16 heads, 42 layers); it showed in
//! profiles.
//!
//! Cephes' single-precision method: `exp(x) = 2^n · exp(r)` with `n = round(x / ln 2)` and
//! `|r| <= ln 2 / 2`, `exp(r)` by a degree-7 polynomial (Cephes' minimax coefficients), `2^n`
//! built from its bits. Within 2 units in the last place of libm's result over the normal range;
//! results below `e^-86.6` (about 2.5e-38) are flushed to zero.

use super::level::KernelLevel;
use super::quant::round_to_int;

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// `ln 2` split in two so `x - n ln 2` loses no bits: `C1` has few mantissa bits, so `n * C1` is
/// exact.
const LN2_C1: f32 = 0.693_359_4;
const LN2_C2: f32 = -2.121_944_4e-4;
/// Below this the result would be tiny or subnormal: returned as 0.
const LOWEST: f32 = -86.6;
/// `ln(f32::MAX)`: above this the result overflows to infinity.
const HIGHEST: f32 = 88.722_84;

/// `e^x`, as described in the module documentation. NaN gives NaN, `-inf` gives 0, `+inf`
/// gives `+inf`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let clamped = x.clamp(LOWEST, HIGHEST);
    // n = round(x / ln 2), by the same vectorizable rounding as activation quantization.
    let n = round_to_int(clamped * LOG2_E);
    let r = clamped - n as f32 * LN2_C1 - n as f32 * LN2_C2;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e_r = p * (r * r) + r + 1.0;
    // 2^n as 2^(n - 1) · 2, so n = 128 (just below HIGHEST) still fits the exponent field;
    // n >= -125 here, so 2^(n - 1) is a normal float.
    let half_scale = f32::from_bits(((n + 126) as u32) << 23);
    let e = e_r * half_scale * 2.0;
    if x < LOWEST {
        0.0
    } else if x > HIGHEST {
        f32::INFINITY
    } else {
        e
    }
}

/// `gate[i] = silu(gate[i]) · up[i]`, SiLU being `x / (1 + e^-x)`: the MLP's activation.
/// Compiled for the widest vectors `level` allows (the portable loop with AVX-512F or AVX2
/// enabled: a prefill's 512 tokens of MiniCPM5-2B take 42 x 512 x 6144 of them, and at the
/// baseline's 4-wide SSE they were about 3% of its time). The same operations in the same order
/// at every level (Rust never fuses a multiply and an add on its own), so the same bits.
pub(crate) fn silu_mul(level: KernelLevel, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "SiLU: gate and up differ in length");
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported"
    );
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is supported (checked above), and both AVX-512 levels have AVX-512F.
        KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni => unsafe { silu_mul_avx512(gate, up) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is supported (checked above), and the AVX2 level has AVX2.
        KernelLevel::Avx2 => unsafe { silu_mul_avx2(gate, up) },
        _ => silu_mul_portable(gate, up),
    }
}

/// `gate[i] = gelu_tanh(gate[i]) · up[i]`, GELU's tanh approximation (transformers'
/// `gelu_pytorch_tanh`, Gemma's MLP activation): `0.5 x (1 + tanh(u))` with
/// `u = √(2/π) (x + 0.044715 x³)`, computed as `x / (1 + e^(-2u))` (the same value: `0.5 (1 +
/// tanh u)` is the logistic function of `2u`). Vectorized and bit-identical across levels as
/// [`silu_mul`] is.
pub(crate) fn gelu_tanh_mul(level: KernelLevel, gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "GELU: gate and up differ in length");
    assert!(
        level.is_supported(),
        "kernel level {level} is not supported"
    );
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is supported (checked above), and both AVX-512 levels have AVX-512F.
        KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni => unsafe {
            gelu_tanh_mul_avx512(gate, up)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is supported (checked above), and the AVX2 level has AVX2.
        KernelLevel::Avx2 => unsafe { gelu_tanh_mul_avx2(gate, up) },
        _ => gelu_tanh_mul_portable(gate, up),
    }
}

/// `2 √(2/π)`: `2u = x (TWO_SQRT_2_OVER_PI + TWO_SQRT_2_OVER_PI · 0.044715 x²)`.
const TWO_SQRT_2_OVER_PI: f32 = 1.595_769_2;
const GELU_CUBIC: f32 = 0.044_715;

#[inline(always)]
fn gelu_tanh_mul_portable(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        let x = *g;
        let two_u = TWO_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
        *g = x / (1.0 + exp(-two_u)) * u;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_tanh_mul_avx512(gate: &mut [f32], up: &[f32]) {
    gelu_tanh_mul_portable(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gelu_tanh_mul_avx2(gate: &mut [f32], up: &[f32]) {
    gelu_tanh_mul_portable(gate, up)
}

#[inline(always)]
fn silu_mul_portable(gate: &mut [f32], up: &[f32]) {
    for (g, u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + exp(-*g)) * u;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn silu_mul_avx512(gate: &mut [f32], up: &[f32]) {
    silu_mul_portable(gate, up)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn silu_mul_avx2(gate: &mut [f32], up: &[f32]) {
    silu_mul_portable(gate, up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_gives_the_scalar_levels_bits_at_every_level() {
        // Past both vector widths with a tail, across exp's range and its edges.
        let mut gate: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 40.0).collect();
        gate.extend([
            0.0,
            -0.0,
            1e-40,
            -1e-40,
            88.0,
            -88.0,
            100.0,
            -100.0,
            f32::MAX,
            f32::MIN,
        ]);
        let up: Vec<f32> = (0..gate.len()).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut want = gate.clone();
        silu_mul(KernelLevel::Scalar, &mut want, &up);
        assert!(want[..1000].iter().all(|v| v.is_finite()));
        for level in KernelLevel::supported() {
            let mut got = gate.clone();
            silu_mul(level, &mut got, &up);
            let (got, want): (Vec<u32>, Vec<u32>) = (
                got.iter().map(|v| v.to_bits()).collect(),
                want.iter().map(|v| v.to_bits()).collect(),
            );
            assert_eq!(got, want, "{level}");
        }
    }

    #[test]
    fn gelu_gives_the_scalar_levels_bits_at_every_level() {
        let mut gate: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 12.0).collect();
        gate.extend([
            0.0,
            -0.0,
            1e-40,
            -1e-40,
            30.0,
            -30.0,
            1e20,
            -1e20,
            f32::MAX,
            f32::MIN,
        ]);
        let up: Vec<f32> = (0..gate.len()).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut want = gate.clone();
        gelu_tanh_mul(KernelLevel::Scalar, &mut want, &up);
        assert!(want.iter().all(|v| v.is_finite()), "{want:?}");
        for level in KernelLevel::supported() {
            let mut got = gate.clone();
            gelu_tanh_mul(level, &mut got, &up);
            let (got, want): (Vec<u32>, Vec<u32>) = (
                got.iter().map(|v| v.to_bits()).collect(),
                want.iter().map(|v| v.to_bits()).collect(),
            );
            assert_eq!(got, want, "{level}");
        }
    }

    #[test]
    fn gelu_matches_the_tanh_formula() {
        let mut worst = 0.0f64;
        for i in -4000..4000 {
            let x = i as f32 * 0.003;
            let mut g = [x];
            gelu_tanh_mul(KernelLevel::Scalar, &mut g, &[1.0]);
            let x64 = f64::from(x);
            let inner = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3));
            let want = 0.5 * x64 * (1.0 + inner.tanh());
            worst = worst.max((f64::from(g[0]) - want).abs() / want.abs().max(1e-3));
        }
        // A few f32 roundings of the cubic and the quotient (1.5e-6 measured).
        assert!(worst < 4e-6, "worst relative error {worst:e}");
    }

    #[test]
    fn matches_libm_within_two_ulps_over_the_normal_range() {
        let mut worst = 0.0f64;
        let mut x = LOWEST;
        while x <= HIGHEST - 0.01 {
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            let err = ((got - want) / want).abs();
            worst = worst.max(err);
            x += 0.000_37;
        }
        // One f32 ulp is 2^-23 relative at most (1.19e-7).
        assert!(
            worst < 2.0 * f32::EPSILON as f64,
            "worst relative error {worst:e}"
        );
    }

    #[test]
    fn edges_are_exact() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-1000.0), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(88.7).is_finite());
    }
}
