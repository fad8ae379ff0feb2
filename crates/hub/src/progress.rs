//! What a download reports while it runs, and how a caller pauses or cancels it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The step a pull is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "PullPhase"))]
pub enum Phase {
    /// Asking the Hub which commit and files.
    Resolving,
    /// Receiving bytes.
    Downloading,
    /// The connection dropped or stalled; waiting before resuming from the same byte.
    Retrying,
    /// Checking the model with `q4nx`.
    Validating,
    /// Converting a GGUF file to Q4NX (an import of a model found on this computer).
    Converting,
    /// Moving it into place and writing the registry.
    Registering,
    /// Installed.
    Done,
    /// Stopped on request; the bytes so far are kept for resuming.
    Paused,
    /// Stopped on request; the bytes so far were deleted.
    Cancelled,
}

/// A snapshot of a pull, sent to the progress callback (and over IPC to the app).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "PullProgress"))]
pub struct Progress {
    /// Model name (folder name).
    pub name: String,
    /// Current step.
    pub phase: Phase,
    /// File being downloaded, if any.
    pub file: Option<String>,
    /// Files fully downloaded so far.
    pub files_done: usize,
    /// Files in the model.
    pub file_count: usize,
    /// Bytes on disk so far, over all files (resumed bytes included).
    pub done_bytes: u64,
    /// Bytes of all files.
    pub total_bytes: u64,
    /// Recent speed in bytes per second (0 until known).
    pub bytes_per_sec: f64,
    /// Seconds left at the recent speed, if known.
    pub eta_secs: Option<f64>,
    /// A plain-language note ("connection dropped, resuming at 1.2 GB").
    pub message: Option<String>,
}

const RUNNING: u8 = 0;
const PAUSE: u8 = 1;
const CANCEL: u8 = 2;

/// Lets another thread pause or cancel a pull. Cheap to clone; all clones share one state.
#[derive(Debug, Clone, Default)]
pub struct DownloadControl {
    state: Arc<AtomicU8>,
}

/// What the owner of a [`DownloadControl`] asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Keep going.
    Run,
    /// Stop and keep the bytes for a later resume.
    Pause,
    /// Stop and delete the bytes.
    Cancel,
}

impl DownloadControl {
    /// A control that lets the pull run.
    pub fn new() -> DownloadControl {
        DownloadControl::default()
    }

    /// Asks the pull to stop at the next read and keep what it has.
    pub fn pause(&self) {
        let _ = self
            .state
            .compare_exchange(RUNNING, PAUSE, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Asks the pull to stop and delete the partial files.
    pub fn cancel(&self) {
        self.state.store(CANCEL, Ordering::SeqCst);
    }

    /// What has been asked.
    pub fn request(&self) -> Request {
        match self.state.load(Ordering::SeqCst) {
            PAUSE => Request::Pause,
            CANCEL => Request::Cancel,
            _ => Request::Run,
        }
    }

    /// Sleeps up to `duration`, waking early if a pause or cancel arrives.
    pub fn sleep(&self, duration: Duration) {
        let end = Instant::now() + duration;
        while self.request() == Request::Run {
            let now = Instant::now();
            if now >= end {
                break;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(50)));
        }
    }
}

/// Speed over the last few seconds, from (time, bytes) samples.
#[derive(Debug)]
pub(crate) struct SpeedMeter {
    samples: VecDeque<(Instant, u64)>,
    span: Duration,
}

impl SpeedMeter {
    pub(crate) fn new() -> SpeedMeter {
        SpeedMeter {
            samples: VecDeque::new(),
            span: Duration::from_secs(5),
        }
    }

    /// Records that `total` bytes have been received by now.
    pub(crate) fn record(&mut self, total: u64) {
        let now = Instant::now();
        self.samples.push_back((now, total));
        while self.samples.len() > 2 && now.duration_since(self.samples[0].0) > self.span {
            self.samples.pop_front();
        }
    }

    /// Bytes per second over the window (0 if too little is known).
    pub(crate) fn bytes_per_sec(&self) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some(&(t0, b0)), Some(&(t1, b1))) if t1 > t0 => {
                b1.saturating_sub(b0) as f64 / t1.duration_since(t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_wins_over_pause_and_pause_does_not_undo_cancel() {
        let control = DownloadControl::new();
        assert_eq!(control.request(), Request::Run);
        let clone = control.clone();
        clone.pause();
        assert_eq!(control.request(), Request::Pause);
        control.cancel();
        clone.pause();
        assert_eq!(control.request(), Request::Cancel);
    }

    #[test]
    fn sleep_returns_at_once_when_paused() {
        let control = DownloadControl::new();
        control.pause();
        let start = Instant::now();
        control.sleep(Duration::from_secs(30));
        assert!(start.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn speed_is_zero_without_two_samples() {
        let mut meter = SpeedMeter::new();
        assert_eq!(meter.bytes_per_sec(), 0.0);
        meter.record(10);
        assert_eq!(meter.bytes_per_sec(), 0.0);
    }

    #[test]
    fn progress_serializes_in_snake_case_for_the_ui() {
        let p = Progress {
            name: "m".into(),
            phase: Phase::Downloading,
            file: None,
            files_done: 0,
            file_count: 1,
            done_bytes: 1,
            total_bytes: 2,
            bytes_per_sec: 0.0,
            eta_secs: None,
            message: None,
        };
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["phase"], "downloading");
        assert_eq!(json["done_bytes"], 1);
    }
}
