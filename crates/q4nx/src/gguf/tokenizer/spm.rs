//! SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`: Gemma, Mistral, Llama 2,
//! Phi-3.5) as the `tokenizer.json` Hugging Face writes for them: a BPE model with byte
//! fallback (`<0x0A>` tokens for characters the vocabulary lacks), spaces spelled `▁`, and no
//! pre-tokenizer (the whole text between special tokens is one piece).
//!
//! SentencePiece and llama.cpp (`llm_tokenizer_spm`) merge the adjacent pair whose joined piece
//! has the highest score; a BPE model merges by rank. The merges are therefore every split of
//! every piece into two pieces of the vocabulary, ranked by the joined piece's score (ties by
//! the ids), which is how `tokenizers`' SentencePiece converter makes them.

use std::collections::HashMap;

use serde_json::{json, Value as Json};

use crate::gguf::{Array, Header, Value};

/// What a SentencePiece vocabulary adds to its tokens: the scores that order the merges.
#[derive(Debug)]
pub(crate) struct SentencePiece<'h> {
    scores: &'h [f32],
    /// Whether a space is put before the text (and after each special token), as
    /// `tokenizer.ggml.add_space_prefix` says; llama.cpp's default is yes.
    pub add_space_prefix: bool,
    unk_id: Option<u32>,
}

/// Checks the SentencePiece parts of header `h` for a vocabulary of `vocab_size` tokens.
pub(crate) fn check(
    h: &Header,
    vocab_size: usize,
    unk_id: Option<u32>,
) -> Result<SentencePiece<'_>, String> {
    let scores =
        match h.get("tokenizer.ggml.scores") {
            None => return Err(
                "the file has no tokenizer.ggml.scores, which a SentencePiece vocabulary needs \
                 to know which pieces to join"
                    .into(),
            ),
            Some(Value::Array(Array::F32(scores))) => scores.as_slice(),
            Some(other) => {
                return Err(format!(
                    "tokenizer.ggml.scores is {}, not an array of 32-bit floats",
                    other.describe()
                ))
            }
        };
    if scores.len() != vocab_size {
        return Err(format!(
            "tokenizer.ggml.scores has {} entries for {vocab_size} tokens",
            scores.len()
        ));
    }
    if let Some(i) = scores.iter().position(|s| s.is_nan()) {
        return Err(format!("tokenizer.ggml.scores[{i}] is not a number"));
    }
    let add_space_prefix = match h.get("tokenizer.ggml.add_space_prefix") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| {
            format!(
                "tokenizer.ggml.add_space_prefix is {}, not true or false",
                v.describe()
            )
        })?,
    };
    Ok(SentencePiece {
        scores,
        add_space_prefix,
        unk_id,
    })
}

impl SentencePiece<'_> {
    /// The `normalizer`, `pre_tokenizer`, `decoder` and `model` of `tokenizer.json`, in that
    /// order, for the vocabulary `tokens` (with ids as keys in `vocab`).
    pub fn parts(&self, tokens: &[&str], vocab: serde_json::Map<String, Json>) -> [Json; 4] {
        let replace_spaces =
            json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
        let normalizer = if self.add_space_prefix {
            json!({"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u{2581}"}, replace_spaces]})
        } else {
            replace_spaces
        };
        let mut decoders = vec![
            json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
            json!({"type": "ByteFallback"}),
            json!({"type": "Fuse"}),
        ];
        if self.add_space_prefix {
            decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        }
        let merges: Vec<[&str; 2]> = merges(tokens, self.scores);
        let model = json!({"type": "BPE", "dropout": null,
            "unk_token": self.unk_id.map(|i| tokens[i as usize]),
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true,
            "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": merges});
        [
            normalizer,
            Json::Null,
            json!({"type": "Sequence", "decoders": decoders}),
            model,
        ]
    }
}

/// Every split of a piece into two pieces of the vocabulary, highest joined score first; among
/// equal scores by the joined piece's id, then by the two halves' ids.
fn merges<'t>(tokens: &[&'t str], scores: &[f32]) -> Vec<[&'t str; 2]> {
    let ids: HashMap<&str, usize> = tokens.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let mut found: Vec<(f32, usize, usize, usize)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        for (cut, _) in piece.char_indices().skip(1) {
            if let (Some(&left), Some(&right)) = (ids.get(&piece[..cut]), ids.get(&piece[cut..])) {
                found.push((scores[id], id, left, right));
            }
        }
    }
    found.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    found
        .into_iter()
        .map(|(_, _, left, right)| [tokens[left], tokens[right]])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_are_every_split_ranked_by_the_joined_score() {
        let tokens = ["a", "b", "c", "ab", "bc", "abc"];
        let scores = [0.0, 0.0, 0.0, -2.0, -1.0, -3.0];
        assert_eq!(
            merges(&tokens, &scores),
            [["b", "c"], ["a", "b"], ["a", "bc"], ["ab", "c"]]
        );
    }

    #[test]
    fn merges_split_between_characters_not_bytes() {
        let tokens = ["\u{2581}", "é", "\u{2581}é"];
        assert_eq!(merges(&tokens, &[0.0, 0.0, -1.0]), [["\u{2581}", "é"]]);
    }
}
