//! The capture pipeline through its test hook (a WAV played as the microphone) and directly:
//! levels, elapsed time, silence, the length bound, stop and cancel.

use super::*;
use std::sync::mpsc;

/// A 16-bit PCM mono WAV of `samples` at `rate`.
fn wav(path: &std::path::Path, rate: u32, samples: &[f32]) {
    let data: Vec<u8> = samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16u32.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&rate.to_le_bytes());
    bytes.extend_from_slice(&(rate * 2).to_le_bytes());
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&(data.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&data);
    std::fs::write(path, bytes).unwrap();
}

fn tone(rate: u32, seconds: f64, amplitude: f32) -> Vec<f32> {
    let n = (seconds * f64::from(rate)) as usize;
    (0..n)
        .map(|i| amplitude * (2.0 * std::f32::consts::PI * 440.0 * i as f32 / rate as f32).sin())
        .collect()
}

fn file_options(path: &std::path::Path, max_seconds: f64) -> CaptureOptions {
    CaptureOptions {
        source: CaptureSource::File {
            path: path.to_path_buf(),
            speed: 100.0,
        },
        max_seconds,
        silence_floor_dbfs: SILENCE_FLOOR_DBFS,
    }
}

/// Waits (on the levels, not the clock) until `elapsed_s` passes `seconds`.
fn wait_for(levels: &mpsc::Receiver<Level>, seconds: f64) -> Vec<Level> {
    let mut seen = Vec::new();
    for level in levels.iter() {
        seen.push(level);
        if level.elapsed_s >= seconds || level.limit_reached {
            break;
        }
    }
    seen
}

#[test]
fn a_wav_through_the_hook_gives_levels_elapsed_time_and_its_sound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spoken.wav");
    // Half-scale sine: RMS 0.354, -9.0 dBFS.
    let sound = tone(SAMPLE_RATE, 1.0, 0.5);
    wav(&path, SAMPLE_RATE, &sound);
    let (tx, rx) = mpsc::channel();
    let capture = Capture::start(file_options(&path, MAX_SECONDS), move |l| {
        let _ = tx.send(l);
    })
    .unwrap();
    assert_eq!(capture.info().device, "spoken.wav");
    assert_eq!(capture.info().rate, SAMPLE_RATE);
    let levels = wait_for(&rx, 1.5);
    let audio = capture.stop().unwrap();
    // Every 100 ms of sound, in order.
    assert!(levels.len() >= 15, "{levels:?}");
    for (i, level) in levels.iter().enumerate() {
        assert!(
            (level.elapsed_s - 0.1 * (i + 1) as f64).abs() < 1e-9,
            "{level:?}"
        );
        assert!(!level.limit_reached);
    }
    // The tone's windows read -9 dBFS, the silence after it the quiet level.
    assert!((levels[3].rms_dbfs + 9.03).abs() < 0.1, "{:?}", levels[3]);
    assert_eq!(levels[13].rms_dbfs, QUIET_DBFS);
    // The recording holds the file's sound, then silence.
    assert!(audio.samples.len() >= 24_000);
    assert_eq!(audio.samples.len() % 320, 0, "whole 20 ms blocks");
    for (a, b) in audio.samples.iter().zip(&sound).take(16_000) {
        assert!((a - b).abs() < 1e-4);
    }
    assert!(audio.samples[16_000..].iter().all(|&s| s == 0.0));
}

#[test]
fn nothing_above_the_floor_is_silence_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiet.wav");
    // -69 dBFS: a quiet room, below the -50 dBFS floor.
    wav(&path, SAMPLE_RATE, &tone(SAMPLE_RATE, 0.5, 0.0005));
    let (tx, rx) = mpsc::channel();
    let capture = Capture::start(file_options(&path, MAX_SECONDS), move |l| {
        let _ = tx.send(l);
    })
    .unwrap();
    wait_for(&rx, 0.6);
    let error = capture.stop().unwrap_err();
    match &error {
        CaptureError::Silence {
            loudest_dbfs,
            floor_dbfs,
        } => {
            assert!((loudest_dbfs + 69.0).abs() < 1.0, "{loudest_dbfs}");
            assert_eq!(*floor_dbfs, SILENCE_FLOOR_DBFS);
        }
        other => panic!("{other:?}"),
    }
    let words = error.to_string();
    assert!(words.starts_with("Nothing was heard"), "{words}");
    assert!(words.contains("-50 dBFS"), "{words}");
}

#[test]
fn the_length_bound_stops_the_recording_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.wav");
    wav(&path, SAMPLE_RATE, &tone(SAMPLE_RATE, 2.0, 0.5));
    let (tx, rx) = mpsc::channel();
    let capture = Capture::start(file_options(&path, 0.55), move |l| {
        let _ = tx.send(l);
    })
    .unwrap();
    let levels = wait_for(&rx, 10.0);
    let last = levels.last().unwrap();
    assert!(last.limit_reached, "{levels:?}");
    assert!((last.elapsed_s - 0.55).abs() < 1e-9, "{last:?}");
    // The thread ended by itself; stop gives exactly the bound's samples.
    while !capture.is_finished() {
        std::thread::yield_now();
    }
    let audio = capture.stop().unwrap();
    assert_eq!(audio.samples.len(), 8_800);
}

#[test]
fn cancel_ends_it_and_a_bad_test_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spoken.wav");
    wav(&path, SAMPLE_RATE, &tone(SAMPLE_RATE, 0.3, 0.5));
    let (tx, rx) = mpsc::channel();
    let capture = Capture::start(file_options(&path, MAX_SECONDS), move |l| {
        let _ = tx.send(l);
    })
    .unwrap();
    wait_for(&rx, 0.2);
    capture.cancel();
    // The level callback is dropped with the thread: the channel closes.
    for _ in rx.iter() {}

    let broken = dir.path().join("broken.wav");
    std::fs::write(&broken, b"RIFF\x10\0\0\0WAVEfmt ").unwrap();
    let error = Capture::start(file_options(&broken, MAX_SECONDS), |_| {}).unwrap_err();
    assert!(
        matches!(error, CaptureError::TestRecording { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("broken.wav"), "{error}");
}

#[test]
fn a_microphone_at_48_khz_is_resampled_to_16_khz_and_measured() {
    let options = CaptureOptions {
        source: CaptureSource::Microphone,
        max_seconds: MAX_SECONDS,
        silence_floor_dbfs: SILENCE_FLOOR_DBFS,
    };
    let mut meter = Meter::new(48_000, &options).unwrap();
    let (tx, rx) = mpsc::channel();
    let sound = tone(48_000, 1.0, 0.5);
    for block in sound.chunks(480) {
        tx.send(Block::Samples(block.to_vec())).unwrap();
    }
    tx.send(Block::Failed("unplugged".into())).unwrap();
    let mut levels = Vec::new();
    let stop = AtomicBool::new(false);
    let error = meter.run(&rx, &stop, |l| levels.push(l)).unwrap_err();
    assert!(matches!(&error, CaptureError::Lost { detail } if detail == "unplugged"));
    assert!(error.to_string().contains("stopped while recording"));
    assert!(levels.len() >= 9, "{}", levels.len());
    assert!((levels[5].rms_dbfs + 9.03).abs() < 0.1, "{:?}", levels[5]);
    let audio = meter.finish().unwrap();
    assert_eq!(audio.samples.len(), 16_000, "ceil(48000 * 16000 / 48000)");
    assert_eq!(audio.source_rate, 48_000);
}

#[test]
fn levels_in_dbfs() {
    assert_eq!(dbfs(1.0), 0.0);
    assert!((dbfs(0.1) + 20.0).abs() < 1e-4);
    assert_eq!(dbfs(0.0), QUIET_DBFS);
    assert_eq!(dbfs(f64::NAN), QUIET_DBFS);
    assert_eq!(dbfs(1e-9), QUIET_DBFS);
}

#[test]
fn the_errors_say_what_to_do() {
    let busy = CaptureError::Busy {
        device: "HDA Intel PCH".into(),
    };
    assert!(busy.to_string().contains("in use by another program"));
    let refused = CaptureError::PermissionRefused {
        device: "default".into(),
    };
    assert!(refused.to_string().contains("not allowed"));
    assert!(CaptureError::NoMicrophone
        .to_string()
        .starts_with("No microphone was found"));
}
