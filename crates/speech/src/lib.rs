//! Hearth's ears: a sound file becomes the 16 kHz mono samples Whisper hears, within bounds
//! stated as numbers, and the engine's Whisper turns them into text.
//!
//! - [`decode`]: WAV/PCM, FLAC, MP3 and Ogg Vorbis through symphonia (pure Rust), packet by
//!   packet, averaged to mono and resampled as they come; [`decode_file`], [`decode_bytes`];
//! - [`resample`]: the band-limited (windowed-sinc) resampler;
//! - [`limits`]: bytes, seconds and channels a decode may take ([`Limits`]);
//! - [`sniff`]: the formats recognized only to be refused by name (Opus, AAC, ...), and what a
//!   file that is not sound looks like;
//! - [`transcribe`]: a Whisper model loaded from its folder, transcribing a decoded recording
//!   ([`SpeechModel`]);
//! - [`capture`]: listening to the microphone (cpal; a WAV in its place for tests): 16 kHz
//!   mono, a live level and time, stopped on request, bounded ([`Capture`], [`CaptureError`]);
//! - [`error`]: the one [`Error`], in plain words.
//!
//! Nothing here knows the app, HTTP or the UI; it depends on the engine alone.

pub mod capture;
mod capture_device;
mod capture_error;
pub mod decode;
pub mod error;
pub mod limits;
pub mod resample;
pub mod sniff;
pub mod transcribe;

pub use capture::{Capture, CaptureError, CaptureInfo, CaptureOptions, CaptureSource, Level};
pub use decode::{decode_bytes, decode_file, Audio};
pub use error::Error;
pub use limits::{Limits, SAMPLE_RATE};
pub use transcribe::{
    LoadError, Segment, SpeechModel, TranscribeOptions, TranscribeProgress, Transcript, WhisperInfo,
};
