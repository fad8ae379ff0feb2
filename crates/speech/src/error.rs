//! Why audio could not be read or transcribed, each in plain words saying what happened and
//! what the person can do. Messages do not name the file: the front end puts its name (or
//! "the uploaded file") before them.

use crate::limits::{duration_words, size_words};

/// Everything reading or transcribing audio can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or read.
    #[error("could not be read: {0}")]
    Io(#[from] std::io::Error),
    /// More bytes than the limit.
    #[error(
        "is {}, more than Hearth reads at once ({}): cut it into shorter parts",
        size_words(*.bytes),
        size_words(*.limit)
    )]
    TooLarge {
        /// The file's size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// Longer than the limit: from its header's duration before decoding, or found while
    /// decoding when the header does not say.
    #[error(
        "is {}{} long, more than Hearth transcribes at once ({}): cut it into shorter parts",
        if *.from_header { "" } else { "more than " },
        duration_words(*.seconds),
        duration_words(*.limit)
    )]
    TooLong {
        /// Its length (from the header), or how far decoding got.
        seconds: f64,
        /// The limit.
        limit: f64,
        /// The length is the header's (else: decoding passed the limit).
        from_header: bool,
    },
    /// Not a sound file of a kind Hearth knows.
    #[error("is not a sound file Hearth can read{}; Hearth reads WAV, FLAC, MP3 and Ogg Vorbis", .looks_like.map(|k| format!(" (it looks like {k})")).unwrap_or_default())]
    NotAudio {
        /// What it seems to be instead, when that is recognizable.
        looks_like: Option<&'static str>,
    },
    /// A sound format Hearth recognizes but does not decode (Opus, AAC, ...).
    #[error("is {format} audio, which Hearth does not read yet: convert it to WAV, FLAC, MP3 or Ogg Vorbis first (for example `ffmpeg -i {example} recording.wav`)")]
    Unsupported {
        /// The format, in words ("Opus", "AAC (MP4/M4A)").
        format: &'static str,
        /// A file name for the example command.
        example: &'static str,
    },
    /// The file holds no samples.
    #[error("holds no sound (0 samples): record again, or choose another file")]
    NoAudio,
    /// The sample rate is outside what Hearth reads.
    #[error("says its sample rate is {rate} Hz, which is not a real recording's (Hearth reads {} to {} Hz): the file is damaged or was written wrongly", crate::resample::MIN_RATE, crate::resample::MAX_RATE)]
    BadSampleRate {
        /// The rate it gives.
        rate: u32,
    },
    /// The channel count is outside what Hearth reads.
    #[error("says it has {channels} channels; Hearth reads 1 to {max}: the file is damaged or was written wrongly")]
    BadChannels {
        /// The count it gives.
        channels: usize,
        /// The most Hearth reads.
        max: usize,
    },
    /// The header promises more sound than the file holds.
    #[error("is cut short: its header promises {} of sound but it holds {}; the file is damaged or was not copied whole", duration_words(*.declared_seconds), duration_words(*.decoded_seconds))]
    Truncated {
        /// What the header says.
        declared_seconds: f64,
        /// What could be decoded.
        decoded_seconds: f64,
    },
    /// The file's structure is broken (a header cut off or lying, a stream that does not decode).
    #[error("is damaged and cannot be read as {format}: {detail}")]
    Damaged {
        /// The format it was read as ("audio" when not known).
        format: String,
        /// What was wrong, from the decoder.
        detail: String,
    },
    /// The language asked for is not one the model knows.
    #[error("cannot be transcribed as \"{language}\": the speech model knows the language codes {known}")]
    Language {
        /// The code asked for.
        language: String,
        /// The codes the model knows, comma-separated.
        known: String,
    },
    /// Transcription failed in the engine.
    #[error("could not be transcribed: {0}")]
    Transcription(String),
    /// Transcription was stopped before it ended.
    #[error("transcription was stopped")]
    Cancelled,
}

impl Error {
    /// Whether the person's file (or request) is at fault, rather than this machine: a server
    /// answers these 400, the rest 500.
    pub fn is_input_error(&self) -> bool {
        !matches!(
            self,
            Error::Io(_) | Error::Transcription(_) | Error::Cancelled
        )
    }
}
