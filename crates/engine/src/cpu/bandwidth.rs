//! Measures how fast this machine reads memory: the ceiling of a memory-bound decode.
//!
//! All pool threads sum disjoint 1 MiB chunks of a buffer much larger than the caches, claimed
//! atomically like the matmul chunks; the figure is the median over repetitions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::pool::ThreadPool;

const CHUNK: usize = 1 << 20;

/// The result of [`measure_read_bandwidth`].
#[derive(Debug, Clone)]
pub struct ReadBandwidth {
    /// Median read bandwidth, in 10^9 bytes per second.
    pub gbps: f64,
    /// Every repetition's figure, in measurement order.
    pub samples_gbps: Vec<f64>,
    /// Bytes read per repetition.
    pub bytes: usize,
    /// Threads that read.
    pub threads: usize,
}

/// The size of this CPU's last-level (L3) cache as Linux reports it (sysfs, for CPU 0), or
/// `None` where it does not. A model whose weights fit in it can be read partly from the
/// cache between decode steps, faster than the probe's buffer, which is much larger.
pub fn l3_cache_bytes() -> Option<u64> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
        (read("level")?.trim() == "3")
            .then(|| parse_cache_size(&read("size")?))
            .flatten()
    })
}

/// A sysfs cache size: a number of bytes with an optional `K`, `M` or `G` (binary) suffix,
/// as `491520K`. `None` for anything else, or a size that overflows.
fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, 'K') => (&text[..i], 1u64 << 10),
        (i, 'M') => (&text[..i], 1 << 20),
        (i, 'G') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

/// Reads a `bytes`-sized buffer `repetitions` times with every thread of `pool` (after one
/// untimed pass that faults the pages in) and returns the median bandwidth.
pub fn measure_read_bandwidth(
    pool: &ThreadPool,
    bytes: usize,
    repetitions: usize,
) -> ReadBandwidth {
    let words = bytes.div_ceil(CHUNK) * CHUNK / 8;
    let buffer: Vec<u64> = (0..words as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9))
        .collect();
    let chunks = buffer.len() * 8 / CHUNK;
    let sink = AtomicU64::new(0);
    let pass = || {
        pool.run(chunks, &|c| {
            let part = &buffer[c * CHUNK / 8..(c + 1) * CHUNK / 8];
            sink.fetch_add(sum_words(part), Ordering::Relaxed);
        })
    };
    pass();
    let mut samples_gbps = Vec::with_capacity(repetitions);
    for _ in 0..repetitions.max(1) {
        let start = Instant::now();
        pass();
        let secs = start.elapsed().as_secs_f64();
        samples_gbps.push((buffer.len() * 8) as f64 / secs / 1e9);
    }
    std::hint::black_box(sink.load(Ordering::Relaxed));
    ReadBandwidth {
        gbps: median(&samples_gbps),
        samples_gbps,
        bytes: buffer.len() * 8,
        threads: pool.threads(),
    }
}

/// The median of `values` (mean of the two middle ones for an even count); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn sum_words(words: &[u64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            return unsafe { sum_avx512(words) };
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            return unsafe { sum_avx2(words) };
        }
    }
    words.iter().fold(0u64, |a, &w| a.wrapping_add(w))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_avx512(words: &[u64]) -> u64 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_si512(); 4];
    let blocks = words.chunks_exact(32);
    let tail = blocks.remainder();
    for block in blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: `block` has 32 words; lane group i reads words 8i..8i+8.
            *a = _mm512_add_epi64(*a, _mm512_loadu_si512(block.as_ptr().add(8 * i).cast()));
        }
    }
    let total = _mm512_add_epi64(
        _mm512_add_epi64(acc[0], acc[1]),
        _mm512_add_epi64(acc[2], acc[3]),
    );
    tail.iter()
        .fold(_mm512_reduce_add_epi64(total) as u64, |a, &w| {
            a.wrapping_add(w)
        })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_avx2(words: &[u64]) -> u64 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_si256(); 4];
    let blocks = words.chunks_exact(16);
    let tail = blocks.remainder();
    for block in blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: `block` has 16 words; lane group i reads words 4i..4i+4.
            *a = _mm256_add_epi64(*a, _mm256_loadu_si256(block.as_ptr().add(4 * i).cast()));
        }
    }
    let mut lanes = [0u64; 4];
    let total = _mm256_add_epi64(
        _mm256_add_epi64(acc[0], acc[1]),
        _mm256_add_epi64(acc[2], acc[3]),
    );
    _mm256_storeu_si256(lanes.as_mut_ptr().cast(), total);
    lanes
        .iter()
        .chain(tail)
        .fold(0u64, |a, &w| a.wrapping_add(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them_and_nothing_else() {
        assert_eq!(parse_cache_size("491520K\n"), Some(491_520 << 10));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("4096"), Some(4096));
        for bad in [
            "",
            "K",
            "-1K",
            "12 K",
            "3.5M",
            "99999999999999999999G",
            "1T",
        ] {
            assert_eq!(parse_cache_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn simd_sum_equals_plain_sum() {
        let words: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0xDEAD_BEEF_1234))
            .collect();
        let plain = words.iter().fold(0u64, |a, &w| a.wrapping_add(w));
        assert_eq!(sum_words(&words), plain);
        assert_eq!(
            sum_words(&words[..13]),
            words[..13].iter().fold(0u64, |a, &w| a.wrapping_add(w))
        );
    }

    #[test]
    fn probe_reports_positive_figures() {
        let pool = ThreadPool::new(2);
        let report = measure_read_bandwidth(&pool, 4 << 20, 3);
        assert_eq!(report.samples_gbps.len(), 3);
        assert!(report.gbps > 0.0 && report.bytes == 4 << 20);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
