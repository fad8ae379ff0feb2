//! Importing a GGUF file into the store: a tiny Llama GGUF built here (Q4_1 linears, a Q8_0
//! tied embedding, F32 norms) is converted, registered and listed; a damaged one is refused
//! with nothing registered and nothing left behind; the GGUF itself is never changed.

mod common;

use common::TempDir;
use hearth_hub::{Error, GgufImportOptions, Store, WeightFormat};
use q4nx::gguf::{write::GgufWriter, GgmlType, Value};

/// Bytes of `rows` rows of `cols` values in `kind`, every byte `fill` after valid f16 scales.
fn blocks(kind: GgmlType, cols: u64, rows: u64) -> Vec<u8> {
    let per_row = kind.bytes_for(cols as usize);
    let mut out = vec![0x21u8; per_row * rows as usize];
    for block in out.chunks_exact_mut(kind.block_bytes()) {
        // d = 0.01 (and m = -0.05 for Q4_1): finite scales.
        block[0..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        if kind == GgmlType::Q4_1 {
            block[2..4].copy_from_slice(&half::f16::from_f32(-0.05).to_le_bytes());
        }
    }
    out
}

fn tiny_llama() -> Vec<u8> {
    let (hidden, ffn, vocab, kv) = (64u64, 64u64, 32u64, 32u64);
    let s = |t: &str| Value::String(t.into());
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", s("llama"));
    w.kv("general.name", s("tiny"));
    w.kv("llama.embedding_length", Value::U32(hidden as u32));
    w.kv("llama.block_count", Value::U32(1));
    w.kv("llama.attention.head_count", Value::U32(2));
    w.kv("llama.attention.head_count_kv", Value::U32(1));
    w.kv("llama.feed_forward_length", Value::U32(ffn as u32));
    w.kv("llama.context_length", Value::U32(256));
    w.kv("llama.rope.freq_base", Value::F32(10000.0));
    w.kv("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5));
    w.kv("tokenizer.ggml.model", s("gpt2"));
    w.kv("tokenizer.ggml.pre", s("smollm"));
    let tokens: Vec<Value> = (0..vocab)
        .map(|i| {
            if i == 0 {
                s("<|end|>")
            } else {
                s(&format!("t{i}"))
            }
        })
        .collect();
    w.kv("tokenizer.ggml.tokens", Value::Array(tokens));
    let types: Vec<Value> = (0..vocab)
        .map(|i| Value::I32(if i == 0 { 3 } else { 1 }))
        .collect();
    w.kv("tokenizer.ggml.token_type", Value::Array(types));
    w.kv("tokenizer.ggml.merges", Value::Array(vec![s("t 1")]));
    w.kv("tokenizer.ggml.eos_token_id", Value::U32(0));
    w.kv(
        "tokenizer.chat_template",
        s("{% for m in messages %}{{ m.content }}{% endfor %}"),
    );
    let f32s = |n: u64| {
        vec![0u8; 4 * n as usize]
            .iter()
            .enumerate()
            .map(|(i, _)| {
                if i % 4 == 3 {
                    0x3f
                } else if i % 4 == 2 {
                    0x80
                } else {
                    0
                }
            })
            .collect::<Vec<u8>>()
    };
    w.tensor(
        "token_embd.weight",
        &[hidden, vocab],
        GgmlType::Q8_0,
        &blocks(GgmlType::Q8_0, hidden, vocab),
    );
    w.tensor(
        "blk.0.attn_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    w.tensor(
        "blk.0.ffn_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    for (name, cols, rows) in [
        ("attn_q", hidden, hidden),
        ("attn_k", hidden, kv),
        ("attn_v", hidden, kv),
        ("attn_output", hidden, hidden),
        ("ffn_gate", hidden, ffn),
        ("ffn_up", hidden, ffn),
        ("ffn_down", ffn, hidden),
    ] {
        w.tensor(
            &format!("blk.0.{name}.weight"),
            &[cols, rows],
            GgmlType::Q4_1,
            &blocks(GgmlType::Q4_1, cols, rows),
        );
    }
    w.tensor(
        "output_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden),
    );
    w.finish()
}

#[test]
fn a_gguf_file_is_converted_registered_and_left_unchanged() {
    let tmp = TempDir::new("gguf");
    let store = Store::at(tmp.0.join("data"));
    let file = tmp.0.join("Tiny-Llama.Q4_1.gguf");
    let bytes = tiny_llama();
    std::fs::write(&file, &bytes).unwrap();
    let mut calls = 0;
    let (model, report) = store
        .import_gguf(&file, &GgufImportOptions::default(), &mut |_| calls += 1)
        .expect("import");
    assert_eq!(model.name, "Tiny-Llama.Q4_1");
    assert_eq!(model.format, WeightFormat::Q4nx);
    assert!(calls > 0, "progress was reported");
    assert_eq!(report.architecture, "llama");
    assert!(report.config.tie_word_embeddings);
    assert_eq!(
        report.linear_paths.values().sum::<usize>(),
        8,
        "7 linears and the head"
    );
    for f in [
        "model.q4nx",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        assert!(model.folder.join(f).is_file(), "{f} in the model folder");
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the GGUF is only read"
    );
    assert_eq!(store.list().unwrap().len(), 1);
    let leftovers: Vec<_> = std::fs::read_dir(store.downloads_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(leftovers.is_empty(), "no work folder left: {leftovers:?}");

    let again = store.import_gguf(&file, &GgufImportOptions::default(), &mut |_| {});
    assert!(matches!(again, Err(Error::NameTaken { .. })), "{again:?}");
}

#[test]
fn a_damaged_gguf_registers_nothing_and_leaves_nothing() {
    let tmp = TempDir::new("gguf-bad");
    let store = Store::at(tmp.0.join("data"));
    let file = tmp.0.join("broken.gguf");
    let bytes = tiny_llama();
    std::fs::write(&file, &bytes[..bytes.len() - 100]).unwrap();
    let err = store
        .import_gguf(&file, &GgufImportOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("truncated") && err.contains("Nothing was registered"),
        "{err}"
    );
    assert!(store.list().unwrap().is_empty());
    assert!(!store.models_dir().join("broken").exists());
    let leftovers: Vec<_> = std::fs::read_dir(store.downloads_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(leftovers.is_empty(), "no work folder left: {leftovers:?}");
}
