//! f16 → f32 conversion of KV-cache rows, 16 values per instruction where the CPU has F16C.
//!
//! The conversion is exact (every f16 is an f32), so the wide copies give the same numbers as
//! the scalar one; only NaN payloads may differ, and the cache never holds NaN from a finite model.

use half::f16;

use super::level::KernelLevel;

/// Writes `src` as f32 into `dst` (same length), with the widest conversion `level` allows:
/// AVX-512F at the AVX-512 levels, F16C at the AVX2 level, plain Rust at the scalar level.
pub fn widen(level: KernelLevel, src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "widen: lengths differ");
    #[cfg(target_arch = "x86_64")]
    match level {
        KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni if is_x86_feature_detected!("avx512f") => {
            // SAFETY: AVX-512F was detected just above.
            return unsafe { wide::widen_avx512(src, dst) };
        }
        // F16C is not part of the AVX2 level's check (every AVX2 CPU has it, but ask anyway).
        KernelLevel::Avx2 | KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni
            if is_x86_feature_detected!("f16c") && is_x86_feature_detected!("avx") =>
        {
            // SAFETY: F16C and AVX were detected just above.
            return unsafe { wide::widen_f16c(src, dst) };
        }
        _ => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = level;
    widen_scalar(src, dst);
}

/// Asks for `src` in the L1 cache ahead of its use (a hint: nothing is read). The KV cache
/// requests the block it will widen next before widening this one, so a long context's
/// attention keeps reading memory while it computes.
pub fn prefetch(src: &[f16]) {
    #[cfg(target_arch = "x86_64")]
    for line in src.chunks(32) {
        // SAFETY: prefetching is a hint, and the address is inside `src`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = src;
}

fn widen_scalar(src: &[f16], dst: &mut [f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use half::f16;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn widen_avx512(src: &[f16], dst: &mut [f32]) {
        let n = src.len() / 16 * 16;
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= both lengths; f16 is 2 bytes, unaligned loads and stores.
            let halves = _mm256_loadu_si256(src.as_ptr().add(i).cast());
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(halves));
        }
        super::widen_scalar(&src[n..], &mut dst[n..]);
    }

    #[target_feature(enable = "avx,f16c")]
    pub unsafe fn widen_f16c(src: &[f16], dst: &mut [f32]) {
        let n = src.len() / 8 * 8;
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= n <= both lengths; unaligned loads and stores.
            let halves = _mm_loadu_si128(src.as_ptr().add(i).cast());
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(halves));
        }
        super::widen_scalar(&src[n..], &mut dst[n..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 bit pattern, at lengths that leave tails of every size.
    #[test]
    fn wide_conversion_matches_the_scalar_one_on_every_half() {
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        for len in [all.len(), all.len() - 1, 15, 7, 0] {
            let src = &all[all.len() - len..];
            let mut slow = vec![0.0; len];
            widen_scalar(src, &mut slow);
            for level in KernelLevel::supported() {
                let mut fast = vec![0.0; len];
                widen(level, src, &mut fast);
                for ((a, b), h) in fast.iter().zip(&slow).zip(src) {
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "{level}, {h:?}: {a} vs {b}"
                    );
                }
            }
        }
    }
}
