//! Which SIMD kernels this CPU can run, detected once at run time.

use std::fmt;

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
        let mut levels = vec![KernelLevel::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                levels.push(KernelLevel::Avx2);
            }
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                levels.push(KernelLevel::Avx512Bw);
                if is_x86_feature_detected!("avx512vnni") && is_x86_feature_detected!("avx512vbmi")
                {
                    levels.push(KernelLevel::Avx512Vnni);
                }
            }
        }
        levels
    }

    /// Whether this CPU can run `self`.
    pub fn is_supported(self) -> bool {
        Self::supported().contains(&self)
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
        [
            KernelLevel::Scalar,
            KernelLevel::Avx2,
            KernelLevel::Avx512Bw,
            KernelLevel::Avx512Vnni,
        ]
        .into_iter()
        .find(|level| level.name() == name)
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
}
