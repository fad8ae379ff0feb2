//! Drafts for speculative decoding by prompt lookup: a conversation often repeats itself (a
//! paragraph being rewritten, code being edited, names, quotes, a model's own loops), so the
//! tokens that followed the latest earlier occurrence of the newest few tokens are a cheap guess
//! of what comes next. No second model: a guess costs one scan of the history, and the model
//! checks all of it in one pass (`runner`).

use std::time::Instant;

/// The longest and shortest n-grams looked up, longest first: a 3-token match predicts better
/// than a 2-token one, and a single token recurs too often to predict anything.
const NGRAMS: [usize; 2] = [3, 2];

/// The most tokens one draft proposes: verifying 9 tokens costs about one weight read on the
/// CPU, and a longer guess is rarely right to its end.
pub const MAX_DRAFT: usize = 8;

/// Up to `max` tokens proposed to follow `history`: what followed the latest earlier
/// occurrence of its last 3 tokens, else of its last 2; empty when neither recurs.
///
/// A continuation that runs into the end of the history goes on with the draft itself, so a
/// repeating stretch (`a b c a b c a b`) drafts its period again and again (`c a b c ...`), as
/// the history would read if it kept repeating.
pub fn draft(history: &[u32], max: usize) -> Vec<u32> {
    let len = history.len();
    for n in NGRAMS {
        if len <= n || max == 0 {
            continue;
        }
        let tail = &history[len - n..];
        // Starts before the tail's own, latest first.
        let Some(start) = (0..len - n).rev().find(|&i| &history[i..i + n] == tail) else {
            continue;
        };
        let mut out = Vec::with_capacity(max);
        for i in start + n..start + n + max {
            out.push(if i < len { history[i] } else { out[i - len] });
        }
        return out;
    }
    Vec::new()
}

/// The drafting side of one generation: how long the next draft may be, whether drafting pays
/// ([`Payoff`]), and the timing of the passes that tells it.
#[derive(Debug)]
pub(crate) struct Drafter {
    /// `Some` to draft always or never (`ChatOptions::speculative`); `None` while it pays.
    forced: Option<bool>,
    payoff: Payoff,
    /// Longest next draft: as far as the model has been agreeing.
    len: usize,
    /// When the last pass started (none before the first).
    pass_started: Option<Instant>,
}

impl Drafter {
    /// The drafter of a generation; `forced` as `ChatOptions::speculative`.
    pub(crate) fn new(forced: Option<bool>) -> Self {
        Drafter {
            forced,
            payoff: Payoff::default(),
            len: MAX_DRAFT,
            pass_started: None,
        }
    }

    /// The pass that verified `drafted` tokens (0: a plain step) ended with `kept` of them
    /// kept. A draft kept whole doubles the next one's length, a rejection cuts it to what was
    /// kept plus one, so text that does not repeat costs a few passes of 2 tokens rather than
    /// of 9.
    pub(crate) fn pass_ended(&mut self, drafted: usize, kept: usize) {
        if drafted > 0 {
            self.len = match kept == drafted {
                true => (2 * self.len).min(MAX_DRAFT),
                false => kept + 1,
            };
        }
        if let Some(started) = self.pass_started {
            let secs = started.elapsed().as_secs_f64();
            match drafted {
                0 => self.payoff.plain_step(secs),
                _ => self.payoff.draft_pass(secs, kept + 1),
            }
        }
    }

    /// The drafts of the next pass (at most `room` tokens; empty for a plain step), which
    /// starts now.
    pub(crate) fn next(&mut self, history: &[u32], room: usize) -> Vec<u32> {
        let drafts = match self.forced.unwrap_or_else(|| self.payoff.drafting()) {
            true => draft(history, room.min(self.len)),
            false => Vec::new(),
        };
        self.pass_started = Some(Instant::now());
        drafts
    }
}

/// Whether drafting pays on this machine for this model, judged from the passes themselves:
/// seconds per generated token of the recent draft passes against those of the recent plain
/// steps (exponential averages, so a stretch of text that stops repeating soon shows). A draft
/// pass costs more than a plain step (on the CPU a pass of 9 tokens of MiniCPM5-2B's shape takes
/// 2 to 2.3 plain steps, bench/README.md), so drafts that are mostly rejected lose time. While they
/// cost more per token than plain steps, drafting pauses for [`PAUSE`] tokens, then tries
/// again judged afresh. Which passes draft never changes a token (`runner`), only the speed.
#[derive(Debug, Default)]
pub(crate) struct Payoff {
    /// Seconds per token of plain steps, averaged.
    plain: Option<f64>,
    /// Seconds per generated token of draft passes since drafting last resumed, averaged, and
    /// how many passes that is.
    drafted: Option<f64>,
    passes: usize,
    /// Plain steps left before drafting resumes.
    paused: usize,
}

/// Plain steps taken before drafting is tried again after it stopped paying.
const PAUSE: usize = 32;

/// Draft passes judged together before drafting can pause (a single rejected draft is common
/// even in text that repeats).
const JUDGED: usize = 3;

/// Weight of the newest pass in the averages.
const NEWEST: f64 = 0.25;

impl Payoff {
    /// Whether the next pass may draft. Also false once, to time a plain step, when only
    /// draft passes have run (a conversation that repeats from its first token).
    pub(crate) fn drafting(&self) -> bool {
        self.paused == 0 && (self.plain.is_some() || self.passes < JUDGED)
    }

    /// A plain step of `secs` seconds (one token).
    pub(crate) fn plain_step(&mut self, secs: f64) {
        self.plain = Some(average(self.plain, secs));
        self.paused = self.paused.saturating_sub(1);
        self.judge();
    }

    /// A draft pass of `secs` seconds that generated `tokens` (the drafts kept and one more).
    pub(crate) fn draft_pass(&mut self, secs: f64, tokens: usize) {
        self.drafted = Some(average(self.drafted, secs / tokens.max(1) as f64));
        self.passes += 1;
        self.judge();
    }

    /// Pauses drafting once enough draft passes cost more per token than plain steps.
    fn judge(&mut self) {
        if let (Some(plain), Some(drafted)) = (self.plain, self.drafted) {
            if self.passes >= JUDGED && drafted > plain {
                (self.drafted, self.passes, self.paused) = (None, 0, PAUSE);
            }
        }
    }
}

fn average(mean: Option<f64>, value: f64) -> f64 {
    mean.map_or(value, |mean| mean + NEWEST * (value - mean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_three_token_match_is_continued() {
        // [1 2 3] occurs at 0 and 5; the latest (5) is followed by 9 8.
        let history = [1, 2, 3, 4, 4, 1, 2, 3, 9, 8, 7, 1, 2, 3];
        assert_eq!(draft(&history, 3), [9, 8, 7]);
    }

    #[test]
    fn two_tokens_are_tried_when_three_do_not_recur() {
        let history = [5, 2, 3, 6, 7, 1, 2, 3];
        assert_eq!(draft(&history, 2), [6, 7]);
    }

    #[test]
    fn nothing_is_drafted_without_a_recurring_pair() {
        assert_eq!(draft(&[1, 2, 3, 4, 5, 3], 8), Vec::<u32>::new());
        assert_eq!(draft(&[7, 7], 8), Vec::<u32>::new());
        assert_eq!(draft(&[], 8), Vec::<u32>::new());
        assert_eq!(draft(&[1, 2, 1, 2], 0), Vec::<u32>::new());
    }

    #[test]
    fn a_repeating_stretch_drafts_its_period_again() {
        assert_eq!(draft(&[1, 2, 3, 1, 2, 3, 1, 2], 5), [3, 1, 2, 3, 1]);
        assert_eq!(draft(&[4, 4, 4], 3), [4, 4, 4]);
    }

    #[test]
    fn a_draft_is_at_most_max_long() {
        let history: Vec<u32> = (0..20).chain(0..3).collect();
        assert_eq!(
            draft(&history, MAX_DRAFT),
            (3..3 + MAX_DRAFT as u32).collect::<Vec<_>>()
        );
    }

    #[test]
    fn drafts_that_save_time_go_on() {
        let mut payoff = Payoff::default();
        payoff.plain_step(0.040);
        for _ in 0..100 {
            assert!(payoff.drafting());
            payoff.draft_pass(0.090, 6); // 15 ms per token
        }
    }

    #[test]
    fn drafts_that_cost_time_pause_then_are_tried_afresh() {
        let mut payoff = Payoff::default();
        payoff.plain_step(0.040);
        for _ in 0..JUDGED - 1 {
            payoff.draft_pass(0.050, 1); // rejected: 50 ms for one token
            assert!(payoff.drafting(), "judged only after {JUDGED} passes");
        }
        payoff.draft_pass(0.050, 1);
        for _ in 0..PAUSE {
            assert!(!payoff.drafting());
            payoff.plain_step(0.040);
        }
        // Afresh: the passes before the pause no longer count.
        assert!(payoff.drafting());
        payoff.draft_pass(0.090, 9);
        payoff.draft_pass(0.090, 9);
        payoff.draft_pass(0.050, 1);
        assert!(
            payoff.drafting(),
            "10, 10 and 50 ms per token average under 40"
        );
    }

    #[test]
    fn a_conversation_that_drafts_from_the_start_times_one_plain_step() {
        let mut payoff = Payoff::default();
        for _ in 0..JUDGED {
            assert!(payoff.drafting());
            payoff.draft_pass(0.050, 1);
        }
        assert!(!payoff.drafting(), "a plain step to compare with");
        payoff.plain_step(0.040);
        assert!(!payoff.drafting(), "then 50 ms per token is found to lose");
    }
}
