//! Whisper against transformers on the tiny random checkpoint of tests/fixtures/whisper
//! (made by its generate.py): the same checkpoint in transformers' safetensors and in
//! CTranslate2's model.bin (converted by ctranslate2's own converter) gives mel features within
//! 1e-4, encoder rows and the top logits of the first steps within 1e-3 (absolute; transformers
//! sums in another order), the same language, and exactly transformers' greedy tokens.

use std::path::{Path, PathBuf};

use hearth_engine::whisper::{TranscribeOptions, Whisper};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/whisper")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixtures().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn audio() -> Vec<f32> {
    let bytes = std::fs::read(fixtures().join("audio.f32")).unwrap();
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn close(what: &str, got: &[f32], want: &[f32], tolerance: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    assert!(
        worst <= tolerance,
        "{what}: differs by {worst} (tolerance {tolerance})"
    );
}

fn check(folder: &str) {
    let r = reference();
    let whisper = Whisper::load(&fixtures().join(folder), 2).unwrap();
    let info = whisper.info();
    assert_eq!(
        (info.n_mels, info.vocab_size, info.d_model),
        (80, 51865, 24)
    );
    assert!(info.multilingual);
    assert_eq!(info.languages.len(), 99);

    let samples = audio();
    let mel = whisper.log_mel(&samples);
    for (frame, values) in r["mel_frames"].as_object().unwrap() {
        let t: usize = frame.parse().unwrap();
        let got: Vec<f32> = (0..80).map(|m| mel[m * 3000 + t]).collect();
        close(
            &format!("{folder} mel frame {t}"),
            &got,
            &floats(values),
            1e-4,
        );
    }

    let encoded = whisper.encode(&mel).unwrap();
    for (row, values) in r["encoder_rows"].as_object().unwrap() {
        let i: usize = row.parse().unwrap();
        close(
            &format!("{folder} encoder row {i}"),
            &encoded[i * 24..(i + 1) * 24],
            &floats(values),
            1e-3,
        );
    }

    for (n, step) in r["steps"].as_array().unwrap().iter().enumerate() {
        let logits = whisper.logits(&encoded, &ids(&step["tokens"])).unwrap();
        let top = ids(&step["top_ids"]);
        let got: Vec<f32> = top.iter().map(|&i| logits[i as usize]).collect();
        close(
            &format!("{folder} step {n} top logits"),
            &got,
            &floats(&step["top_values"]),
            1e-3,
        );
        let best = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
            .unwrap();
        assert_eq!(best as u32, top[0], "{folder} step {n}: greedy token");
    }

    let detected = r["detected_language"].as_str().unwrap();
    for (language, want) in r["greedy"].as_object().unwrap() {
        let given = TranscribeOptions {
            language: Some(language.clone()),
            ..TranscribeOptions::default()
        };
        let (lang, tokens) = whisper.greedy_tokens(&samples, &given).unwrap();
        assert_eq!(lang, *language);
        assert_eq!(tokens, ids(want), "{folder}: greedy tokens in {language}");
    }
    let (lang, _) = whisper
        .greedy_tokens(&samples, &TranscribeOptions::default())
        .unwrap();
    assert_eq!(lang, detected, "{folder}: detected language");
}

#[test]
fn safetensors_checkpoint_matches_transformers() {
    check("tiny");
}

#[test]
fn ctranslate2_conversion_matches_transformers() {
    check("tiny-ct2");
}
