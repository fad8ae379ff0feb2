//! Speech to text on the NPU: FastFlowLM's Whisper (`whisper-v3:turbo`, loaded beside the
//! chat model when `flm serve` is started with `--asr 1`).
//!
//! Contract: [`transcribe_on`] takes 16 kHz mono samples (what Hearth's audio decoding gives),
//! encodes them as a 16-bit PCM WAV ([`wav_bytes`]), sends them as the multipart form
//! FastFlowLM reads (`model`, `file`) to `POST /v1/audio/transcriptions` of the server on a
//! loopback port, and returns the `text` of its `{"model", "text"}` answer. Every failure is a
//! [`TranscribeError`] in plain words: the server gone, Whisper not loaded, out of time (the
//! limit said in seconds), an answer that is not FastFlowLM's. It never starts a server: the
//! backend ([`crate::npu::NpuBackend::transcribe`]) does, with the one FastFlowLM it owns.

use std::time::Duration;

use serde_json::Value;

/// The Whisper FastFlowLM loads with `--asr 1` (and pulls on first use).
pub const ASR_MODEL: &str = "whisper-v3:turbo";

/// The sample rate FastFlowLM's Whisper hears, and the WAV's.
pub const SAMPLE_RATE: u32 = 16_000;

/// The longest audio sent at once: 2 hours (as Hearth's own `/v1/audio/transcriptions`).
pub const MAX_SECONDS: u64 = 2 * 60 * 60;

/// The largest answer read (a transcript of 2 hours is far smaller).
const MAX_ANSWER_BYTES: u64 = 8 * 1024 * 1024;

/// What went wrong sending speech to FastFlowLM, in plain words with what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TranscribeError {
    /// No samples.
    #[error("the audio is empty: there is nothing to transcribe")]
    Empty,
    /// Longer than [`MAX_SECONDS`].
    #[error("the audio lasts {seconds} s, more than the {max} s Hearth sends to FastFlowLM at once: cut it into shorter pieces")]
    TooLong {
        /// Its length.
        seconds: u64,
        /// The limit.
        max: u64,
    },
    /// A sample is not a number (NaN or infinite).
    #[error("the audio holds a sample that is not a number (at {index}): decode it again")]
    NotANumber {
        /// Which sample.
        index: usize,
    },
    /// Nothing answered on the port.
    #[error("FastFlowLM is not answering on port {port} ({detail}): it may have stopped; Hearth starts it again on the next request")]
    ServerGone {
        /// The port.
        port: u16,
        /// What the connection said.
        detail: String,
    },
    /// The server answered, but has no Whisper (started without `--asr 1`).
    #[error("FastFlowLM on port {port} has no speech model loaded (it was started without --asr 1; it said {said:?}): restart it with speech turned on")]
    AsrNotLoaded {
        /// The port.
        port: u16,
        /// What it said (shortened).
        said: String,
    },
    /// No answer in time.
    #[error("FastFlowLM did not finish transcribing {audio_secs:.1} s of audio within {limit_secs} s: try a shorter recording, or the CPU")]
    Timeout {
        /// The audio's length.
        audio_secs: f64,
        /// The limit.
        limit_secs: u64,
    },
    /// An answer that is not `{"text": ...}`.
    #[error(
        "FastFlowLM answered the transcription with HTTP {status} and {said:?}, not a transcript"
    )]
    BadAnswer {
        /// The HTTP status.
        status: u16,
        /// What it said (shortened).
        said: String,
    },
}

/// Refuses audio FastFlowLM is not sent: empty, longer than [`MAX_SECONDS`], or holding a
/// sample that is not a number.
pub fn check_samples(samples: &[f32]) -> Result<(), TranscribeError> {
    if samples.is_empty() {
        return Err(TranscribeError::Empty);
    }
    let seconds = samples.len() as u64 / u64::from(SAMPLE_RATE);
    if seconds > MAX_SECONDS {
        return Err(TranscribeError::TooLong {
            seconds,
            max: MAX_SECONDS,
        });
    }
    if let Some(index) = samples.iter().position(|s| !s.is_finite()) {
        return Err(TranscribeError::NotANumber { index });
    }
    Ok(())
}

/// `samples` (16 kHz mono, in -1..1; louder ones are clipped) as a 16-bit PCM WAV file.
pub fn wav_bytes(samples: &[f32]) -> Result<Vec<u8>, TranscribeError> {
    check_samples(samples)?;
    let seconds = samples.len() as u64 / u64::from(SAMPLE_RATE);
    // At most 2 h * 16000 * 2 bytes = 230 MB: fits the u32 sizes of a RIFF header.
    let data_len = u32::try_from(samples.len() * 2).map_err(|_| TranscribeError::TooLong {
        seconds,
        max: MAX_SECONDS,
    })?;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&SAMPLE_RATE.to_le_bytes());
    out.extend_from_slice(&(SAMPLE_RATE * 2).to_le_bytes()); // bytes per second
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        let v = (s.clamp(-1.0, 1.0) * 32767.0).round() as i16;
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

/// A multipart form of `model` and `file` (`audio.wav`), and its boundary. The boundary is
/// made so it cannot occur in the WAV: it is checked against the bytes and lengthened until
/// it does not.
pub fn multipart_form(model: &str, wav: &[u8]) -> (String, Vec<u8>) {
    let mut boundary = String::from("hearth-speech-boundary-7a3f");
    while contains(wav, boundary.as_bytes()) || model.contains(&boundary) {
        boundary.push('x');
    }
    let mut body = Vec::with_capacity(wav.len() + 512);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(wav);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (boundary, body)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Transcribes `samples` (16 kHz mono) with the Whisper of the FastFlowLM on `port`, waiting
/// at most `timeout` for the whole exchange.
pub fn transcribe_on(
    port: u16,
    samples: &[f32],
    timeout: Duration,
) -> Result<String, TranscribeError> {
    let wav = wav_bytes(samples)?;
    let (boundary, body) = multipart_form(ASR_MODEL, &wav);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(timeout))
        .build()
        .into();
    let audio_secs = samples.len() as f64 / f64::from(SAMPLE_RATE);
    let response = agent
        .post(&format!("http://127.0.0.1:{port}/v1/audio/transcriptions"))
        .header(
            "Content-Type",
            &format!("multipart/form-data; boundary={boundary}"),
        )
        .send(&body[..]);
    let mut response = match response {
        Ok(r) => r,
        Err(e) => return Err(transport(e, port, audio_secs, timeout)),
    };
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_string()
        .map_err(|e| transport(e, port, audio_secs, timeout))?;
    read_answer(port, status, &text)
}

/// The transcript in FastFlowLM's answer (`{"model", "text"}`), or what is wrong with it.
pub fn read_answer(port: u16, status: u16, body: &str) -> Result<String, TranscribeError> {
    let said = shorten(body);
    let value: Option<Value> = serde_json::from_str(body).ok();
    if status == 200 {
        if let Some(text) = value
            .as_ref()
            .and_then(|v| v.get("text"))
            .and_then(Value::as_str)
        {
            return Ok(text.trim().to_string());
        }
    }
    // FastFlowLM without `--asr 1` has no Whisper: its answer is an error, or `null` (as for
    // embeddings without `--embed 1`).
    let no_model = matches!(value, Some(Value::Null))
        || body.to_ascii_lowercase().contains("asr")
        || body.to_ascii_lowercase().contains("whisper");
    if no_model {
        return Err(TranscribeError::AsrNotLoaded { port, said });
    }
    Err(TranscribeError::BadAnswer { status, said })
}

fn transport(e: ureq::Error, port: u16, audio_secs: f64, timeout: Duration) -> TranscribeError {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Connect) => TranscribeError::ServerGone {
            port,
            detail: "the connection was not accepted within 5 s".into(),
        },
        ureq::Error::Timeout(_) => TranscribeError::Timeout {
            audio_secs,
            limit_secs: timeout.as_secs().max(1),
        },
        other => TranscribeError::ServerGone {
            port,
            detail: other.to_string(),
        },
    }
}

fn shorten(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_header_says_16_khz_mono_16_bit() {
        let wav = wav_bytes(&[0.0, 0.5, -1.0, 2.0]).unwrap();
        assert_eq!(wav.len(), 44 + 8);
        assert_eq!(&wav[0..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(wav[4..8].try_into().unwrap()), 36 + 8);
        assert_eq!(u16::from_le_bytes([wav[22], wav[23]]), 1);
        assert_eq!(u32::from_le_bytes(wav[24..28].try_into().unwrap()), 16_000);
        assert_eq!(u16::from_le_bytes([wav[34], wav[35]]), 16);
        assert_eq!(i16::from_le_bytes([wav[46], wav[47]]), 16384);
        assert_eq!(i16::from_le_bytes([wav[48], wav[49]]), -32767);
        assert_eq!(i16::from_le_bytes([wav[50], wav[51]]), 32767);
    }

    #[test]
    fn wav_refuses_empty_nan_and_too_long() {
        assert_eq!(wav_bytes(&[]), Err(TranscribeError::Empty));
        assert_eq!(
            wav_bytes(&[0.0, f32::NAN]),
            Err(TranscribeError::NotANumber { index: 1 })
        );
        let long = vec![0.0f32; (MAX_SECONDS as usize + 1) * SAMPLE_RATE as usize];
        assert!(matches!(
            wav_bytes(&long),
            Err(TranscribeError::TooLong { .. })
        ));
    }

    #[test]
    fn boundary_never_occurs_in_the_audio() {
        let wav = b"xx--hearth-speech-boundary-7a3fyy".to_vec();
        let (boundary, body) = multipart_form(ASR_MODEL, &wav);
        assert!(!contains(&wav, boundary.as_bytes()));
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("name=\"model\"\r\n\r\nwhisper-v3:turbo\r\n"));
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
    }

    #[test]
    fn answers_are_read_or_refused_in_words() {
        assert_eq!(
            read_answer(1, 200, r#"{"model":"whisper-v3:turbo","text":" hello "}"#).unwrap(),
            "hello"
        );
        assert!(matches!(
            read_answer(1, 200, "null"),
            Err(TranscribeError::AsrNotLoaded { .. })
        ));
        assert!(matches!(
            read_answer(1, 500, "<html>"),
            Err(TranscribeError::BadAnswer { status: 500, .. })
        ));
        let words = TranscribeError::Timeout {
            audio_secs: 12.0,
            limit_secs: 30,
        }
        .to_string();
        assert!(
            words.contains("12.0 s") && words.contains("30 s"),
            "{words}"
        );
    }
}
