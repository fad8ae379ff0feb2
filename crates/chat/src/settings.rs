//! The settings a conversation carries with it (stored with it in the database): system prompt,
//! sampling, answer length and the thinking switch.

use hearth_engine::SamplingParams;
use serde::{Deserialize, Serialize};

/// The longest answer a user may ask for, in tokens.
pub const MAX_ANSWER_TOKENS: usize = 32_768;

/// The settings a conversation carries with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConversationSettings {
    /// Instructions given to the model before the conversation. Empty: none.
    pub system_prompt: String,
    /// Sampling for this conversation's answers.
    pub sampling: SamplingParams,
    /// Longest answer, in tokens.
    pub max_tokens: usize,
    /// Ask reasoning models to think first (None: the model's default).
    pub enable_thinking: Option<bool>,
}

impl Default for ConversationSettings {
    fn default() -> Self {
        ConversationSettings {
            system_prompt: String::new(),
            sampling: SamplingParams::default(),
            max_tokens: 1024,
            enable_thinking: None,
        }
    }
}

impl ConversationSettings {
    /// Bring every field into its valid range.
    pub fn clamped(mut self) -> Self {
        self.sampling = clamp_sampling(self.sampling);
        self.max_tokens = self.max_tokens.clamp(1, MAX_ANSWER_TOKENS);
        self
    }

    /// The engine options for an answer in this conversation. A seed of 0 means "a new one for
    /// every answer", so Regenerate writes something new; any other seed repeats answers.
    pub fn chat_options(&self) -> hearth_engine::ChatOptions {
        let mut sampling = clamp_sampling(self.sampling);
        if sampling.seed == 0 {
            sampling.seed = fresh_seed();
        }
        hearth_engine::ChatOptions {
            sampling,
            max_tokens: self.max_tokens.clamp(1, MAX_ANSWER_TOKENS),
            enable_thinking: self.enable_thinking,
            speculative: None,
            format: hearth_engine::ResponseFormat::Text,
        }
    }
}

/// A seed no earlier answer used (in all likelihood): std's per-process random hash keys over
/// the clock. Never 0, which would mean "pick one".
fn fresh_seed() -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos) | 1
}

/// Every sampling value brought into the range the engine accepts, so a bad value from the UI
/// or a hand-edited file never reaches the sampler (NaN becomes the default).
pub fn clamp_sampling(s: SamplingParams) -> SamplingParams {
    let finite = |v: f32, d: f32| if v.is_finite() { v } else { d };
    let d = SamplingParams::default();
    SamplingParams {
        temperature: finite(s.temperature, d.temperature).clamp(0.0, 2.0),
        top_k: s.top_k.min(1000),
        top_p: finite(s.top_p, d.top_p).clamp(0.0, 1.0),
        min_p: finite(s.min_p, d.min_p).clamp(0.0, 1.0),
        repetition_penalty: finite(s.repetition_penalty, d.repetition_penalty).clamp(0.5, 2.0),
        seed: s.seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_values_are_clamped() {
        let s = ConversationSettings {
            max_tokens: 0,
            sampling: SamplingParams {
                temperature: f32::NAN,
                top_p: 7.0,
                ..SamplingParams::default()
            },
            ..ConversationSettings::default()
        }
        .clamped();
        assert_eq!(s.max_tokens, 1);
        assert_eq!(s.sampling.temperature, 0.7, "NaN becomes the default");
        assert_eq!(s.sampling.top_p, 1.0);
    }

    #[test]
    fn seed_zero_gives_each_answer_its_own_seed_and_a_fixed_seed_stays() {
        let fresh = ConversationSettings::default();
        let a = fresh.chat_options().sampling.seed;
        let b = fresh.chat_options().sampling.seed;
        assert!(a != 0 && b != 0, "0 is never passed on");
        assert_ne!(a, b, "two answers, two seeds");
        let mut fixed = ConversationSettings::default();
        fixed.sampling.seed = 42;
        assert_eq!(fixed.chat_options().sampling.seed, 42);
    }
}
