//! Sound files to 16 kHz mono samples: symphonia reads the container and decodes packet by
//! packet (WAV/PCM, FLAC, MP3, Ogg Vorbis), each packet is averaged to mono and fed to the
//! [`Resampler`](crate::resample::Resampler), and only the 16 kHz samples are kept.
//!
//! The contract: [`decode_file`] and [`decode_bytes`] return the whole recording or an
//! [`Error`] in plain words, within [`Limits`]: the byte size is checked first, the header's
//! sample rate, channels and duration before any decoding (a 10-hour file is refused from its
//! header at once), and the samples kept as they grow (a file whose header does not say how
//! long it is stops at the limit). A header that promises more sound than the file holds is
//! refused as cut short, a file that holds none as empty, one that is not sound as not sound.
//! The decoder never takes the process down: a panic inside it (a malformed stream the library
//! did not expect) becomes [`Error::Damaged`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::{self, DecoderOptions, CODEC_TYPE_NULL};
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::{MediaSource, MediaSourceStream, MediaSourceStreamOptions};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

use crate::error::Error;
use crate::limits::{Limits, MAX_CHANNELS, SAMPLE_RATE};
use crate::resample::{Resampler, MAX_RATE, MIN_RATE};
use crate::sniff;

/// Packets in a row that may fail to decode (skipped) before the file is called damaged.
const MAX_BAD_PACKETS_IN_A_ROW: usize = 64;
/// Packets in a row that may give no samples before the file is called damaged (a stream
/// that never advances).
const MAX_EMPTY_PACKETS_IN_A_ROW: usize = 100_000;
/// How much shorter than its header says a recording may be without being called cut short:
/// the larger of half a second and 2% (an MP3's or Vorbis' count is the encoder's estimate).
const SHORTFALL_SECONDS: f64 = 0.5;
const SHORTFALL_FRACTION: f64 = 0.02;

/// A recording as Whisper hears it.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    /// Mono samples at [`SAMPLE_RATE`] (16 kHz), in -1..1 for full scale.
    pub samples: Vec<f32>,
    /// The file's own sample rate, in Hz (the first, if it changes).
    pub source_rate: u32,
    /// The file's channels (averaged into one).
    pub source_channels: usize,
    /// What it was read as: "WAV", "FLAC", "MP3", "Ogg Vorbis".
    pub format: &'static str,
}

impl Audio {
    /// Its length, in seconds.
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / f64::from(SAMPLE_RATE)
    }
}

/// Decodes the sound file at `path`, read in packets (never whole).
pub fn decode_file(path: &Path, limits: &Limits) -> Result<Audio, Error> {
    let mut file = File::open(path)?;
    let bytes = file.metadata()?.len();
    if bytes > limits.max_bytes {
        return Err(Error::TooLarge {
            bytes,
            limit: limits.max_bytes,
        });
    }
    let mut head = Vec::with_capacity(HEAD);
    (&mut file).take(HEAD as u64).read_to_end(&mut head)?;
    file.seek(SeekFrom::Start(0))?;
    let extension = path.extension().and_then(|e| e.to_str());
    decode_source(Box::new(file), &head, extension, limits)
}

/// Decodes a sound file held in memory (an upload); `extension` (from its file name, without
/// the dot) helps recognize its format.
pub fn decode_bytes<B>(bytes: B, extension: Option<&str>, limits: &Limits) -> Result<Audio, Error>
where
    B: AsRef<[u8]> + Send + Sync + 'static,
{
    let len = bytes.as_ref().len() as u64;
    if len > limits.max_bytes {
        return Err(Error::TooLarge {
            bytes: len,
            limit: limits.max_bytes,
        });
    }
    let head = bytes.as_ref()[..bytes.as_ref().len().min(HEAD)].to_vec();
    decode_source(
        Box::new(std::io::Cursor::new(bytes)),
        &head,
        extension,
        limits,
    )
}

/// Bytes read ahead to recognize a format.
const HEAD: usize = 512;

fn decode_source(
    source: Box<dyn MediaSource>,
    head: &[u8],
    extension: Option<&str>,
    limits: &Limits,
) -> Result<Audio, Error> {
    if head.is_empty() {
        return Err(Error::NoAudio);
    }
    if let Some(refusal) = sniff::refusal(head) {
        return Err(refusal);
    }
    let format = format_name(head);
    match catch_unwind(AssertUnwindSafe(|| {
        decode_stream(source, head, extension, limits)
    })) {
        Ok(result) => result,
        Err(panic) => {
            let detail = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the decoder stopped on malformed data".to_owned());
            tracing::warn!(%detail, "the audio decoder panicked");
            Err(Error::Damaged {
                format: format.to_owned(),
                detail: "its data is malformed".to_owned(),
            })
        }
    }
}

/// The container the first bytes show, in words.
fn format_name(head: &[u8]) -> &'static str {
    if head.starts_with(b"RIFF") || head.starts_with(b"RF64") {
        "WAV"
    } else if head.starts_with(b"fLaC") {
        "FLAC"
    } else if head.starts_with(b"OggS") {
        "Ogg"
    } else if head.starts_with(b"ID3")
        || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE0 == 0xE0)
    {
        "MP3"
    } else {
        "audio"
    }
}

fn decode_stream(
    source: Box<dyn MediaSource>,
    head: &[u8],
    extension: Option<&str>,
    limits: &Limits,
) -> Result<Audio, Error> {
    let container = format_name(head);
    let damaged = |detail: String| Error::Damaged {
        format: container.to_owned(),
        detail,
    };
    let stream = MediaSourceStream::new(source, MediaSourceStreamOptions::default());
    let mut hint = Hint::new();
    if let Some(extension) = extension {
        hint.with_extension(extension);
    }
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            stream,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| match e {
            SymphoniaError::Unsupported(_) if container == "audio" => Error::NotAudio {
                looks_like: sniff::looks_like(head),
            },
            other => damaged(header_words(other)),
        })?;
    let mut reader = probed.format;
    let track = reader
        .tracks()
        .iter()
        .find(|t| t.codec_params.codec != CODEC_TYPE_NULL)
        .ok_or_else(|| damaged("it holds no sound track".to_owned()))?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let format = codec_name(params.codec, container);
    if params.codec == codecs::CODEC_TYPE_OPUS {
        return Err(Error::Unsupported {
            format: "Opus",
            example: "recording.opus",
        });
    }
    // The header's facts, checked before any decoding.
    if let Some(rate) = params.sample_rate {
        check_rate(rate)?;
    }
    if let Some(channels) = params.channels {
        check_channels(channels.count())?;
    }
    let declared_seconds = match (params.n_frames, params.sample_rate) {
        (Some(frames), Some(rate)) => Some(frames as f64 / f64::from(rate)),
        _ => None,
    };
    if let Some(seconds) = declared_seconds {
        if seconds > limits.max_seconds {
            return Err(Error::TooLong {
                seconds,
                limit: limits.max_seconds,
                from_header: true,
            });
        }
    }
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| match e {
            SymphoniaError::Unsupported(what) => {
                damaged(format!("its encoding is not one Hearth reads ({what})"))
            }
            other => damaged(other.to_string()),
        })?;

    let max_samples = limits.max_samples();
    let mut samples: Vec<f32> = Vec::new();
    let mut resampler: Option<Resampler> = None;
    let mut mono: Vec<f32> = Vec::new();
    let mut buffer: Option<SampleBuffer<f32>> = None;
    let mut source_rate = None;
    let mut source_channels = 0;
    let mut input_frames: u64 = 0;
    let mut rate_changed = false;
    let (mut bad_in_a_row, mut empty_in_a_row) = (0usize, 0usize);
    let mut first_error = None;
    loop {
        let packet = match reader.next_packet() {
            Ok(packet) => packet,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break
            }
            // A chained stream with new parameters: the sound so far is what there is.
            Err(SymphoniaError::ResetRequired) => break,
            Err(SymphoniaError::IoError(e)) => return Err(Error::Io(e)),
            Err(other) => return Err(damaged(other.to_string())),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(decoded) => decoded,
            Err(SymphoniaError::DecodeError(detail)) => {
                // One bad packet is skipped (as players do); many in a row is a damaged file.
                bad_in_a_row += 1;
                first_error.get_or_insert_with(|| detail.to_owned());
                if bad_in_a_row > MAX_BAD_PACKETS_IN_A_ROW {
                    return Err(damaged(first_error.unwrap_or_default()));
                }
                continue;
            }
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break
            }
            Err(SymphoniaError::IoError(e)) => return Err(Error::Io(e)),
            Err(other) => return Err(damaged(other.to_string())),
        };
        bad_in_a_row = 0;
        let spec = *decoded.spec();
        let frames = decoded.frames();
        if frames == 0 {
            empty_in_a_row += 1;
            if empty_in_a_row > MAX_EMPTY_PACKETS_IN_A_ROW {
                return Err(damaged("its packets hold no sound".to_owned()));
            }
            continue;
        }
        empty_in_a_row = 0;
        let channels = spec.channels.count();
        check_channels(channels)?;
        check_rate(spec.rate)?;
        source_channels = source_channels.max(channels);
        match &mut resampler {
            Some(r) if r.from_rate() == spec.rate => {}
            _ => {
                if let Some(mut old) = resampler.take() {
                    old.finish(&mut samples);
                    rate_changed = true;
                }
                source_rate.get_or_insert(spec.rate);
                resampler = Some(
                    Resampler::new(spec.rate, SAMPLE_RATE)
                        .map_err(|e| Error::BadSampleRate { rate: e.rate })?,
                );
            }
        }
        let needed = decoded.capacity() as u64;
        let buf = match &mut buffer {
            Some(b) if b.capacity() >= decoded.capacity() * channels => b,
            _ => buffer.insert(SampleBuffer::new(needed, spec)),
        };
        buf.copy_interleaved_ref(decoded);
        let interleaved = &buf.samples()[..frames * channels];
        mono.clear();
        mono.extend(interleaved.chunks_exact(channels).map(|frame| {
            let sum: f32 = frame.iter().sum();
            // A NaN or infinity from a broken float WAV becomes silence, not a poisoned mel.
            let value = sum / channels as f32;
            if value.is_finite() {
                value.clamp(-1.0, 1.0)
            } else {
                0.0
            }
        }));
        input_frames += frames as u64;
        if let Some(r) = &mut resampler {
            r.push(&mono, &mut samples);
        }
        if samples.len() as u64 > max_samples {
            return Err(Error::TooLong {
                seconds: limits.max_seconds,
                limit: limits.max_seconds,
                from_header: false,
            });
        }
    }
    if let Some(mut r) = resampler {
        r.finish(&mut samples);
    }
    let Some(source_rate) = source_rate else {
        if let Some(detail) = first_error {
            return Err(damaged(detail));
        }
        return Err(Error::NoAudio);
    };
    if let (Some(declared), false) = (declared_seconds, rate_changed) {
        let decoded = input_frames as f64 / f64::from(source_rate);
        let allowed = SHORTFALL_SECONDS.max(declared * SHORTFALL_FRACTION);
        if declared - decoded > allowed {
            return Err(Error::Truncated {
                declared_seconds: declared,
                decoded_seconds: decoded,
            });
        }
    }
    samples.truncate(max_samples as usize);
    tracing::debug!(
        format,
        source_rate,
        source_channels,
        seconds = samples.len() as f64 / f64::from(SAMPLE_RATE),
        "audio decoded"
    );
    Ok(Audio {
        samples,
        source_rate,
        source_channels,
        format,
    })
}

fn check_rate(rate: u32) -> Result<(), Error> {
    if (MIN_RATE..=MAX_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(Error::BadSampleRate { rate })
    }
}

fn check_channels(channels: usize) -> Result<(), Error> {
    if (1..=MAX_CHANNELS).contains(&channels) {
        Ok(())
    } else {
        Err(Error::BadChannels {
            channels,
            max: MAX_CHANNELS,
        })
    }
}

/// The format in words, from the track's codec (the container's name for PCM and others).
fn codec_name(codec: codecs::CodecType, container: &'static str) -> &'static str {
    use symphonia::core::codecs::*;
    match codec {
        CODEC_TYPE_FLAC => "FLAC",
        CODEC_TYPE_MP3 | CODEC_TYPE_MP2 | CODEC_TYPE_MP1 => "MP3",
        CODEC_TYPE_VORBIS => "Ogg Vorbis",
        _ => container,
    }
}

/// A probe's failure in words: a file that ends inside its header is cut short there.
fn header_words(error: SymphoniaError) -> String {
    match error {
        SymphoniaError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the file ends inside its header".to_owned()
        }
        SymphoniaError::IoError(e) => e.to_string(),
        SymphoniaError::DecodeError(detail) => format!("its header is invalid ({detail})"),
        SymphoniaError::Unsupported(what) => {
            format!("its header asks for something Hearth does not read ({what})")
        }
        SymphoniaError::LimitError(what) => format!("its header asks for too much ({what})"),
        other => other.to_string(),
    }
}
