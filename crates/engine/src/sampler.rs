//! Choosing the next token from logits: repetition penalty, then greedy (temperature 0) or
//! temperature, top-k, top-p and min-p sampling. The random source is passed in, so a seed makes
//! a run reproducible and tests are deterministic.

use serde::{Deserialize, Serialize};

use crate::Error;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "Sampling"))]
pub struct SamplingParams {
    /// Softmax temperature; 0 picks the most likely token (greedy). By default, 0.7.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 keeps all. By default, 40.
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p`; 1 keeps all.
    /// By default, 0.95.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one; 0 keeps all.
    /// By default, 0.05.
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of tokens already in the context by this;
    /// 1 disables it. By default, 1.0.
    pub repetition_penalty: f32,
    /// Seed of the random source. By default, 0.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.7,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding: always the most likely token.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            ..SamplingParams::default()
        }
    }

    /// Checks every value's range, so a bad setting fails before any work.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: String| Err(Error::InvalidSampling { reason });
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature {} must be 0 or more",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p {} must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p {} must be in [0, 1]", self.min_p));
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "repetition_penalty {} must be more than 0",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// A small, fast, seedable random source (xoshiro256** seeded through SplitMix64), identical on
/// every platform and version so seeded runs stay reproducible.
#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// A random source from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            state: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Picks the next token from `logits` (modified in place by the penalty). `context` holds the
/// tokens the repetition penalty applies to.
pub fn sample(logits: &mut [f32], context: &[u32], params: &SamplingParams, rng: &mut Rng) -> u32 {
    if params.repetition_penalty != 1.0 {
        apply_repetition_penalty(logits, context, params.repetition_penalty);
    }
    if params.temperature == 0.0 {
        return argmax(logits);
    }
    let kept = Distribution::new(logits, params);
    kept.draw(rng.next_f32() * kept.total, None)
}

/// Picks the next token as [`sample`] would, given a `draft` of it: the draft is kept with the
/// probability `p(draft)` that [`sample`] would choose it, and otherwise a token is drawn from
/// that distribution without the draft (renormalized), so the token has exactly [`sample`]'s
/// distribution (the rule of speculative sampling for a draft that is a single token). Greedy
/// keeps the draft when it is the argmax.
///
/// It draws other random numbers than [`sample`], so a seeded run that drafts samples other
/// (equally distributed) tokens than one that does not; greedy choices are the same.
pub fn sample_with_draft(
    logits: &mut [f32],
    context: &[u32],
    params: &SamplingParams,
    rng: &mut Rng,
    draft: u32,
) -> u32 {
    if params.repetition_penalty != 1.0 {
        apply_repetition_penalty(logits, context, params.repetition_penalty);
    }
    if params.temperature == 0.0 {
        return argmax(logits);
    }
    let kept = Distribution::new(logits, params);
    let p_draft = kept.weight(draft);
    if rng.next_f32() * kept.total < p_draft {
        return draft;
    }
    kept.draw(rng.next_f32() * (kept.total - p_draft), Some(draft))
}

/// What sampling draws from, after temperature, top-k, min-p and top-p: the kept candidates,
/// most likely first, and their probabilities under the softmax of the top k (kept ones sum
/// to `total`).
struct Distribution {
    candidates: Vec<(u32, f32)>,
    probs: Vec<f32>,
    total: f32,
}

impl Distribution {
    fn new(logits: &[f32], params: &SamplingParams) -> Self {
        // Candidates sorted by logit, most likely first, ties with the lower id first. That
        // order is total, so selecting the top k first (linear time, instead of sorting a whole
        // vocabulary of 130 000 on every token) keeps exactly what a full sort would.
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut candidates: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l / params.temperature))
            .collect();
        if params.top_k > 0 && params.top_k < candidates.len() {
            candidates.select_nth_unstable_by(params.top_k - 1, order);
            candidates.truncate(params.top_k);
        }
        candidates.sort_unstable_by(order);
        let max = candidates[0].1;
        let mut probs: Vec<f32> = candidates.iter().map(|c| (c.1 - max).exp()).collect();
        let sum: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= sum);
        // min-p relative to the most likely token, then top-p over what remains.
        let floor = params.min_p * probs[0];
        let mut keep = probs.iter().take_while(|&&p| p >= floor).count().max(1);
        let mut cumulative = 0.0;
        for (i, p) in probs[..keep].iter().enumerate() {
            cumulative += p;
            if cumulative >= params.top_p {
                keep = i + 1;
                break;
            }
        }
        candidates.truncate(keep);
        probs.truncate(keep);
        let total = probs.iter().sum();
        Distribution {
            candidates,
            probs,
            total,
        }
    }

    /// The kept probability of `token` (0 when it is not kept).
    fn weight(&self, token: u32) -> f32 {
        let at = self.candidates.iter().position(|c| c.0 == token);
        at.map_or(0.0, |i| self.probs[i])
    }

    /// The candidate where `r` (in `0..total`, less `skip`'s share) falls, walking the kept
    /// candidates in order and passing over `skip`.
    fn draw(&self, mut r: f32, skip: Option<u32>) -> u32 {
        let mut last = None;
        for (candidate, p) in self.candidates.iter().zip(&self.probs) {
            if Some(candidate.0) == skip {
                continue;
            }
            r -= p;
            if r < 0.0 {
                return candidate.0;
            }
            last = Some(candidate.0);
        }
        // Rounding left r just above 0: the last candidate walked.
        last.unwrap_or(self.candidates[0].0)
    }
}

/// The index of the largest logit (the lowest index among equals, as `torch.argmax`).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The CTRL / transformers repetition penalty: each distinct token already seen has its logit
/// divided by `penalty` when positive and multiplied when negative.
fn apply_repetition_penalty(logits: &mut [f32], context: &[u32], penalty: f32) {
    let mut seen = context.to_vec();
    seen.sort_unstable();
    seen.dedup();
    for &token in &seen {
        if let Some(l) = logits.get_mut(token as usize) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplingParams {
        SamplingParams {
            temperature,
            top_k,
            top_p,
            min_p,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }

    #[test]
    fn greedy_takes_the_first_of_equal_maxima() {
        let mut logits = [0.0, 3.0, 3.0, -1.0];
        assert_eq!(
            sample(
                &mut logits,
                &[],
                &SamplingParams::greedy(),
                &mut Rng::new(1)
            ),
            1
        );
    }

    #[test]
    fn top_k_one_is_greedy_at_any_temperature() {
        let mut rng = Rng::new(7);
        for _ in 0..50 {
            let mut logits = [0.5, 0.1, 0.4, 0.45];
            assert_eq!(
                sample(&mut logits, &[], &params(5.0, 1, 1.0, 0.0), &mut rng),
                0
            );
        }
    }

    #[test]
    fn top_k_among_ties_keeps_the_lowest_ids() {
        // Ten equal logits and one higher: top-3 is the highest and the two lowest tied ids.
        let mut rng = Rng::new(3);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..300 {
            let mut logits = [1.0f32; 11];
            logits[7] = 1.2;
            seen.insert(sample(
                &mut logits,
                &[],
                &params(1.0, 3, 1.0, 0.0),
                &mut rng,
            ));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [0, 1, 7]);
    }

    #[test]
    fn top_p_keeps_only_the_nucleus() {
        // Probabilities about 0.64, 0.24, 0.09, 0.03: top_p 0.8 keeps the first two.
        let mut rng = Rng::new(3);
        for _ in 0..200 {
            let mut logits = [3.0, 2.0, 1.0, 0.0];
            let t = sample(&mut logits, &[], &params(1.0, 0, 0.8, 0.0), &mut rng);
            assert!(t <= 1, "token {t} is outside the 0.8 nucleus");
        }
    }

    #[test]
    fn min_p_drops_unlikely_tokens() {
        let mut rng = Rng::new(4);
        for _ in 0..200 {
            let mut logits = [3.0, 2.9, -5.0, -6.0];
            let t = sample(&mut logits, &[], &params(1.0, 0, 1.0, 0.1), &mut rng);
            assert!(t <= 1, "token {t} is below min_p");
        }
    }

    #[test]
    fn sampling_follows_the_distribution() {
        let mut rng = Rng::new(5);
        let mut counts = [0usize; 2];
        for _ in 0..4000 {
            let mut logits = [0.0, (3.0f32).ln()]; // probabilities 0.25, 0.75
            counts[sample(&mut logits, &[], &params(1.0, 0, 1.0, 0.0), &mut rng) as usize] += 1;
        }
        let share = counts[1] as f32 / 4000.0;
        assert!((share - 0.75).abs() < 0.03, "share of token 1 is {share}");
    }

    /// Shares of each token over `trials` choices made by `choose`.
    fn shares(trials: usize, tokens: usize, mut choose: impl FnMut() -> u32) -> Vec<f32> {
        let mut counts = vec![0usize; tokens];
        (0..trials).for_each(|_| counts[choose() as usize] += 1);
        counts.iter().map(|&c| c as f32 / trials as f32).collect()
    }

    /// Whatever the draft, a token chosen with it has the distribution plain sampling has:
    /// after temperature, top-k and min-p here, with a draft the filters drop among them.
    #[test]
    fn drafting_leaves_the_distribution_unchanged() {
        // Temperature 2 over logits 2 ln p: probabilities 0.5, 0.3, 0.15, 0.05; min-p 0.2
        // drops the last (0.05 < 0.1), top-k 4 the fifth.
        let logits = [0.5f32, 0.3, 0.15, 0.05, 0.01].map(|p| 2.0 * p.ln());
        let filters = params(2.0, 4, 1.0, 0.2);
        let expected = [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0, 0.0];
        let mut rng = Rng::new(11);
        let trials = 40_000;
        let plain = shares(trials, 5, || {
            sample(&mut logits.clone(), &[], &filters, &mut rng)
        });
        for draft in 0..5 {
            let drafted = shares(trials, 5, || {
                sample_with_draft(&mut logits.clone(), &[], &filters, &mut rng, draft)
            });
            for t in 0..5 {
                let (a, b, e) = (drafted[t], plain[t], expected[t]);
                assert!(
                    (a - e).abs() < 0.015 && (b - e).abs() < 0.015,
                    "draft {draft}, token {t}: drafted {a}, plain {b}, expected {e}"
                );
            }
        }
    }

    /// The repetition penalty sees the same context either way: greedy with a draft picks
    /// what greedy picks, and a kept draft is the only token of a one-token distribution.
    #[test]
    fn drafting_applies_the_repetition_penalty_to_the_same_context() {
        let context = [0, 0, 2];
        let mut penalized = params(0.0, 0, 1.0, 0.0);
        penalized.repetition_penalty = 3.0;
        let logits = [2.0f32, 1.0, 1.5, -1.0];
        let mut rng = Rng::new(1);
        let plain = sample(&mut logits.clone(), &context, &penalized, &mut rng);
        for draft in 0..4 {
            let mut with_draft = logits;
            let token = sample_with_draft(&mut with_draft, &context, &penalized, &mut rng, draft);
            assert_eq!(token, plain, "draft {draft}");
            assert_eq!(with_draft, [2.0 / 3.0, 1.0, 0.5, -1.0], "penalized once");
        }
        assert_eq!(plain, 1);
    }

    #[test]
    fn same_seed_same_choices() {
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..20)
                .map(|_| {
                    let mut logits = [1.0, 1.1, 0.9, 1.05];
                    sample(&mut logits, &[], &params(1.0, 0, 1.0, 0.0), &mut rng)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn repetition_penalty_divides_positive_and_multiplies_negative_once() {
        let mut logits = [2.0, -2.0, 1.0];
        apply_repetition_penalty(&mut logits, &[0, 1, 0], 2.0);
        assert_eq!(logits, [1.0, -4.0, 1.0]);
    }

    #[test]
    fn out_of_range_settings_are_rejected() {
        assert!(params(-1.0, 0, 1.0, 0.0).validate().is_err());
        assert!(params(1.0, 0, 0.0, 0.0).validate().is_err());
        assert!(params(1.0, 0, 1.0, 1.5).validate().is_err());
        assert!(SamplingParams::default().validate().is_ok());
    }
}
