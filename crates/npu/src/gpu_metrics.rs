//! The amdgpu `gpu_metrics` file, format 3.0 (APUs with an SMU 14 power manager: Strix class).
//!
//! `/sys/class/drm/cardN/device/gpu_metrics` holds the kernel's `struct gpu_metrics_v3_0`, little
//! endian, natural C alignment. Its header says how many bytes follow (`structure_size`) and which
//! layout it is (`format_revision`.`content_revision`). Two sizes of 3.0 exist in the wild:
//!
//! - 264 bytes (current kernels): IPU read/write bandwidth at 98/100, `average_sys_power` after the
//!   per-core powers, so `average_ipuclk_frequency` sits at 180.
//! - 256 bytes (the first SMU 14 kernels): neither of those, `average_ipuclk_frequency` at 178.
//!
//! Fields before byte 136 (activity and power) are the same in both, so any other size of at
//! least 136 bytes is read for those alone. A u16 of 0xFFFF or u32 of 0xFFFFFFFF means "not
//! available" (the SMU firmware does not fill that field).

use serde::Serialize;

/// Header byte 2 for the layout this module reads.
pub const FORMAT_REVISION: u8 = 3;
/// Header byte 3 for the layout this module reads.
pub const CONTENT_REVISION: u8 = 0;
/// `structure_size` of the current layout.
pub const SIZE_CURRENT: usize = 264;
/// `structure_size` of the first SMU 14 layout.
pub const SIZE_EARLY: usize = 256;
/// Bytes needed for the fields shared by every 3.0 layout.
pub const SIZE_COMMON: usize = 136;

/// Byte offsets of the fields Hearth reads (current layout).
pub mod offset {
    /// u16 % GFX busy.
    pub const AVERAGE_GFX_ACTIVITY: usize = 42;
    /// u16 % busy per NPU column, 8 of them.
    pub const AVERAGE_IPU_ACTIVITY: usize = 46;
    /// u16 MB/s NPU reads (264-byte layout only).
    pub const AVERAGE_IPU_READS: usize = 98;
    /// u16 MB/s NPU writes (264-byte layout only).
    pub const AVERAGE_IPU_WRITES: usize = 100;
    /// u32 mW package power used for PPT/STAPM.
    pub const AVERAGE_SOCKET_POWER: usize = 112;
    /// u16 mW NPU power.
    pub const AVERAGE_IPU_POWER: usize = 116;
    /// u32 mW APU power.
    pub const AVERAGE_APU_POWER: usize = 120;
    /// u32 mW GFX power.
    pub const AVERAGE_GFX_POWER: usize = 124;
    /// u32 mW all CPU cores.
    pub const AVERAGE_ALL_CORE_POWER: usize = 132;
    /// u16 MHz NPU clock in the 264-byte layout.
    pub const AVERAGE_IPUCLK_FREQUENCY: usize = 180;
    /// u16 MHz NPU clock in the 256-byte layout.
    pub const AVERAGE_IPUCLK_FREQUENCY_EARLY: usize = 178;
}

/// Number of NPU columns `average_ipu_activity` has room for.
pub const IPU_COLUMNS: usize = 8;

/// The fields of one `gpu_metrics` v3.0 reading that Hearth uses; `None` = not available.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuMetrics {
    /// `structure_size` from the header.
    pub structure_size: usize,
    /// iGPU busy, %.
    pub gfx_activity_percent: Option<u16>,
    /// NPU busy per column, %.
    pub ipu_activity_percent: [Option<u16>; IPU_COLUMNS],
    /// NPU DRAM reads, MB/s.
    pub ipu_reads_mb_s: Option<u16>,
    /// NPU DRAM writes, MB/s.
    pub ipu_writes_mb_s: Option<u16>,
    /// Package power used for PPT, mW.
    pub socket_power_mw: Option<u32>,
    /// NPU power, mW.
    pub ipu_power_mw: Option<u16>,
    /// APU power, mW.
    pub apu_power_mw: Option<u32>,
    /// iGPU power, mW.
    pub gfx_power_mw: Option<u32>,
    /// All CPU cores, mW.
    pub all_core_power_mw: Option<u32>,
    /// NPU clock, MHz.
    pub ipuclk_mhz: Option<u16>,
}

/// Why bytes are not a usable `gpu_metrics` v3.0 table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuMetricsError {
    /// Fewer than the 4 header bytes.
    #[error("{len} bytes is too short for a gpu_metrics header (4 bytes)")]
    TooShort { len: usize },
    /// Another format (discrete GPUs use 1.x, older APUs 2.x).
    #[error(
        "gpu_metrics format {format}.{content} is not 3.0 (not a Ryzen AI 300-class APU table)"
    )]
    OtherFormat { format: u8, content: u8 },
    /// The header promises more bytes than the file has.
    #[error("gpu_metrics says {declared} bytes but the file has {len}")]
    Truncated { declared: usize, len: usize },
    /// Too small to hold the power fields.
    #[error("gpu_metrics 3.0 of {declared} bytes is too small for the power fields ({SIZE_COMMON} bytes)")]
    TooSmall { declared: usize },
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let v = u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?);
    (v != u16::MAX).then_some(v)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let v = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
    (v != u32::MAX).then_some(v)
}

impl GpuMetrics {
    /// Parses the bytes of a `gpu_metrics` file. Never panics; see [`GpuMetricsError`].
    pub fn parse(bytes: &[u8]) -> Result<GpuMetrics, GpuMetricsError> {
        use offset::*;
        if bytes.len() < 4 {
            return Err(GpuMetricsError::TooShort { len: bytes.len() });
        }
        let declared = u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
        let (format, content) = (bytes[2], bytes[3]);
        if (format, content) != (FORMAT_REVISION, CONTENT_REVISION) {
            return Err(GpuMetricsError::OtherFormat { format, content });
        }
        if declared > bytes.len() {
            return Err(GpuMetricsError::Truncated {
                declared,
                len: bytes.len(),
            });
        }
        if declared < SIZE_COMMON {
            return Err(GpuMetricsError::TooSmall { declared });
        }
        let b = &bytes[..declared];
        let current = declared >= SIZE_CURRENT;
        let early = (SIZE_EARLY..SIZE_CURRENT).contains(&declared);
        let mut ipu_activity_percent = [None; IPU_COLUMNS];
        for (i, slot) in ipu_activity_percent.iter_mut().enumerate() {
            *slot = u16_at(b, AVERAGE_IPU_ACTIVITY + 2 * i);
        }
        Ok(GpuMetrics {
            structure_size: declared,
            gfx_activity_percent: u16_at(b, AVERAGE_GFX_ACTIVITY),
            ipu_activity_percent,
            ipu_reads_mb_s: current.then(|| u16_at(b, AVERAGE_IPU_READS)).flatten(),
            ipu_writes_mb_s: current.then(|| u16_at(b, AVERAGE_IPU_WRITES)).flatten(),
            socket_power_mw: u32_at(b, AVERAGE_SOCKET_POWER),
            ipu_power_mw: u16_at(b, AVERAGE_IPU_POWER),
            apu_power_mw: u32_at(b, AVERAGE_APU_POWER),
            gfx_power_mw: u32_at(b, AVERAGE_GFX_POWER),
            all_core_power_mw: u32_at(b, AVERAGE_ALL_CORE_POWER),
            ipuclk_mhz: if current {
                u16_at(b, AVERAGE_IPUCLK_FREQUENCY)
            } else if early {
                u16_at(b, AVERAGE_IPUCLK_FREQUENCY_EARLY)
            } else {
                None
            },
        })
    }

    /// Mean busy % over the NPU columns that report one; `None` if none do.
    pub fn ipu_activity_mean(&self) -> Option<f64> {
        let known: Vec<f64> = self
            .ipu_activity_percent
            .iter()
            .flatten()
            .map(|&v| f64::from(v))
            .collect();
        (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64)
    }
}

/// Builds `gpu_metrics` v3.0 bytes: the writer half used by tests and the fixture generator.
#[derive(Debug, Clone)]
pub struct GpuMetricsWriter {
    bytes: Vec<u8>,
}

impl GpuMetricsWriter {
    /// A table of `size` bytes with header 3.0 and every u16/u32 field "not available"
    /// (0xFF bytes), as an SMU that fills nothing would leave it.
    pub fn new(size: usize) -> Self {
        let mut bytes = vec![0xFF; size.max(4)];
        let declared = u16::try_from(size).unwrap_or(u16::MAX);
        bytes[0..2].copy_from_slice(&declared.to_le_bytes());
        bytes[2] = FORMAT_REVISION;
        bytes[3] = CONTENT_REVISION;
        GpuMetricsWriter { bytes }
    }

    /// Writes a u16 at `at` (ignored if out of range).
    pub fn u16(mut self, at: usize, v: u16) -> Self {
        if let Some(s) = self.bytes.get_mut(at..at + 2) {
            s.copy_from_slice(&v.to_le_bytes());
        }
        self
    }

    /// Writes a u32 at `at` (ignored if out of range).
    pub fn u32(mut self, at: usize, v: u32) -> Self {
        if let Some(s) = self.bytes.get_mut(at..at + 4) {
            s.copy_from_slice(&v.to_le_bytes());
        }
        self
    }

    /// The finished bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::offset::*;
    use super::*;

    fn busy_strix(size: usize) -> Vec<u8> {
        let mut w = GpuMetricsWriter::new(size)
            .u16(AVERAGE_GFX_ACTIVITY, 7)
            .u32(AVERAGE_SOCKET_POWER, 18_250)
            .u16(AVERAGE_IPU_POWER, 1_630)
            .u32(AVERAGE_APU_POWER, 15_000)
            .u32(AVERAGE_GFX_POWER, 900)
            .u32(AVERAGE_ALL_CORE_POWER, 6_100);
        for col in 0..4 {
            w = w.u16(AVERAGE_IPU_ACTIVITY + 2 * col, 80 + col as u16);
        }
        if size >= SIZE_CURRENT {
            w = w
                .u16(AVERAGE_IPU_READS, 31_000)
                .u16(AVERAGE_IPU_WRITES, 1_200)
                .u16(AVERAGE_IPUCLK_FREQUENCY, 1_800);
        } else {
            w = w.u16(AVERAGE_IPUCLK_FREQUENCY_EARLY, 1_500);
        }
        w.into_bytes()
    }

    #[test]
    fn current_264_byte_layout() {
        let m = GpuMetrics::parse(&busy_strix(264)).unwrap();
        assert_eq!(m.structure_size, 264);
        assert_eq!(m.gfx_activity_percent, Some(7));
        assert_eq!(m.socket_power_mw, Some(18_250));
        assert_eq!(m.ipu_power_mw, Some(1_630));
        assert_eq!(m.apu_power_mw, Some(15_000));
        assert_eq!(m.gfx_power_mw, Some(900));
        assert_eq!(m.all_core_power_mw, Some(6_100));
        assert_eq!(m.ipu_reads_mb_s, Some(31_000));
        assert_eq!(m.ipu_writes_mb_s, Some(1_200));
        assert_eq!(m.ipuclk_mhz, Some(1_800));
        assert_eq!(
            m.ipu_activity_percent,
            [
                Some(80),
                Some(81),
                Some(82),
                Some(83),
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(m.ipu_activity_mean(), Some(81.5));
    }

    #[test]
    fn early_256_byte_layout_has_no_ipu_bandwidth() {
        let m = GpuMetrics::parse(&busy_strix(256)).unwrap();
        assert_eq!(
            m.ipuclk_mhz,
            Some(1_500),
            "ipuclk sits at 178 in 256-byte tables"
        );
        assert_eq!(m.ipu_reads_mb_s, None);
        assert_eq!(m.ipu_power_mw, Some(1_630));
    }

    #[test]
    fn unknown_size_reads_only_common_fields() {
        let m = GpuMetrics::parse(&busy_strix(200)).unwrap();
        assert_eq!(m.socket_power_mw, Some(18_250));
        assert_eq!(m.ipuclk_mhz, None);
        let bigger = GpuMetrics::parse(&busy_strix(288)).unwrap();
        assert_eq!(
            bigger.ipuclk_mhz,
            Some(1_800),
            "a longer table keeps the 264 prefix"
        );
    }

    #[test]
    fn ffff_means_not_available() {
        let m = GpuMetrics::parse(&GpuMetricsWriter::new(264).into_bytes()).unwrap();
        assert_eq!(m.ipu_power_mw, None);
        assert_eq!(m.socket_power_mw, None);
        assert_eq!(m.ipu_activity_mean(), None);
    }

    #[test]
    fn bad_tables_are_errors_not_panics() {
        assert_eq!(
            GpuMetrics::parse(&[1, 2]),
            Err(GpuMetricsError::TooShort { len: 2 })
        );
        let mut v1 = busy_strix(264);
        v1[2] = 1;
        v1[3] = 4;
        assert_eq!(
            GpuMetrics::parse(&v1),
            Err(GpuMetricsError::OtherFormat {
                format: 1,
                content: 4
            })
        );
        let cut = &busy_strix(264)[..150];
        assert_eq!(
            GpuMetrics::parse(cut),
            Err(GpuMetricsError::Truncated {
                declared: 264,
                len: 150
            })
        );
        let tiny = GpuMetricsWriter::new(64).into_bytes();
        assert_eq!(
            GpuMetrics::parse(&tiny),
            Err(GpuMetricsError::TooSmall { declared: 64 })
        );
        for len in 0..300 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 3) as u8).collect();
            let _ = GpuMetrics::parse(&junk);
        }
    }
}
