//! Sound files of every format Hearth reads come out as the same 16 kHz mono tone: its
//! length, level and frequency measured on the decoded samples.

use crate::common;

use common::*;
use hearth_speech::{decode_bytes, decode_file, Error, Limits};

fn check_tone(samples: &[f32], seconds: f64, freq: f64, amplitude: f64, what: &str) {
    let got = samples.len() as f64 / 16_000.0;
    assert!(
        (got - seconds).abs() < 0.06,
        "{what}: {got} s, expected {seconds}"
    );
    let level = amplitude_at(samples, freq);
    assert!(
        (level - amplitude).abs() < amplitude * 0.06, // MP3 and Vorbis are lossy
        "{what}: {freq} Hz at {level}, expected {amplitude}"
    );
    for off in [-200.0, 200.0] {
        let other = amplitude_at(samples, freq + off);
        assert!(
            other < amplitude * 0.01,
            "{what}: {} Hz at {other}",
            freq + off
        );
    }
}

#[test]
fn the_committed_fixtures_decode_to_the_tone() {
    for (name, format) in [
        ("tone.flac", "FLAC"),
        ("tone.mp3", "MP3"),
        ("tone.ogg", "Ogg Vorbis"),
    ] {
        let audio = decode_file(&fixture(name), &Limits::default()).unwrap();
        assert_eq!(audio.format, format, "{name}");
        assert_eq!(audio.source_rate, 22_050, "{name}");
        assert_eq!(audio.source_channels, 1, "{name}");
        // MP3 adds the encoder's delay and padding (about 50 ms) around the second.
        let seconds = if format == "MP3" {
            audio.duration_s()
        } else {
            1.0
        };
        check_tone(&audio.samples, seconds, 440.0, 0.5, name);
        assert!(
            (audio.duration_s() - 1.0).abs() < 0.1,
            "{name}: {}",
            audio.duration_s()
        );
    }
}

#[test]
fn opus_is_refused_by_name_with_a_way_out() {
    let err = decode_file(&fixture("tone.opus"), &Limits::default()).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { format: "Opus", .. }),
        "{err:?}"
    );
    let words = err.to_string();
    assert!(
        words.contains("Opus audio, which Hearth does not read yet"),
        "{words}"
    );
    assert!(
        words.contains("convert it to WAV, FLAC, MP3 or Ogg Vorbis"),
        "{words}"
    );
}

#[test]
fn pcm_wav_of_every_common_shape_decodes() {
    let tone = sine(1000.0, 44_100, 0.5, 0.5);
    // Stereo 44.1 kHz 16-bit, averaged to mono.
    let audio = decode_bytes(wav_i16(&tone, 2, 44_100), Some("wav"), &Limits::default()).unwrap();
    assert_eq!(
        (audio.format, audio.source_rate, audio.source_channels),
        ("WAV", 44_100, 2)
    );
    check_tone(&audio.samples, 0.5, 1000.0, 0.5, "stereo 16-bit");
    // Float, 48 kHz.
    let audio = decode_bytes(
        wav_f32(&sine(300.0, 48_000, 0.5, 0.25), 48_000),
        None,
        &Limits::default(),
    )
    .unwrap();
    check_tone(&audio.samples, 0.5, 300.0, 0.25, "float");
    // 8 kHz (upsampled) and 16 kHz (as is).
    let audio = decode_bytes(
        wav_i16(&sine(700.0, 8_000, 0.5, 0.5), 1, 8_000),
        None,
        &Limits::default(),
    )
    .unwrap();
    check_tone(&audio.samples, 0.5, 700.0, 0.5, "8 kHz");
    let audio = decode_bytes(
        wav_i16(&sine(700.0, 16_000, 0.5, 0.5), 1, 16_000),
        None,
        &Limits::default(),
    )
    .unwrap();
    check_tone(&audio.samples, 0.5, 700.0, 0.5, "16 kHz");
    // A left channel with the tone and a silent right one: the mean, half the level.
    let mut bytes = wav_header(1, 2, 16_000, 16, 16_000 * 4);
    for s in sine(500.0, 16_000, 1.0, 0.8) {
        bytes.extend_from_slice(&((s * 32767.0) as i16).to_le_bytes());
        bytes.extend_from_slice(&0i16.to_le_bytes());
    }
    let audio = decode_bytes(bytes, None, &Limits::default()).unwrap();
    check_tone(&audio.samples, 1.0, 500.0, 0.4, "one channel of two");
}

#[test]
fn a_file_read_from_disk_and_from_memory_decodes_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("tone.flac")).unwrap();
    let path = dir.path().join("copy.flac");
    std::fs::write(&path, &bytes).unwrap();
    let from_disk = decode_file(&path, &Limits::default()).unwrap();
    let from_memory = decode_bytes(bytes, Some("flac"), &Limits::default()).unwrap();
    assert_eq!(from_disk, from_memory);
}
