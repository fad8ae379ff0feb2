//! Sampling power about once a second on its own thread while a generation runs; the caller
//! integrates the readings (the answer loop turns them into joules).
//!
//! ```no_run
//! use hearth_npu::Telemetry;
//! let telemetry = Telemetry::start(std::path::Path::new("/"));
//! // ... prefill runs ...
//! let decode_from = telemetry.sample_now(); // at the first generated token
//! // ... decode runs ...
//! let recording = telemetry.finish();
//! println!("{} readings over {} s", recording.samples.len(), recording.end_secs);
//! ```
//!
//! The thread reads once at start, at each [`TelemetryHandle::sample_now`], every `interval`,
//! and once more at finish, so even a generation shorter than a second has readings at both
//! ends. The amdgpu `gpu_metrics` values are refreshed by the firmware about once a second:
//! sampling faster only repeats them.

use crate::sample::{PowerSample, PowerSources};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How telemetry samples.
#[derive(Debug)]
pub struct TelemetryOptions {
    /// Time between readings. By default, 1 s.
    pub interval: Duration,
    /// Also read the amdxdna sensors ioctl (opens the NPU device once; wakes the NPU). By
    /// default, true: telemetry only runs while generating.
    pub sensors_ioctl: bool,
}

impl Default for TelemetryOptions {
    fn default() -> Self {
        TelemetryOptions {
            interval: Duration::from_secs(1),
            sensors_ioctl: true,
        }
    }
}

/// Starts telemetry; see [`TelemetryHandle`].
#[derive(Debug)]
pub struct Telemetry;

impl Telemetry {
    /// Starts sampling the system under `root` (`/` for this machine) with default options.
    pub fn start(root: &Path) -> TelemetryHandle {
        Telemetry::start_with(root, TelemetryOptions::default())
    }

    /// Starts sampling with `options`.
    pub fn start_with(root: &Path, options: TelemetryOptions) -> TelemetryHandle {
        let started = Instant::now();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (tx, rx) = mpsc::channel::<Message>();
        let root = root.to_path_buf();
        let thread_shared = Arc::clone(&shared);
        let TelemetryOptions {
            interval,
            sensors_ioctl,
        } = options;
        let thread = std::thread::Builder::new()
            .name("hearth-telemetry".into())
            .spawn(move || {
                let mut sources = PowerSources::discover(&root);
                if sensors_ioctl {
                    sources = sources.with_sensors_ioctl();
                }
                let capacity = sources.battery_capacity_wh();
                lock(&thread_shared).battery_capacity_wh = capacity;
                let take = |sources: &mut PowerSources| {
                    let s = sources.sample(started.elapsed().as_secs_f64());
                    lock(&thread_shared).samples.push(s);
                };
                take(&mut sources);
                loop {
                    match rx.recv_timeout(interval) {
                        Ok(Message::SampleNow) | Err(RecvTimeoutError::Timeout) => {
                            take(&mut sources)
                        }
                        Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => {
                            take(&mut sources);
                            break;
                        }
                    }
                }
            })
            .map_err(|e| tracing::warn!("telemetry thread could not start: {e}"))
            .ok();
        TelemetryHandle {
            started,
            shared,
            tx,
            thread,
        }
    }
}

enum Message {
    SampleNow,
    Stop,
}

#[derive(Default)]
struct Shared {
    samples: Vec<PowerSample>,
    battery_capacity_wh: Option<f64>,
}

/// What telemetry read through one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// Every reading, in the order taken.
    pub samples: Vec<PowerSample>,
    /// When sampling stopped, in seconds since the start.
    pub end_secs: f64,
    /// The battery's full capacity, Wh, when known.
    pub battery_capacity_wh: Option<f64>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    // A panic while holding the lock leaves plain data behind; keep using it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running telemetry session for one generation. Dropping it stops the thread.
#[derive(Debug)]
pub struct TelemetryHandle {
    started: Instant,
    shared: Arc<Mutex<Shared>>,
    tx: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} samples", self.samples.len())
    }
}

impl TelemetryHandle {
    /// Takes a reading now (at a boundary the caller marks, such as the first generated token)
    /// and returns the time, in seconds since the start.
    pub fn sample_now(&self) -> f64 {
        let t_secs = self.started.elapsed().as_secs_f64();
        let _ = self.tx.send(Message::SampleNow);
        t_secs
    }

    /// Stops sampling, with a last reading, and hands over every reading.
    pub fn finish(mut self) -> Recording {
        let end_secs = self.started.elapsed().as_secs_f64();
        self.stop();
        let mut shared = lock(&self.shared);
        Recording {
            samples: std::mem::take(&mut shared.samples),
            end_secs,
            battery_capacity_wh: shared.battery_capacity_wh,
        }
    }

    fn stop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for TelemetryHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu_metrics::{offset, GpuMetricsWriter};
    use std::fs;

    #[test]
    fn samples_at_start_marks_and_finish_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let card = dir.path().join("sys/class/drm/card1/device");
        fs::create_dir_all(&card).unwrap();
        let bytes = GpuMetricsWriter::new(264)
            .u32(offset::AVERAGE_SOCKET_POWER, 12_000)
            .u16(offset::AVERAGE_IPU_POWER, 1_500)
            .into_bytes();
        fs::write(card.join("gpu_metrics"), bytes).unwrap();
        // An interval far longer than the test: every reading comes from start, mark, finish.
        let t = Telemetry::start_with(
            dir.path(),
            TelemetryOptions {
                interval: Duration::from_secs(3600),
                sensors_ioctl: true,
            },
        );
        let marked = t.sample_now();
        let r = t.finish();
        assert_eq!(r.samples.len(), 3, "start, the mark, finish");
        assert!(0.0 <= marked && marked <= r.end_secs);
        assert!(r.samples.windows(2).all(|w| w[0].t_secs <= w[1].t_secs));
        for s in &r.samples {
            assert_eq!(s.package_watts.value(), Some(&12.0));
            assert!(s
                .package_watts
                .source()
                .unwrap()
                .contains("gpu_metrics (card1) average_socket_power"));
            assert_eq!(s.npu_watts.value(), Some(&1.5));
        }
    }

    #[test]
    fn dropping_the_handle_stops_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let t = Telemetry::start(dir.path());
        drop(t);
    }
}
