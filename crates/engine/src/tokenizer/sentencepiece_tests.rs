//! SentencePiece-style vocabularies through [`TextTokenizer`]: a BPE model with byte fallback
//! and spaces spelled `▁`, as Hugging Face writes Gemma's, Llama 2's and Mistral's
//! `tokenizer.json`, and as `q4nx` rebuilds one from a GGUF file's `tokenizer.ggml.model =
//! "llama"` vocabulary.

use serde_json::json;

use super::*;

/// A tiny vocabulary: three specials, the 256 byte tokens, and the pieces of "hello" and
/// "▁hello". `prefix`: a space before the text, as llama.cpp's `add_space_prefix` (Llama 2).
fn tiny(prefix: bool) -> TextTokenizer {
    let mut pieces: Vec<String> = ["<unk>", "<s>", "</s>"].map(String::from).to_vec();
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    pieces.extend(
        [
            "\u{2581}",
            "h",
            "e",
            "l",
            "o",
            "he",
            "ll",
            "llo",
            "hello",
            "\u{2581}hello",
        ]
        .map(String::from),
    );
    let vocab: serde_json::Map<String, serde_json::Value> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), json!(i)))
        .collect();
    let merges = [
        ["l", "l"],
        ["h", "e"],
        ["ll", "o"],
        ["he", "llo"],
        ["\u{2581}", "hello"],
    ];
    let replace = json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"});
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    let normalizer = if prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
        json!({"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u{2581}"}, replace]})
    } else {
        replace
    };
    let special = |id: usize, text: &str| {
        json!({"id": id, "content": text, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
    };
    let file = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
        "normalizer": normalizer, "pre_tokenizer": null, "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
            "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": true,
            "byte_fallback": true, "ignore_merges": false, "vocab": vocab, "merges": merges},
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, file.to_string()).unwrap();
    TextTokenizer::from_file(&path).expect("a SentencePiece-style tokenizer.json loads")
}

fn spelled(t: &TextTokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&i| t.id_to_token(i).unwrap()).collect()
}

#[test]
fn spaces_become_the_marker_and_missing_characters_fall_back_to_bytes() {
    let t = tiny(false);
    let ids = t.encode("hello hé", false).unwrap();
    assert_eq!(
        spelled(&t, &ids),
        ["hello", "\u{2581}", "h", "<0xC3>", "<0xA9>"]
    );
    assert_eq!(t.decode(&ids, true).unwrap(), "hello hé");
}

#[test]
fn a_space_prefix_is_added_before_the_text_and_dropped_when_decoding() {
    let t = tiny(true);
    let ids = t.encode("hello", false).unwrap();
    assert_eq!(spelled(&t, &ids), ["\u{2581}hello"]);
    assert_eq!(t.decode(&ids, true).unwrap(), "hello");
    // After a special token the text is prefixed again, as llama.cpp does.
    let ids = t.encode("hello</s>hello", false).unwrap();
    assert_eq!(
        spelled(&t, &ids),
        ["\u{2581}hello", "</s>", "\u{2581}hello"]
    );
}

#[test]
fn byte_tokens_join_into_characters_when_streaming() {
    let t = tiny(false);
    let ids = t.encode("h🙂", false).unwrap();
    assert_eq!(ids.len(), 5, "h and the emoji's four bytes: {ids:?}");
    let mut stream = t.stream();
    let pieces: Vec<Option<String>> = ids.iter().map(|&id| stream.step(id).unwrap()).collect();
    assert_eq!(pieces[0].as_deref(), Some("h"));
    assert!(pieces[1..4].iter().all(Option::is_none), "{pieces:?}");
    assert_eq!(pieces[4].as_deref(), Some("🙂"));
}

#[test]
fn token_bytes_spell_markers_as_spaces_and_byte_tokens_as_bytes() {
    let t = tiny(false);
    let table = t.token_bytes();
    let id = |s: &str| t.token_to_id(s).unwrap() as usize;
    assert_eq!(table[id("\u{2581}hello")].as_deref(), Some(&b" hello"[..]));
    assert_eq!(table[id("<0xC3>")].as_deref(), Some(&[0xC3u8][..]));
    assert_eq!(table[id("</s>")], None);
}

#[test]
fn a_quoted_special_reads_as_text_of_its_message_with_no_second_space_prefix() {
    let t = tiny(true);
    let message = "hello</s>hello";
    let rendered = format!("<s>{}</s>", t.quote(message));
    let ids = t.encode_prompt(&rendered).unwrap();

    let special = |s: &str| t.token_to_id(s).unwrap();
    let mut expected = vec![special("<s>")];
    expected.extend(encoded(t.as_text(), message, false).unwrap());
    expected.push(special("</s>"));
    assert_eq!(ids, expected);
    let spelled = spelled(&t, &ids);
    assert_eq!(
        spelled[1], "\u{2581}hello",
        "the message's one prefix: {spelled:?}"
    );
    assert_eq!(spelled[spelled.len() - 2], "hello", "{spelled:?}");
    assert_eq!(
        spelled.iter().filter(|s| s.starts_with('\u{2581}')).count(),
        1,
        "{spelled:?}"
    );
    assert_eq!(t.decode(&ids, true).unwrap(), message);
}
