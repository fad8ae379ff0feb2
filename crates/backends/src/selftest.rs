//! Fidelity self-test: does another backend (the NPU through FastFlowLM) write what Hearth's
//! CPU engine writes for the same model? Fixed prompts are answered greedily on both, and for
//! each prompt the report says how many leading characters and tokens agree and where the two
//! answers part.
//!
//! Greedy answers of the same weights agree for a while and then may part where two tokens are
//! nearly tied and the backends round differently; an answer that parts at once points to a
//! wrong model, template or kernel.

use std::ops::ControlFlow;

use hearth_chat::backend::{Backend, BackendEvent, Input};
use hearth_engine::{ChatMessage, ChatOptions, Role, SamplingParams};
use serde::{Deserialize, Serialize};

use crate::cpu::CpuBackend;

/// The fixed prompts: short, factual, and different in kind (a list, an explanation, code).
pub const PROMPTS: &[&str] = &[
    "What is the capital of France? Answer in one sentence.",
    "List three primary colours.",
    "Explain in two sentences what a compiler does.",
    "Write a function that adds two numbers.",
];

/// Answer length for each prompt, in tokens. By default in [`run`]: 48.
pub const DEFAULT_MAX_TOKENS: usize = 48;

/// How the two answers to one prompt compare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptAgreement {
    /// The prompt.
    pub prompt: String,
    /// The CPU engine's answer.
    pub reference: String,
    /// The other backend's answer (what it wrote before failing, if it failed).
    pub candidate: String,
    /// Leading characters that are the same.
    pub agreeing_chars: usize,
    /// Leading tokens that are the same (both answers tokenized with the model's tokenizer).
    pub agreeing_tokens: Option<usize>,
    /// The reference's length in tokens.
    pub reference_tokens: Option<usize>,
    /// Where they part: the character index, `None` when the answers are identical.
    pub diverges_at_char: Option<usize>,
    /// A few characters of each answer from where they part, for showing.
    pub divergence: Option<(String, String)>,
    /// Why the other backend (or the reference) failed, if it did.
    pub error: Option<String>,
}

impl PromptAgreement {
    /// True when both answered and wrote the same text.
    pub fn identical(&self) -> bool {
        self.error.is_none() && self.diverges_at_char.is_none()
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelityReport {
    /// The other backend, as it describes itself.
    pub candidate: String,
    /// The reference, as it describes itself.
    pub reference: String,
    /// One entry per prompt, in order.
    pub prompts: Vec<PromptAgreement>,
}

impl FidelityReport {
    /// How many prompts got identical answers.
    pub fn identical_count(&self) -> usize {
        self.prompts.iter().filter(|p| p.identical()).count()
    }
}

/// Options that make answers repeatable: greedy choice, no penalties.
pub fn greedy_options(max_tokens: usize) -> ChatOptions {
    ChatOptions {
        sampling: SamplingParams {
            temperature: 0.0,
            top_k: 1,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0,
        },
        max_tokens,
        enable_thinking: Some(false),
        speculative: None,
        format: hearth_engine::ResponseFormat::Text,
    }
}

/// Answers `prompts` greedily on `candidate` and on `reference`, and compares them.
pub fn run(
    candidate: &mut dyn Backend,
    reference: &mut CpuBackend,
    prompts: &[&str],
    max_tokens: usize,
) -> FidelityReport {
    let options = greedy_options(max_tokens);
    let mut results = Vec::new();
    for prompt in prompts {
        let input = || Input::Chat(vec![ChatMessage::new(Role::User, *prompt)]);
        let (reference_text, reference_error) = answer_text(reference, input(), &options);
        let (candidate_text, candidate_error) = answer_text(candidate, input(), &options);
        let error = match (reference_error, candidate_error) {
            (Some(r), _) => Some(format!("the CPU reference failed: {r}")),
            (None, Some(c)) => Some(c),
            (None, None) => None,
        };
        let tokenizer = reference.model().tokenizer();
        let ids = |t: &str| tokenizer.and_then(|k| k.encode(t, false).ok());
        let (ref_ids, cand_ids) = (ids(&reference_text), ids(&candidate_text));
        let agreeing_tokens = match (&ref_ids, &cand_ids) {
            (Some(a), Some(b)) => Some(common_prefix(a, b)),
            _ => None,
        };
        let ref_chars: Vec<char> = reference_text.chars().collect();
        let cand_chars: Vec<char> = candidate_text.chars().collect();
        let agreeing_chars = common_prefix(&ref_chars, &cand_chars);
        let same = ref_chars == cand_chars;
        let snippet =
            |chars: &[char]| -> String { chars.iter().skip(agreeing_chars).take(24).collect() };
        results.push(PromptAgreement {
            prompt: (*prompt).to_string(),
            agreeing_chars,
            agreeing_tokens,
            reference_tokens: ref_ids.as_ref().map(Vec::len),
            diverges_at_char: (!same).then_some(agreeing_chars),
            divergence: (!same).then(|| (snippet(&ref_chars), snippet(&cand_chars))),
            reference: reference_text,
            candidate: candidate_text,
            error,
        });
    }
    FidelityReport {
        candidate: candidate.info().label.clone(),
        reference: reference.info().label.clone(),
        prompts: results,
    }
}

/// The answer's text, and the error that ended it early, if one did.
fn answer_text(
    backend: &mut dyn Backend,
    input: Input,
    options: &ChatOptions,
) -> (String, Option<String>) {
    let mut text = String::new();
    let prompt = match backend.prepare(input, options) {
        Ok(p) => p,
        Err(e) => return (text, Some(e.to_string())),
    };
    let result = backend.generate(prompt, options, &mut |event| {
        if let BackendEvent::Text(piece) = event {
            text.push_str(piece);
        }
        ControlFlow::Continue(())
    });
    let error = result.err().map(|e| e.to_string());
    (text, error)
}

fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_counts_stop_at_the_first_difference() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4]), 2);
        assert_eq!(common_prefix::<u32>(&[], &[1]), 0);
        assert_eq!(common_prefix(&[1, 2], &[1, 2]), 2);
    }
}
