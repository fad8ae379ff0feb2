//! The times chat records (when an answer finished, when a conversation changed), in Unix
//! seconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since 1970 (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
