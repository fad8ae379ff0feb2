//! Last-token pooling (Qwen3-Embedding's) against transformers (tests/fixtures/engine/
//! generate_qwen3_embedding.py): a tiny random Qwen3 saved as the real checkpoint is (no `model.`
//! prefix, no head, bf16), its tokenizer appending `<|endoftext|>`, and the base model's last
//! hidden state at that token, L2-normalized, for five texts (an instructed query, one cut at
//! the fixture's 128 positions).

use crate::common;

use common::fixture;
use hearth_engine::{DecoderEmbedder, Error};

#[derive(serde::Deserialize)]
struct Reference {
    max_length: usize,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    text: String,
    tokens: Vec<u32>,
    embedding: Vec<f32>,
}

fn reference() -> Reference {
    let path = fixture("tiny-qwen3-embedding/reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).expect("the reference parses")
}

/// Max abs error of the tiny model's unit vectors (entries up to about 0.4): the bf16 weights
/// are read into f32 on both sides, and f32 sums in another order than torch's give about 1e-7
/// (measured: 3.0e-7).
const TINY_BOUND: f32 = 2e-6;

#[test]
fn tiny_qwen3_embedding_matches_transformers() {
    let expected = reference();
    let model = DecoderEmbedder::load(&fixture("tiny-qwen3-embedding"), Some(2))
        .expect("the tiny Qwen3 embedding model loads without the model. prefix");
    assert_eq!(model.dimension(), 64);
    assert_eq!(model.max_tokens(), expected.max_length);
    let texts: Vec<&str> = expected.cases.iter().map(|c| c.text.as_str()).collect();
    for case in &expected.cases {
        assert_eq!(
            model.tokens(&case.text).unwrap(),
            case.tokens,
            "tokens of {:?}",
            case.text
        );
    }
    let got = model.embed(&texts).unwrap();
    let mut worst = 0.0f32;
    for (case, vector) in expected.cases.iter().zip(&got) {
        assert_eq!(vector.len(), case.embedding.len());
        let error = vector
            .iter()
            .zip(&case.embedding)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        worst = worst.max(error);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "unit length, got {norm}");
    }
    eprintln!(
        "tiny Qwen3 embedding: max abs error {worst:e} over {} texts",
        texts.len()
    );
    assert!(worst < TINY_BOUND, "max abs error {worst} >= {TINY_BOUND}");
}

/// A text's vector does not depend on what was embedded before it (each pass starts from an
/// empty context) nor on how many threads compute it.
#[test]
fn a_vector_does_not_depend_on_the_texts_before_it() {
    let expected = reference();
    let texts: Vec<&str> = expected.cases.iter().map(|c| c.text.as_str()).collect();
    let one = DecoderEmbedder::load(&fixture("tiny-qwen3-embedding"), Some(1)).unwrap();
    let three = DecoderEmbedder::load(&fixture("tiny-qwen3-embedding"), Some(3)).unwrap();
    let all = one.embed(&texts).unwrap();
    let reversed: Vec<&str> = texts.iter().rev().copied().collect();
    let mut back = three.embed(&reversed).unwrap();
    back.reverse();
    assert_eq!(all, back);
}

/// A BERT folder is not a decoder, and a folder without a tokenizer cannot say which token's
/// state is the vector: both are refused, saying why.
#[test]
fn folders_that_are_not_decoder_embedding_models_are_refused_with_a_reason() {
    let err = DecoderEmbedder::load(&fixture("tiny-bert"), Some(1)).unwrap_err();
    assert!(matches!(err, Error::Load { .. }), "{err}");
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(
            fixture("tiny-qwen3-embedding").join(file),
            dir.path().join(file),
        )
        .unwrap();
    }
    let err = DecoderEmbedder::load(dir.path(), Some(1)).unwrap_err();
    assert!(matches!(err, Error::NoTokenizer { .. }), "{err}");
}

#[test]
fn qwen3_folders_are_told_from_bert_ones_by_their_config() {
    assert!(DecoderEmbedder::is_qwen3_folder(&fixture(
        "tiny-qwen3-embedding"
    )));
    assert!(DecoderEmbedder::is_qwen3_folder(&fixture("tiny-qwen3")));
    assert!(!DecoderEmbedder::is_qwen3_folder(&fixture("tiny-bert")));
    assert!(!DecoderEmbedder::is_qwen3_folder(&fixture(
        "no-such-folder"
    )));
}
