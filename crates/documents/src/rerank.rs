//! The second look: a language model reads the question with each of the best passages found by
//! keyword and meaning and judges whether the passage answers it; the passages are ranked again
//! by that judgement.
//!
//! The prompt and the score are Qwen3-Reranker's (its model card, Apache-2.0): a system line
//! ([`JUDGE`]), the user turn "<Instruct>: {instruction}\n<Query>: {question}\n<Document>:
//! {passage}", the assistant turn opened with an empty think block; the score is p(yes), the
//! softmax over the logits of "yes" and "no" at the last position. A Qwen3 model whose folder
//! name or config.json says "reranker" gets exactly that prompt, its three parts tokenized
//! apart and joined as the card does ([`PromptStyle::Qwen3Reranker`]); any other chat model
//! (the one the user chats with, when no reranker is installed) gets the same system line and
//! user turn through its own chat template, thinking off, and "yes"/"Yes" against "no"/"No"
//! ([`PromptStyle::ChatTemplate`]): a general model is asked in its own format and may answer
//! in either case.
//!
//! Contract: [`rerank`] keeps the passages it is given, in the reranker's order (ties keep
//! the order they came in), each with p(yes) as its score; the caller chooses how many to give
//! (the combined ranking's first [`RERANK_DEPTH`]). A passage longer than the model's context
//! allows is cut at its end. Scoring can be stopped between passages (`after_each`); the
//! passages then keep their first order.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Mutex;

use hearth_engine::{ChatMessage, ChatOptions, LoadOptions, Model, Role};

use crate::search::Hit;

/// What the reranker is told to judge, Qwen3-Reranker's system line word for word.
pub const JUDGE: &str = "Judge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".";

/// The task, in the `<Instruct>` line: what a passage must do for the question.
pub const INSTRUCTION: &str = "Given a question, retrieve passages that answer it";

/// Passages of the combined ranking the reranker reads: enough to reach answers the first
/// ranking put below its first five (the bench's paraphrases rank 7-47 by meaning), few enough
/// that a small model reads them in seconds.
pub const RERANK_DEPTH: usize = 20;

/// Qwen3-Reranker's prompt around the pair, as its model card writes it.
const QWEN3_PREFIX: &str = "<|im_start|>system\n";
const QWEN3_USER: &str = "<|im_end|>\n<|im_start|>user\n";
const QWEN3_SUFFIX: &str = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

/// Positions a reranker is loaded with: the prompt (about 60 tokens), a question and a passage
/// of the library (at most a few hundred tokens).
const RERANK_CONTEXT: usize = 2048;

/// A model that judges whether passages answer a question.
pub trait Reranker: Send + Sync {
    /// Names the model (for logs and the measured cost).
    fn model_id(&self) -> &str;

    /// p(yes) for each passage, in order. `after_each` is told how many are done and can stop:
    /// then the scores of those done are returned.
    fn score(
        &self,
        question: &str,
        passages: &[&str],
        after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Vec<f64>, String>;
}

/// Which prompt a model reads (see the module's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptStyle {
    /// Qwen3-Reranker's own prompt, exactly as its model card builds it.
    Qwen3Reranker,
    /// The model's chat template around the same system line and user turn.
    ChatTemplate,
}

/// A reranker on Hearth's engine: a reranker model, or a chat model asked the same question.
pub struct EngineReranker {
    model: Mutex<Model>,
    style: PromptStyle,
    yes: Vec<u32>,
    no: Vec<u32>,
    id: String,
}

/// Whether the folder holds a reranker: its name or its config.json says so (Qwen3-Reranker's
/// config names the plain causal model, so its name is what tells).
pub fn is_reranker_folder(dir: &Path) -> bool {
    let says = |text: &str| text.to_lowercase().contains("rerank");
    let named = dir
        .file_name()
        .is_some_and(|name| says(&name.to_string_lossy()));
    named
        || std::fs::read_to_string(dir.join("config.json"))
            .is_ok_and(|config| config.len() < 1 << 20 && says(&config))
}

impl EngineReranker {
    /// Loads the model folder `dir` to rerank on `threads` threads (None: one per physical
    /// core). Its weights are read through the file's map (not copied: a chat model loaded for
    /// chatting already has its copy), with a context of 2,048 positions (fewer when the model
    /// has fewer) and no kept conversations.
    pub fn load(dir: &Path, threads: Option<usize>) -> Result<Self, String> {
        let name = dir
            .file_name()
            .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into());
        let options = LoadOptions {
            threads,
            map_weights: true,
            kv_store_bytes: Some(0),
            ..LoadOptions::default()
        };
        let model = Model::load(dir, &options).map_err(|e| e.to_string())?;
        let style = if is_reranker_folder(dir) && model.info().family == "qwen3" {
            PromptStyle::Qwen3Reranker
        } else {
            PromptStyle::ChatTemplate
        };
        Self::from_model(model, &name, style)
    }

    /// Wraps a loaded model, read with `style`'s prompt. Refused when the model has no
    /// tokenizer, no chat template (for [`PromptStyle::ChatTemplate`]), or no token for "yes"
    /// and "no".
    pub fn from_model(model: Model, name: &str, style: PromptStyle) -> Result<Self, String> {
        let tokenizer = model
            .tokenizer()
            .ok_or_else(|| format!("{name} has no tokenizer, so it cannot judge passages"))?;
        let (yes, no) = match style {
            PromptStyle::Qwen3Reranker => {
                let id = |word: &str| {
                    tokenizer.token_to_id(word).ok_or_else(|| {
                        format!("{name} has no token \"{word}\", so it is not a Qwen3 reranker")
                    })
                };
                (vec![id("yes")?], vec![id("no")?])
            }
            PromptStyle::ChatTemplate => {
                if !model.info().has_chat_template {
                    return Err(format!(
                        "{name} has no chat template, so it cannot be asked to judge passages"
                    ));
                }
                // The first token of each spelling, as an answer would begin.
                let first = |words: [&str; 2]| -> Result<Vec<u32>, String> {
                    let mut ids = Vec::new();
                    for word in words {
                        let encoded = tokenizer.encode(word, false).map_err(|e| e.to_string())?;
                        if let Some(&id) = encoded.first() {
                            if !ids.contains(&id) {
                                ids.push(id);
                            }
                        }
                    }
                    match ids.is_empty() {
                        true => Err(format!("{name} cannot spell \"{}\"", words[0])),
                        false => Ok(ids),
                    }
                };
                (first(["yes", "Yes"])?, first(["no", "No"])?)
            }
        };
        if yes.iter().any(|id| no.contains(id)) {
            return Err(format!(
                "{name} spells \"yes\" and \"no\" with the same token"
            ));
        }
        let context = model.info().context_length.min(RERANK_CONTEXT);
        tracing::debug!(name, ?style, context, "reranker ready");
        Ok(Self {
            model: Mutex::new(model),
            style,
            yes,
            no,
            id: name.to_owned(),
        })
    }

    /// The prompt style it reads.
    pub fn style(&self) -> PromptStyle {
        self.style
    }

    /// The token ids the model reads for `question` and `passage` (see the module's notes),
    /// the passage cut at its end when the whole would not fit in `context` positions.
    pub fn prompt(
        &self,
        model: &Model,
        question: &str,
        passage: &str,
        context: usize,
    ) -> Result<Vec<u32>, String> {
        let tokenizer = model
            .tokenizer()
            .ok_or_else(|| format!("{} has no tokenizer", self.id))?;
        let err = |e: hearth_engine::Error| e.to_string();
        match self.style {
            PromptStyle::Qwen3Reranker => {
                // Three parts tokenized apart, as the model card joins them.
                let prefix = tokenizer
                    .encode(&format!("{QWEN3_PREFIX}{JUDGE}{QWEN3_USER}"), false)
                    .map_err(err)?;
                let suffix = tokenizer.encode(QWEN3_SUFFIX, false).map_err(err)?;
                let pair = tokenizer.quote(&pair_text(question, passage));
                let mut pair = tokenizer.encode_prompt(&pair).map_err(err)?;
                let room = context.saturating_sub(prefix.len() + suffix.len());
                if room == 0 {
                    return Err(format!("{}'s context is too short to judge", self.id));
                }
                pair.truncate(room);
                Ok([prefix, pair, suffix].concat())
            }
            PromptStyle::ChatTemplate => {
                let options = ChatOptions {
                    enable_thinking: Some(false),
                    ..ChatOptions::default()
                };
                let mut passage = passage;
                loop {
                    let messages = [
                        ChatMessage::new(Role::System, JUDGE),
                        ChatMessage::new(Role::User, pair_text(question, passage)),
                    ];
                    let ids = model.tokenize_chat(&messages, &options).map_err(err)?;
                    if ids.len() <= context {
                        return Ok(ids);
                    }
                    if passage.is_empty() {
                        return Err(format!("the question is too long for {} to judge", self.id));
                    }
                    // Keep the share of the passage that fits, and a little less.
                    let keep = passage.chars().count() * context / ids.len() * 9 / 10;
                    let end = passage.char_indices().nth(keep).map_or(0, |(at, _)| at);
                    passage = &passage[..end];
                }
            }
        }
    }
}

/// The user turn's text: the instruction, the question and the passage.
pub fn pair_text(question: &str, passage: &str) -> String {
    format!("<Instruct>: {INSTRUCTION}\n<Query>: {question}\n<Document>: {passage}")
}

/// p(yes): the softmax over the "yes" logits and the "no" logits, each side's probabilities
/// summed (one token each for Qwen3-Reranker, where this is its model card's score).
pub fn probability_of_yes(yes: &[f32], no: &[f32]) -> f64 {
    let top = yes
        .iter()
        .chain(no)
        .fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
    let mass = |logits: &[f32]| logits.iter().map(|&x| (x as f64 - top).exp()).sum::<f64>();
    let (yes, no) = (mass(yes), mass(no));
    if yes + no > 0.0 && (yes + no).is_finite() {
        yes / (yes + no)
    } else {
        0.0
    }
}

impl Reranker for EngineReranker {
    fn model_id(&self) -> &str {
        &self.id
    }

    fn score(
        &self,
        question: &str,
        passages: &[&str],
        after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
    ) -> Result<Vec<f64>, String> {
        let mut model = self
            .model
            .lock()
            .map_err(|_| format!("{} failed while judging passages before", self.id))?;
        let context = model.info().context_length.min(RERANK_CONTEXT);
        let prompts = passages
            .iter()
            .map(|passage| self.prompt(&model, question, passage, context))
            .collect::<Result<Vec<_>, _>>()?;
        let ids: Vec<u32> = self.yes.iter().chain(&self.no).copied().collect();
        let logits = model
            .last_logits_of(&prompts, &ids, after_each)
            .map_err(|e| e.to_string())?;
        let split = self.yes.len();
        Ok(logits
            .iter()
            .map(|row| probability_of_yes(&row[..split], &row[split..]))
            .collect())
    }
}

/// `hits` ranked again by `reranker` for `question` (see the module's notes): each hit's score
/// becomes its p(yes). None when `after_each` stopped the scoring before the last passage.
pub fn rerank(
    question: &str,
    hits: Vec<Hit>,
    reranker: &dyn Reranker,
    after_each: &mut dyn FnMut(usize) -> ControlFlow<()>,
) -> Result<Option<Vec<Hit>>, String> {
    let texts: Vec<String> = hits.iter().map(passage_text).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let scores = reranker.score(question, &texts, after_each)?;
    if scores.len() < hits.len() {
        return Ok(None);
    }
    let mut ranked: Vec<(usize, f64, Hit)> = hits
        .into_iter()
        .zip(scores)
        .enumerate()
        .map(|(i, (hit, score))| (i, score, hit))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(Some(
        ranked
            .into_iter()
            .map(|(_, score, hit)| Hit { score, ..hit })
            .collect(),
    ))
}

/// A passage as the reranker reads it: under its heading, as it was embedded (a passage of
/// bullet points says little without "4.3. Good password").
fn passage_text(hit: &Hit) -> String {
    match &hit.place {
        crate::extract::Place::Heading(heading) => format!("{heading}\n{}", hit.text),
        _ => hit.text.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probability_is_the_softmax_of_yes_against_no() {
        assert!((probability_of_yes(&[0.0], &[0.0]) - 0.5).abs() < 1e-12);
        let p = probability_of_yes(&[2.0], &[0.0]);
        assert!((p - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-12);
        // Two spellings on one side add their probabilities.
        let p = probability_of_yes(&[0.0, 0.0], &[0.0]);
        assert!((p - 2.0 / 3.0).abs() < 1e-12);
        assert!(probability_of_yes(&[1000.0], &[-1000.0]) > 0.999);
        assert_eq!(probability_of_yes(&[f32::NAN], &[0.0]), 0.0);
    }

    #[test]
    fn a_folder_is_a_reranker_by_its_name_or_its_config() {
        let dir = tempfile::tempdir().unwrap();
        let named = dir.path().join("Qwen3-Reranker-0.6B");
        std::fs::create_dir(&named).unwrap();
        assert!(is_reranker_folder(&named));
        let plain = dir.path().join("model");
        std::fs::create_dir(&plain).unwrap();
        std::fs::write(plain.join("config.json"), "{\"model_type\": \"qwen3\"}").unwrap();
        assert!(!is_reranker_folder(&plain));
        std::fs::write(plain.join("config.json"), "{\"task\": \"reranker\"}").unwrap();
        assert!(is_reranker_folder(&plain));
    }
}
