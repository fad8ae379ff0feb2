//! The sentence-embedding encoder against sentence-transformers (tests/fixtures/engine/
//! generate_encoder.py): a tiny random BERT with its own WordPiece tokenizer, always; the real
//! all-MiniLM-L6-v2 when `models/embedding` has been made (`scripts/embedding-model.sh`;
//! `npm test` makes it).

use crate::common;

use std::path::PathBuf;

use common::fixture;
use hearth_engine::Embedder;

/// sentence-transformers' token ids and normalized mean-pooled embeddings of a batch.
#[derive(serde::Deserialize)]
struct EmbeddingReference {
    texts: Vec<String>,
    tokens: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
}

fn reference(path: PathBuf) -> EmbeddingReference {
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("the reference parses")
}

fn max_abs_error(actual: &[Vec<f32>], expected: &[Vec<f32>]) -> f32 {
    actual
        .iter()
        .zip(expected)
        .flat_map(|(a, e)| {
            assert_eq!(a.len(), e.len(), "dimension");
            a.iter().zip(e).map(|(x, y)| (x - y).abs())
        })
        .fold(0.0, f32::max)
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot = |x: &[f32], y: &[f32]| -> f64 {
        x.iter()
            .zip(y)
            .map(|(p, q)| f64::from(*p) * f64::from(*q))
            .sum()
    };
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt())
}

/// Max abs error of the tiny model's unit vectors (entries up to about 0.5); f32 sums in another
/// order than torch's give about 1e-7.
const TINY_BOUND: f32 = 2e-6;

#[test]
fn tiny_bert_matches_sentence_transformers() {
    let expected = reference(fixture("tiny-bert/reference.json"));
    let model = Embedder::load(&fixture("tiny-bert"), Some(2)).expect("the tiny BERT loads");
    assert_eq!(model.dimension(), 32);
    assert_eq!(model.max_pieces(), 254);
    let texts: Vec<&str> = expected.texts.iter().map(String::as_str).collect();
    for (text, want) in texts.iter().zip(&expected.tokens) {
        assert_eq!(&model.tokens(text).unwrap(), want, "tokens of {text:?}");
    }
    let got = model.embed(&texts).unwrap();
    let error = max_abs_error(&got, &expected.embeddings);
    eprintln!(
        "tiny BERT: max abs error {error:e} over {} texts",
        texts.len()
    );
    assert!(error < TINY_BOUND, "max abs error {error} >= {TINY_BOUND}");
    for v in &got {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "unit length, got {norm}");
    }
}

#[test]
fn a_text_alone_gets_the_same_vector_as_in_a_batch() {
    // Texts of a batch attend only to their own tokens: no padding or neighbour leaks in.
    let expected = reference(fixture("tiny-bert/reference.json"));
    let texts: Vec<&str> = expected.texts.iter().map(String::as_str).collect();
    let batched = Embedder::load(&fixture("tiny-bert"), Some(2))
        .unwrap()
        .embed(&texts)
        .unwrap();
    let single = Embedder::load(&fixture("tiny-bert"), Some(1)).unwrap();
    for (text, vector) in texts.iter().zip(&batched) {
        assert_eq!(&single.embed(&[text]).unwrap()[0], vector, "{text:?}");
    }
}

#[test]
fn bad_token_sequences_are_refused_with_what_is_wrong() {
    let model = Embedder::load(&fixture("tiny-bert"), Some(1)).unwrap();
    let err = model.embed_tokens(&[vec![2, 100_000, 3]]).unwrap_err();
    assert!(err.to_string().contains("100000"), "{err}");
    let err = model.embed_tokens(&[vec![2; 257]]).unwrap_err();
    assert!(err.to_string().contains("257"), "{err}");
    assert!(model.embed_tokens(&[vec![]]).is_err());
    assert!(model.embed(&[]).unwrap().is_empty());
}

#[test]
fn a_decoder_folder_is_not_taken_for_an_encoder() {
    let err = Embedder::load(&fixture("tiny-qwen3"), Some(1)).unwrap_err();
    assert!(err.to_string().contains("model_type"), "{err}");
}

/// all-MiniLM-L6-v2 against sentence-transformers: cosine at least 0.9999 per sentence, max abs
/// error under 1e-5 (unit vectors of 384 entries, each about 0.05).
#[test]
fn minilm_matches_sentence_transformers() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/embedding");
    if !dir.join("model.safetensors").is_file() {
        eprintln!("skipped: models/embedding is not there (scripts/embedding-model.sh makes it)");
        return;
    }
    let expected = reference(fixture("minilm-reference.json"));
    let model = Embedder::load(&dir, None).expect("all-MiniLM-L6-v2 loads");
    assert_eq!(model.dimension(), 384);
    let texts: Vec<&str> = expected.texts.iter().map(String::as_str).collect();
    for (text, want) in texts.iter().zip(&expected.tokens) {
        assert_eq!(&model.tokens(text).unwrap(), want, "tokens of {text:?}");
    }
    let got = model.embed(&texts).unwrap();
    let error = max_abs_error(&got, &expected.embeddings);
    let worst = got
        .iter()
        .zip(&expected.embeddings)
        .map(|(a, b)| cosine(a, b))
        .fold(1.0, f64::min);
    eprintln!("all-MiniLM-L6-v2: max abs error {error:e}, lowest cosine {worst}");
    assert!(worst >= 0.9999, "lowest cosine {worst}");
    assert!(error < 1e-5, "max abs error {error}");
}
