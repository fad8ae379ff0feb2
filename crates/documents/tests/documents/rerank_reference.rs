//! The reranker against transformers: the tiny Qwen3 reranker fixture
//! (tests/fixtures/engine/generate_reranker.py) scores a few (question, passage) pairs with
//! Qwen3-Reranker's prompt, and the engine must build the same token ids and the same p(yes).

use std::ops::ControlFlow;
use std::path::PathBuf;

use hearth_documents::{EngineReranker, PromptStyle, Reranker};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine/tiny-qwen3-reranker")
}

fn reference() -> serde_json::Value {
    let text = std::fs::read_to_string(fixture().join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_prompt_and_p_yes_match_transformers() {
    let reranker = EngineReranker::load(&fixture(), Some(1)).unwrap();
    assert_eq!(reranker.style(), PromptStyle::Qwen3Reranker);
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    let model = hearth_engine::Model::load(&fixture(), &Default::default()).unwrap();
    for case in cases {
        let question = case["query"].as_str().unwrap();
        let document = case["document"].as_str().unwrap();
        let want: Vec<u32> = case["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let ids = reranker.prompt(&model, question, document, 1024).unwrap();
        assert_eq!(ids, want, "{question} / {document}");
    }
    // All passages of one question in one call (the shared prefix computed once) and each
    // alone give transformers' p(yes).
    let documents: Vec<&str> = cases
        .iter()
        .map(|c| c["document"].as_str().unwrap())
        .collect();
    for case in cases {
        let question = case["query"].as_str().unwrap();
        let all = reranker
            .score(question, &documents, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        let k = documents
            .iter()
            .position(|d| *d == case["document"].as_str().unwrap())
            .unwrap();
        let alone = reranker
            .score(
                question,
                &[documents[k]],
                &mut |_| ControlFlow::Continue(()),
            )
            .unwrap();
        let want = case["p_yes"].as_f64().unwrap();
        assert!((all[k] - want).abs() < 1e-5, "{} against {want}", all[k]);
        assert!(
            (alone[0] - want).abs() < 1e-5,
            "{} against {want}",
            alone[0]
        );
    }
}

#[test]
fn a_passage_longer_than_the_context_is_cut_at_its_end() {
    let reranker = EngineReranker::load(&fixture(), Some(1)).unwrap();
    let model = hearth_engine::Model::load(&fixture(), &Default::default()).unwrap();
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(200);
    let ids = reranker.prompt(&model, "Where?", &long, 300).unwrap();
    assert_eq!(ids.len(), 300);
    let whole = reranker.prompt(&model, "Where?", "Here.", 300).unwrap();
    // The suffix (the assistant turn opened) is always there.
    assert_eq!(ids[ids.len() - 10..], whole[whole.len() - 10..]);
    let scores = reranker
        .score("Where?", &[&long], &mut |_| ControlFlow::Continue(()))
        .unwrap();
    assert!(scores[0] > 0.0 && scores[0] < 1.0);
}

#[test]
fn a_chat_model_without_reranker_in_its_name_is_asked_through_its_template() {
    // The reranker fixture's weights under a plain name: a chat model like any other.
    let model = hearth_engine::Model::load(&fixture(), &Default::default()).unwrap();
    let reranker =
        EngineReranker::from_model(model, "a-chat-model", PromptStyle::ChatTemplate).unwrap();
    let model = hearth_engine::Model::load(&fixture(), &Default::default()).unwrap();
    let ids = reranker
        .prompt(&model, "Where?", "In the data folder.", 1024)
        .unwrap();
    let text = model.tokenizer().unwrap().decode(&ids, false).unwrap();
    assert!(
        text.starts_with("<|im_start|>system\nJudge whether the Document"),
        "{text}"
    );
    assert!(
        text.ends_with("<Document>: In the data folder.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
        "{text}"
    );
    let scores = reranker
        .score(
            "Where does Hearth keep my files?",
            &["In the data folder.", "The quick brown fox."],
            &mut |_| ControlFlow::Continue(()),
        )
        .unwrap();
    assert_eq!(scores.len(), 2);
    assert!(scores.iter().all(|p| (0.0..=1.0).contains(p)));
}
