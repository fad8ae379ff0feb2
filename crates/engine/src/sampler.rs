//! Choosing the next token from logits: repetition penalty, then greedy (temperature 0) or
//! temperature, top-k, top-p and min-p sampling. The random source is passed in, so a seed makes
//! a run reproducible and tests are deterministic. Under a [`Constraint`] (structured output),
//! the choice is made among the tokens it allows ([`sample_allowed`]).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::constraint::Constraint;
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
    /// Divide positive (multiply negative) logits of the tokens among the last
    /// [`REPETITION_WINDOW`] of the context by this; 1 disables it. By default, 1.0.
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

/// How many of the most recent tokens the repetition penalty looks at: llama.cpp's and
/// Ollama's `repeat_last_n` default. A penalty over the whole context would also push the model
/// away from the words of the question and of the passages it is asked to quote.
pub const REPETITION_WINDOW: usize = 64;

/// Picks the next token from `logits` (modified in place by the penalty). `context` holds the
/// tokens so far, of which the repetition penalty reads the last [`REPETITION_WINDOW`].
pub fn sample(logits: &mut [f32], context: &[u32], params: &SamplingParams, rng: &mut Rng) -> u32 {
    if params.repetition_penalty != 1.0 {
        apply_repetition_penalty(logits, context, params.repetition_penalty);
    }
    if params.temperature == 0.0 {
        return argmax(logits);
    }
    let kept = Distribution::new(logits, params);
    kept.draw(rng.next_f32() * kept.total)
}

/// How many of the most likely tokens a choice under a constraint tries one by one before it
/// scans the whole vocabulary for the allowed ones.
const FIRST_LOOK: usize = 64;

/// Picks the next token as [`sample`] does, among the tokens `constraint` allows: greedy takes
/// the most likely allowed token; sampling draws from the kept candidates that are allowed
/// (renormalized), or, when none of them is, applies top-k, min-p and top-p to the allowed
/// tokens alone. The same one random number is drawn as in [`sample`]. None when no token is
/// allowed; an error when choosing one went past the constraint's bounds of work.
pub(crate) fn sample_allowed(
    logits: &mut [f32],
    context: &[u32],
    params: &SamplingParams,
    rng: &mut Rng,
    constraint: &Constraint<'_>,
) -> Result<Option<u32>, Error> {
    constraint.begin_token();
    if params.repetition_penalty != 1.0 {
        apply_repetition_penalty(logits, context, params.repetition_penalty);
    }
    if params.temperature == 0.0 {
        let mut first: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l))
            .collect();
        if first.len() > FIRST_LOOK {
            first.select_nth_unstable_by(FIRST_LOOK - 1, most_likely_first);
            first.truncate(FIRST_LOOK);
        }
        first.sort_unstable_by(most_likely_first);
        if let Some(&(token, _)) = first.iter().find(|c| constraint.allows(c.0)) {
            return Ok(Some(token));
        }
        constraint.within_bounds()?;
        return Ok(constraint
            .allowed()?
            .into_iter()
            .map(|t| (t, logits[t as usize]))
            .min_by(most_likely_first)
            .map(|c| c.0));
    }
    let r = rng.next_f32();
    let kept = Distribution::new(logits, params);
    // Past a few candidates (sampling without top-k), one scan of the vocabulary costs less
    // than asking about each, and keeps a choice within the constraint's work.
    let (kept, scanned) = if kept.candidates.len() > FIRST_LOOK {
        let allowed = constraint.allowed()?;
        let set: HashSet<u32> = allowed.iter().copied().collect();
        (kept.only(|token| set.contains(&token)), Some(allowed))
    } else {
        let kept = kept.only(|token| constraint.allows(token));
        constraint.within_bounds()?;
        (kept, None)
    };
    let drawn = match kept {
        Some(allowed) => allowed,
        None => {
            let allowed = match scanned {
                Some(allowed) => allowed,
                None => constraint.allowed()?,
            };
            let allowed: Vec<(u32, f32)> = allowed
                .into_iter()
                .map(|t| (t, logits[t as usize] / params.temperature))
                .collect();
            if allowed.is_empty() {
                return Ok(None);
            }
            Distribution::over(allowed, params)
        }
    };
    Ok(Some(drawn.draw(r * drawn.total)))
}

/// Candidates by logit, most likely first, ties with the lower id first: a total order.
fn most_likely_first(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
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
        let candidates: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l / params.temperature))
            .collect();
        Self::over(candidates, params)
    }

    /// The distribution over `candidates` (ids with logits already divided by the
    /// temperature; at least one).
    fn over(mut candidates: Vec<(u32, f32)>, params: &SamplingParams) -> Self {
        // Candidates sorted by logit, most likely first, ties with the lower id first. That
        // order is total, so selecting the top k first (linear time, instead of sorting a whole
        // vocabulary of 130 000 on every token) keeps exactly what a full sort would.
        let order = most_likely_first;
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

    /// The kept candidates for which `keep` holds, with their probabilities; None when
    /// there are none.
    fn only(mut self, keep: impl Fn(u32) -> bool) -> Option<Self> {
        let mut probs = self.probs.iter();
        let (candidates, probs): (Vec<(u32, f32)>, Vec<f32>) = self
            .candidates
            .iter()
            .map(|&c| (c, *probs.next().expect("one probability per candidate")))
            .filter(|(c, _)| keep(c.0))
            .unzip();
        if candidates.is_empty() {
            return None;
        }
        self.total = probs.iter().sum();
        (self.candidates, self.probs) = (candidates, probs);
        Some(self)
    }

    /// The candidate where `r` (in `0..total`) falls, walking the kept candidates in order.
    fn draw(&self, mut r: f32) -> u32 {
        for (candidate, p) in self.candidates.iter().zip(&self.probs) {
            r -= p;
            if r < 0.0 {
                return candidate.0;
            }
        }
        // Rounding left r just above 0: the last candidate.
        self.candidates[self.candidates.len() - 1].0
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

/// The CTRL / transformers repetition penalty over the last [`REPETITION_WINDOW`] tokens of
/// `context`: each distinct token seen there has its logit divided by `penalty` when positive
/// and multiplied when negative.
fn apply_repetition_penalty(logits: &mut [f32], context: &[u32], penalty: f32) {
    let recent = &context[context.len().saturating_sub(REPETITION_WINDOW)..];
    let mut seen = recent.to_vec();
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
    fn repetition_penalty_reads_only_the_last_64_tokens() {
        let mut context = vec![0u32];
        context.extend(std::iter::repeat_n(1, REPETITION_WINDOW));
        let mut logits = [2.0, 2.0];
        apply_repetition_penalty(&mut logits, &context, 2.0);
        assert_eq!(
            logits,
            [2.0, 1.0],
            "token 0 is 65 tokens back: not penalized"
        );
    }

    /// Runs `check` with a constraint over the 256 one-byte tokens that allows only a JSON
    /// boolean (`t` or `f` first, or whitespace before it, which [`unlikely_whitespace`]
    /// keeps out of the way).
    fn with_boolean_constraint(check: impl FnOnce(&Constraint<'_>)) {
        use crate::constraint::TokenBytes;
        use crate::json_schema::Grammar;
        let vocab = TokenBytes::from_bytes((0..=255u8).map(|b| vec![b]).collect());
        let grammar = Grammar::from_schema(&serde_json::json!({"type": "boolean"})).unwrap();
        check(&Constraint::new(grammar, &vocab, &[]));
    }

    fn unlikely_whitespace(logits: &mut [f32]) {
        logits[b' ' as usize] = -100.0;
        logits[b'\n' as usize] = -100.0;
    }

    #[test]
    fn greedy_under_a_constraint_takes_the_most_likely_allowed_token() {
        with_boolean_constraint(|constraint| {
            let mut logits = [0.0f32; 256];
            logits[b'x' as usize] = 9.0;
            logits[b't' as usize] = 2.0;
            logits[b'f' as usize] = 1.0;
            unlikely_whitespace(&mut logits);
            let greedy = SamplingParams::greedy();
            let token =
                sample_allowed(&mut logits, &[], &greedy, &mut Rng::new(1), constraint).unwrap();
            assert_eq!(token, Some(b't' as u32));
        });
    }

    #[test]
    fn greedy_scans_the_vocabulary_when_no_likely_token_is_allowed() {
        with_boolean_constraint(|constraint| {
            let mut logits = [5.0f32; 256];
            logits[b't' as usize] = 0.5;
            logits[b'f' as usize] = 1.0;
            unlikely_whitespace(&mut logits);
            let greedy = SamplingParams::greedy();
            let token =
                sample_allowed(&mut logits, &[], &greedy, &mut Rng::new(1), constraint).unwrap();
            assert_eq!(
                token,
                Some(b'f' as u32),
                "past the {FIRST_LOOK} most likely"
            );
        });
    }

    #[test]
    fn sampling_under_a_constraint_draws_allowed_tokens_in_proportion() {
        with_boolean_constraint(|constraint| {
            let mut rng = Rng::new(9);
            let mut counts = [0usize; 2];
            for top_k in [0, 3] {
                for _ in 0..2000 {
                    let mut logits = [0.0f32; 256];
                    logits[b't' as usize] = (3.0f32).ln(); // 0.75 of t and f together
                    unlikely_whitespace(&mut logits);
                    // With top_k 3 these three fill the kept candidates: the allowed tokens
                    // are then drawn from alone.
                    for high in [b'a', b'b', b'c'] {
                        logits[high as usize] = 4.0;
                    }
                    let params = params(1.0, top_k, 1.0, 0.0);
                    match sample_allowed(&mut logits, &[], &params, &mut rng, constraint).unwrap() {
                        Some(t) if t == b't' as u32 => counts[0] += 1,
                        Some(t) if t == b'f' as u32 => counts[1] += 1,
                        other => panic!("{other:?} is not allowed"),
                    }
                }
            }
            let share = counts[0] as f32 / 4000.0;
            assert!((share - 0.75).abs() < 0.03, "share of t is {share}");
        });
    }

    #[test]
    fn out_of_range_settings_are_rejected() {
        assert!(params(-1.0, 0, 1.0, 0.0).validate().is_err());
        assert!(params(1.0, 0, 0.0, 0.0).validate().is_err());
        assert!(params(1.0, 0, 1.0, 1.5).validate().is_err());
        assert!(SamplingParams::default().validate().is_ok());
    }
}
