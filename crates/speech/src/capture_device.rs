//! The system's default microphone through cpal (ALSA on Linux): opened at its own rate and
//! sample format, each block averaged to mono f32 in the sound system's callback and sent to
//! the capture thread (`crate::capture`), which resamples and measures it.
//!
//! The contract: [`open_default`] returns a playing stream (dropping it closes the microphone)
//! or a [`CaptureError`] naming the case (no microphone, busy, permission refused, a format
//! Hearth cannot take); a failure while recording arrives as [`Block::Failed`].

use std::sync::mpsc::Sender;

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::{ErrorKind, FromSample, SampleFormat, SizedSample};

use crate::capture_error::CaptureError;
use crate::resample::{MAX_RATE, MIN_RATE};

/// A block from a source (the microphone, or the test file's player): mono samples at its
/// rate, or its failure in the sound system's words.
pub(crate) enum Block {
    Samples(Vec<f32>),
    Failed(String),
}

/// An open microphone: the stream (closed when dropped), its rate and its name.
pub(crate) struct OpenMicrophone {
    pub(crate) _stream: cpal::Stream,
    pub(crate) rate: u32,
    pub(crate) device: String,
}

/// Opens the default input device and starts it; its blocks go to `blocks`.
pub(crate) fn open_default(blocks: Sender<Block>) -> Result<OpenMicrophone, CaptureError> {
    let host = cpal::default_host();
    let device = host
        .default_input_device()
        .ok_or(CaptureError::NoMicrophone)?;
    let name = device
        .description()
        .map(|d| d.name().to_owned())
        .unwrap_or_else(|_| "default".to_owned());
    let config = device
        .default_input_config()
        .map_err(|e| classify(e, &name))?;
    let rate = config.sample_rate();
    if !(MIN_RATE..=MAX_RATE).contains(&rate) {
        return Err(CaptureError::Unsupported {
            device: name,
            detail: format!(
                "it records at {rate} Hz, outside what Hearth takes ({MIN_RATE} to {MAX_RATE} Hz)"
            ),
        });
    }
    let channels = usize::from(config.channels().max(1));
    let stream_config = config.config();
    let stream = match config.sample_format() {
        SampleFormat::F32 => build::<f32>(&device, stream_config, channels, blocks),
        SampleFormat::F64 => build::<f64>(&device, stream_config, channels, blocks),
        SampleFormat::I16 => build::<i16>(&device, stream_config, channels, blocks),
        SampleFormat::I32 => build::<i32>(&device, stream_config, channels, blocks),
        SampleFormat::I8 => build::<i8>(&device, stream_config, channels, blocks),
        SampleFormat::U16 => build::<u16>(&device, stream_config, channels, blocks),
        SampleFormat::U8 => build::<u8>(&device, stream_config, channels, blocks),
        other => {
            return Err(CaptureError::Unsupported {
                device: name,
                detail: format!("it gives samples as {other}, which Hearth does not read"),
            })
        }
    }
    .map_err(|e| classify(e, &name))?;
    stream.play().map_err(|e| classify(e, &name))?;
    Ok(OpenMicrophone {
        _stream: stream,
        rate,
        device: name,
    })
}

/// An input stream of samples `T`, averaged to mono f32 per frame.
fn build<T>(
    device: &cpal::Device,
    config: cpal::StreamConfig,
    channels: usize,
    blocks: Sender<Block>,
) -> Result<cpal::Stream, cpal::Error>
where
    T: SizedSample,
    f32: FromSample<T>,
{
    let failures = blocks.clone();
    device.build_input_stream::<T, _, _>(
        config,
        move |data: &[T], _| {
            let mono: Vec<f32> = data
                .chunks(channels)
                .map(|frame| {
                    frame.iter().map(|&s| f32::from_sample_(s)).sum::<f32>() / frame.len() as f32
                })
                .collect();
            // The capture thread has ended: nothing more to do with the sound.
            let _ = blocks.send(Block::Samples(mono));
        },
        move |error| {
            let _ = failures.send(Block::Failed(error.to_string()));
        },
        None,
    )
}

/// The sound system's error as the case a person can act on.
fn classify(error: cpal::Error, device: &str) -> CaptureError {
    let device = device.to_owned();
    match error.kind() {
        ErrorKind::DeviceNotAvailable | ErrorKind::HostUnavailable => CaptureError::NoMicrophone,
        ErrorKind::DeviceBusy => CaptureError::Busy { device },
        ErrorKind::PermissionDenied => CaptureError::PermissionRefused { device },
        ErrorKind::UnsupportedConfig => CaptureError::Unsupported {
            device,
            detail: error.to_string(),
        },
        _ => CaptureError::Device {
            detail: error.to_string(),
        },
    }
}
