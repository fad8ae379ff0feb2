//! `POST /v1/audio/transcriptions` as `flm serve --asr 1` answers it: a multipart form of
//! `model` and `file`, answered `{"model": "whisper-v3:turbo", "text": ...}`.
//!
//! There is no Whisper here: the "transcript" describes the bytes that arrived (the WAV's
//! format, its length in seconds and an FNV-1a checksum of its samples, in words), so a test
//! knows its audio arrived whole. Without `--asr 1` the route answers `null` with status 200,
//! as FastFlowLM's handlers do for a mode that was not enabled (its embeddings route without
//! `--embed 1` is documented so; the transcription route's exact answer could not be checked
//! on a real NPU). A form or a WAV that cannot be read is a 400 `{"error": ...}`. Whisper
//! itself is looked up at start (`serve.rs`): `whisper-v3:turbo` must be in the model list the
//! server reads, with its files in its folder, or the start fails as a failed ASR load does.

use serde_json::{json, Value};

/// The Whisper `--asr 1` loads.
pub const ASR_MODEL: &str = "whisper-v3:turbo";

/// The answer to a transcription request: (status, body).
pub fn transcribe(asr: bool, content_type: &str, body: &[u8]) -> (u16, Value) {
    if !asr {
        return (200, Value::Null);
    }
    let Some(boundary) = content_type
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
    else {
        return bad("the request is not multipart/form-data with a boundary");
    };
    let parts = match parts(body, &boundary) {
        Ok(p) => p,
        Err(e) => return bad(&e),
    };
    let Some((_, file)) = parts.iter().find(|(name, _)| name == "file") else {
        return bad("no file in the form");
    };
    match describe_wav(file) {
        Ok(text) => (200, json!({"model": ASR_MODEL, "text": text})),
        Err(e) => bad(&e),
    }
}

fn bad(what: &str) -> (u16, Value) {
    (400, json!({ "error": what }))
}

/// The form's parts as (name, content).
fn parts(body: &[u8], boundary: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let delimiter = format!("--{boundary}");
    let d = delimiter.as_bytes();
    let mut starts = Vec::new();
    let mut i = 0;
    while i + d.len() <= body.len() {
        if &body[i..i + d.len()] == d {
            starts.push(i);
            i += d.len();
        } else {
            i += 1;
        }
    }
    if starts.len() < 2 {
        return Err("the form has no complete part".into());
    }
    let last = starts[starts.len() - 1];
    if !body[last + d.len()..].starts_with(b"--") {
        return Err("the form is cut before its closing boundary".into());
    }
    let mut out = Vec::new();
    for pair in starts.windows(2) {
        let part = &body[pair[0] + d.len()..pair[1]];
        let part = part
            .strip_prefix(b"\r\n")
            .ok_or("a part does not begin with CRLF")?;
        let part = part
            .strip_suffix(b"\r\n")
            .ok_or("a part does not end with CRLF")?;
        let split = part
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or("a part has no end of headers")?;
        let headers = String::from_utf8_lossy(&part[..split]).to_string();
        let name = headers
            .split(';')
            .map(str::trim)
            .find_map(|p| p.strip_prefix("name=\""))
            .and_then(|p| p.split('"').next())
            .ok_or("a part has no name")?
            .to_string();
        out.push((name, part[split + 4..].to_vec()));
    }
    Ok(out)
}

/// The WAV's format, length and checksum in words, or why it is not a readable WAV.
fn describe_wav(wav: &[u8]) -> Result<String, String> {
    if wav.len() < 12 || &wav[0..4] != b"RIFF" || &wav[8..12] != b"WAVE" {
        return Err("the file is not a WAV (no RIFF/WAVE header)".into());
    }
    let mut at = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while at + 8 <= wav.len() {
        let id = &wav[at..at + 4];
        let size = u32::from_le_bytes(wav[at + 4..at + 8].try_into().unwrap()) as usize;
        let start = at + 8;
        let end = start
            .checked_add(size)
            .filter(|e| *e <= wav.len())
            .ok_or_else(|| {
                format!(
                    "the WAV's {} chunk runs past its end",
                    String::from_utf8_lossy(id)
                )
            })?;
        let chunk = &wav[start..end];
        if id == b"fmt " {
            if chunk.len() < 16 {
                return Err("the WAV's fmt chunk is too short".into());
            }
            let u16_at = |o: usize| u16::from_le_bytes([chunk[o], chunk[o + 1]]);
            format = Some((
                u16_at(0),
                u16_at(2),
                u32::from_le_bytes(chunk[4..8].try_into().unwrap()),
                u16_at(14),
            ));
        } else if id == b"data" {
            let (kind, channels, rate, bits) =
                format.ok_or("the WAV's data comes before its fmt chunk")?;
            if kind != 1 || bits != 16 || channels == 0 || rate == 0 {
                return Err(format!(
                    "the WAV is format {kind} with {bits} bits, not 16-bit PCM"
                ));
            }
            let frames = chunk.len() / (2 * channels as usize);
            let seconds = frames as f64 / f64::from(rate);
            let mut hash: u32 = 0x811c_9dc5;
            for b in chunk {
                hash = (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193);
            }
            return Ok(format!(
                "heard {seconds:.3} seconds of {rate} Hz audio in {channels} channel(s), {} bytes, checksum {hash:08x}",
                chunk.len()
            ));
        }
        at = end + (size & 1);
    }
    Err("the WAV has no data chunk".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_and_foreign_files_are_refused() {
        assert_eq!(
            describe_wav(b"RIFF").unwrap_err(),
            "the file is not a WAV (no RIFF/WAVE header)"
        );
        let mut wav = b"RIFF\0\0\0\0WAVEdata".to_vec();
        wav.extend_from_slice(&1000u32.to_le_bytes());
        assert!(describe_wav(&wav)
            .unwrap_err()
            .contains("runs past its end"));
    }
}
