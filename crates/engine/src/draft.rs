//! Drafts for speculative decoding by prompt lookup: a conversation often repeats itself (a
//! paragraph being rewritten, code being edited, names, quotes, a model's own loops), so the
//! tokens that followed the latest earlier occurrence of the newest few tokens are a cheap guess
//! of what comes next. No second model: a guess costs one scan of the history, and the model
//! checks all of it in one pass (`runner`).

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
}
