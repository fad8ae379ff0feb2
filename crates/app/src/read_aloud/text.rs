//! What of an answer is read aloud, sentence by sentence, while the answer is still being
//! written.
//!
//! [`SentenceStream`] takes the answer's markdown in pieces as they stream ([`SentenceStream::push`])
//! and gives back each sentence as soon as its end is known, in plain words
//! ([`speakable`]). Not read out: the model's thinking (`<think>…</think>`), code blocks
//! (``` and ~~~ fences), table separator rows, markdown symbols (`#`, `*`, `_`, `` ` ``,
//! `~~`, `>`, list markers), links' and pictures' addresses (their words stay), bare web
//! addresses, HTML tags and citation markers (`[1]`, `[1, 2]`, `[1][2]`, `[^1]`, `【1】`).
//!
//! A sentence ends at `.`, `!`, `?` or `…` followed by white space (closing quotes, brackets,
//! emphasis and citation markers may come between), at `。`, `！`, `？` (no space needed), and
//! at the end of a line; not inside inline code or a link, and not after a one-letter word or
//! a common abbreviation ("e.g.", "Dr.", "z. B."). A sentence that finds no end within
//! [`MAX_SENTENCE_CHARS`] is cut at its last comma, semicolon, colon or space, so speaking
//! never waits long for a line without punctuation. A table row is read as one sentence, its
//! cells separated by commas.

/// The longest piece read at once: a longer sentence is cut at its last pause before this.
pub const MAX_SENTENCE_CHARS: usize = 400;

/// Turns a streamed markdown answer into the sentences to read, in plain words.
#[derive(Debug, Default)]
pub struct SentenceStream {
    /// Text that may still hold the start of a `<think>` or `</think>` tag.
    held: String,
    /// Inside the model's thinking.
    thinking: bool,
    /// The current line, as written so far.
    line: String,
    /// Bytes of `line` already given out (or skipped as its marker).
    consumed: usize,
    /// How the current line is read, once its start says so.
    kind: Option<LineKind>,
    /// Inside a code block: the fence that closes it.
    fence: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    /// Words, read sentence by sentence as they come.
    Prose,
    /// A fence line, a table row or a line of a code block: decided at its end.
    WholeLine,
}

impl SentenceStream {
    /// A stream at the start of an answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece of the answer; returns the sentences it completed.
    pub fn push(&mut self, piece: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.held.push_str(piece);
        let visible = self.take_visible(false);
        self.push_visible(&visible, &mut out);
        out
    }

    /// The answer is complete: returns what is left of it.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let visible = self.take_visible(true);
        self.push_visible(&visible, &mut out);
        self.end_line(&mut out);
        out
    }

    /// Takes from `held` what is outside `<think>…</think>`, keeping back a possible start of
    /// a tag (unless `all`).
    fn take_visible(&mut self, all: bool) -> String {
        let mut visible = String::new();
        loop {
            let tag = if self.thinking { "</think>" } else { "<think>" };
            if let Some(at) = self.held.find(tag) {
                if !self.thinking {
                    visible.push_str(&self.held[..at]);
                }
                self.held.drain(..at + tag.len());
                self.thinking = !self.thinking;
                continue;
            }
            // Keep back the longest end of `held` that starts the tag.
            let keep = if all {
                0
            } else {
                (1..tag.len())
                    .rev()
                    .find(|&n| self.held.ends_with(&tag[..n]))
                    .unwrap_or(0)
            };
            let cut = self.held.len() - keep;
            if !self.thinking {
                visible.push_str(&self.held[..cut]);
            }
            self.held.drain(..cut);
            return visible;
        }
    }

    fn push_visible(&mut self, text: &str, out: &mut Vec<String>) {
        let mut rest = text;
        while let Some(at) = rest.find('\n') {
            self.line.push_str(&rest[..at]);
            self.end_line(out);
            rest = &rest[at + 1..];
        }
        self.line.push_str(rest);
        self.read_partial_line(out);
    }

    /// Reads the sentences of the current line that are complete, before its end.
    fn read_partial_line(&mut self, out: &mut Vec<String>) {
        if self.kind.is_none() {
            self.kind = self.decide_kind(false);
        }
        if self.kind != Some(LineKind::Prose) {
            return;
        }
        while let Some(end) = sentence_end(&self.line[self.consumed..], false) {
            let sentence = &self.line[self.consumed..self.consumed + end];
            out.extend(speakable(sentence));
            self.consumed += end;
        }
    }

    /// The current line ended (or the answer did).
    fn end_line(&mut self, out: &mut Vec<String>) {
        let kind = match self.kind {
            Some(kind) => kind,
            None => self.decide_kind(true).unwrap_or(LineKind::WholeLine),
        };
        let line = std::mem::take(&mut self.line);
        let consumed = std::mem::replace(&mut self.consumed, 0);
        self.kind = None;
        let trimmed = line.trim();
        if let Some(fence) = &self.fence {
            if trimmed.starts_with(fence.as_str())
                && trimmed
                    .chars()
                    .all(|c| c == fence.chars().next().unwrap_or('`'))
            {
                self.fence = None;
            }
            return;
        }
        if let Some(fence) = fence_of(trimmed) {
            self.fence = Some(fence);
            return;
        }
        let rest = &line[consumed.min(line.len())..];
        match kind {
            LineKind::Prose => {
                let mut rest = rest;
                while let Some(end) = sentence_end(rest, true) {
                    out.extend(speakable(&rest[..end]));
                    rest = &rest[end..];
                }
            }
            LineKind::WholeLine => {
                if let Some(row) = table_row(trimmed) {
                    out.extend(speakable(&row));
                } else if !trimmed.is_empty() {
                    out.extend(speakable(line_text(trimmed)));
                }
            }
        }
    }

    /// How the current line is read, once enough of its start is known: `None` while it
    /// could still be a fence, a table row or a list marker. Inside a code block every line
    /// waits for its end. Skips a prose line's marker (heading, list, quote).
    fn decide_kind(&mut self, ended: bool) -> Option<LineKind> {
        if self.fence.is_some() {
            return Some(LineKind::WholeLine);
        }
        let start = self.line.len() - self.line.trim_start().len();
        let head = &self.line[start..];
        if head.is_empty() {
            return ended.then_some(LineKind::WholeLine);
        }
        if head.starts_with('|') {
            return Some(LineKind::WholeLine);
        }
        let fenceish = |c: char| c == '`' || c == '~';
        let run = head.chars().take_while(|&c| fenceish(c)).count();
        if run > 0 {
            if run >= 3
                && head
                    .chars()
                    .all(|c| c == head.chars().next().unwrap_or('`'))
            {
                // "```" so far: a fence unless more words come on the line.
                return ended.then_some(LineKind::WholeLine);
            }
            if run >= 3 {
                return Some(LineKind::WholeLine);
            }
            if head.len() == run && !ended {
                return None;
            }
        }
        match marker_len(head, ended) {
            None => None,
            Some(n) => {
                self.consumed = start + n;
                Some(LineKind::Prose)
            }
        }
    }
}

/// The fence that closes a code block opened by `line` (trimmed), if it opens one.
fn fence_of(line: &str) -> Option<String> {
    for mark in ['`', '~'] {
        let run = line.chars().take_while(|&c| c == mark).count();
        if run >= 3 {
            return Some(std::iter::repeat_n(mark, run).collect());
        }
    }
    None
}

/// The length of a line's heading, list or quote marker (with its space): `Some(0)` for
/// none, `None` while the start is too short to tell.
fn marker_len(head: &str, ended: bool) -> Option<usize> {
    let bytes = head.as_bytes();
    let first = bytes[0];
    let after = |n: usize| -> Option<usize> {
        match bytes.get(n) {
            Some(b' ') | Some(b'\t') => Some(n + 1),
            Some(_) => Some(0),
            None if ended => Some(0),
            None => None,
        }
    };
    match first {
        b'#' => {
            let run = bytes.iter().take_while(|&&b| b == b'#').count();
            if run > 6 {
                Some(0)
            } else {
                after(run)
            }
        }
        b'-' | b'+' | b'*' | b'>' => after(1),
        b'0'..=b'9' => {
            let run = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            match bytes.get(run) {
                Some(b'.') | Some(b')') if run <= 9 => after(run + 1),
                Some(_) => Some(0),
                None if ended => Some(0),
                None => None,
            }
        }
        _ => Some(0),
    }
}

/// A whole line that is not prose (a fence-looking line with words after, or a short line):
/// its marker left out.
fn line_text(line: &str) -> &str {
    let n = marker_len(line, true).unwrap_or(0);
    &line[n..]
}

/// A table row's cells joined by commas; `Some("")` for a separator row (`|---|:--:|`).
fn table_row(line: &str) -> Option<String> {
    if !line.starts_with('|') {
        return None;
    }
    let inner = line.trim_matches('|');
    if inner
        .chars()
        .all(|c| matches!(c, '-' | ':' | '|' | ' ' | '\t'))
    {
        return Some(String::new());
    }
    let cells: Vec<&str> = inner
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    Some(cells.join(", "))
}

/// Words after which a period does not end a sentence (lowercase, without the period).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "vs", "nr", "ca", "bzw", "vgl", "sr", "sra", "srta", "dra",
    "mme", "mlle", "fig", "approx", "jr",
];

const CLOSERS: &[char] = &[
    ')', ']', '"', '\'', '”', '’', '»', '*', '_', '」', '』', '）',
];

/// The byte length of the first complete sentence of `text`, if its end is known. With
/// `line_ended`, the rest of the line is a sentence too.
pub fn sentence_end(text: &str, line_ended: bool) -> Option<usize> {
    if text.trim().is_empty() {
        return None;
    }
    let mut code = false;
    let mut brackets = 0usize;
    let mut link_target = 0usize;
    let mut last_pause: Option<usize> = None;
    let mut chars = 0usize;
    let mut iter = text.char_indices().peekable();
    while let Some((at, c)) = iter.next() {
        chars += 1;
        match c {
            '`' => code = !code,
            _ if code => {}
            '[' => brackets += 1,
            ']' => {
                brackets = brackets.saturating_sub(1);
                if text[at + 1..].starts_with('(') {
                    link_target += 1;
                    iter.next();
                }
            }
            ')' if link_target > 0 => link_target -= 1,
            _ if brackets > 0 || link_target > 0 => {}
            '。' | '！' | '？' => {
                let end = at + c.len_utf8();
                return Some(end + skip_closers(&text[end..]));
            }
            '.' | '!' | '?' | '…' => {
                let end = at + c.len_utf8();
                let closed = end + skip_closers(&text[end..]);
                match text[closed..].chars().next() {
                    Some(next)
                        if next.is_whitespace() && (c != '.' || !is_abbreviation(&text[..at])) =>
                    {
                        return Some(closed);
                    }
                    None if !line_ended => return None,
                    _ => {}
                }
            }
            ',' | ';' | ':' | '，' | '；' | '：' | '、' => last_pause = Some(at + c.len_utf8()),
            _ => {}
        }
        if chars >= MAX_SENTENCE_CHARS {
            let space = text[..at].rfind(char::is_whitespace).filter(|&s| s > 0);
            return Some(last_pause.or(space).unwrap_or(at + c.len_utf8()));
        }
    }
    line_ended.then_some(text.len())
}

/// Bytes of closing quotes, brackets, emphasis and citation markers at the start of `text`.
fn skip_closers(text: &str) -> usize {
    let mut at = 0;
    loop {
        let rest = &text[at..];
        if let Some(c) = rest.chars().next().filter(|c| CLOSERS.contains(c)) {
            at += c.len_utf8();
        } else if let Some(n) = citation_len(rest) {
            at += n;
        } else {
            return at;
        }
    }
}

/// Whether the word before a period is an abbreviation or a single letter ("e.g", "z. B").
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    let word = word.trim_start_matches(['"', '\'', '“', '«']);
    let lower = word.to_lowercase();
    let letters = lower.chars().filter(|c| c.is_alphabetic()).count();
    if letters == 1 && lower.chars().all(|c| c.is_alphabetic() || c == '.') {
        return true;
    }
    // "e.g", "i.e", "z.B": letters with periods between.
    if lower.contains('.') && lower.split('.').all(|p| p.chars().count() <= 2) {
        return true;
    }
    ABBREVIATIONS.contains(&lower.as_str())
}

/// The byte length of a citation marker at the start of `text`: `[1]`, `[1, 2]`, `[1-3]`,
/// `[^1]` or `【1】` (digits, commas, dashes and spaces inside).
fn citation_len(text: &str) -> Option<usize> {
    let (open, close) = if text.starts_with('[') {
        ('[', ']')
    } else if text.starts_with('【') {
        ('【', '】')
    } else {
        return None;
    };
    let inner_start = open.len_utf8();
    let end = text[inner_start..].find(close)? + inner_start;
    let inner = text[inner_start..end].trim_start_matches('^');
    let ok = !inner.is_empty()
        && inner.len() <= 40
        && inner.chars().any(|c| c.is_ascii_digit())
        && inner
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, ',' | ' ' | '-' | '–' | '，'));
    // A markdown link "[1](url)" is a link, not a marker.
    let after = &text[end + close.len_utf8()..];
    (ok && !(open == '[' && after.starts_with('('))).then_some(end + close.len_utf8())
}

/// A piece of markdown in plain words to read, or `None` when nothing speakable is left.
pub fn speakable(markdown: &str) -> Option<String> {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(c) = rest.chars().next() {
        // Citation markers.
        if let Some(n) = citation_len(rest) {
            rest = &rest[n..];
            out.push(' ');
            continue;
        }
        // Pictures and links: their words, without the address.
        let link_start = if rest.starts_with("![") {
            Some(2)
        } else if c == '[' {
            Some(1)
        } else {
            None
        };
        if let Some(skip) = link_start {
            if let Some((words, len)) = link(&rest[skip - 1..]) {
                out.push_str(words);
                rest = &rest[skip - 1 + len..];
                continue;
            }
        }
        // Web addresses, written bare or in <…>.
        if starts_web_address(rest) {
            let bracketed = rest.starts_with('<');
            let mut len = rest
                .find(|c: char| c.is_whitespace() || c == '>' || c == ')')
                .unwrap_or(rest.len());
            if bracketed && rest[len..].starts_with('>') {
                len += 1;
            } else {
                // A sentence's own period after the address stays.
                len = rest[..len]
                    .trim_end_matches(['.', ',', ';', ':', '!', '?'])
                    .len();
            }
            rest = &rest[len..];
            continue;
        }
        // HTML tags (<br>, <sup>…).
        if c == '<' {
            if let Some(end) = rest.find('>') {
                let tag = &rest[1..end];
                if !tag.is_empty()
                    && tag.len() <= 40
                    && tag
                        .trim_start_matches('/')
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic())
                {
                    out.push(' ');
                    rest = &rest[end + 1..];
                    continue;
                }
            }
        }
        match c {
            '*' | '`' | '#' | '~' | '|' => out.push(' '),
            '_' => {
                // Emphasis, but not inside a word (snake_case).
                let prev = out.chars().last().is_some_and(|p| p.is_alphanumeric());
                let next = rest[1..]
                    .chars()
                    .next()
                    .is_some_and(|n| n.is_alphanumeric());
                out.push(if prev && next { '_' } else { ' ' });
            }
            '>' if out.trim().is_empty() => out.push(' '),
            '\\' => {}
            _ => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    let words: Vec<&str> = out.split_whitespace().collect();
    let mut plain = words.join(" ");
    // Punctuation left alone by a removed marker: "red ." becomes "red.".
    for mark in [" .", " ,", " !", " ?", " ;", " :", " 。", " ，"] {
        plain = plain.replace(mark, mark.trim_start());
    }
    plain.chars().any(|c| c.is_alphanumeric()).then_some(plain)
}

/// A markdown link or picture at the start of `text` (at its `[`): its words and its length.
fn link(text: &str) -> Option<(&str, usize)> {
    let close = text.find("](")?;
    let words = &text[1..close];
    if words.contains('[') {
        return None;
    }
    let target = &text[close + 2..];
    let end = target.find(')')?;
    if target[..end].contains(char::is_whitespace) && !target[..end].contains('"') {
        return None;
    }
    Some((words, close + 2 + end + 1))
}

fn starts_web_address(text: &str) -> bool {
    let text = text.strip_prefix('<').unwrap_or(text);
    ["http://", "https://", "www.", "ftp://", "mailto:"]
        .iter()
        .any(|p| {
            text.get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentences of `answer` streamed in pieces of `size` characters.
    fn streamed(answer: &str, size: usize) -> Vec<String> {
        let mut stream = SentenceStream::new();
        let chars: Vec<char> = answer.chars().collect();
        let mut out = Vec::new();
        for piece in chars.chunks(size) {
            out.extend(stream.push(&piece.iter().collect::<String>()));
        }
        out.extend(stream.finish());
        out
    }

    fn whole(answer: &str) -> Vec<String> {
        let one = streamed(answer, answer.len().max(1));
        for size in [1, 2, 3, 7] {
            assert_eq!(
                streamed(answer, size),
                one,
                "in pieces of {size}: {answer:?}"
            );
        }
        one
    }

    #[test]
    fn sentences_split_at_their_ends() {
        assert_eq!(
            whole("Hello there. How are you? Fine!\nNext line"),
            ["Hello there.", "How are you?", "Fine!", "Next line"]
        );
    }

    #[test]
    fn the_first_sentence_comes_before_the_answer_is_finished() {
        let mut stream = SentenceStream::new();
        assert!(stream.push("The sky is").is_empty());
        assert!(stream.push(" blue.").is_empty(), "the end is not known yet");
        assert_eq!(stream.push(" It"), ["The sky is blue."]);
        assert!(stream.push(" is big").is_empty());
        assert_eq!(stream.finish(), ["It is big"]);
    }

    #[test]
    fn abbreviations_decimals_and_initials_do_not_end_sentences() {
        assert_eq!(
            whole("Use e.g. a pen, z. B. rot. Pi is 3.14 today. Dr. Who is J. Smith. End."),
            [
                "Use e.g. a pen, z. B. rot.",
                "Pi is 3.14 today.",
                "Dr. Who is J. Smith.",
                "End."
            ]
        );
    }

    #[test]
    fn chinese_sentences_end_without_spaces() {
        assert_eq!(
            whole("天空是蓝色的。为什么？因为散射【1】。"),
            ["天空是蓝色的。", "为什么？", "因为散射。"]
        );
    }

    #[test]
    fn code_blocks_are_not_read() {
        let answer = "Run this:\n\n```rust\nfn main() { println!(\"Hi. There.\"); }\n```\n\nThen it prints.\n~~~\nhidden\n~~~\nDone.";
        assert_eq!(whole(answer), ["Run this:", "Then it prints.", "Done."]);
    }

    #[test]
    fn an_unclosed_code_block_hides_the_rest() {
        assert_eq!(whole("Look:\n```\ncode. more."), ["Look:"]);
    }

    #[test]
    fn thinking_is_not_read() {
        assert_eq!(
            whole("<think>\nLet me think. Hmm.\n</think>\n\nThe answer is 4."),
            ["The answer is 4."]
        );
        assert_eq!(
            whole("Before. <think>x. y.</think> After."),
            ["Before.", "After."]
        );
    }

    #[test]
    fn markdown_symbols_are_not_read() {
        let answer = "# Title\n\n## Part *one*\n- **Bold** item\n* _stress_ here\n1. First `step`\n> Quoted ~~old~~ text\n---\nsnake_case stays.";
        assert_eq!(
            whole(answer),
            [
                "Title",
                "Part one",
                "Bold item",
                "stress here",
                "First step",
                "Quoted old text",
                "snake_case stays."
            ]
        );
    }

    #[test]
    fn links_keep_their_words_and_lose_their_addresses() {
        assert_eq!(
            whole("See [the docs](https://example.org/a.b?c=d). Or https://x.org/y. Or <https://z.org>. ![A cat](cat.png) sits."),
            ["See the docs.", "Or.", "Or.", "A cat sits."]
        );
    }

    #[test]
    fn citation_markers_are_not_read() {
        assert_eq!(
            whole("Water boils at 100 °C [1]. It freezes at 0 °C.[2][3] Ice floats [1, 2]. Heat rises [^4]."),
            [
                "Water boils at 100 °C.",
                "It freezes at 0 °C.",
                "Ice floats.",
                "Heat rises."
            ]
        );
        assert_eq!(
            speakable("[1](https://a.org) is a link").unwrap(),
            "1 is a link"
        );
        assert_eq!(speakable("keep [note] words").unwrap(), "keep [note] words");
    }

    #[test]
    fn tables_are_read_row_by_row() {
        let answer = "| Name | Age |\n|---|:--:|\n| Ann | 31 |\n";
        assert_eq!(whole(answer), ["Name, Age", "Ann, 31"]);
    }

    #[test]
    fn a_long_sentence_is_cut_at_a_pause() {
        let part = "word ".repeat(70);
        let answer = format!("{part}, {part}{part}end");
        let got = whole(&answer);
        assert!(got.len() >= 2, "{got:?}");
        assert!(got.iter().all(|s| s.chars().count() <= MAX_SENTENCE_CHARS));
        assert!(got[0].ends_with(','), "cut at the comma: {:?}", got[0]);
        let rejoined: String = got.join(" ");
        let words = answer.replace(" ,", ",");
        assert_eq!(
            rejoined.split_whitespace().count(),
            words.split_whitespace().count()
        );
    }

    #[test]
    fn nothing_speakable_gives_nothing() {
        assert!(whole("***\n\n---\n[1]\n").is_empty());
        assert_eq!(speakable("  **  "), None);
    }

    #[test]
    fn hostile_text_does_not_panic() {
        for answer in [
            "[",
            "]( ",
            "![",
            "【",
            "【1",
            "<",
            "<>",
            "`",
            "``",
            "|",
            "||",
            "#######",
            "1.",
            "9999999999. x",
            "[1, ",
            "\u{0}",
            "é.",
            "…",
            "<think>",
            "</think>",
            "<thi",
            "a.\u{301} b",
            "[](",
            "![]()",
        ] {
            let _ = whole(answer);
            let _ = speakable(answer);
        }
    }
}
