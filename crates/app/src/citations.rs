//! What an answer used of the passages it was given: the one home of the rule that turns a
//! finished answer and its numbered passages ([`crate::grounding`]) into the sources saved and
//! listed under it ([`sort_sources`]), and of what counts as a citation ([`cited`]).
//!
//! **Markers.** The model is asked to cite a passage by its number: `[1]`, `[1][2]`, `[1, 2]`
//! (also `;`, `，`, `、` between numbers), a range `[1-3]`, or the CJK brackets `【1】`, with
//! ASCII or full-width digits. Not a citation: a marker inside fenced code (``` or ~~~) or
//! inline code, a markdown link `[1](url)`, a link definition `[1]: url`, the second half of a
//! reference link `[text][1]`, the thinking before `</think>`, and a number
//! no passage has (`[0]`, `[9]` of three passages, `[123456]`). The UI links the same forms
//! (`ui/src/lib/citations.ts`, on the rendered answer, where code and links are elements).
//!
//! **Entries.** Passages of one page or section of a file are one entry (its first number is
//! the entry's; `numbers` lists them all), so "page 15" is listed once. An answer with markers
//! lists the cited entries first, by number, then the rest as "Also read". A short file given
//! whole says so once: its entries that are only read become one "read whole" entry.
//!
//! **Without markers** (small models rarely write them) an entry is "probably used" when the
//! answer's wording is in it. The score is lexical: the answer's content words (letters and
//! digits, lower-cased, a plural `s` dropped; Chinese, Japanese and Korean text as pairs of
//! neighbouring characters; words of fewer than 3 letters or 2 digits and common function
//! words of Hearth's five languages left out), each weighted by how rare it is among the
//! passages given, `ln(1 + N / df)` (N passages, df of them holding the word, at least 1). An
//! entry's score is the weight of the answer's words it holds over the weight of all the
//! answer's words: the share of the answer it supports, 0 to 1. It is probably used when it
//! shares at least [`MIN_SHARED`] words, scores at least [`FLOOR`], and at least half the best
//! entry's score; at most [`MAX_PROBABLE`], best first. Below the floor the answer has no
//! sources (a greeting, or an answer unrelated to the files): everything is "Also read".

use std::collections::{HashMap, HashSet};

use hearth_chat::conversations::Source;
pub use hearth_chat::conversations::SourceUse;

/// The least share of the answer's weighted words an entry must hold to be "probably used".
pub const FLOOR: f64 = 0.2;
/// The least number of the answer's content words an entry must hold to be "probably used".
pub const MIN_SHARED: usize = 2;
/// At most this many entries are "probably used".
pub const MAX_PROBABLE: usize = 4;

/// The longest number read in a marker (longer is no citation: no answer has 10,000 passages).
const MAX_DIGITS: usize = 4;
/// The widest range read in a marker (`[1-40]` is not a citation of forty passages).
const MAX_RANGE: usize = 20;

/// The numbers `answer` cites with markers that `known` accepts, in the order first cited,
/// each once (the rules are in the module doc).
pub fn cited(answer: &str, known: &dyn Fn(usize) -> bool) -> Vec<usize> {
    let text = without_thinking(answer);
    let mut found = Vec::new();
    for prose in prose_parts(&text) {
        markers_in(&prose, &mut |n| {
            if known(n) && !found.contains(&n) {
                found.push(n);
            }
        });
    }
    found
}

/// The answer's text without the model's thinking, as the UI shows it: everything outside
/// its `<think>` … `</think>` sections (a model may think more than once; nothing after an
/// unclosed one), the pieces as paragraphs.
fn without_thinking(answer: &str) -> String {
    let mut pieces = Vec::new();
    let mut rest = answer;
    while let Some(start) = rest.find("<think>") {
        pieces.push(&rest[..start]);
        let inside = &rest[start + "<think>".len()..];
        match inside.find("</think>") {
            Some(end) => rest = &inside[end + "</think>".len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    pieces.push(rest);
    pieces.retain(|p| !p.trim().is_empty());
    if pieces.len() == 1 {
        return pieces[0].to_owned();
    }
    pieces
        .iter()
        .map(|p| p.trim())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The parts of markdown `text` outside fenced code blocks and inline code, as paragraphs
/// (an inline code span never crosses a blank line).
fn prose_parts(text: &str) -> Vec<String> {
    // Fenced blocks out, line by line: a fence of 3+ ` or ~ opens, one of the same character
    // at least as long closes; an unclosed block runs to the end.
    let mut outside = String::new();
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let run = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        match fence {
            Some((c, len)) => {
                if run(c) >= len && trimmed.trim_start_matches(c).trim().is_empty() {
                    fence = None;
                }
                outside.push('\n');
            }
            None => {
                let opener = ['`', '~'].into_iter().find(|&c| run(c) >= 3);
                match opener {
                    Some(c) if !(c == '`' && trimmed[run(c)..].contains('`')) => {
                        fence = Some((c, run(c)));
                        outside.push('\n');
                    }
                    _ => outside.push_str(line),
                }
            }
        }
    }
    outside
        .split("\n\n")
        .map(without_inline_code)
        .collect::<Vec<_>>()
}

/// `paragraph` with its inline code spans (a run of n backticks up to the next run of exactly
/// n) replaced by a space; an unmatched run is text.
fn without_inline_code(paragraph: &str) -> String {
    let chars: Vec<char> = paragraph.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.extend(&chars[i..i + n]);
                i += n;
            }
        }
    }
    out
}

/// Calls `each` with every number of every citation marker in `prose` (code already out).
fn markers_in(prose: &str, each: &mut dyn FnMut(usize)) {
    // As markdown shows them, `\[` and `\]` are brackets.
    let chars: Vec<char> = prose
        .replace("\\[", "[")
        .replace("\\]", "]")
        .chars()
        .collect();
    let mut i = 0;
    // Where the last bracket group that was no marker ended (for `[text][1]`).
    let mut plain_group_end = usize::MAX;
    // Only spaces since the line began (for `[1]: url`).
    let mut line_start = true;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '[' => ']',
            '【' => '】',
            _ => {
                if c == ']' {
                    plain_group_end = i + 1;
                }
                if c == '\n' {
                    line_start = true;
                } else if !c.is_whitespace() {
                    line_start = false;
                }
                i += 1;
                continue;
            }
        };
        let Some((numbers, end)) = marker_at(&chars, i + 1, close) else {
            line_start = false;
            i += 1;
            continue;
        };
        let link = chars.get(end) == Some(&'(');
        let definition = line_start && chars.get(end) == Some(&':');
        let reference = c == '[' && plain_group_end == i;
        if !(link || definition || reference) {
            numbers.into_iter().for_each(&mut *each);
        }
        line_start = false;
        i = end;
    }
}

/// The numbers of a marker whose opening bracket is just before `chars[from]` and which closes
/// with `close`, and the index after it; None when it is no marker.
fn marker_at(chars: &[char], from: usize, close: char) -> Option<(Vec<usize>, usize)> {
    let mut i = from;
    let skip_spaces = |i: &mut usize| {
        while chars.get(*i).is_some_and(|c| *c == ' ') {
            *i += 1;
        }
    };
    let number = |i: &mut usize| -> Option<usize> {
        let start = *i;
        let mut value = 0usize;
        while let Some(d) = chars.get(*i).and_then(|&c| digit(c)) {
            if *i - start == MAX_DIGITS {
                return None;
            }
            value = value * 10 + d;
            *i += 1;
        }
        (*i > start).then_some(value)
    };
    let mut numbers = Vec::new();
    skip_spaces(&mut i);
    numbers.push(number(&mut i)?);
    loop {
        skip_spaces(&mut i);
        match *chars.get(i)? {
            c if c == close => return Some((numbers, i + 1)),
            ',' | ';' | '，' | '、' | '；' => {
                i += 1;
                skip_spaces(&mut i);
                numbers.push(number(&mut i)?);
            }
            '-' | '–' | '—' => {
                i += 1;
                skip_spaces(&mut i);
                let last = *numbers.last()?;
                let end = number(&mut i)?;
                if end < last || end - last > MAX_RANGE {
                    return None;
                }
                numbers.extend(last + 1..=end);
            }
            _ => return None,
        }
    }
}

/// The value of an ASCII or full-width digit.
fn digit(c: char) -> Option<usize> {
    match c {
        '0'..='9' => Some(c as usize - '0' as usize),
        '０'..='９' => Some(c as usize - '０' as usize),
        _ => None,
    }
}

/// The sources to save and list for `answer` from the passages it was `given` (numbered as
/// the prompt numbered them; entries already sorted once may be sorted again): one entry per
/// page or section, each with how the answer used it, cited first, then probably used (best
/// first), then "Also read" (rules in the module doc).
pub fn sort_sources(answer: &str, given: &[Source]) -> Vec<Source> {
    let text = without_thinking(answer);
    let mut groups = group_by_place(given);
    let known: HashSet<usize> = given.iter().flat_map(Source::all_numbers).collect();
    let cited: HashSet<usize> = cited(&text, &|n| known.contains(&n)).into_iter().collect();
    let mut probable: Vec<(usize, f64)> = Vec::new();
    if cited.is_empty() {
        let texts: Vec<String> = groups.iter().map(|g| joined_text(g)).collect();
        let scores = support(&text, &texts);
        let best = scores.iter().map(|s| s.share).fold(0.0, f64::max);
        probable = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| s.shared >= MIN_SHARED && s.share >= FLOOR && s.share >= best / 2.0)
            .map(|(i, s)| (i, s.share))
            .collect();
        probable.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        probable.truncate(MAX_PROBABLE);
    }
    let mut sorted: Vec<Source> = Vec::new();
    let mut also = Vec::new();
    for (i, group) in groups.iter_mut().enumerate() {
        let numbers: Vec<usize> = group.iter().flat_map(|s| s.all_numbers()).collect();
        if numbers.iter().any(|n| cited.contains(n)) {
            sorted.push(entry(group, SourceUse::Cited));
        } else if !probable.iter().any(|(p, _)| *p == i) {
            also.push(entry(group, SourceUse::AlsoRead));
        }
    }
    sorted.sort_by_key(|s| s.number);
    for (i, _) in &probable {
        sorted.push(entry(&groups[*i], SourceUse::ProbablyUsed));
    }
    sorted.extend(read_whole_once(also));
    sorted
}

/// `given` grouped by file and place, in the order first given, each group by number.
fn group_by_place(given: &[Source]) -> Vec<Vec<Source>> {
    let mut groups: Vec<Vec<Source>> = Vec::new();
    let mut at: HashMap<(i64, &str), usize> = HashMap::new();
    for s in given {
        let key = (s.document_id, s.place.as_str());
        match at.get(&key) {
            Some(&g) => groups[g].push(s.clone()),
            None => {
                at.insert(key, groups.len());
                groups.push(vec![s.clone()]);
            }
        }
    }
    for g in &mut groups {
        g.sort_by_key(|s| s.number);
    }
    groups
}

/// One entry for the passages of `group` (one file, one place), used as `used`.
fn entry(group: &[Source], used: SourceUse) -> Source {
    let mut numbers: Vec<usize> = group.iter().flat_map(Source::all_numbers).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let first = &group[0];
    let one_section = group.iter().all(|s| s.section == first.section);
    Source {
        number: numbers[0],
        numbers: if numbers.len() > 1 {
            numbers
        } else {
            Vec::new()
        },
        char_start: if one_section {
            group.iter().map(|s| s.char_start).min().unwrap_or(0)
        } else {
            first.char_start
        },
        char_end: if one_section {
            group.iter().map(|s| s.char_end).max().unwrap_or(0)
        } else {
            first.char_end
        },
        text: joined_text(group),
        from_scan: group.iter().any(|s| s.from_scan),
        read_whole: group.iter().any(|s| s.read_whole),
        used,
        ..first.clone()
    }
}

/// The text of `group`'s passages once: overlapping passages of one section joined where they
/// overlap, others apart by a blank line.
fn joined_text(group: &[Source]) -> String {
    let mut parts: Vec<&Source> = group.iter().collect();
    parts.sort_by_key(|s| (s.section, s.char_start, s.char_end));
    let mut text = String::new();
    let mut last: Option<(usize, usize)> = None;
    for s in parts {
        let whole_range = s.text.chars().count() == s.char_end.saturating_sub(s.char_start);
        match last {
            Some((section, end)) if section == s.section && whole_range && s.char_start <= end => {
                if s.char_end > end {
                    text.extend(s.text.chars().skip(end - s.char_start));
                    last = Some((section, s.char_end));
                }
            }
            _ => {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(&s.text);
                last = whole_range.then_some((s.section, s.char_end));
            }
        }
    }
    text
}

/// "Also read" entries with those of a file read whole made one entry for the file (no
/// place), at the place of its first; in number order.
fn read_whole_once(also: Vec<Source>) -> Vec<Source> {
    let mut out: Vec<Source> = Vec::new();
    for s in also {
        let same = out
            .iter_mut()
            .find(|o| o.read_whole && s.read_whole && o.document_id == s.document_id);
        match same {
            Some(o) => *o = entry(&[o.clone(), s], SourceUse::AlsoRead),
            None => out.push(s),
        }
    }
    for o in out.iter_mut().filter(|o| o.read_whole) {
        o.place = String::new();
        o.page = None;
    }
    out.sort_by_key(|s| s.number);
    out
}

/// How much of an answer one text supports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Support {
    /// The weight of the answer's content words the text holds over that of all of them.
    pub share: f64,
    /// How many of the answer's content words the text holds.
    pub shared: usize,
}

/// How much of `answer` each of `texts` supports (the score of the module doc).
pub fn support(answer: &str, texts: &[String]) -> Vec<Support> {
    let answer_words = content_words(answer);
    let text_words: Vec<HashSet<String>> = texts.iter().map(|t| content_words(t)).collect();
    let n = texts.len().max(1) as f64;
    let weight = |w: &String| {
        let df = text_words.iter().filter(|t| t.contains(w)).count().max(1) as f64;
        (1.0 + n / df).ln()
    };
    let weights: HashMap<&String, f64> = answer_words.iter().map(|w| (w, weight(w))).collect();
    let total: f64 = weights.values().sum();
    text_words
        .iter()
        .map(|words| {
            let held: Vec<&&String> = weights.keys().filter(|w| words.contains(**w)).collect();
            let sum: f64 = held.iter().map(|w| weights[**w]).sum();
            Support {
                share: if total > 0.0 { sum / total } else { 0.0 },
                shared: held.len(),
            }
        })
        .collect()
}

/// The content words of `text` (as the module doc says).
fn content_words(text: &str) -> HashSet<String> {
    let mut words = HashSet::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let keep_word = |word: &mut String, words: &mut HashSet<String>| {
        let w = std::mem::take(word);
        let digits = w.chars().all(|c| c.is_ascii_digit());
        let long = if digits {
            w.len() >= 2
        } else {
            w.chars().count() >= 3
        };
        if long && !STOP_WORDS.contains(&w.as_str()) {
            words.insert(singular(w));
        }
    };
    let keep_cjk = |cjk: &mut Vec<char>, words: &mut HashSet<String>| {
        for pair in cjk.windows(2) {
            let w: String = pair.iter().collect();
            if !CJK_STOP_PAIRS.contains(&w.as_str()) {
                words.insert(w);
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            keep_word(&mut word, &mut words);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            keep_cjk(&mut cjk, &mut words);
            word.extend(c.to_lowercase());
        } else {
            keep_word(&mut word, &mut words);
            keep_cjk(&mut cjk, &mut words);
        }
    }
    keep_word(&mut word, &mut words);
    keep_cjk(&mut cjk, &mut words);
    words
}

/// `word` without a plural `s` (not of `ss`, nor of a word of three letters).
fn singular(word: String) -> String {
    if word.chars().count() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_owned()
    } else {
        word
    }
}

/// Chinese, Japanese and Korean characters, read in pairs.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// Words of three or more letters that say nothing of a file's content, in English, German,
/// French and Spanish (lower case).
const STOP_WORDS: &[&str] = &[
    // English
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "your",
    "yours",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "have",
    "him",
    "his",
    "how",
    "its",
    "may",
    "new",
    "now",
    "who",
    "did",
    "yes",
    "get",
    "got",
    "let",
    "she",
    "too",
    "use",
    "with",
    "this",
    "that",
    "these",
    "those",
    "there",
    "their",
    "them",
    "they",
    "then",
    "than",
    "what",
    "when",
    "where",
    "which",
    "while",
    "will",
    "would",
    "could",
    "should",
    "shall",
    "must",
    "might",
    "from",
    "into",
    "onto",
    "about",
    "above",
    "after",
    "again",
    "also",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "further",
    "here",
    "hers",
    "herself",
    "himself",
    "itself",
    "just",
    "more",
    "most",
    "myself",
    "nor",
    "off",
    "once",
    "only",
    "other",
    "ours",
    "over",
    "own",
    "same",
    "some",
    "such",
    "very",
    "were",
    "why",
    "yourself",
    "because",
    "until",
    "under",
    "through",
    "upon",
    "like",
    "well",
    "hello",
    "thank",
    "thanks",
    "please",
    "sure",
    "help",
    "happy",
    "question",
    "answer",
    "file",
    "files",
    "passage",
    "passages",
    "according",
    "based",
    "provided",
    "mentioned",
    "information",
    "document",
    "documents",
    "attached",
    "say",
    "says",
    "said",
    "see",
    // German
    "der",
    "die",
    "das",
    "den",
    "dem",
    "des",
    "ein",
    "eine",
    "einen",
    "einem",
    "einer",
    "eines",
    "und",
    "oder",
    "aber",
    "ist",
    "sind",
    "war",
    "waren",
    "sein",
    "hat",
    "haben",
    "wird",
    "werden",
    "kann",
    "können",
    "mit",
    "von",
    "für",
    "auf",
    "aus",
    "bei",
    "nach",
    "über",
    "unter",
    "nicht",
    "auch",
    "noch",
    "nur",
    "ich",
    "sie",
    "wir",
    "ihr",
    "ihre",
    "ihnen",
    "mich",
    "mir",
    "dich",
    "dir",
    "sich",
    "wie",
    "was",
    "wer",
    "wenn",
    "dass",
    "als",
    "zum",
    "zur",
    "vom",
    "beim",
    "hallo",
    "gerne",
    "bitte",
    "danke",
    // French
    "les",
    "des",
    "une",
    "est",
    "sont",
    "pour",
    "dans",
    "par",
    "sur",
    "avec",
    "pas",
    "que",
    "qui",
    "quoi",
    "vous",
    "nous",
    "ils",
    "elles",
    "elle",
    "mais",
    "donc",
    "cette",
    "ces",
    "son",
    "ses",
    "leur",
    "leurs",
    "aux",
    "été",
    "être",
    "avoir",
    "fait",
    "bonjour",
    "merci",
    "comment",
    "aider",
    "plus",
    // Spanish
    "los",
    "las",
    "una",
    "uno",
    "unos",
    "unas",
    "del",
    "por",
    "para",
    "con",
    "sin",
    "que",
    "como",
    "pero",
    "más",
    "este",
    "esta",
    "estos",
    "estas",
    "ese",
    "esa",
    "son",
    "está",
    "están",
    "ser",
    "hay",
    "hola",
    "gracias",
    "ayudar",
    "puedo",
    "usted",
    "sus",
];

/// Pairs of Chinese characters too common to say anything of a file's content.
const CJK_STOP_PAIRS: &[&str] = &[
    "我们", "你们", "他们", "一个", "可以", "这个", "那个", "什么", "没有", "我是", "你好", "是一",
    "因为", "所以", "如果", "但是", "就是", "这些", "那些", "已经", "还是", "您好", "帮助", "问题",
    "文件", "根据", "的是", "了一", "不是", "我可", "以帮", "有什", "么可",
];

#[cfg(test)]
#[path = "citations_tests.rs"]
mod tests;
