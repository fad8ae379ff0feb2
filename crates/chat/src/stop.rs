//! Stop strings: generation ends when the answer contains one, and the answer is cut before it.
//! While streaming, text that could be the start of a stop string is held back until it is
//! clear, so a client never sees part of a stop string.

/// Filters streamed text against stop strings. The pieces it releases, concatenated, are the
/// answer cut before the first stop string.
#[derive(Debug, Default)]
pub struct StopFilter {
    stops: Vec<String>,
    pending: String,
    stopped: bool,
}

impl StopFilter {
    /// A filter for `stops` (empty strings are ignored).
    pub fn new(stops: Vec<String>) -> Self {
        StopFilter {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            pending: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop string was seen; nothing more will be released.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds a generated piece; returns the text now safe to show (possibly empty).
    pub fn push(&mut self, piece: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.pending.push_str(piece);
        // Anything released earlier could not start a stop string, so a match starts in
        // `pending`.
        let first_stop = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min();
        if let Some(at) = first_stop {
            self.stopped = true;
            self.pending.truncate(at);
            return std::mem::take(&mut self.pending);
        }
        let keep_from = self
            .pending
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.pending[i..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(self.pending.len());
        let rest = self.pending.split_off(keep_from);
        std::mem::replace(&mut self.pending, rest)
    }

    /// Releases what was held back once generation has ended without a stop string.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, bool) {
        let mut filter = StopFilter::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = Vec::new();
        for piece in pieces {
            out.push(filter.push(piece));
            if filter.stopped() {
                break;
            }
        }
        out.push(filter.finish());
        (out, filter.stopped())
    }

    #[test]
    fn without_stops_everything_passes_at_once() {
        let (out, stopped) = run(&[], &["Hello", " world"]);
        assert_eq!(out, ["Hello", " world", ""]);
        assert!(!stopped);
    }

    #[test]
    fn stop_inside_one_piece_cuts_there() {
        let (out, stopped) = run(&["END"], &["abcENDdef"]);
        assert_eq!(out.concat(), "abc");
        assert!(stopped);
    }

    #[test]
    fn stop_split_across_pieces_is_never_shown() {
        let (out, stopped) = run(&["\n\nUser:"], &["Hi", "\n", "\nUs", "er:", " more"]);
        assert_eq!(out.concat(), "Hi");
        assert!(stopped);
        assert!(out.iter().all(|p| !p.contains('\n')), "{out:?}");
    }

    #[test]
    fn a_false_start_is_released_later() {
        let (out, stopped) = run(&["STOP"], &["a ST", "ART b"]);
        assert_eq!(out.concat(), "a START b");
        assert_eq!(out[0], "a ", "the possible stop start is held back");
        assert!(!stopped);
    }

    #[test]
    fn earliest_of_several_stops_wins() {
        let (out, _) = run(&["yy", "x"], &["aayybbx"]);
        assert_eq!(out.concat(), "aa");
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let (out, stopped) = run(&["é!"], &["caf", "é", "é!"]);
        assert_eq!(out.concat(), "café");
        assert!(stopped);
    }

    #[test]
    fn empty_stop_strings_are_ignored() {
        let (out, stopped) = run(&[""], &["abc"]);
        assert_eq!(out.concat(), "abc");
        assert!(!stopped);
    }
}
