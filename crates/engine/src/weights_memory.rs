//! Where a loaded model's weights live while it answers: a copy in huge pages when the machine
//! has the memory for it, else the file's memory map.
//!
//! Every token reads all the weights once. Through the page cache they sit in 4 KiB pages: the
//! TLB misses every few tiles, and the hardware prefetchers stop at every page boundary. A copy
//! in 2 MiB pages (`q4nx::Weights::copy_into_huge_pages`) removes both. Measured on the 2-core
//! VM (bench/README.md): SmolLM2-135M decodes 10% (1 thread) to 15% (2 threads) faster, and
//! MiniCPM5-2B about 6%. The copy costs a read at load and memory the kernel cannot drop under
//! pressure, so it is made only when the weights take at most half the memory the kernel says
//! is available.
//!
//! Weights larger than the memory the machine has are refused at load ([`check_fits`]), naming
//! their size: every tensor of the file counts, so a mixture of experts counts all its experts
//! although a token reads only a few of them.

use q4nx::Weights;
use serde::{Deserialize, Serialize};

/// Where the weights of a loaded model are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightsMemory {
    /// Copied into anonymous memory backed by huge pages.
    HugePages,
    /// Read through the file's memory map (the page cache).
    Mapped,
}

impl WeightsMemory {
    /// A word for tables and logs.
    pub fn name(self) -> &'static str {
        match self {
            WeightsMemory::HugePages => "huge pages",
            WeightsMemory::Mapped => "file map",
        }
    }
}

/// Copies `weights` into huge pages unless `map` asks for the file map or they would take more
/// than half of `available` bytes (unknown: keep the map). A copy that fails leaves the map.
pub(crate) fn place(weights: &mut Weights, map: bool, available: Option<u64>) -> WeightsMemory {
    let fits = available.is_some_and(|free| weights.data_bytes() <= free / 2);
    if map || !fits {
        weights.advise_streaming();
        return WeightsMemory::Mapped;
    }
    match weights.copy_into_huge_pages() {
        Ok(()) => WeightsMemory::HugePages,
        Err(e) => {
            tracing::warn!(error = %e, "the weights stay in the file map");
            weights.advise_streaming();
            WeightsMemory::Mapped
        }
    }
}

/// Refuses weights of `bytes` (all the file's tensors) larger than the `installed` memory
/// (unknown passes): they could never be held, and reading them from disk at every token would
/// take minutes per word.
pub(crate) fn check_fits(bytes: u64, installed: Option<u64>) -> Result<(), String> {
    match installed {
        Some(total) if bytes > total => Err(format!(
            "its weights take {} ({bytes} bytes), more than the {} of memory this computer \
             has; choose a smaller model or a smaller quantization of it",
            gib(bytes),
            gib(total)
        )),
        _ => Ok(()),
    }
}

/// `bytes` as GiB with one decimal, for messages.
pub(crate) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub(crate) fn available_memory() -> Option<u64> {
    parse_meminfo(&read_meminfo()?, "MemAvailable:")
}

/// `MemTotal` of `/proc/meminfo` (the memory installed), in bytes.
pub(crate) fn installed_memory() -> Option<u64> {
    parse_meminfo(&read_meminfo()?, "MemTotal:")
}

fn read_meminfo() -> Option<String> {
    std::fs::read_to_string("/proc/meminfo").ok()
}

/// The `field  N kB` line of a `/proc/meminfo` text (`field` with its colon), in bytes.
fn parse_meminfo(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with(field))?;
    let mut words = line[field.len()..].split_whitespace();
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(())?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_copied_only_when_they_take_at_most_half_the_available_memory() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine/tiny-llama");
        let open = || Weights::open(&dir).unwrap();
        let bytes = open().data_bytes();
        let cases = [
            (false, Some(2 * bytes), WeightsMemory::HugePages),
            (false, Some(2 * bytes - 1), WeightsMemory::Mapped),
            (false, None, WeightsMemory::Mapped),
            (true, Some(u64::MAX), WeightsMemory::Mapped),
        ];
        for (map, available, expected) in cases {
            assert_eq!(
                place(&mut open(), map, available),
                expected,
                "{map} {available:?}"
            );
        }
    }

    #[test]
    fn mem_available_is_read_in_bytes_and_anything_else_is_unknown() {
        let text = "MemTotal:       24684080 kB\nMemFree:        20843332 kB\n\
                    MemAvailable:   24192312 kB\nBuffers:          123 kB\n";
        assert_eq!(parse_meminfo(text, "MemAvailable:"), Some(24192312 * 1024));
        assert_eq!(parse_meminfo(text, "MemTotal:"), Some(24684080 * 1024));
        for bad in [
            "",
            "MemTotal: 5 kB\n",
            "MemAvailable: kB\n",
            "MemAvailable: -3 kB\n",
            "MemAvailable: 12 MB\n",
            "MemAvailable: 99999999999999999999 kB\n",
            "MemAvailable: 18446744073709551615 kB\n",
        ] {
            assert_eq!(parse_meminfo(bad, "MemAvailable:"), None, "{bad:?}");
        }
    }

    #[test]
    fn weights_larger_than_the_installed_memory_are_refused_with_their_size() {
        // Qwen3-30B-A3B in Q4_1 tiles: 128 experts of 3 x 768 x 2048 in 48 layers, about
        // 18 GB although a token reads 8 of the experts.
        let experts = 48u64 * 128 * 3 * 768 * 2048 * 5 / 8;
        let e = check_fits(experts, Some(16 << 30)).unwrap_err();
        assert!(e.contains("16.9 GiB") && e.contains("16.0 GiB"), "{e}");
        assert!(e.contains(&experts.to_string()), "{e}");
        assert!(check_fits(experts, Some(32 << 30)).is_ok());
        assert!(check_fits(experts, None).is_ok(), "unknown memory passes");
        assert!(check_fits(16 << 30, Some(16 << 30)).is_ok());
    }
}
