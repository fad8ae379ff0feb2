//! Sound files the tests make byte by byte, and what they measure in decoded samples.
#![allow(dead_code)]

use std::path::PathBuf;

/// A committed fixture (crates/speech/tests/fixtures, written by make.sh there).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A canonical WAV header: `format` 1 (PCM) or 3 (float), with the `data` chunk's size as
/// given (it may lie).
pub fn wav_header(format: u16, channels: u16, rate: u32, bits: u16, data_len: u32) -> Vec<u8> {
    let block_align = channels.wrapping_mul(bits / 8);
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&36u32.wrapping_add(data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&format.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&rate.wrapping_mul(u32::from(block_align)).to_le_bytes());
    out.extend_from_slice(&block_align.to_le_bytes());
    out.extend_from_slice(&bits.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out
}

/// A sine at `freq` Hz and `amplitude` (full scale 1), `seconds` long, per channel.
pub fn sine(freq: f64, rate: u32, seconds: f64, amplitude: f64) -> Vec<f64> {
    let n = (seconds * f64::from(rate)).round() as usize;
    (0..n)
        .map(|i| amplitude * (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate)).sin())
        .collect()
}

/// A 16-bit PCM WAV file of `samples` on every one of `channels`.
pub fn wav_i16(samples: &[f64], channels: u16, rate: u32) -> Vec<u8> {
    let data_len = (samples.len() * usize::from(channels) * 2) as u32;
    let mut out = wav_header(1, channels, rate, 16, data_len);
    for &s in samples {
        let v = (s * 32767.0).round() as i16;
        for _ in 0..channels {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// A 32-bit float WAV file (mono).
pub fn wav_f32(samples: &[f64], rate: u32) -> Vec<u8> {
    let mut out = wav_header(3, 1, rate, 32, (samples.len() * 4) as u32);
    for &s in samples {
        out.extend_from_slice(&(s as f32).to_le_bytes());
    }
    out
}

/// The amplitude of `freq` in 16 kHz `samples` (a Hann-windowed single DFT bin over the
/// middle half), relative to full scale.
pub fn amplitude_at(samples: &[f32], freq: f64) -> f64 {
    let middle = &samples[samples.len() / 4..samples.len() * 3 / 4];
    let n = middle.len() as f64;
    let (mut re, mut im, mut wsum) = (0.0, 0.0, 0.0);
    for (i, &x) in middle.iter().enumerate() {
        let w = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n).cos();
        let phase = 2.0 * std::f64::consts::PI * freq * i as f64 / 16_000.0;
        re += f64::from(x) * w * phase.cos();
        im += f64::from(x) * w * phase.sin();
        wsum += w;
    }
    2.0 * (re * re + im * im).sqrt() / wsum
}

/// A silent MPEG-1 Layer III frame: 128 kbit/s, 44.1 kHz, joint stereo off, no CRC, 417
/// bytes; all-zero side information decodes to 1,152 frames of silence.
pub fn silent_mp3_frame() -> Vec<u8> {
    let mut frame = vec![0xFF, 0xFB, 0x90, 0x00];
    frame.resize(417, 0);
    frame
}

/// A silent frame carrying a Xing header that says the stream has `frames` frames.
pub fn xing_mp3_frame(frames: u32) -> Vec<u8> {
    let mut frame = silent_mp3_frame();
    // After the 4-byte header and 32 bytes of stereo side information.
    let at = 4 + 32;
    frame[at..at + 4].copy_from_slice(b"Xing");
    frame[at + 4..at + 8].copy_from_slice(&1u32.to_be_bytes()); // flags: frame count present
    frame[at + 8..at + 12].copy_from_slice(&frames.to_be_bytes());
    frame
}

/// A deterministic xorshift generator, for damaged copies of a file.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
