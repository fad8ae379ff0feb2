//! The Hugging Face tokenizer files of a GGUF model, rebuilt from its `tokenizer.ggml.*`
//! metadata: `tokenizer.json`, `tokenizer_config.json` (chat template, bos/eos) and
//! `generation_config.json`. Two kinds of vocabulary import: byte-level BPE (`gpt2`, with the
//! pre-tokenizer `tokenizer.ggml.pre` names) and SentencePiece (`llama`, see [`spm`]).
//!
//! Pre-tokenizers are written as the original models' own `tokenizer.json` spells them, which
//! is what llama.cpp's regexes for the same names reproduce.

mod spm;

use serde_json::{json, Map, Value as Json};

use crate::gguf::{Header, Value};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const TOKEN_UNKNOWN: i64 = 2;
const TOKEN_CONTROL: i64 = 3;
const TOKEN_USER_DEFINED: i64 = 4;

/// Tokens that end a turn although the header may not name them (`tokenizer.ggml.eot_token_id`
/// is often missing): llama.cpp ends generation on these spellings too.
const END_OF_TURN_SPELLINGS: [&str; 5] = [
    "<end_of_turn>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
];

/// Llama 3's split regex (also Qwen2's with single digits).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The three JSON files, as text, and the facts config.json needs from them.
#[derive(Debug, Clone)]
pub struct TokenizerFiles {
    /// `tokenizer.json`.
    pub tokenizer: String,
    /// `tokenizer_config.json`.
    pub tokenizer_config: String,
    /// `generation_config.json`.
    pub generation_config: String,
    /// Beginning-of-sequence id, if the vocabulary names one.
    pub bos_id: Option<u32>,
    /// Every id that ends generation: eos, end of turn, end of message.
    pub eos_ids: Vec<u32>,
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
}

/// Most tokens in a vocabulary Hearth imports: twice the largest real one (Gemma's 262,144).
/// The vocabulary is rebuilt as JSON in memory, so this bounds what a header check costs.
pub const MAX_VOCAB: usize = 1 << 19;

fn strings<'h>(h: &'h Header, key: &str) -> Result<Vec<&'h str>, String> {
    let items = h
        .get(key)
        .ok_or_else(|| format!("the file has no {key}; it carries no tokenizer Hearth can use"))?
        .as_array()
        .ok_or_else(|| format!("{key} is not an array"))?;
    let strings = items.as_strings().ok_or_else(|| {
        format!(
            "{key} holds elements of GGUF type {}, not strings",
            items.element_type()
        )
    })?;
    Ok(strings.iter().map(String::as_str).collect())
}

fn id(h: &Header, key: &str, vocab: usize) -> Result<Option<u32>, String> {
    match h.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(i) if (i as usize) < vocab => Ok(Some(i as u32)),
            // Some converters write -1 for "none".
            _ if v.as_i64() == Some(-1) => Ok(None),
            _ => Err(format!(
                "{key} is {}, not a token id below {vocab}",
                v.describe()
            )),
        },
    }
}

/// A GGUF vocabulary, checked: everything the tokenizer files are built from.
#[derive(Debug)]
pub(crate) struct Vocabulary<'h> {
    tokens: Vec<&'h str>,
    types: Vec<i64>,
    /// Beginning-of-sequence id, if the vocabulary names one.
    pub bos_id: Option<u32>,
    eos_id: Option<u32>,
    /// Every id that ends generation.
    pub eos_ids: Vec<u32>,
    add_bos: bool,
    kind: Kind<'h>,
}

/// How a vocabulary splits text into its tokens.
#[derive(Debug)]
enum Kind<'h> {
    /// Byte-level BPE (`gpt2`): ranked merges after the pre-tokenizer `pre` names.
    ByteLevel {
        merges: Vec<&'h str>,
        pre: &'h str,
        pre_tokenizer: Json,
    },
    /// SentencePiece (`llama`): merges by score, byte fallback.
    SentencePiece(spm::SentencePiece<'h>),
}

impl Vocabulary<'_> {
    /// Tokens in the vocabulary.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// Builds the tokenizer files from the header's `tokenizer.ggml.*` and `tokenizer.chat_template`.
pub fn tokenizer_files(h: &Header, context_length: usize) -> Result<TokenizerFiles, String> {
    build(h, &vocabulary(h)?, context_length)
}

/// Checks the header's vocabulary without building anything from it (a header check stays
/// cheap: no JSON of half a million tokens).
pub(crate) fn vocabulary(h: &Header) -> Result<Vocabulary<'_>, String> {
    let model = h
        .get("tokenizer.ggml.model")
        .and_then(Value::as_str)
        .ok_or("the file has no tokenizer.ggml.model; it carries no tokenizer Hearth can use")?;
    if !matches!(model, "gpt2" | "llama") {
        return Err(format!(
            "its tokenizer type {other:?} ({name}) is not supported yet; Hearth imports \
             byte-level BPE (\"gpt2\": Llama 3, Qwen, SmolLM2) and SentencePiece (\"llama\": \
             Gemma, Mistral, Llama 2)",
            other = model,
            name = match model {
                "bert" => "WordPiece",
                "t5" => "SentencePiece Unigram",
                "rwkv" => "RWKV's own",
                "plamo2" => "PLaMo 2's own",
                _ => "a kind Hearth does not know",
            }
        ));
    }
    let pre = h
        .get("tokenizer.ggml.pre")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let tokens = strings(h, "tokenizer.ggml.tokens")?;
    if tokens.len() > MAX_VOCAB {
        return Err(format!(
            "its vocabulary has {} tokens; Hearth imports vocabularies of up to {MAX_VOCAB} \
             (the largest real ones have about 262000)",
            tokens.len()
        ));
    }
    let vocab_size = tokens.len();
    let types: Vec<i64> = match h.get("tokenizer.ggml.token_type") {
        None => vec![1; vocab_size],
        Some(v) => {
            let a = v
                .as_array()
                .ok_or("tokenizer.ggml.token_type is not an array")?;
            if a.len() != vocab_size {
                return Err(format!(
                    "tokenizer.ggml.token_type has {} entries for {vocab_size} tokens",
                    a.len()
                ));
            }
            a.to_i64s()
                .ok_or("tokenizer.ggml.token_type holds a non-integer")?
        }
    };
    let bos_id = id(h, "tokenizer.ggml.bos_token_id", vocab_size)?;
    let eos_id = id(h, "tokenizer.ggml.eos_token_id", vocab_size)?;
    let mut eos_ids: Vec<u32> = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(i) = id(h, key, vocab_size)? {
            if !eos_ids.contains(&i) {
                eos_ids.push(i);
            }
        }
    }
    for (i, &text) in tokens.iter().enumerate() {
        if END_OF_TURN_SPELLINGS.contains(&text) && !eos_ids.contains(&(i as u32)) {
            eos_ids.push(i as u32);
        }
    }
    let add_bos = h
        .get("tokenizer.ggml.add_bos_token")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let kind = if model == "llama" {
        let unk_id = id(h, "tokenizer.ggml.unknown_token_id", vocab_size)?;
        Kind::SentencePiece(spm::check(h, vocab_size, unk_id)?)
    } else {
        byte_level(h, pre)?
    };
    if h.get("tokenizer.chat_template")
        .is_some_and(|t| t.as_str().is_none())
    {
        return Err("tokenizer.chat_template is not a string".into());
    }
    let mut seen = std::collections::HashSet::with_capacity(tokens.len());
    if let Some(text) = tokens.iter().find(|t| !seen.insert(**t)) {
        return Err(format!(
            "token {text:?} appears twice in tokenizer.ggml.tokens"
        ));
    }
    Ok(Vocabulary {
        tokens,
        types,
        bos_id,
        eos_id,
        eos_ids,
        add_bos,
        kind,
    })
}

/// The merges and pre-tokenizer of a byte-level BPE vocabulary.
fn byte_level<'h>(h: &'h Header, pre: &'h str) -> Result<Kind<'h>, String> {
    let merges = strings(h, "tokenizer.ggml.merges")?;
    let pre_tokenizer = match pre {
        // GPT-2's own regex, inside ByteLevel.
        // llama.cpp's converter names it "gpt-2".
        "default" | "gpt2" | "gpt-2" => json!({"type": "ByteLevel", "add_prefix_space": false,
            "trim_offsets": true, "use_regex": true}),
        "smollm" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
        ]}),
        // llama.cpp reads LFM2's vocabulary as Llama 3's (the same split, merges skipped for
        // whole-vocabulary words).
        "llama-bpe" | "llama3" | "lfm2" => split_then_bytes(LLAMA3_SPLIT),
        // llama.cpp gives deepseek-r1-qwen the qwen2 pre-tokenizer (llama-vocab.cpp).
        "qwen2" | "deepseek-r1-qwen" => split_then_bytes(QWEN2_SPLIT),
        other => {
            return Err(format!(
                "its pre-tokenizer {other:?} (tokenizer.ggml.pre) is not supported yet; Hearth \
                 imports gpt-2, smollm, llama-bpe, qwen2, deepseek-r1-qwen and lfm2"
            ))
        }
    };
    Ok(Kind::ByteLevel {
        merges,
        pre,
        pre_tokenizer,
    })
}

/// The tokenizer files of the checked vocabulary `v` of header `h`.
pub(crate) fn build(
    h: &Header,
    v: &Vocabulary<'_>,
    context_length: usize,
) -> Result<TokenizerFiles, String> {
    let Vocabulary {
        tokens,
        types,
        bos_id,
        eos_id,
        eos_ids,
        add_bos,
        kind,
    } = v;
    let (bos_id, eos_id, add_bos) = (*bos_id, *eos_id, *add_bos);
    let vocab_size = tokens.len();
    let sentencepiece = matches!(kind, Kind::SentencePiece(_));

    let mut vocab = Map::new();
    let mut added = Vec::new();
    for (i, (&text, &kind)) in tokens.iter().zip(types).enumerate() {
        vocab.insert(text.to_string(), json!(i));
        // llama.cpp finds control and unknown tokens in text when asked to parse special
        // tokens, and user-defined ones always; SentencePiece's are matched in the raw text.
        let special = kind == TOKEN_CONTROL || (sentencepiece && kind == TOKEN_UNKNOWN);
        if special || kind == TOKEN_USER_DEFINED {
            added.push(
                json!({"id": i, "content": text, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": !sentencepiece && kind == TOKEN_USER_DEFINED,
                "special": special}),
            );
        }
    }
    let [normalizer, pre_tokenizer, decoder, model] = match kind {
        Kind::ByteLevel {
            merges,
            pre,
            pre_tokenizer,
        } => [
            if matches!(*pre, "qwen2" | "deepseek-r1-qwen") {
                json!({"type": "NFC"})
            } else {
                Json::Null
            },
            pre_tokenizer.clone(),
            json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                "use_regex": true}),
            json!({"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": matches!(*pre, "llama-bpe" | "llama3" | "lfm2"),
                "vocab": vocab, "merges": merges}),
        ],
        Kind::SentencePiece(sp) => sp.parts(tokens, vocab),
    };
    let post_processor = match (add_bos, bos_id) {
        (true, Some(b)) => {
            let bos = tokens[b as usize];
            json!({"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [b], "tokens": [bos]}}})
        }
        _ => Json::Null,
    };
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": decoder,
        "model": model,
    });

    let text_of = |i: Option<u32>| i.map(|i| tokens[i as usize].to_string());
    let mut config = Map::new();
    config.insert("add_bos_token".into(), json!(add_bos));
    config.insert("add_eos_token".into(), json!(false));
    config.insert("bos_token".into(), json!(text_of(bos_id)));
    config.insert("eos_token".into(), json!(text_of(eos_id)));
    config.insert("clean_up_tokenization_spaces".into(), json!(false));
    config.insert("model_max_length".into(), json!(context_length));
    if let Some(template) = h.get("tokenizer.chat_template") {
        config.insert("chat_template".into(), json!(template.as_str()));
    }
    let generation = json!({"bos_token_id": bos_id, "eos_token_id": eos_ids});
    let pretty = |v: &Json| {
        let mut s = serde_json::to_string_pretty(v).expect("JSON values serialize");
        s.push('\n');
        s
    };
    Ok(TokenizerFiles {
        // tokenizer.json is large: compact, as Hugging Face writes it.
        tokenizer: serde_json::to_string(&tokenizer).expect("JSON values serialize"),
        tokenizer_config: pretty(&Json::Object(config)),
        generation_config: pretty(&generation),
        bos_id,
        eos_ids: eos_ids.clone(),
        vocab_size,
    })
}

fn split_then_bytes(regex: &str) -> Json {
    json!({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::write::GgufWriter;
    use crate::gguf::{parse, Array};
    use std::path::Path;

    fn header(model: &str, pre: &str) -> Header {
        let mut w = GgufWriter::new(3);
        let s = |t: &str| Value::String(t.into());
        w.kv("tokenizer.ggml.model", s(model));
        w.kv("tokenizer.ggml.pre", s(pre));
        let strings = |list: &[&str]| {
            Value::Array(Array::String(list.iter().map(|t| t.to_string()).collect()))
        };
        w.kv(
            "tokenizer.ggml.tokens",
            strings(&["<|end|>", "a", "b", "ab"]),
        );
        w.kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![3, 1, 1, 1])),
        );
        w.kv("tokenizer.ggml.merges", strings(&["a b"]));
        w.kv("tokenizer.ggml.eos_token_id", Value::U32(0));
        w.kv("tokenizer.chat_template", s("{{ messages }}"));
        parse(&w.finish(), Path::new("t.gguf")).unwrap()
    }

    #[test]
    fn builds_files_with_special_tokens_and_template() {
        let f = tokenizer_files(&header("gpt2", "smollm"), 2048).unwrap();
        let t: Json = serde_json::from_str(&f.tokenizer).unwrap();
        assert_eq!(t["added_tokens"][0]["content"], "<|end|>");
        assert_eq!(t["added_tokens"][0]["special"], true);
        assert_eq!(t["model"]["merges"][0], "a b");
        assert_eq!(t["pre_tokenizer"]["pretokenizers"][0]["type"], "Digits");
        let c: Json = serde_json::from_str(&f.tokenizer_config).unwrap();
        assert_eq!(c["eos_token"], "<|end|>");
        assert_eq!(c["chat_template"], "{{ messages }}");
        assert_eq!(f.eos_ids, [0]);
    }

    #[test]
    fn refuses_unknown_tokenizer_kinds_and_pre_tokenizers_plainly() {
        let err = tokenizer_files(&header("t5", "default"), 2048).unwrap_err();
        assert!(
            err.contains("\"t5\" (SentencePiece Unigram) is not supported yet"),
            "{err}"
        );
        let err = tokenizer_files(&header("gpt2", "deepseek-coder"), 2048).unwrap_err();
        assert!(err.contains("not supported yet"), "{err}");
    }

    /// A SentencePiece header: `<unk>`, `<s>`, `</s>`, a user-defined tab, two byte tokens, and
    /// pieces whose scores make "▁ab" come from "▁" + "ab", not "▁a" + "b". `scores` replaces
    /// those scores; `edit` adds keys.
    fn sentencepiece(scores: Option<Array>, edit: impl FnOnce(&mut GgufWriter)) -> Header {
        let mut w = GgufWriter::new(3);
        w.kv("tokenizer.ggml.model", Value::String("llama".into()));
        let tokens = [
            "<unk>",
            "<s>",
            "</s>",
            "\t",
            "<0x0A>",
            "<0xC3>",
            "\u{2581}",
            "a",
            "b",
            "ab",
            "\u{2581}a",
            "\u{2581}ab",
        ];
        let good = vec![
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0,
        ];
        w.kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(
                tokens.iter().map(|t| t.to_string()).collect(),
            )),
        );
        w.kv(
            "tokenizer.ggml.scores",
            Value::Array(scores.unwrap_or(Array::F32(good))),
        );
        w.kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![2, 3, 3, 4, 6, 6, 1, 1, 1, 1, 1, 1])),
        );
        w.kv("tokenizer.ggml.unknown_token_id", Value::U32(0));
        w.kv("tokenizer.ggml.bos_token_id", Value::U32(1));
        w.kv("tokenizer.ggml.eos_token_id", Value::U32(2));
        w.kv("tokenizer.ggml.add_bos_token", Value::Bool(true));
        edit(&mut w);
        parse(&w.finish(), Path::new("t.gguf")).unwrap()
    }

    #[test]
    fn builds_a_sentencepiece_vocabulary_with_byte_fallback() {
        let f = tokenizer_files(&sentencepiece(None, |_| {}), 2048).unwrap();
        let t: Json = serde_json::from_str(&f.tokenizer).unwrap();
        assert_eq!(t["model"]["type"], "BPE");
        assert_eq!(t["model"]["byte_fallback"], true);
        assert_eq!(t["model"]["unk_token"], "<unk>");
        assert_eq!(
            t["model"]["merges"],
            json!([
                ["a", "b"],
                ["\u{2581}", "a"],
                ["\u{2581}", "ab"],
                ["\u{2581}a", "b"]
            ])
        );
        // llama.cpp's default: a space before the text, stripped again when decoding.
        assert_eq!(t["normalizer"]["normalizers"][0]["type"], "Prepend");
        assert_eq!(t["decoder"]["decoders"][3]["type"], "Strip");
        assert_eq!(t["pre_tokenizer"], Json::Null);
        let added: Vec<(&str, bool, bool)> = t["added_tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let flag = |k: &str| a[k].as_bool().unwrap();
                (
                    a["content"].as_str().unwrap(),
                    flag("special"),
                    flag("normalized"),
                )
            })
            .collect();
        assert_eq!(
            added,
            [
                ("<unk>", true, false),
                ("<s>", true, false),
                ("</s>", true, false),
                ("\t", false, false)
            ]
        );
        assert_eq!((f.bos_id, f.eos_ids.as_slice()), (Some(1), &[2][..]));
    }

    #[test]
    fn a_sentencepiece_vocabulary_without_a_space_prefix_replaces_spaces_only() {
        let h = sentencepiece(None, |w| {
            w.kv("tokenizer.ggml.add_space_prefix", Value::Bool(false));
        });
        let t: Json = serde_json::from_str(&tokenizer_files(&h, 2048).unwrap().tokenizer).unwrap();
        assert_eq!(t["normalizer"]["type"], "Replace");
        assert_eq!(t["decoder"]["decoders"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn malformed_sentencepiece_headers_are_refused_plainly() {
        let cases = [
            (
                Array::F32(vec![0.0; 3]),
                "tokenizer.ggml.scores has 3 entries for 12 tokens",
            ),
            (Array::I32(vec![0; 12]), "not an array of 32-bit floats"),
            (
                Array::F32(vec![f32::NAN; 12]),
                "tokenizer.ggml.scores[0] is not a number",
            ),
        ];
        for (scores, want) in cases {
            let err = vocabulary(&sentencepiece(Some(scores), |_| {})).unwrap_err();
            assert!(err.contains(want), "{err} (wanted {want:?})");
        }
        let h = sentencepiece(None, |w| {
            w.kv("tokenizer.ggml.add_space_prefix", Value::U32(7));
        });
        let err = vocabulary(&h).unwrap_err();
        assert!(err.contains("add_space_prefix is"), "{err}");
        let mut w = GgufWriter::new(3);
        w.kv("tokenizer.ggml.model", Value::String("llama".into()));
        w.kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(vec!["a".into()])),
        );
        let h = parse(&w.finish(), Path::new("t.gguf")).unwrap();
        let err = vocabulary(&h).unwrap_err();
        assert!(err.contains("has no tokenizer.ggml.scores"), "{err}");
    }

    #[test]
    fn end_of_turn_tokens_end_generation_without_a_header_key() {
        let mut w = GgufWriter::new(3);
        w.kv("tokenizer.ggml.model", Value::String("gpt2".into()));
        w.kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(
                ["<|endoftext|>", "<|im_end|>", "a"]
                    .map(String::from)
                    .to_vec(),
            )),
        );
        w.kv("tokenizer.ggml.merges", Value::Array(Array::String(vec![])));
        w.kv("tokenizer.ggml.eos_token_id", Value::U32(0));
        let h = parse(&w.finish(), Path::new("t.gguf")).unwrap();
        assert_eq!(tokenizer_files(&h, 2048).unwrap().eos_ids, [0, 1]);
    }
}
