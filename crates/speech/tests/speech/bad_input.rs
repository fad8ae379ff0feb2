//! Issue 51 item 5: bad input gets a clear error and nothing crashes, each case made byte by
//! byte here: a truncated or lying WAV or MP3 header, a 10-hour file, 0 samples, a sample rate
//! of 1, a file that is not sound, and damaged copies of every fixture.

use crate::common;

use std::time::Instant;

use common::*;
use hearth_speech::{decode_bytes, decode_file, Error, Limits};

fn decode(bytes: Vec<u8>) -> Result<hearth_speech::Audio, Error> {
    decode_bytes(bytes, None, &Limits::default())
}

#[test]
fn a_wav_header_cut_anywhere_is_refused_plainly() {
    let whole = wav_i16(&sine(440.0, 16_000, 0.1, 0.5), 1, 16_000);
    for cut in 0..44 {
        let err = decode(whole[..cut].to_vec()).unwrap_err();
        let words = err.to_string();
        assert!(
            matches!(
                err,
                Error::NoAudio
                    | Error::Damaged { .. }
                    | Error::Truncated { .. }
                    | Error::NotAudio { .. }
            ),
            "cut at {cut}: {err:?}"
        );
        assert!(!words.is_empty());
        if cut >= 12 {
            assert!(
                words.contains("WAV") || matches!(err, Error::NoAudio | Error::Truncated { .. }),
                "cut at {cut}: {words}"
            );
        }
    }
}

#[test]
fn a_wav_whose_header_promises_more_than_it_holds_is_cut_short() {
    // The header says 10 s; the file holds 1 s.
    let mut bytes = wav_header(1, 1, 16_000, 16, 16_000 * 2 * 10);
    for s in sine(440.0, 16_000, 1.0, 0.5) {
        bytes.extend_from_slice(&((s * 32767.0) as i16).to_le_bytes());
    }
    let err = decode(bytes).unwrap_err();
    assert!(
        matches!(err, Error::Truncated { declared_seconds, decoded_seconds }
            if declared_seconds == 10.0 && (decoded_seconds - 1.0).abs() < 0.01),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "is cut short: its header promises 10.0 s of sound but it holds 1.0 s; the file is damaged or was not copied whole"
    );
}

#[test]
fn a_10_hour_wav_is_refused_from_its_header_before_decoding() {
    // 10 hours of 16 kHz mono 16-bit in the header; 1 KB of it in the file.
    let mut bytes = wav_header(1, 1, 16_000, 16, 16_000 * 2 * 36_000);
    bytes.resize(bytes.len() + 1024, 0);
    let started = Instant::now();
    let err = decode(bytes).unwrap_err();
    assert!(
        matches!(err, Error::TooLong { seconds, from_header: true, .. } if seconds == 36_000.0),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "is 10 h 0 min long, more than Hearth transcribes at once (2 h 0 min): cut it into shorter parts"
    );
    // Nothing was decoded: the answer is immediate (a generous bound, not a timing test).
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn an_mp3_whose_header_says_10_hours_is_refused_before_decoding() {
    // A Xing header counting 10 hours of 1,152-sample frames at 44.1 kHz, then 3 real frames.
    let frames = (36_000.0f64 * 44_100.0 / 1152.0).ceil() as u32;
    let mut bytes = xing_mp3_frame(frames);
    for _ in 0..3 {
        bytes.extend_from_slice(&silent_mp3_frame());
    }
    let err = decode_bytes(bytes, Some("mp3"), &Limits::default()).unwrap_err();
    assert!(
        matches!(err, Error::TooLong { from_header: true, seconds, .. } if seconds >= 36_000.0),
        "{err:?}"
    );
}

#[test]
fn a_stream_without_a_length_stops_at_the_limit() {
    // The FLAC fixture with its STREAMINFO's total-samples field zeroed ("unknown").
    let mut bytes = std::fs::read(fixture("tone.flac")).unwrap();
    assert_eq!(&bytes[..4], b"fLaC");
    // STREAMINFO's 64 bits of rate (20), channels (3), bits (5) and total samples (36) start
    // 10 bytes into the block, after the 4-byte block header.
    let at = 4 + 4 + 10;
    bytes[at + 3] &= 0xF0;
    bytes[at + 4..at + 8].fill(0);
    let limits = Limits {
        max_seconds: 0.5,
        ..Limits::default()
    };
    let err = decode_bytes(bytes.clone(), Some("flac"), &limits).unwrap_err();
    assert!(
        matches!(err, Error::TooLong { seconds, from_header: false, .. } if seconds == 0.5),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "is more than 0.5 s long, more than Hearth transcribes at once (0.5 s): cut it into shorter parts"
    );
    // Within the limit, the same stream is its whole second.
    let audio = decode_bytes(bytes, Some("flac"), &Limits::default()).unwrap();
    assert!(
        (audio.duration_s() - 1.0).abs() < 0.01,
        "{}",
        audio.duration_s()
    );
}

#[test]
fn an_mp3_without_a_length_header_is_measured_from_its_size() {
    // 100 silent frames (2.6 s), no Xing header: the length is estimated from the bytes, and
    // refused from that estimate; within the limit it is 2.6 s of silence.
    let bytes: Vec<u8> = (0..100).flat_map(|_| silent_mp3_frame()).collect();
    let limits = Limits {
        max_seconds: 1.0,
        ..Limits::default()
    };
    let err = decode_bytes(bytes.clone(), Some("mp3"), &limits).unwrap_err();
    assert!(matches!(err, Error::TooLong { .. }), "{err:?}");
    let audio = decode_bytes(bytes, Some("mp3"), &Limits::default()).unwrap();
    assert!(
        (audio.duration_s() - 100.0 * 1152.0 / 44_100.0).abs() < 0.05,
        "{}",
        audio.duration_s()
    );
    assert!(audio.samples.iter().all(|&s| s == 0.0));
}

#[test]
fn a_wav_with_no_samples_is_empty() {
    let err = decode(wav_header(1, 1, 16_000, 16, 0)).unwrap_err();
    assert!(matches!(err, Error::NoAudio), "{err:?}");
    assert_eq!(
        err.to_string(),
        "holds no sound (0 samples): record again, or choose another file"
    );
    assert!(matches!(decode(Vec::new()).unwrap_err(), Error::NoAudio));
}

#[test]
fn a_sample_rate_of_1_or_0_is_refused() {
    for rate in [1u32, 0, 3_999, 10_000_000] {
        let mut bytes = wav_header(1, 1, rate, 16, 200);
        bytes.resize(bytes.len() + 200, 0);
        let err = decode(bytes).unwrap_err();
        match rate {
            0 => assert!(
                matches!(
                    err,
                    Error::BadSampleRate { rate: 0 } | Error::Damaged { .. }
                ),
                "{err:?}"
            ),
            _ => assert!(
                matches!(err, Error::BadSampleRate { rate: r } if r == rate),
                "{rate}: {err:?}"
            ),
        }
    }
    let mut bytes = wav_header(1, 1, 1, 16, 200);
    bytes.resize(bytes.len() + 200, 0);
    assert_eq!(
        decode(bytes).unwrap_err().to_string(),
        "says its sample rate is 1 Hz, which is not a real recording's (Hearth reads 4000 to 768000 Hz): the file is damaged or was written wrongly"
    );
}

#[test]
fn impossible_channel_counts_and_sample_sizes_are_refused() {
    for (channels, bits) in [(0u16, 16u16), (200, 16), (1, 0), (1, 7), (1, 64)] {
        let mut bytes = wav_header(1, channels, 16_000, bits, 400);
        bytes.resize(bytes.len() + 400, 0);
        let err = decode(bytes).unwrap_err();
        assert!(
            matches!(err, Error::BadChannels { .. } | Error::Damaged { .. }),
            "{channels} channels of {bits} bits: {err:?}"
        );
    }
}

#[test]
fn files_that_are_not_sound_say_what_they_look_like() {
    let cases: [(&[u8], Option<&str>); 4] = [
        (
            b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n1 0 obj\n<<>>\nendobj\n",
            Some("a PDF document"),
        ),
        (b"Dear Sam, the meeting moved to Tuesday.\n", Some("text")),
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", Some("a PNG picture")),
        (
            &[
                0x00, 0x13, 0x37, 0x42, 0x99, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
            ],
            None,
        ),
    ];
    for (bytes, looks_like) in cases {
        let err = decode(bytes.to_vec()).unwrap_err();
        assert!(
            matches!(&err, Error::NotAudio { looks_like: l } if *l == looks_like),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .contains("Hearth reads WAV, FLAC, MP3 and Ogg Vorbis"));
    }
    assert_eq!(
        decode(b"Dear Sam\n".to_vec()).unwrap_err().to_string(),
        "is not a sound file Hearth can read (it looks like text); Hearth reads WAV, FLAC, MP3 and Ogg Vorbis"
    );
}

#[test]
fn lying_mp3_headers_are_refused_or_read_as_far_as_they_hold() {
    // An ID3 tag that says it is 200 MB long, in a 1 KB file.
    let mut id3 = b"ID3\x04\x00\x00\x7F\x7F\x7F\x7F".to_vec();
    id3.resize(1024, 0);
    assert!(decode_bytes(id3, Some("mp3"), &Limits::default()).is_err());
    // Frame headers with the forbidden bitrate index 15, over and over.
    let bad: Vec<u8> = (0..50)
        .flat_map(|_| {
            let mut f = vec![0xFF, 0xFB, 0xF0, 0x00];
            f.resize(417, 0x55);
            f
        })
        .collect();
    assert!(decode_bytes(bad, Some("mp3"), &Limits::default()).is_err());
    // A Xing header counting 1,000 frames before 3: cut short.
    let mut bytes = xing_mp3_frame(1000);
    for _ in 0..3 {
        bytes.extend_from_slice(&silent_mp3_frame());
    }
    let err = decode_bytes(bytes, Some("mp3"), &Limits::default()).unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err:?}");
}

#[test]
fn too_many_bytes_are_refused_before_reading() {
    let bytes = wav_i16(&sine(440.0, 16_000, 0.1, 0.5), 1, 16_000);
    let limits = Limits {
        max_bytes: 1000,
        ..Limits::default()
    };
    let err = decode_bytes(bytes.clone(), None, &limits).unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { bytes: b, limit: 1000 } if b == bytes.len() as u64),
        "{err:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.wav");
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        decode_file(&path, &limits).unwrap_err(),
        Error::TooLarge { .. }
    ));
    let missing = decode_file(&dir.path().join("missing.wav"), &Limits::default()).unwrap_err();
    assert!(matches!(missing, Error::Io(_)), "{missing:?}");
    assert!(missing.to_string().starts_with("could not be read: "));
}

#[test]
fn every_cut_and_damaged_copy_of_the_fixtures_ends_without_a_crash() {
    let mut rng = Rng(0x5EED_0051);
    let mut files: Vec<(String, Vec<u8>)> = ["tone.flac", "tone.mp3", "tone.ogg", "tone.opus"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(fixture(n)).unwrap()))
        .collect();
    files.push((
        "tone.wav".into(),
        wav_i16(&sine(440.0, 22_050, 0.5, 0.5), 2, 22_050),
    ));
    for (name, whole) in &files {
        // Cut at 64 places.
        for i in 0..64 {
            let cut = whole.len() * i / 64;
            let _ = decode(whole[..cut].to_vec());
        }
        // 150 copies with 1 to 16 bytes changed.
        for _ in 0..150 {
            let mut bytes = whole.clone();
            for _ in 0..=rng.below(16) {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next() as u8;
            }
            if let Ok(audio) = decode(bytes) {
                // Clamped to full scale before resampling; the low-pass may ring past it, by
                // at most the sum of its taps' magnitudes.
                let peak = audio.samples.iter().fold(0.0f32, |m, s| m.max(s.abs()));
                assert!(peak.is_finite() && peak <= 2.0, "{name}: peak {peak}");
            }
        }
    }
}
