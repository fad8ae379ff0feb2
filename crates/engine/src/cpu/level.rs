//! Which SIMD kernels this CPU can run, detected once at run time.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// The level the matmuls use: 0 = not chosen yet, else `level as u8 + 1`.
static SELECTED: AtomicU8 = AtomicU8::new(0);

/// A family of kernels, fastest first. Every level computes the same integer sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelLevel {
    /// Plain Rust, any CPU. The reference twin of every SIMD kernel.
    Scalar,
    /// 256-bit AVX2 + FMA: `vpmaddubsw` integer products.
    Avx2,
    /// 512-bit AVX-512F/BW: `vpmaddubsw` on 64-byte vectors.
    Avx512Bw,
    /// 512-bit AVX-512 VNNI + VBMI (Zen 4/5, Ice Lake and later): `vpermt2b` turns the tile's
    /// row-interleaved nibbles into 16 rows x 4 columns and `vpdpbusd` sums them.
    Avx512Vnni,
}

impl KernelLevel {
    /// The best level this CPU supports.
    pub fn detect() -> KernelLevel {
        Self::supported()
            .into_iter()
            .max()
            .unwrap_or(KernelLevel::Scalar)
    }

    /// Every level this CPU can run (always includes [`KernelLevel::Scalar`]).
    pub fn supported() -> Vec<KernelLevel> {
        Self::ALL
            .into_iter()
            .filter(|level| level.is_supported())
            .collect()
    }

    /// The level the matmuls run at: chosen once, on first use, as the `HEARTH_KERNEL`
    /// environment variable names it (when this CPU supports it) or else [`KernelLevel::detect`].
    pub fn selected() -> KernelLevel {
        match SELECTED.load(Ordering::Relaxed) {
            0 => {
                let level = std::env::var("HEARTH_KERNEL")
                    .ok()
                    .and_then(|name| KernelLevel::from_name(&name))
                    .filter(|level| level.is_supported())
                    .unwrap_or_else(KernelLevel::detect);
                SELECTED.store(level as u8 + 1, Ordering::Relaxed);
                level
            }
            n => Self::ALL[usize::from(n - 1)],
        }
    }

    /// Makes the matmuls run at `self` from now on (for benchmarks and comparisons).
    /// Returns false, changing nothing, when this CPU cannot run it.
    pub fn select(self) -> bool {
        let ok = self.is_supported();
        if ok {
            SELECTED.store(self as u8 + 1, Ordering::Relaxed);
        }
        ok
    }

    /// Every level, slowest first (the order of the discriminants).
    pub const ALL: [KernelLevel; 4] = [
        KernelLevel::Scalar,
        KernelLevel::Avx2,
        KernelLevel::Avx512Bw,
        KernelLevel::Avx512Vnni,
    ];

    /// Whether this CPU can run `self` (cheap: the kernels assert it on every call).
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        let avx512bw =
            || is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw");
        match self {
            KernelLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx2 => {
                is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx512Bw => avx512bw(),
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx512Vnni => {
                avx512bw()
                    && is_x86_feature_detected!("avx512vnni")
                    && is_x86_feature_detected!("avx512vbmi")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Short lowercase name, as shown by `hearth bench` and the model info.
    pub fn name(self) -> &'static str {
        match self {
            KernelLevel::Scalar => "scalar",
            KernelLevel::Avx2 => "avx2",
            KernelLevel::Avx512Bw => "avx512bw",
            KernelLevel::Avx512Vnni => "avx512vnni",
        }
    }

    /// Parses a name given by [`KernelLevel::name`].
    pub fn from_name(name: &str) -> Option<KernelLevel> {
        Self::ALL.into_iter().find(|level| level.name() == name)
    }
}

impl fmt::Display for KernelLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_is_always_supported_and_detect_picks_the_best() {
        let levels = KernelLevel::supported();
        assert!(levels.contains(&KernelLevel::Scalar));
        assert_eq!(Some(&KernelLevel::detect()), levels.iter().max());
    }

    #[test]
    fn names_round_trip() {
        for level in KernelLevel::supported() {
            assert_eq!(KernelLevel::from_name(level.name()), Some(level));
        }
        assert_eq!(KernelLevel::from_name("sse9"), None);
    }

    #[test]
    fn all_is_in_discriminant_order() {
        for (i, level) in KernelLevel::ALL.iter().enumerate() {
            assert_eq!(*level as usize, i);
        }
    }
}
