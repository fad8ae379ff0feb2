//! The engine's embedding models as the library uses them: a folder's config.json chooses the
//! BERT encoder or the Qwen3 decoder (Qwen3-Embedding's last-token pooling, here the engine's
//! tiny random fixture made by tests/fixtures/engine/generate_qwen3_embedding.py), and a Qwen3
//! model reads its instruction before a question and nothing before a passage.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use hearth_documents::embedding::QWEN3_QUERY_INSTRUCTION;
use hearth_documents::{
    index, search, EmbeddingModel, EngineEmbedding, IndexSettings, Library, Ranking,
};

fn engine_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

/// transformers' texts and vectors for the tiny Qwen3 embedding model.
fn reference() -> Vec<(String, Vec<f32>)> {
    let path = engine_fixture("tiny-qwen3-embedding/reference.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let vector = case["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            (case["text"].as_str().unwrap().to_owned(), vector)
        })
        .collect()
}

fn max_abs_error(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn a_qwen3_folder_loads_the_decoder_and_instructs_only_questions() {
    let model = EngineEmbedding::load(&engine_fixture("tiny-qwen3-embedding"), Some(2)).unwrap();
    assert_eq!(model.model_id(), "tiny-qwen3-embedding-64d");
    assert_eq!(
        model.max_tokens(),
        128,
        "the fixture's max_position_embeddings"
    );
    let cases = reference();
    let (instructed, query_vector) = &cases[0];
    let question = instructed
        .strip_prefix(QWEN3_QUERY_INSTRUCTION)
        .expect("the fixture's query carries the library's instruction");
    let got = model.embed_query(question).unwrap();
    assert!(
        max_abs_error(&got, query_vector) < 2e-6,
        "the question's vector"
    );
    let (passage, passage_vector) = &cases[1];
    let got = model.embed(&[passage.as_str()]).unwrap();
    assert!(
        max_abs_error(&got[0], passage_vector) < 2e-6,
        "a passage is embedded as it is"
    );
    let plain = model.embed(&[question]).unwrap();
    assert!(
        max_abs_error(&plain[0], query_vector) > 1e-3,
        "without the instruction a question gets another vector"
    );
    assert!(model.pieces("Hearth") >= 1);
}

#[test]
fn a_bert_folder_loads_the_encoder_and_embeds_questions_as_they_are() {
    let model = EngineEmbedding::load(&engine_fixture("tiny-bert"), Some(2)).unwrap();
    assert_eq!(model.model_id(), "tiny-bert-32d");
    assert_eq!(model.max_tokens(), 256);
    let question = "Where does Hearth keep my files?";
    assert_eq!(
        model.embed_query(question).unwrap(),
        model.embed(&[question]).unwrap()[0]
    );
}

/// A library indexed with the Qwen3 model stores its vectors under its id and finds passages
/// by them.
#[test]
fn a_library_indexes_and_searches_with_the_qwen3_model() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.md");
    std::fs::write(
        &file,
        "# Travel\n\nThe train to Lyon leaves at nine.\n\n# Kitchen\n\nBake the bread for forty minutes.\n",
    )
    .unwrap();
    let model = EngineEmbedding::load(&engine_fixture("tiny-qwen3-embedding"), Some(2)).unwrap();
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    let report = index(
        &library,
        &[file],
        &IndexSettings::default(),
        Some(&model),
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    assert!(report.embedded > 0, "{report:?}");
    let documents: Vec<_> = library.documents().unwrap().iter().map(|d| d.id).collect();
    let hits = search(
        &library,
        "When does the train leave?",
        &documents,
        Ranking::Semantic,
        Some(&model),
        5,
    )
    .unwrap();
    assert!(!hits.is_empty(), "the semantic ranking finds passages");
    assert!(hits.iter().all(|h| h.semantic_rank.is_some()));
}

/// The Qwen3 model, counting the questions it is asked to embed as questions.
struct CountingQueries {
    model: EngineEmbedding,
    queries: std::cell::Cell<usize>,
}

impl EmbeddingModel for CountingQueries {
    fn model_id(&self) -> &str {
        self.model.model_id()
    }

    fn pieces(&self, word: &str) -> usize {
        self.model.pieces(word)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.model.embed(texts)
    }

    fn embed_query(&self, question: &str) -> Result<Vec<f32>, String> {
        self.queries.set(self.queries.get() + 1);
        self.model.embed_query(question)
    }
}

/// Search embeds the question as a question (with the model's instruction), passages as they
/// are: the semantic ranking's scores are the cosines with the instructed question's vector.
#[test]
fn search_embeds_the_question_with_the_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "The train to Lyon leaves at nine.").unwrap();
    let model = CountingQueries {
        model: EngineEmbedding::load(&engine_fixture("tiny-qwen3-embedding"), Some(1)).unwrap(),
        queries: std::cell::Cell::new(0),
    };
    let library = Library::open(&dir.path().join("documents.db")).unwrap();
    index(
        &library,
        &[file],
        &IndexSettings::default(),
        Some(&model),
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(model.queries.get(), 0, "passages are not questions");
    let documents: Vec<_> = library.documents().unwrap().iter().map(|d| d.id).collect();
    let question = "When does the train leave?";
    let hits = search(
        &library,
        question,
        &documents,
        Ranking::Semantic,
        Some(&model),
        5,
    )
    .unwrap();
    assert_eq!(model.queries.get(), 1);
    let asked = model.model.embed_query(question).unwrap();
    let passage = model.model.embed(&[hits[0].text.as_str()]).unwrap();
    let cosine: f64 = asked
        .iter()
        .zip(&passage[0])
        .map(|(a, b)| f64::from(*a) * f64::from(*b))
        .sum();
    assert!(
        (hits[0].score - cosine).abs() < 1e-5,
        "score {} is the instructed question's cosine {cosine}",
        hits[0].score
    );
}
