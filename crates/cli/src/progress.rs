//! The one progress printer of the long verbs (`pull`, `convert`): on a terminal, a status line
//! redrawn in place on stderr; elsewhere (a log, a pipe), only whole lines, so the output reads
//! well when captured. What it shows is escaped ([`safe`]): file and model names come from
//! outside.

use std::io::{IsTerminal, Write};

use hearth_chat::PrefillProgress;

use crate::terminal::safe;

/// A status line on stderr.
pub struct StatusLine {
    live: bool,
    /// Whether a redrawn line is on screen (and so needs a newline before anything else).
    drawn: bool,
}

impl StatusLine {
    /// A status line that redraws in place when stderr is a terminal.
    pub fn new() -> StatusLine {
        StatusLine {
            live: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Whether stderr is a terminal, so [`StatusLine::redraw`] shows anything.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Replaces the status line with `text` (on a terminal only).
    pub fn redraw(&mut self, text: &str) {
        if self.live {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K{}", safe(text));
            self.drawn = true;
        }
    }

    /// Writes `text` as a line of its own, below any status line.
    pub fn line(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        if self.drawn {
            let _ = writeln!(err);
            self.drawn = false;
        }
        let _ = writeln!(err, "{}", safe(text));
    }

    /// Erases the status line, so what follows is written where it was.
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            self.drawn = false;
        }
    }

    /// Ends the status line, so what follows starts on a line of its own.
    pub fn finish(&mut self) {
        if self.drawn {
            let _ = writeln!(std::io::stderr());
            self.drawn = false;
        }
    }
}

/// Prompts shorter than this are read too fast for their reading to be worth a status line.
const LONG_PROMPT: usize = 256;

/// What the status line says while the processor reads a long prompt ("Reading the prompt…
/// 40%"), None for a short one (`hearth run` and `hearth chat` erase it at the first text).
pub fn reading(progress: PrefillProgress) -> Option<String> {
    (progress.total >= LONG_PROMPT).then(|| {
        format!(
            "Reading the prompt… {}%",
            progress.done * 100 / progress.total
        )
    })
}

/// `secs` as people read a time left: `42s`, `3m07s`, `1h05m`.
pub fn duration(secs: f64) -> String {
    let secs = secs.round() as u64;
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_long_prompt_shows_its_reading() {
        let at = |done, total| reading(PrefillProgress { done, total });
        assert_eq!(at(64, 100), None);
        assert_eq!(at(0, 1000).as_deref(), Some("Reading the prompt… 0%"));
        assert_eq!(at(448, 1000).as_deref(), Some("Reading the prompt… 44%"));
    }

    #[test]
    fn durations_read_as_seconds_minutes_or_hours() {
        assert_eq!(duration(42.4), "42s");
        assert_eq!(duration(187.0), "3m07s");
        assert_eq!(duration(3900.0), "1h05m");
    }
}
