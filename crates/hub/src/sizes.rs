//! Sizes in the units people read, for messages and listings.

/// Bytes in the units people read: "1.7 GB", "512 KB" (powers of 1000, like disk sizes).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value < 10.0 {
        format!("{value:.2} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_bytes_reads_like_a_disk_size() {
        assert_eq!(super::human_bytes(999), "999 B");
        assert_eq!(super::human_bytes(1_700_000_000), "1.70 GB");
        assert_eq!(super::human_bytes(52_400_000), "52.4 MB");
    }
}
