//! What may be written to a terminal. Text that comes from outside Hearth (a server's error
//! body, a model's answer, a name or file name from the Hub or the registry, a chat template's
//! message) could hold control characters that move the cursor, retitle the window or clear the
//! screen; every print site of such text goes through [`safe`].

use std::borrow::Cow;

/// `text` with every control character other than a line break or a tab, and every bidirectional
/// formatting character (U+202E turns the rest of a line around), written as an escape
/// (`\u{1b}`), so that it shows as text and never drives the terminal or hides what it says.
pub fn safe(text: &str) -> Cow<'_, str> {
    let is_control = |c: char| (c.is_control() && c != '\n' && c != '\t') || is_bidi_format(c);
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_control(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The Unicode bidirectional formatting characters: marks, embeddings, overrides and isolates.
fn is_bidi_format(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::safe;

    #[test]
    fn bidi_overrides_are_shown_not_obeyed() {
        assert_eq!(safe("abc\u{202e}fdp.exe"), "abc\\u{202e}fdp.exe");
        assert_eq!(safe("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        assert_eq!(
            safe("ctl\x1b]0;PWNED\x07\x1b[2J.q4nx"),
            "ctl\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J.q4nx"
        );
        assert_eq!(
            safe("a\rb\u{9b}c"),
            "a\\u{d}b\\u{9b}c",
            "CR and C1 controls too"
        );
    }

    #[test]
    fn plain_text_lines_and_tabs_pass_unchanged() {
        let text = "Qwen3 — 1.7B\n\tready: é 漢字 🙂";
        assert!(matches!(safe(text), std::borrow::Cow::Borrowed(t) if t == text));
    }
}
