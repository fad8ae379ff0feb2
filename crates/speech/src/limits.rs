//! The bounds every decode runs within, as numbers: bytes in, seconds of sound, channels. A
//! recording's samples at 16 kHz mono f32 take 64,000 bytes a second (230 MB an hour), so the
//! seconds bound is also the memory bound of what decoding keeps; the file itself is read in
//! packets, never whole (a server's upload is in memory already, within its byte bound).

/// The sample rate Whisper listens at, and every decode's output rate.
pub const SAMPLE_RATE: u32 = 16_000;

/// Longest recording decoded by default: two hours (460 MB of samples).
pub const DEFAULT_MAX_SECONDS: f64 = 2.0 * 3600.0;

/// Largest file read by default: 4 GiB, the most a WAV file can hold (two hours of 48 kHz
/// stereo 16-bit PCM are 1.4 GB).
pub const DEFAULT_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Most channels a recording may have (symphonia's channel map holds 32).
pub const MAX_CHANNELS: usize = 32;

/// What a decode may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Bytes of the file, at most.
    pub max_bytes: u64,
    /// Seconds of sound, at most: refused from the header's duration before decoding where
    /// the header gives one, else when decoding passes it.
    pub max_seconds: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_seconds: DEFAULT_MAX_SECONDS,
        }
    }
}

impl Limits {
    /// The most output samples (16 kHz mono) a decode under these limits keeps.
    pub fn max_samples(&self) -> u64 {
        (self.max_seconds.max(0.0) * f64::from(SAMPLE_RATE)).ceil() as u64
    }
}

/// A duration in words: "42.5 s", "12 min 5 s", "10 h 0 min".
pub fn duration_words(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "an unknown length".to_owned();
    }
    if seconds < 60.0 {
        return format!("{seconds:.1} s");
    }
    let whole = seconds.round() as u64;
    if whole < 3600 {
        format!("{} min {} s", whole / 60, whole % 60)
    } else {
        format!("{} h {} min", whole / 3600, whole % 3600 / 60)
    }
}

/// A size in words: "812 bytes", "25.0 MB", "4.3 GB" (decimal units, as file managers show).
pub fn size_words(bytes: u64) -> String {
    const MB: f64 = 1e6;
    if bytes < 1_000_000 {
        format!("{bytes} bytes")
    } else if bytes < 1_000_000_000 {
        format!("{:.1} MB", bytes as f64 / MB)
    } else {
        format!("{:.1} GB", bytes as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_words() {
        assert_eq!(duration_words(42.54), "42.5 s");
        assert_eq!(duration_words(725.0), "12 min 5 s");
        assert_eq!(duration_words(36_000.0), "10 h 0 min");
        assert_eq!(duration_words(f64::NAN), "an unknown length");
        assert_eq!(size_words(812), "812 bytes");
        assert_eq!(size_words(26_214_400), "26.2 MB");
        assert_eq!(size_words(4_294_967_296), "4.3 GB");
        assert_eq!(Limits::default().max_samples(), 115_200_000);
    }
}
