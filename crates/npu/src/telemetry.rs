//! Sampling power about once a second on its own thread while a generation runs.
//!
//! ```no_run
//! use hearth_npu::{Phase, Telemetry};
//! let telemetry = Telemetry::start(std::path::Path::new("/"));
//! // ... prefill runs ...
//! telemetry.mark_phase(Phase::Decode); // at the first generated token
//! // ... decode runs; telemetry.latest() gives live watts ...
//! let energy = telemetry.finish(312, 128); // prompt and generated token counts
//! println!("{:?} J ({})", energy.total_joules, energy.source);
//! ```
//!
//! The thread reads once at start, at each phase mark, every `interval`, and once more at
//! finish, so even a generation shorter than a second has readings at both ends. The amdgpu
//! `gpu_metrics` values are refreshed by the firmware about once a second: sampling faster only
//! repeats them.

use crate::energy::{self, EnergyReport, Phase, PhaseMark};
use crate::sample::{PowerSample, PowerSources};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A function called with each reading, on the sampling thread.
pub type SampleCallback = Box<dyn FnMut(&PowerSample) + Send>;

/// How telemetry samples.
pub struct TelemetryOptions {
    /// Time between readings. By default, 1 s.
    pub interval: Duration,
    /// Also read the amdxdna sensors ioctl (opens the NPU device once; wakes the NPU). By
    /// default, true: telemetry only runs while generating.
    pub sensors_ioctl: bool,
    /// Called on the sampling thread with each reading (e.g. to stream live watts to a UI).
    /// By default, none.
    pub on_sample: Option<SampleCallback>,
}

impl Default for TelemetryOptions {
    fn default() -> Self {
        TelemetryOptions {
            interval: Duration::from_secs(1),
            sensors_ioctl: true,
            on_sample: None,
        }
    }
}

impl std::fmt::Debug for TelemetryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryOptions")
            .field("interval", &self.interval)
            .field("sensors_ioctl", &self.sensors_ioctl)
            .field("on_sample", &self.on_sample.is_some())
            .finish()
    }
}

/// Starts telemetry; see [`TelemetryHandle`].
#[derive(Debug)]
pub struct Telemetry;

impl Telemetry {
    /// Starts sampling the system under `root` (`/` for this machine) with default options. The
    /// generation is taken to be in [`Phase::Prefill`] from now.
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
            mut on_sample,
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
                let mut take = |sources: &mut PowerSources| {
                    let s = sources.sample(started.elapsed().as_secs_f64());
                    if let Some(f) = on_sample.as_mut() {
                        f(&s);
                    }
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
    marks: Vec<PhaseMark>,
    battery_capacity_wh: Option<f64>,
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
        write!(
            f,
            "{} samples, {} marks",
            self.samples.len(),
            self.marks.len()
        )
    }
}

impl TelemetryHandle {
    /// Marks that `phase` begins now (call with [`Phase::Decode`] at the first generated
    /// token) and takes a reading at the boundary.
    pub fn mark_phase(&self, phase: Phase) {
        let t_secs = self.started.elapsed().as_secs_f64();
        lock(&self.shared).marks.push(PhaseMark { phase, t_secs });
        let _ = self.tx.send(Message::SampleNow);
    }

    /// The most recent reading, for live figures.
    pub fn latest(&self) -> Option<PowerSample> {
        lock(&self.shared).samples.last().cloned()
    }

    /// Every reading so far.
    pub fn samples(&self) -> Vec<PowerSample> {
        lock(&self.shared).samples.clone()
    }

    /// Stops sampling (with a last reading) and integrates the energy of the generation, which
    /// read `prompt_tokens` and produced `generated_tokens`.
    pub fn finish(mut self, prompt_tokens: usize, generated_tokens: usize) -> EnergyReport {
        let end = self.started.elapsed().as_secs_f64();
        self.stop();
        let shared = lock(&self.shared);
        energy::report(
            &shared.samples,
            &shared.marks,
            end,
            prompt_tokens,
            generated_tokens,
            shared.battery_capacity_wh,
        )
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
        let seen = Arc::new(Mutex::new(0usize));
        let seen2 = Arc::clone(&seen);
        // An interval far longer than the test: every reading comes from start, mark, finish.
        let t = Telemetry::start_with(
            dir.path(),
            TelemetryOptions {
                interval: Duration::from_secs(3600),
                sensors_ioctl: true,
                on_sample: Some(Box::new(move |_| *seen2.lock().unwrap() += 1)),
            },
        );
        t.mark_phase(Phase::Decode);
        let r = t.finish(20, 10);
        assert_eq!(r.samples, 3, "start, decode mark, finish");
        assert_eq!(*seen.lock().unwrap(), 3);
        assert_eq!(r.meter, Some(energy::Meter::Package));
        assert!(r
            .source
            .contains("gpu_metrics (card1) average_socket_power"));
        let total = r.total_joules.unwrap();
        let secs = r.prefill_secs + r.decode_secs;
        assert!((total - 12.0 * secs).abs() < 1e-6, "flat 12 W over the run");
        let npu = r
            .meters
            .iter()
            .find(|m| m.meter == energy::Meter::Npu)
            .unwrap();
        assert!((npu.average_watts - 1.5).abs() < 1e-9 || secs == 0.0);
    }

    #[test]
    fn dropping_the_handle_stops_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let t = Telemetry::start(dir.path());
        drop(t);
    }
}
