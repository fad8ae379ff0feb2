//! Whisper refuses broken folders and unusable audio with plain errors, never a panic; long
//! audio runs in 30 s windows with progress, and a stop request is honoured.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use hearth_engine::whisper::{TranscribeOptions, Whisper, SAMPLE_RATE};
use hearth_engine::Error;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper")
}

/// A copy of a fixture folder to damage.
fn copy(folder: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixtures().join(folder)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

fn load_error(dir: &Path) -> String {
    match Whisper::load(dir, 1) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_truncated_or_lying_model_bin_is_refused() {
    let dir = copy("tiny-ct2");
    let bin = dir.path().join("model.bin");
    let bytes = std::fs::read(&bin).unwrap();
    for cut in [0, 3, 10, 40, 1000, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&bin, &bytes[..cut]).unwrap();
        let err = load_error(dir.path());
        assert!(err.contains("model.bin"), "cut at {cut}: {err}");
    }
    // The first dim of encoder/conv1/weight: after its name, its NUL and its rank byte.
    let name = b"encoder/conv1/weight\0";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    let dim_at = at + name.len() + 1;
    let mut huge = bytes.clone();
    huge[dim_at..dim_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&bin, &huge).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("more than"), "{err}");
    let mut off_by_one = bytes.clone();
    off_by_one[dim_at] = off_by_one[dim_at].wrapping_add(1);
    std::fs::write(&bin, &off_by_one).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("bytes"), "{err}");
}

#[test]
fn missing_files_and_wrong_shapes_are_named() {
    let empty = tempfile::tempdir().unwrap();
    assert!(load_error(empty.path()).contains("neither model.bin"));

    let dir = copy("tiny");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    assert!(load_error(dir.path()).contains("no tokenizer.json"));

    let dir = copy("tiny");
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config).unwrap();
    let bad = text.replace(
        "\"encoder_attention_heads\": 2",
        "\"encoder_attention_heads\": 5",
    );
    std::fs::write(&config, bad).unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("5 encoder attention heads"), "{err}");

    let dir = copy("tiny");
    std::fs::write(
        dir.path().join("model.safetensors"),
        b"\x08\0\0\0\0\0\0\0{}      ",
    )
    .unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("no decoder/embeddings/weight"), "{err}");

    let dir = copy("tiny-ct2");
    std::fs::write(dir.path().join("vocabulary.json"), "[\"a\", \"b\"]").unwrap();
    let err = load_error(dir.path());
    assert!(err.contains("no <|endoftext|>"), "{err}");
}

#[test]
fn unusable_audio_and_languages_are_refused_plainly() {
    let whisper = Whisper::load(&fixtures().join("tiny"), 1).unwrap();
    let go = &mut |_| ControlFlow::Continue(());
    let options = TranscribeOptions::default();
    let err = whisper.transcribe(&[], &options, go).unwrap_err();
    assert!(matches!(err, Error::Audio { .. }), "{err}");
    let err = whisper
        .transcribe(&[0.0, f32::NAN], &options, go)
        .unwrap_err();
    assert!(err.to_string().contains("sample 1 is NaN"), "{err}");
    let klingon = TranscribeOptions {
        language: Some("tlh".into()),
        ..TranscribeOptions::default()
    };
    let err = whisper.transcribe(&[0.0; 160], &klingon, go).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not know the language \"tlh\""),
        "{err}"
    );
}

#[test]
fn long_audio_runs_in_windows_with_progress_and_stops_on_request() {
    let whisper = Whisper::load(&fixtures().join("tiny"), 2).unwrap();
    let samples: Vec<f32> = (0..65 * SAMPLE_RATE)
        .map(|i| (i as f32 * 0.05).sin() * 0.1)
        .collect();
    let options = TranscribeOptions {
        language: Some("en".into()),
        timestamps: true,
        temperature_fallback: false,
    };
    let mut seen = Vec::new();
    let t = whisper
        .transcribe(&samples, &options, &mut |p| {
            seen.push((p.done_s, p.total_s));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(seen, [(30.0, 65.0), (60.0, 65.0), (65.0, 65.0)]);
    assert_eq!((t.language.as_str(), t.duration_s), ("en", 65.0));
    for s in &t.segments {
        assert!(
            0.0 <= s.start_s && s.start_s <= s.end_s && s.end_s <= 65.0,
            "{s:?}"
        );
    }
    let mut calls = 0;
    let err = whisper
        .transcribe(&samples, &options, &mut |_| {
            calls += 1;
            ControlFlow::Break(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled), "{err}");
    assert_eq!(calls, 1);
}
