//! Listening to the microphone: mono samples at the device's rate, resampled to 16 kHz with
//! [`Resampler`], measured as they come (a live level in dBFS and the time recorded), stopped
//! on request, and bounded in length.
//!
//! The contract:
//! - [`Capture::start`] opens the source on a thread of its own and returns once it records,
//!   or with a [`CaptureError`] naming the case (no microphone, in use, permission refused);
//!   `on_level` is called every [`LEVEL_WINDOW_S`] of sound with a [`Level`];
//! - [`Capture::stop`] ends it and returns the [`Audio`] (16 kHz mono), or
//!   [`CaptureError::Silence`] when no 100 ms window reached [`SILENCE_FLOOR_DBFS`];
//!   [`Capture::cancel`] ends it and drops the sound;
//! - recording stops by itself at [`CaptureOptions::max_seconds`] ([`MAX_SECONDS`], five minutes,
//!   by default: 19 MB of samples), the last [`Level`] saying `limit_reached`; `stop` then
//!   returns what was recorded;
//! - the sound stays in memory: nothing here writes it to disk.
//!
//! **The test hook**: with [`TEST_WAV_VAR`] (`HEARTH_TEST_MIC_WAV`) set to a sound file,
//! [`CaptureSource::from_env`] gives [`CaptureSource::File`], which plays that file into the
//! same pipeline in 20 ms blocks at real time (or [`TEST_SPEED_VAR`] times faster), followed by
//! silence as a quiet microphone gives, so a machine without a sound device (CI) exercises the
//! same levels, times, bounds and stop.
//!
//! The level is the RMS of the window, in dB relative to a full-scale square wave (0 dBFS;
//! a full-scale sine is -3 dBFS); silence reads [`QUIET_DBFS`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::capture_device::Block;
pub use crate::capture_error::CaptureError;
use crate::decode::{decode_file, Audio};
use crate::limits::{Limits, SAMPLE_RATE};
use crate::resample::Resampler;

/// The environment variable naming a sound file the capture plays instead of the microphone.
pub const TEST_WAV_VAR: &str = "HEARTH_TEST_MIC_WAV";
/// The environment variable making the test file play faster than real time (a number, 1-100).
pub const TEST_SPEED_VAR: &str = "HEARTH_TEST_MIC_SPEED";
/// The longest recording by default: five minutes.
pub const MAX_SECONDS: f64 = 300.0;
/// A recording whose loudest 100 ms window stays below this is silence (a quiet room through
/// a laptop's microphone is about -60 dBFS; speech at arm's length -35 to -20).
pub const SILENCE_FLOOR_DBFS: f32 = -50.0;
/// The level reported for digital silence.
pub const QUIET_DBFS: f32 = -100.0;
/// How much sound each level measures, in seconds.
pub const LEVEL_WINDOW_S: f64 = 0.1;
/// The test file's block length, in seconds.
const FILE_BLOCK_S: f64 = 0.02;

/// What is recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum CaptureSource {
    /// The system's default microphone.
    Microphone,
    /// A sound file played as if spoken into the microphone (the test hook).
    File {
        /// The file (any format [`decode_file`] reads).
        path: PathBuf,
        /// How many times faster than real time it plays (1: real time).
        speed: f64,
    },
}

impl CaptureSource {
    /// The microphone, or the file [`TEST_WAV_VAR`] names (at [`TEST_SPEED_VAR`]'s speed).
    pub fn from_env() -> CaptureSource {
        match std::env::var_os(TEST_WAV_VAR).filter(|v| !v.is_empty()) {
            None => CaptureSource::Microphone,
            Some(path) => {
                let speed = std::env::var(TEST_SPEED_VAR)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite())
                    .map_or(1.0, |s| s.clamp(1.0, 100.0));
                CaptureSource::File {
                    path: PathBuf::from(path),
                    speed,
                }
            }
        }
    }
}

/// How a capture runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureOptions {
    /// What is recorded.
    pub source: CaptureSource,
    /// The longest recording, in seconds.
    pub max_seconds: f64,
    /// Below this the recording is silence, in dBFS.
    pub silence_floor_dbfs: f32,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            source: CaptureSource::from_env(),
            max_seconds: MAX_SECONDS,
            silence_floor_dbfs: SILENCE_FLOOR_DBFS,
        }
    }
}

/// The live state of a recording, every [`LEVEL_WINDOW_S`] of sound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Seconds recorded so far.
    pub elapsed_s: f64,
    /// The last window's RMS level, in dBFS ([`QUIET_DBFS`] for silence).
    pub rms_dbfs: f32,
    /// The recording reached its longest and stopped by itself.
    pub limit_reached: bool,
}

/// What a capture is recording from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureInfo {
    /// The device's name (the file's, for the test hook).
    pub device: String,
    /// Its sample rate, in Hz.
    pub rate: u32,
}

/// A recording in progress.
pub struct Capture {
    info: CaptureInfo,
    stop: Arc<AtomicBool>,
    keep: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Audio, CaptureError>>>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Capture {
    /// Starts recording; `on_level` sees the level and time as they come (on the capture's
    /// thread).
    pub fn start(
        options: CaptureOptions,
        on_level: impl FnMut(Level) + Send + 'static,
    ) -> Result<Capture, CaptureError> {
        let stop = Arc::new(AtomicBool::new(false));
        let keep = Arc::new(AtomicBool::new(true));
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread = {
            let stop = stop.clone();
            let keep = keep.clone();
            std::thread::Builder::new()
                .name("hearth-capture".into())
                .spawn(move || record(options, stop, keep, ready_tx, on_level))
                .map_err(|e| CaptureError::Device {
                    detail: format!("no thread to record on ({e})"),
                })?
        };
        match ready_rx.recv() {
            Ok(Ok(info)) => Ok(Capture {
                info,
                stop,
                keep,
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(error)) => error,
                _ => CaptureError::Device {
                    detail: "the recording thread ended at once".into(),
                },
            }),
        }
    }

    /// What it records from.
    pub fn info(&self) -> &CaptureInfo {
        &self.info
    }

    /// Whether it stopped by itself (its length bound, or the device failing).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops and returns the recording at 16 kHz mono.
    pub fn stop(mut self) -> Result<Audio, CaptureError> {
        self.end(true)
    }

    /// Stops and drops the recording.
    pub fn cancel(mut self) {
        let _ = self.end(false);
    }

    fn end(&mut self, keep: bool) -> Result<Audio, CaptureError> {
        self.keep.store(keep, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) | None => Err(CaptureError::Device {
                detail: "the recording thread failed".into(),
            }),
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.end(false);
        }
    }
}

/// The capture thread: opens the source, then measures and keeps its sound until stopped.
fn record(
    options: CaptureOptions,
    stop: Arc<AtomicBool>,
    keep: Arc<AtomicBool>,
    ready: mpsc::SyncSender<Result<CaptureInfo, CaptureError>>,
    on_level: impl FnMut(Level),
) -> Result<Audio, CaptureError> {
    let (tx, rx) = mpsc::channel();
    // Held while recording: dropping it closes the microphone (or ends the file's player).
    let opened = match open(&options.source, tx) {
        Ok(opened) => opened,
        Err(error) => {
            let _ = ready.send(Err(error));
            return Err(CaptureError::Device {
                detail: "not opened".into(),
            });
        }
    };
    let info = opened.info();
    let mut meter = match Meter::new(info.rate, &options) {
        Ok(meter) => meter,
        Err(error) => {
            let _ = ready.send(Err(error));
            return Err(CaptureError::Device {
                detail: "not opened".into(),
            });
        }
    };
    let _ = ready.send(Ok(info));
    let outcome = meter.run(&rx, &stop, on_level);
    drop(opened);
    outcome?;
    if !keep.load(Ordering::SeqCst) {
        return Err(CaptureError::Device {
            detail: "cancelled".into(),
        });
    }
    meter.finish()
}

/// An open source: the microphone's stream or the file's player thread.
enum Opened {
    Microphone(crate::capture_device::OpenMicrophone),
    File {
        name: String,
        player: Option<JoinHandle<()>>,
        stop: Arc<AtomicBool>,
    },
}

impl Opened {
    fn info(&self) -> CaptureInfo {
        match self {
            Opened::Microphone(mic) => CaptureInfo {
                device: mic.device.clone(),
                rate: mic.rate,
            },
            Opened::File { name, .. } => CaptureInfo {
                device: name.clone(),
                rate: SAMPLE_RATE,
            },
        }
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Opened::File { player, stop, .. } = self {
            stop.store(true, Ordering::SeqCst);
            if let Some(player) = player.take() {
                let _ = player.join();
            }
        }
    }
}

fn open(source: &CaptureSource, blocks: Sender<Block>) -> Result<Opened, CaptureError> {
    match source {
        CaptureSource::Microphone => {
            crate::capture_device::open_default(blocks).map(Opened::Microphone)
        }
        CaptureSource::File { path, speed } => {
            let audio = decode_file(path, &Limits::default()).map_err(|error| {
                CaptureError::TestRecording {
                    path: path.display().to_string(),
                    error,
                }
            })?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "test recording".into());
            let speed = if speed.is_finite() && *speed >= 1.0 {
                *speed
            } else {
                1.0
            };
            // The player's own flag: it stops when the source is dropped, after the meter.
            let stop = Arc::new(AtomicBool::new(false));
            let player_stop = stop.clone();
            let player = std::thread::Builder::new()
                .name("hearth-capture-file".into())
                .spawn(move || play(audio.samples, speed, &player_stop, &blocks))
                .map_err(|e| CaptureError::Device {
                    detail: format!("no thread to play the test recording on ({e})"),
                })?;
            Ok(Opened::File {
                name,
                player: Some(player),
                stop,
            })
        }
    }
}

/// Plays `samples` (16 kHz) as the microphone would give them, in 20 ms blocks at `speed`
/// times real time, then silence until stopped.
fn play(samples: Vec<f32>, speed: f64, stop: &AtomicBool, blocks: &Sender<Block>) {
    let block = (FILE_BLOCK_S * f64::from(SAMPLE_RATE)) as usize;
    let started = Instant::now();
    let mut sent = 0usize;
    let silence = vec![0.0f32; block];
    while !stop.load(Ordering::SeqCst) {
        let chunk = if sent < samples.len() {
            samples[sent..(sent + block).min(samples.len())].to_vec()
        } else {
            silence.clone()
        };
        sent += chunk.len();
        if blocks.send(Block::Samples(chunk)).is_err() {
            return;
        }
        // Real time (divided by speed) since the start, so blocks do not drift.
        let due = Duration::from_secs_f64(sent as f64 / f64::from(SAMPLE_RATE) / speed);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// Resamples, keeps and measures the sound.
struct Meter {
    resampler: Resampler,
    samples: Vec<f32>,
    max_samples: usize,
    floor_dbfs: f32,
    /// Sum of squares and count of the window being measured.
    window_sum: f64,
    window_len: usize,
    window_size: usize,
    loudest_dbfs: f32,
    source_rate: u32,
}

impl Meter {
    fn new(rate: u32, options: &CaptureOptions) -> Result<Meter, CaptureError> {
        let resampler =
            Resampler::new(rate, SAMPLE_RATE).map_err(|e| CaptureError::Unsupported {
                device: "microphone".into(),
                detail: e.to_string(),
            })?;
        let max_seconds = if options.max_seconds.is_finite() && options.max_seconds > 0.0 {
            options.max_seconds.min(MAX_SECONDS * 12.0)
        } else {
            MAX_SECONDS
        };
        Ok(Meter {
            resampler,
            samples: Vec::new(),
            max_samples: (max_seconds * f64::from(SAMPLE_RATE)).round() as usize,
            floor_dbfs: options.silence_floor_dbfs,
            window_sum: 0.0,
            window_len: 0,
            window_size: (LEVEL_WINDOW_S * f64::from(SAMPLE_RATE)) as usize,
            loudest_dbfs: QUIET_DBFS,
            source_rate: rate,
        })
    }

    /// Takes blocks until `stop`, the length bound, or a failure of the source.
    fn run(
        &mut self,
        blocks: &Receiver<Block>,
        stop: &AtomicBool,
        mut on_level: impl FnMut(Level),
    ) -> Result<(), CaptureError> {
        let mut out = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let block = match blocks.recv_timeout(Duration::from_millis(50)) {
                Ok(block) => block,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) if stop.load(Ordering::SeqCst) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CaptureError::Lost {
                        detail: "the sound stopped coming".into(),
                    })
                }
            };
            let input = match block {
                Block::Samples(input) => input,
                Block::Failed(detail) => return Err(CaptureError::Lost { detail }),
            };
            out.clear();
            self.resampler.push(&input, &mut out);
            if self.take(&out, &mut on_level) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Keeps and measures `out`; true when the length bound is reached.
    fn take(&mut self, out: &[f32], on_level: &mut impl FnMut(Level)) -> bool {
        let room = self.max_samples - self.samples.len();
        let take = &out[..out.len().min(room)];
        for &s in take {
            self.samples.push(s);
            self.window_sum += f64::from(s) * f64::from(s);
            self.window_len += 1;
            if self.window_len == self.window_size {
                let level = self.close_window();
                on_level(Level {
                    elapsed_s: self.elapsed_s(),
                    rms_dbfs: level,
                    limit_reached: self.samples.len() >= self.max_samples,
                });
            }
        }
        if self.samples.len() >= self.max_samples {
            if self.window_len > 0 {
                self.close_window();
            }
            on_level(Level {
                elapsed_s: self.elapsed_s(),
                rms_dbfs: QUIET_DBFS,
                limit_reached: true,
            });
            return true;
        }
        false
    }

    /// The level of the window measured so far, which starts a new one.
    fn close_window(&mut self) -> f32 {
        let rms = (self.window_sum / self.window_len.max(1) as f64).sqrt();
        self.window_sum = 0.0;
        self.window_len = 0;
        let level = dbfs(rms);
        self.loudest_dbfs = self.loudest_dbfs.max(level);
        level
    }

    fn elapsed_s(&self) -> f64 {
        self.samples.len() as f64 / f64::from(SAMPLE_RATE)
    }

    /// The recording, or silence when nothing reached the floor.
    fn finish(mut self) -> Result<Audio, CaptureError> {
        if self.samples.len() < self.max_samples {
            let mut rest = Vec::new();
            self.resampler.finish(&mut rest);
            let room = self.max_samples - self.samples.len();
            self.samples.extend(rest.into_iter().take(room));
        }
        if self.window_len > 0 {
            self.close_window();
        }
        if self.loudest_dbfs < self.floor_dbfs {
            return Err(CaptureError::Silence {
                loudest_dbfs: self.loudest_dbfs,
                floor_dbfs: self.floor_dbfs,
            });
        }
        Ok(Audio {
            samples: self.samples,
            source_rate: self.source_rate,
            source_channels: 1,
            format: "microphone",
        })
    }
}

/// An RMS amplitude in dBFS, [`QUIET_DBFS`] at the least.
pub fn dbfs(rms: f64) -> f32 {
    if rms <= 0.0 || !rms.is_finite() {
        return QUIET_DBFS;
    }
    ((20.0 * rms.log10()) as f32).max(QUIET_DBFS)
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
