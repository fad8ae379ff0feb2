//! The tokens a BERT encoder reads: its WordPiece `tokenizer.json` (BertNormalizer: clean text,
//! CJK characters apart, lowercase and accents stripped; BertPreTokenizer; WordPiece with `##`
//! and `[UNK]` for a word past 100 characters), run by the `tokenizers` crate with the file's own
//! padding and truncation turned off, then `[CLS]`, at most `max_pieces` word pieces, `[SEP]` (as
//! transformers' tokenizer with `truncation=True` cuts a single text).

use std::path::Path;

use crate::tokenizer::TextTokenizer;
use crate::Error;

/// A BERT tokenizer with its sequence limit.
#[derive(Debug)]
pub(crate) struct WordPieces {
    tokenizer: TextTokenizer,
    cls: u32,
    sep: u32,
    max_pieces: usize,
}

impl WordPieces {
    /// Reads `tokenizer.json` of the folder `dir`; texts are cut to `max_pieces` word pieces.
    pub(crate) fn from_dir(dir: &Path, max_pieces: usize) -> Result<Self, Error> {
        let path = dir.join("tokenizer.json");
        if !path.is_file() {
            return Err(Error::NoTokenizer {
                dir: dir.to_path_buf(),
            });
        }
        let tokenizer = TextTokenizer::from_file(&path)?.without_truncation_or_padding()?;
        let special = |token: &str| {
            tokenizer
                .token_to_id(token)
                .ok_or_else(|| Error::Tokenizer {
                    path: path.clone(),
                    reason: format!("it has no {token} token; is it a BERT WordPiece tokenizer?"),
                })
        };
        Ok(WordPieces {
            cls: special("[CLS]")?,
            sep: special("[SEP]")?,
            tokenizer,
            max_pieces,
        })
    }

    /// Word pieces a text may have before the rest is cut off.
    pub(crate) fn max_pieces(&self) -> usize {
        self.max_pieces
    }

    /// Word pieces of `text`, without `[CLS]`/`[SEP]` and without truncation.
    pub(crate) fn count(&self, text: &str) -> Result<usize, Error> {
        Ok(self.tokenizer.encode(text, false)?.len())
    }

    /// `[CLS]`, the first `max_pieces` word pieces of `text`, `[SEP]`.
    pub(crate) fn tokens(&self, text: &str) -> Result<Vec<u32>, Error> {
        let mut pieces = self.tokenizer.encode(text, false)?;
        pieces.truncate(self.max_pieces);
        let mut ids = Vec::with_capacity(pieces.len() + 2);
        ids.push(self.cls);
        ids.extend(pieces);
        ids.push(self.sep);
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine")
            .join(name)
    }

    #[derive(serde::Deserialize)]
    struct Case {
        text: String,
        ids: Vec<u32>,
    }

    /// transformers' ids (its fast and its pure-Python BertTokenizer agree on each) for the
    /// real all-MiniLM-L6-v2 tokenizer (generate_encoder.py).
    #[test]
    fn minilm_tokens_match_transformers() {
        let pieces = WordPieces::from_dir(&fixture("minilm-tokenizer"), 10_000).unwrap();
        let text = std::fs::read_to_string(fixture("minilm-tokenizer-cases.json")).unwrap();
        let cases: Vec<Case> = serde_json::from_str(&text).unwrap();
        assert!(cases.len() >= 20);
        for case in cases {
            let ids = pieces.tokens(&case.text).unwrap();
            assert_eq!(ids, case.ids, "tokens of {:?}", case.text);
            assert_eq!(pieces.count(&case.text).unwrap(), case.ids.len() - 2);
        }
    }

    #[test]
    fn the_file_padding_to_128_is_not_applied() {
        // all-MiniLM-L6-v2's tokenizer.json pads and truncates every text to 128 tokens.
        let pieces = WordPieces::from_dir(&fixture("minilm-tokenizer"), 254).unwrap();
        assert_eq!(pieces.tokens("hello").unwrap(), vec![101, 7592, 102]);
        let long = "word ".repeat(300);
        assert_eq!(pieces.count(&long).unwrap(), 300, "counting never cuts");
        let ids = pieces.tokens(&long).unwrap();
        assert_eq!(ids.len(), 256, "cut to 254 pieces plus [CLS] and [SEP]");
        assert_eq!((ids[0], ids[255]), (101, 102));
    }

    #[test]
    fn a_folder_without_tokenizer_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = WordPieces::from_dir(dir.path(), 254).unwrap_err();
        assert!(err.to_string().contains("no tokenizer.json"), "{err}");
    }
}
