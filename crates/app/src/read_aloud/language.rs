//! Which of Hearth's five languages an answer is written in, so it is read in the
//! conversation's language whatever the app's own language is.
//!
//! The rule, on the answer's first sentences: mostly Chinese characters (at least a third of
//! the letters) is Chinese; otherwise the language with the most of its commonest short words
//! (a list per language, with the words two of them share left out), when it has at least two
//! and more than any other. Anything less certain gives `None`, and the caller falls back to
//! the app's language.

use crate::settings::Language;

const ENGLISH: &[&str] = &[
    "the", "and", "is", "are", "of", "to", "you", "that", "it", "with", "for", "this", "was", "be",
    "have", "not", "can", "your", "will", "or",
];
const GERMAN: &[&str] = &[
    "der", "die", "das", "und", "ist", "nicht", "ich", "ein", "eine", "mit", "zu", "den", "sie",
    "es", "auf", "für", "sind", "auch", "dem", "wird", "oder", "kann",
];
const FRENCH: &[&str] = &[
    "le", "les", "et", "est", "des", "une", "pour", "dans", "vous", "pas", "du", "ce", "qui", "il",
    "sont", "au", "avec", "sur", "peut", "ou", "mais",
];
const SPANISH: &[&str] = &[
    "el", "los", "las", "y", "es", "una", "por", "para", "con", "del", "se", "lo", "al", "está",
    "son", "pero", "como", "más", "puede", "o",
];

/// The language `text` is written in, if that is clear (see the module's rule).
pub fn detect(text: &str) -> Option<Language> {
    let letters = text.chars().filter(|c| c.is_alphabetic()).count();
    let han = text.chars().filter(|&c| is_han(c)).count();
    if letters > 0 && han * 3 >= letters {
        return Some(Language::Zh);
    }
    let mut counts = [
        (Language::En, 0usize),
        (Language::De, 0),
        (Language::Fr, 0),
        (Language::Es, 0),
    ];
    for word in text
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        for (language, list) in [(0, ENGLISH), (1, GERMAN), (2, FRENCH), (3, SPANISH)] {
            if list.contains(&word.as_str()) {
                counts[language].1 += 1;
            }
        }
    }
    counts.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
    let (best, count) = counts[0];
    (count >= 2 && count > counts[1].1).then_some(best)
}

fn is_han(c: char) -> bool {
    matches!(c as u32, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0xF900..=0xFAFF | 0x20000..=0x2A6DF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_language_is_told_apart() {
        let cases = [
            (
                "The sky is blue because of the way light scatters.",
                Language::En,
            ),
            (
                "Der Himmel ist blau, weil das Licht gestreut wird.",
                Language::De,
            ),
            (
                "Le ciel est bleu parce que la lumière est diffusée dans l'air.",
                Language::Fr,
            ),
            (
                "El cielo es azul por la forma en que se dispersa la luz.",
                Language::Es,
            ),
            ("天空是蓝色的，因为光被散射了。", Language::Zh),
            ("Python 的 list 是一种有序的集合。", Language::Zh),
        ];
        for (text, language) in cases {
            assert_eq!(detect(text), Some(language), "{text}");
        }
    }

    #[test]
    fn unclear_text_is_not_guessed() {
        assert_eq!(detect(""), None);
        assert_eq!(detect("42"), None);
        assert_eq!(detect("OK."), None);
        assert_eq!(detect("Hallo Welt"), None);
    }
}
