//! The model verbs (`logits`, `generate`, `run`, `chat`) end to end through the `hearth` binary,
//! on the engine's tiny fixture models.

use crate::common;

use std::path::PathBuf;
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

/// Runs `hearth` with every Hearth folder in a temporary directory (`hearth chat` saves there).
fn hearth(args: &[&str], stdin: &str) -> Output {
    let home = tempfile::tempdir().unwrap();
    common::run_typing(common::hearth(home.path()).args(args), stdin)
}

/// Runs `hearth` and checks it succeeded, showing its stderr if not.
fn hearth_ok(args: &[&str], stdin: &str) -> Output {
    let out = hearth(args, stdin);
    assert!(
        out.status.success(),
        "hearth {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn reference(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture(name).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(value: &serde_json::Value) -> String {
    let ids: Vec<String> = value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    ids.join(",")
}

#[test]
fn logits_json_matches_transformers() {
    let reference = reference("tiny-qwen3");
    let model = fixture("tiny-qwen3");
    let tokens = ids(&reference["tokens"]);
    let out = hearth_ok(
        &[
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--tokens",
            &tokens,
            "--json",
        ],
        "",
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["logits"].as_array().unwrap();
    let expected = reference["logits"].as_array().unwrap();
    assert_eq!(rows.len(), expected.len(), "one row per position");
    for (row, want) in rows.iter().zip(expected) {
        let (row, want) = (row.as_array().unwrap(), want.as_array().unwrap());
        assert_eq!(row.len(), 512, "vocabulary-sized rows");
        let scale = want
            .iter()
            .map(|v| v.as_f64().unwrap().abs())
            .fold(0.0, f64::max);
        for (a, b) in row.iter().zip(want) {
            let diff = (a.as_f64().unwrap() - b.as_f64().unwrap()).abs();
            assert!(diff <= 1e-4 * scale, "logit differs by {diff}");
        }
    }
}

#[test]
fn generate_json_gives_the_greedy_continuation_and_timings() {
    let reference = reference("tiny-qwen3-untied");
    let model = fixture("tiny-qwen3-untied");
    let prompt = ids(&reference["greedy_prompt"]);
    let out = hearth_ok(
        &[
            "generate",
            "--model",
            model.to_str().unwrap(),
            "--tokens",
            &prompt,
            "--max-tokens",
            "16",
            "--temperature",
            "0",
            "--json",
        ],
        "",
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["tokens"], reference["greedy_tokens"]);
    assert_eq!(json["prompt_tokens"], 7);
    assert_eq!(json["generated_tokens"], 16);
    assert_eq!(json["stop_reason"], "max_tokens");
    for key in ["prefill_secs", "ttft_secs", "decode_secs"] {
        assert!(json[key].as_f64().is_some(), "{key} is reported");
    }
}

#[test]
fn run_streams_an_answer_and_reports_timings_on_stderr() {
    let model = fixture("tiny-llama");
    let out = hearth_ok(
        &[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--max-tokens",
            "8",
            "--seed",
            "3",
            "Hello!",
        ],
        "",
    );
    assert!(!out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("prompt tokens"));
}

#[test]
fn chat_answers_each_line_until_exit() {
    let model = fixture("tiny-qwen3");
    let out = hearth_ok(
        &[
            "chat",
            "--model",
            model.to_str().unwrap(),
            "--max-tokens",
            "4",
        ],
        "Hi!\n/reset\nAgain\n/exit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("> "), "prompts for a line: {stdout:?}");
    assert!(
        stdout.lines().count() >= 2,
        "an answer line per question: {stdout:?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("new conversation"));
}

#[test]
fn bad_token_ids_fail_with_a_clear_message_and_exit_code_2() {
    let model = fixture("tiny-qwen3");
    let out = hearth(
        &[
            "generate",
            "--model",
            model.to_str().unwrap(),
            "--tokens",
            "1,600",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("token id 600") && stderr.contains("out of range"),
        "{stderr}"
    );
    let out = hearth(
        &[
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--tokens",
            "1,two",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"two\""));
}

#[test]
fn a_missing_model_folder_says_so() {
    let out = hearth(&["run", "--model", "no/such/folder", "hi"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[test]
fn logits_reports_perplexity_of_text() {
    let model = fixture("tiny-qwen3");
    let out = hearth_ok(
        &[
            "logits",
            "--model",
            model.to_str().unwrap(),
            "--text",
            "The quick brown fox jumps over the lazy dog.",
            "--perplexity",
            "--json",
        ],
        "",
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let perplexity = json["perplexity"].as_f64().unwrap();
    assert!(json["tokens"].as_u64().unwrap() > 2);
    // A random model over 512 ids: far from perfect, and near the vocabulary size at worst.
    assert!(
        perplexity > 1.0 && perplexity < 5000.0,
        "perplexity {perplexity}"
    );
}
