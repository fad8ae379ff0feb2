//! The real whisper base against faster-whisper (opt-in, ignored): espeak-ng speech in the five
//! languages, transcribed by Hearth and compared with faster-whisper's transcripts of the same
//! samples (beam 1, no VAD, no fallback, no timestamps). Set up with
//!
//! ```text
//! scripts/whisper-model.sh                                  # the model
//! python3 scripts/whisper-reference.py target/real-models/whisper-base \
//!     target/real-models/whisper-speech                     # needs faster-whisper, espeak-ng
//! cargo test --release -p hearth-engine --test engine whisper_real:: -- --ignored --nocapture
//! ```
//!
//! `HEARTH_WHISPER_MODEL` and `HEARTH_WHISPER_SPEECH` point elsewhere. It prints each
//! transcript beside faster-whisper's and the real-time factor on 1 and 2 threads, and fails
//! when a transcript of the clip padded to 30 s (where both compute the same features) differs.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use hearth_engine::whisper::{TranscribeOptions, Whisper, WINDOW_SAMPLES};

fn dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(default)
        },
        PathBuf::from,
    )
}

fn read_f32(path: &std::path::Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn text(whisper: &Whisper, samples: &[f32], language: Option<&str>) -> (String, String) {
    let options = TranscribeOptions {
        language: language.map(str::to_string),
        ..TranscribeOptions::default()
    };
    let t = whisper
        .transcribe(samples, &options, &mut |_| ControlFlow::Continue(()))
        .unwrap();
    (t.text, t.language)
}

#[test]
#[ignore = "needs the real whisper base and faster-whisper's transcripts (see the module doc)"]
fn whisper_base_transcribes_like_faster_whisper() {
    let model = dir("HEARTH_WHISPER_MODEL", "target/real-models/whisper-base");
    let speech = dir("HEARTH_WHISPER_SPEECH", "target/real-models/whisper-speech");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(speech.join("faster_whisper.json")).unwrap())
            .unwrap();
    let mut mismatches = Vec::new();
    let mut all = Vec::new();
    for threads in [1, 2] {
        let whisper = Whisper::load(&model, threads).unwrap();
        if threads == 1 {
            eprintln!("{:?}", whisper.info());
        }
        for lang in ["en", "de", "fr", "es", "zh"] {
            let samples = read_f32(&speech.join(format!("{lang}.f32")));
            let r = &reference[lang];
            let mut padded = samples.clone();
            padded.resize(WINDOW_SAMPLES.max(samples.len()), 0.0);
            let start = Instant::now();
            let (got, _) = text(&whisper, &padded, Some(lang));
            let secs = start.elapsed().as_secs_f64();
            if threads == 1 {
                all.extend_from_slice(&samples);
                let want = r["padded"].as_str().unwrap();
                let same = got == want;
                eprintln!("{lang}: {}", if same { "same" } else { "DIFFERENT" });
                eprintln!("  hearth:         {got}");
                eprintln!("  faster-whisper: {want}");
                if !same {
                    mismatches.push(lang);
                }
                let (as_is, _) = text(&whisper, &samples, Some(lang));
                eprintln!(
                    "  unpadded: hearth {as_is:?}, faster-whisper {:?}",
                    r["as_is"]
                );
                let (_, detected) = text(&whisper, &padded, None);
                eprintln!(
                    "  detected: hearth {detected}, faster-whisper {}",
                    r["detected"]
                );
            }
            eprintln!(
                "  {threads} thread(s): one 30 s window in {secs:.2} s (real-time factor {:.3})",
                secs / 30.0
            );
        }
    }
    assert!(
        mismatches.is_empty(),
        "transcripts differ in {mismatches:?}"
    );
}
