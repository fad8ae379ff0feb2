//! Which SIMD kernels this CPU can run, detected at run time. The level a model runs at is
//! chosen when it is loaded ([`crate::LoadOptions::kernel`]) and passed to every kernel; nothing
//! here is process-wide.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A family of kernels, slowest first. Every level computes the same integer sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelLevel {
    /// Plain Rust, any CPU. The reference twin of every SIMD kernel.
    Scalar,
    /// 256-bit AVX2 + FMA (+ F16C): `vpmaddubsw` integer products.
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
        let avx2 = || {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
        };
        // The AVX-512 levels also run AVX2 kernels (every AVX-512 CPU has AVX2, FMA and F16C).
        #[cfg(target_arch = "x86_64")]
        let avx512bw = || {
            avx2() && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
        };
        match self {
            KernelLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx2 => avx2(),
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

    /// Whether this level's attention kernels have BF16 dot products: the AVX-512 levels on a
    /// CPU with AVX512_BF16 (`vdpbf16ps`: Zen 4 and 5, Sapphire Rapids and later). Only a
    /// quantized model's attention uses them (see `cpu::attention`).
    pub fn has_bf16_dot(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni => {
                self.is_supported() && is_x86_feature_detected!("avx512bf16")
            }
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

    /// Parses a name given by [`KernelLevel::name`] (as `--kernel` or `HEARTH_KERNEL` spell
    /// it). Whether this CPU can run the level is a separate question:
    /// [`KernelLevel::is_supported`].
    pub fn parse(name: &str) -> Result<KernelLevel, UnknownKernelLevel> {
        Self::ALL
            .into_iter()
            .find(|level| level.name() == name)
            .ok_or_else(|| UnknownKernelLevel(name.to_owned()))
    }
}

impl FromStr for KernelLevel {
    type Err = UnknownKernelLevel;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        KernelLevel::parse(name)
    }
}

/// A kernel level name that [`KernelLevel::parse`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("engine: unknown kernel level {0:?}: use scalar, avx2, avx512bw or avx512vnni")]
pub struct UnknownKernelLevel(pub String);

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
            assert_eq!(KernelLevel::parse(level.name()), Ok(level));
            assert_eq!(level.name().parse(), Ok(level));
        }
        let err = KernelLevel::parse("sse9").unwrap_err();
        assert!(err.to_string().contains("\"sse9\""), "{err}");
    }

    #[test]
    fn serde_names_are_the_display_names() {
        for level in KernelLevel::ALL {
            let json = serde_json::to_string(&level).unwrap();
            assert_eq!(json, format!("\"{level}\""));
        }
    }

    #[test]
    fn all_is_in_discriminant_order() {
        for (i, level) in KernelLevel::ALL.iter().enumerate() {
            assert_eq!(*level as usize, i);
        }
    }
}
