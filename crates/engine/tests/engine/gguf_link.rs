//! Linked GGUF models (`q4nx::gguf::link_gguf`: the file read where it lies, on its own blocks)
//! compute what `hearth import` of the same file computes where the import keeps the codes
//! (the Q8_0 fixtures: the llama one with its Q/K rows left interleaved and RoPE on adjacent
//! pairs, Qwen2 with its biases, Gemma 3 with its `1 + w` norms), and what llama.cpp computes
//! on the same file, for the Q8_0 fixtures and for a small Qwen2 written here in F32 and
//! quantized by llama.cpp itself to Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_M (Q4_K and Q6_K), Q5_K_M (Q5_K
//! and Q6_K) and Q6_K (`tests/fixtures/gguf/llama_cpp_quantize.py`): hidden 256 and an MLP of
//! 512, so every K is a multiple of the K-quants' 256.
//!
//! The llama.cpp comparisons need `HEARTH_LLAMA_PYTHON` (the venv python
//! `scripts/python-tools.sh` prints; `npm test` sets it); without it they say SKIPPED and pass.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::logits::{argmax, log_softmax, margin};
use common::rows8::{assert_rows_regrouped, logits_from};
use q4nx::gguf::write::GgufWriter;
use q4nx::gguf::{GgmlType, GgufFile, Value};

/// Margin (logits) below which llama.cpp's own top choice is a near-tie.
const MARGIN: f32 = 0.3;

fn gguf_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

fn link(gguf: &Path, tmp: &Path) -> PathBuf {
    let dir = tmp.join("linked");
    q4nx::gguf::link_gguf(gguf, &dir, &mut |_| {}).expect("link");
    dir
}

fn logits(dir: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    logits_from(dir, tokens, false)
}

/// How far `ours` is from `theirs`: mean KL(theirs || ours), the largest |difference| in
/// standard deviations of `theirs`, and the positions where `theirs` is confident (margin at
/// least [`MARGIN`]) but the top-1 differs.
fn distance(ours: &[Vec<f32>], theirs: &[Vec<f32>]) -> (f64, f64, Vec<usize>) {
    assert_eq!(ours.len(), theirs.len());
    let mut kl = 0.0;
    let mut wrong = Vec::new();
    for (pos, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let (la, lb) = (log_softmax(a), log_softmax(b));
        kl += lb
            .iter()
            .zip(&la)
            .map(|(p, q)| p.exp() * (p - q))
            .sum::<f64>();
        if margin(b) >= MARGIN && argmax(a) != argmax(b) {
            wrong.push(pos);
        }
    }
    let all: Vec<f64> = theirs.iter().flatten().map(|&v| v as f64).collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let std = (all.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / all.len() as f64).sqrt();
    let max = ours
        .iter()
        .flatten()
        .zip(theirs.iter().flatten())
        .map(|(x, y)| (x - y).abs() as f64)
        .fold(0.0, f64::max);
    (kl / ours.len() as f64, max / std, wrong)
}

/// The Q8_0 fixtures and the tiny model whose reference tokens they are run on.
const Q8_0_FIXTURES: [(&str, &str); 3] = [
    ("tiny-llama3", "tiny-llama3-q8_0.gguf"),
    ("tiny-qwen2", "tiny-qwen2-q8_0.gguf"),
    ("tiny-gemma3-swa6", "tiny-gemma3-q8_0.gguf"),
];

#[test]
fn a_linked_q8_0_gguf_computes_what_its_import_computes() {
    for (fixture, gguf) in Q8_0_FIXTURES {
        let tmp = tempfile::tempdir().unwrap();
        let gguf = gguf_fixtures().join(gguf);
        let linked = link(&gguf, tmp.path());
        let imported = tmp.path().join("imported");
        q4nx::gguf::import_gguf(&gguf, &imported, Some(1), &mut |_| {}).unwrap();
        let tokens = common::reference(fixture).tokens;
        let (a, b) = (logits(&linked, &tokens), logits(&imported, &tokens));
        let (kl, max, wrong) = distance(&a, &b);
        eprintln!("{fixture}: linked vs imported: mean KL {kl:.2e}, max {max:.2e} std");
        // The same codes and scales, the same activations. The import stores the embedding and
        // the norms as BF16 where the link reads the file's values (measured: Qwen2 and Gemma 3
        // 0.04-0.05 std, mean KL 3-5e-5); where those are BF16-exact (the llama fixture) only
        // the order of f32 sums differs, so the link's RoPE on adjacent pairs of the rows
        // llama.cpp interleaved computes what the import's un-permuted rows do (measured 9e-7).
        assert!(wrong.is_empty(), "{fixture}: top-1 differs at {wrong:?}");
        let bound = if fixture == "tiny-llama3" { 1e-5 } else { 0.06 };
        assert!(kl < 1e-4 && max < bound, "{fixture}: KL {kl}, max {max}");
    }
}

/// llama.cpp's logits of `gguf` at `tokens` (see llama_cpp_logits.py).
fn llama_cpp_logits(python: &Path, gguf: &Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let out = Command::new(python)
        .arg(gguf_fixtures().join("llama_cpp_logits.py"))
        .arg(gguf)
        .arg(serde_json::to_string(tokens).unwrap())
        .arg("[]")
        .output()
        .expect("run llama_cpp_logits.py");
    assert!(
        out.status.success(),
        "llama_cpp_logits.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn llama_python() -> Option<PathBuf> {
    let python = std::env::var_os("HEARTH_LLAMA_PYTHON").map(PathBuf::from);
    if python.is_none() {
        eprintln!(
            "SKIPPED: HEARTH_LLAMA_PYTHON is not set (npm test sets it; or run \
             HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) cargo test -p hearth-engine --test engine gguf_link::)"
        );
    }
    python
}

#[test]
fn linked_q8_0_ggufs_match_llama_cpp() {
    let Some(python) = llama_python() else { return };
    for (fixture, gguf) in Q8_0_FIXTURES {
        let tmp = tempfile::tempdir().unwrap();
        let gguf = gguf_fixtures().join(gguf);
        let tokens = common::reference(fixture).tokens;
        let ours = logits(&link(&gguf, tmp.path()), &tokens);
        let theirs = llama_cpp_logits(&python, &gguf, &tokens);
        let (kl, max, wrong) = distance(&ours, &theirs);
        eprintln!("{fixture}: linked vs llama.cpp: mean KL {kl:.2e}, max {max:.2e} std");
        // As llama_cpp_tiny.rs bounds the imports of the same files.
        assert!(wrong.is_empty(), "{fixture}: top-1 differs at {wrong:?}");
        assert!(kl < 1e-3, "{fixture}: mean KL {kl}");
        let bound = if fixture == "tiny-gemma3-swa6" {
            0.25
        } else {
            0.15
        };
        assert!(max < bound, "{fixture}: {max} std from llama.cpp");
    }
}

/// A deterministic value in [-1, 1) from a counter (SplitMix64).
fn noise(state: &mut u64) -> f32 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// An F32 Qwen2 GGUF with the tiny Qwen2 fixture's vocabulary and tokenizer, hidden 256, 4
/// heads of 64 (2 KV heads), an MLP of 512, 2 layers, an untied head, and fixed random weights.
fn write_f32_qwen2(path: &Path) {
    let source = GgufFile::open(&gguf_fixtures().join("tiny-qwen2-q8_0.gguf")).unwrap();
    let h = source.header();
    let (hidden, ffn, layers, heads, kv_heads, head_dim) = (256u64, 512u64, 2u32, 4u32, 2u32, 64);
    let vocab = h.tensor("token_embd.weight").unwrap().dims[1];
    let mut w = GgufWriter::new(3);
    for (key, value) in &h.metadata {
        let value = match key.as_str() {
            "qwen2.embedding_length" => Value::U32(hidden as u32),
            "qwen2.feed_forward_length" => Value::U32(ffn as u32),
            "qwen2.block_count" => Value::U32(layers),
            "qwen2.attention.head_count" => Value::U32(heads),
            "qwen2.attention.head_count_kv" => Value::U32(kv_heads),
            "qwen2.attention.key_length"
            | "qwen2.attention.value_length"
            | "qwen2.rope.dimension_count" => Value::U32(head_dim),
            "general.file_type" => Value::U32(0),
            _ => value.clone(),
        };
        w.kv(key, value);
    }
    let mut state = 49;
    let mut f32s = |n: u64, scale: f32, offset: f32| -> Vec<u8> {
        (0..n)
            .flat_map(|_| (offset + scale * noise(&mut state)).to_le_bytes())
            .collect()
    };
    let (q, kv) = (u64::from(heads) * 64, u64::from(kv_heads) * 64);
    w.tensor(
        "token_embd.weight",
        &[hidden, vocab],
        GgmlType::F32,
        &f32s(hidden * vocab, 1.0, 0.0),
    );
    w.tensor(
        "output_norm.weight",
        &[hidden],
        GgmlType::F32,
        &f32s(hidden, 0.1, 1.0),
    );
    w.tensor(
        "output.weight",
        &[hidden, vocab],
        GgmlType::F32,
        &f32s(hidden * vocab, 0.2, 0.0),
    );
    let linear = 1.5 / (hidden as f32).sqrt();
    for l in 0..layers {
        let p = format!("blk.{l}");
        let f = GgmlType::F32;
        w.tensor(
            &format!("{p}.attn_norm.weight"),
            &[hidden],
            f,
            &f32s(hidden, 0.1, 1.0),
        );
        w.tensor(
            &format!("{p}.attn_q.weight"),
            &[hidden, q],
            f,
            &f32s(hidden * q, linear, 0.0),
        );
        w.tensor(&format!("{p}.attn_q.bias"), &[q], f, &f32s(q, 0.2, 0.0));
        w.tensor(
            &format!("{p}.attn_k.weight"),
            &[hidden, kv],
            f,
            &f32s(hidden * kv, linear, 0.0),
        );
        w.tensor(&format!("{p}.attn_k.bias"), &[kv], f, &f32s(kv, 0.2, 0.0));
        w.tensor(
            &format!("{p}.attn_v.weight"),
            &[hidden, kv],
            f,
            &f32s(hidden * kv, linear, 0.0),
        );
        w.tensor(&format!("{p}.attn_v.bias"), &[kv], f, &f32s(kv, 0.2, 0.0));
        w.tensor(
            &format!("{p}.attn_output.weight"),
            &[q, hidden],
            f,
            &f32s(q * hidden, linear, 0.0),
        );
        w.tensor(
            &format!("{p}.ffn_norm.weight"),
            &[hidden],
            f,
            &f32s(hidden, 0.1, 1.0),
        );
        w.tensor(
            &format!("{p}.ffn_gate.weight"),
            &[hidden, ffn],
            f,
            &f32s(hidden * ffn, linear, 0.0),
        );
        w.tensor(
            &format!("{p}.ffn_up.weight"),
            &[hidden, ffn],
            f,
            &f32s(hidden * ffn, linear, 0.0),
        );
        let down = 1.5 / (ffn as f32).sqrt();
        w.tensor(
            &format!("{p}.ffn_down.weight"),
            &[ffn, hidden],
            f,
            &f32s(ffn * hidden, down, 0.0),
        );
    }
    std::fs::write(path, w.finish()).unwrap();
}

#[test]
fn linked_ggufs_in_every_block_type_match_llama_cpp() {
    let Some(python) = llama_python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let f32_file = tmp.path().join("qwen2-f32.gguf");
    write_f32_qwen2(&f32_file);
    let tokens = common::reference("tiny-qwen2").tokens;
    // llama.cpp's file types, and the block types each must hold.
    let cases: [(u32, &str, &[GgmlType]); 7] = [
        (2, "Q4_0", &[GgmlType::Q4_0]),
        (3, "Q4_1", &[GgmlType::Q4_1]),
        (8, "Q5_0", &[GgmlType::Q5_0]),
        (9, "Q5_1", &[GgmlType::Q5_1]),
        (15, "Q4_K_M", &[GgmlType::Q4_K, GgmlType::Q6_K]),
        (17, "Q5_K_M", &[GgmlType::Q5_K, GgmlType::Q6_K]),
        (18, "Q6_K", &[GgmlType::Q6_K]),
    ];
    let mut failures = Vec::new();
    for (ftype, name, kinds) in cases {
        let gguf = tmp.path().join(format!("qwen2-{name}.gguf"));
        let out = Command::new(&python)
            .arg(gguf_fixtures().join("llama_cpp_quantize.py"))
            .args([&f32_file, &gguf])
            .arg(ftype.to_string())
            .output()
            .expect("run llama_cpp_quantize.py");
        assert!(
            out.status.success(),
            "llama_cpp_quantize.py {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let held: Vec<GgmlType> = GgufFile::open(&gguf)
            .unwrap()
            .header()
            .tensors
            .iter()
            .map(|t| t.kind)
            .collect();
        for kind in kinds {
            assert!(held.contains(kind), "{name}: no {kind} tensor in {held:?}");
        }
        let dir = tmp.path().join(name);
        q4nx::gguf::link_gguf(&gguf, &dir, &mut |_| {}).expect("link");
        let ours = logits(&dir, &tokens);
        if kinds.contains(&GgmlType::Q4_K) || kinds.contains(&GgmlType::Q6_K) {
            // The huge-page copy's groups of 8 rows and the file's rows: the same bits.
            assert_eq!(
                ours,
                logits_from(&dir, &tokens, true),
                "{name}: grouped vs mapped"
            );
            assert_rows_regrouped(&dir);
        }
        let theirs = llama_cpp_logits(&python, &gguf, &tokens);
        let (kl, max, wrong) = distance(&ours, &theirs);
        eprintln!(
            "{name}: linked vs llama.cpp: mean KL {kl:.2e}, max {max:.2e} std, confident \
             top-1 different at {wrong:?}"
        );
        if !(wrong.is_empty() && kl < 1e-3 && max < 0.15) {
            failures.push(format!(
                "{name}: KL {kl:.2e}, max {max:.2e}, top-1 {wrong:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
