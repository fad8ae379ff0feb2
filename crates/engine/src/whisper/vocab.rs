//! Whisper's tokens: the text of each id and the special tokens the decoding rules use.
//!
//! Read from `tokenizer.json` (the vocabulary and added tokens), or CTranslate2's
//! `vocabulary.txt` (one token a line) or `vocabulary.json` (a list). Tokens are GPT-2's
//! byte-level spelling (each byte shown as one printable character), so text is the bytes of
//! the tokens joined, read as UTF-8. Special tokens are found by their spelling
//! (`<|startoftranscript|>`, `<|en|>`, `<|notimestamps|>`...); timestamp tokens are the ids
//! after `<|notimestamps|>` (each 0.02 s), which tokenizer files often leave out.

use std::collections::HashMap;
use std::path::Path;

use crate::Error;

const MAX_TOKENIZER_BYTES: u64 = 64 << 20;

/// The tokens of a Whisper model.
#[derive(Debug)]
pub(crate) struct Vocabulary {
    /// The bytes of each ordinary token (ids below `eot`).
    bytes: Vec<Vec<u8>>,
    pub(crate) eot: u32,
    pub(crate) sot: u32,
    pub(crate) translate: u32,
    pub(crate) transcribe: u32,
    pub(crate) sot_lm: Option<u32>,
    pub(crate) sot_prev: Option<u32>,
    pub(crate) no_speech: Option<u32>,
    pub(crate) no_timestamps: u32,
    /// The first timestamp token (`<|0.00|>`).
    pub(crate) timestamp_begin: u32,
    /// The token of one space (" ", suppressed at the first step).
    pub(crate) blank: Option<u32>,
    /// Language codes and their token ids, in id order.
    pub(crate) languages: Vec<(String, u32)>,
}

/// GPT-2's byte-level alphabet: the character each byte is written as.
fn byte_alphabet() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut extra = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, 33..=126 | 161..=172 | 174..=255);
        let c = if printable {
            char::from(b)
        } else {
            extra += 1;
            char::from_u32(255 + extra).expect("below 512 is a char")
        };
        map.insert(c, b);
    }
    map
}

impl Vocabulary {
    pub(crate) fn read(dir: &Path, vocab_size: usize) -> Result<Vocabulary, Error> {
        let tokens = read_tokens(dir)?;
        Self::from_tokens(dir, tokens, vocab_size)
    }

    /// Builds the vocabulary from `(id, spelling)` pairs.
    pub(crate) fn from_tokens(
        dir: &Path,
        tokens: Vec<(u32, String)>,
        vocab_size: usize,
    ) -> Result<Vocabulary, Error> {
        let mut by_name: HashMap<&str, u32> = HashMap::new();
        for (id, text) in &tokens {
            if (*id as usize) >= vocab_size {
                return Err(Error::Tokenizer {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "token {text:?} has id {id}, but the model has {vocab_size} tokens: the \
                         tokenizer belongs to another model"
                    ),
                });
            }
            by_name.insert(text, *id);
        }
        let need = |name: &str| {
            by_name.get(name).copied().ok_or_else(|| Error::Tokenizer {
                path: dir.to_path_buf(),
                reason: format!("it has no {name} token; is it a Whisper tokenizer?"),
            })
        };
        let eot = need("<|endoftext|>")?;
        let sot = need("<|startoftranscript|>")?;
        let translate = need("<|translate|>")?;
        let transcribe = need("<|transcribe|>")?;
        let no_timestamps = need("<|notimestamps|>")?;
        let mut languages: Vec<(String, u32)> = tokens
            .iter()
            .filter(|(id, _)| *id > sot && *id < translate)
            .filter_map(|(id, text)| {
                let code = text.strip_prefix("<|")?.strip_suffix("|>")?;
                Some((code.to_string(), *id))
            })
            .collect();
        languages.sort_by_key(|(_, id)| *id);
        if languages.is_empty() {
            // English-only models have no language tokens: they always transcribe English.
            languages.push(("en".into(), sot));
        }
        let alphabet = byte_alphabet();
        let mut bytes = vec![Vec::new(); eot as usize];
        for (id, text) in &tokens {
            if *id < eot {
                bytes[*id as usize] = text
                    .chars()
                    .map(|c| alphabet.get(&c).copied())
                    .collect::<Option<Vec<u8>>>()
                    .unwrap_or_else(|| text.as_bytes().to_vec());
            }
        }
        Ok(Vocabulary {
            bytes,
            eot,
            sot,
            translate,
            transcribe,
            sot_lm: by_name.get("<|startoflm|>").copied(),
            sot_prev: by_name.get("<|startofprev|>").copied(),
            no_speech: by_name
                .get("<|nospeech|>")
                .or_else(|| by_name.get("<|nocaptions|>"))
                .copied(),
            no_timestamps,
            timestamp_begin: no_timestamps + 1,
            blank: by_name.get("\u{120}").copied(),
            languages,
        })
    }

    /// The text of ordinary tokens; special and timestamp tokens are left out.
    pub(crate) fn decode(&self, ids: &[u32]) -> String {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.bytes.get(id as usize) {
                out.extend_from_slice(b);
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The token of a language code ("en"), if the model knows it.
    pub(crate) fn language_token(&self, code: &str) -> Option<u32> {
        self.languages
            .iter()
            .find(|(c, _)| c == code)
            .map(|(_, id)| *id)
    }

    /// Whether the model has language tokens (multilingual).
    pub(crate) fn multilingual(&self) -> bool {
        self.languages.iter().all(|(_, id)| *id != self.sot)
    }

    pub(crate) fn language_codes(&self) -> Vec<String> {
        self.languages.iter().map(|(c, _)| c.clone()).collect()
    }
}

/// `(id, spelling)` of every token the folder's tokenizer files name.
fn read_tokens(dir: &Path) -> Result<Vec<(u32, String)>, Error> {
    let read = |file: &str| -> Result<Option<String>, Error> {
        let path = dir.join(file);
        if !path.is_file() {
            return Ok(None);
        }
        let bad = |reason: String| Error::Tokenizer {
            path: path.clone(),
            reason,
        };
        let len = std::fs::metadata(&path)
            .map_err(|e| bad(e.to_string()))?
            .len();
        if len > MAX_TOKENIZER_BYTES {
            return Err(bad(format!(
                "is {len} bytes, more than any tokenizer takes"
            )));
        }
        std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|e| bad(e.to_string()))
    };
    let bad = |file: &str, reason: String| Error::Tokenizer {
        path: dir.join(file),
        reason,
    };
    if let Some(text) = read("tokenizer.json")? {
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad("tokenizer.json", format!("not valid JSON ({e})")))?;
        let vocab = json
            .pointer("/model/vocab")
            .and_then(|v| v.as_object())
            .ok_or_else(|| bad("tokenizer.json", "it has no model.vocab map".into()))?;
        let mut tokens = Vec::with_capacity(vocab.len() + 200);
        for (text, id) in vocab {
            let id = id
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| bad("tokenizer.json", format!("token {text:?} has id {id}")))?;
            tokens.push((id, text.clone()));
        }
        for added in json
            .get("added_tokens")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
        {
            if let (Some(id), Some(text)) = (
                added.get("id").and_then(|i| i.as_u64()),
                added.get("content").and_then(|c| c.as_str()),
            ) {
                let id = u32::try_from(id).map_err(|_| {
                    bad(
                        "tokenizer.json",
                        format!("added token {text:?} has id {id}"),
                    )
                })?;
                tokens.push((id, text.to_string()));
            }
        }
        return Ok(tokens);
    }
    if let Some(text) = read("vocabulary.json")? {
        let list: Vec<String> = serde_json::from_str(&text)
            .map_err(|e| bad("vocabulary.json", format!("not a list of tokens ({e})")))?;
        return Ok((0u32..).zip(list).collect());
    }
    if let Some(text) = read("vocabulary.txt")? {
        return Ok((0u32..).zip(text.lines().map(str::to_string)).collect());
    }
    Err(Error::Tokenizer {
        path: dir.join("tokenizer.json"),
        reason: "the folder has no tokenizer.json, vocabulary.json or vocabulary.txt; add the \
                 model's tokenizer.json"
            .into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vocabulary {
        let mut tokens: Vec<(u32, String)> = vec![
            (0, "Hello".into()),
            (1, "\u{120}w\u{c3}\u{b6}rld".into()),
            (2, "\u{120}".into()),
        ];
        for (i, name) in [
            "<|endoftext|>",
            "<|startoftranscript|>",
            "<|en|>",
            "<|de|>",
            "<|translate|>",
            "<|transcribe|>",
            "<|notimestamps|>",
        ]
        .iter()
        .enumerate()
        {
            tokens.push((3 + i as u32, name.to_string()));
        }
        Vocabulary::from_tokens(Path::new("t"), tokens, 20).unwrap()
    }

    #[test]
    fn byte_level_tokens_decode_to_utf8_and_specials_are_found() {
        let v = vocab();
        assert_eq!(v.decode(&[4, 5, 0, 1, 3, 12]), "Hello wörld");
        assert_eq!(
            (v.eot, v.sot, v.no_timestamps, v.timestamp_begin),
            (3, 4, 9, 10)
        );
        assert_eq!(v.language_token("de"), Some(6));
        assert_eq!(v.language_codes(), ["en", "de"]);
        assert_eq!(v.blank, Some(2));
        assert!(v.multilingual());
    }

    #[test]
    fn a_tokenizer_of_another_model_is_refused() {
        let err = Vocabulary::from_tokens(Path::new("t"), vec![(99, "x".into())], 20).unwrap_err();
        assert!(err.to_string().contains("another model"), "{err}");
        let err = Vocabulary::from_tokens(Path::new("t"), vec![(1, "x".into())], 20).unwrap_err();
        assert!(err.to_string().contains("no <|endoftext|>"), "{err}");
    }
}
