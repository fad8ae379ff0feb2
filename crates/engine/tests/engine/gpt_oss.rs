//! gpt-oss on the tiny random GptOssForCausalLM of `tests/fixtures/engine/generate_gpt_oss.py`
//! (sinks, sliding layers of 4 around a full one, YaRN, 4 experts with biases, 2 per token, a
//! clamped SwiGLU), beyond `reference.rs`'s logits and greedy continuation against
//! transformers: `hearth convert` of transformers' own files (3-D experts) and of the released
//! MXFP4 form; the Q4NX model against its own weights dequantized; one token at a time (the
//! sliding window read from the cache) against a prefill; the sinks taking part; parameters
//! counted as transformers counts them; a missing sink or bias refused in words.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::dequantized::write_dequantized;
use common::moe::{decode_speed, decoded_logits};
use common::{fixture, max_relative_error, reference};
use hearth_engine::{LoadOptions, Model};
use q4nx::{ConvertOptions, Tensor, Weights};

const NAME: &str = "tiny-gpt-oss";

/// Q4NX against its own weights dequantized, relative to each row's largest logit: the int8
/// activations' rounding (`q4nx_weights.rs`).
const Q4NX_TOLERANCE: f32 = 0.1;

fn load(dir: &Path) -> Model {
    Model::load(dir, &LoadOptions::default()).expect("model loads")
}

fn convert(src: &Path, dst: &Path) {
    q4nx::convert(src, dst, &ConvertOptions::default(), &mut |_| {}).expect("converts");
}

/// The fixture's files (not its `transformers/` folder) copied into a temporary folder.
fn copy_files(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    dir
}

/// Reads a safetensors file's tensors as (dtype, shape, bytes).
fn read_safetensors(path: &Path) -> BTreeMap<String, (String, Vec<usize>, Vec<u8>)> {
    let file = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&file[8..8 + len]).unwrap();
    let data = &file[8 + len..];
    header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| {
            let [start, end] = [0, 1].map(|i| v["data_offsets"][i].as_u64().unwrap() as usize);
            let shape = v["shape"].as_array().unwrap();
            (
                k.clone(),
                (
                    v["dtype"].as_str().unwrap().to_owned(),
                    shape.iter().map(|d| d.as_u64().unwrap() as usize).collect(),
                    data[start..end].to_vec(),
                ),
            )
        })
        .collect()
}

fn write_safetensors(path: &Path, tensors: &BTreeMap<String, (String, Vec<usize>, Vec<u8>)>) {
    let (mut header, mut data) = (serde_json::Map::new(), Vec::new());
    for (name, (dtype, shape, bytes)) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let json = serde_json::to_vec(&header).unwrap();
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&json);
    file.extend_from_slice(&data);
    std::fs::write(path, file).unwrap();
}

/// transformers' own files (each layer's experts as 3-D `gate_up_proj`, gate and up
/// interleaved and stored inputs first, and `down_proj`) convert to exactly the bytes the same
/// values under Hearth's names convert to: the split is transformers' layout.
#[test]
fn converting_transformers_files_splits_the_experts_as_transformers_lays_them_out() {
    let tmp = tempfile::tempdir().unwrap();
    let (from_hf, from_canonical) = (tmp.path().join("hf"), tmp.path().join("canonical"));
    convert(&fixture(NAME).join("transformers"), &from_hf);
    convert(&fixture(NAME), &from_canonical);
    let (a, b) = (
        read_safetensors(&from_hf.join("model.q4nx")),
        read_safetensors(&from_canonical.join("model.q4nx")),
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, tensor) in &a {
        assert!(tensor == &b[name], "{name} differs");
    }
    assert!(a.contains_key("model.layers.2.mlp.experts.3.up_proj.bias"));
}

/// The released checkpoints' MXFP4 experts (`*_blocks` codes, `*_scales` E8M0 exponents,
/// rows = outputs) are dequantized at conversion and quantized as the other linears: with
/// random codes and scales in place of the fixture's experts, every converted expert matrix
/// holds the values the codes mean (E2M1 times 2^(scale - 127), gate and up from the even and
/// odd rows) within Q4_1's rounding.
#[test]
fn mxfp4_experts_are_dequantized_at_conversion() {
    const E2M1: [f32; 16] = [
        0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
    ];
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("mxfp4");
    std::fs::create_dir(&src).unwrap();
    let hf = fixture(NAME).join("transformers");
    std::fs::copy(hf.join("config.json"), src.join("config.json")).unwrap();
    let mut tensors = read_safetensors(&hf.join("model.safetensors"));
    let (experts, hidden, width) = (4, 64, 32);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // (layer, proj) -> (codes, scales, rows, cols)
    let mut made = BTreeMap::new();
    for layer in 0..3 {
        for (proj, rows, cols) in [
            ("gate_up_proj", 2 * width, hidden),
            ("down_proj", hidden, width),
        ] {
            let p = format!("model.layers.{layer}.mlp.experts.{proj}");
            tensors.remove(&p).expect("a 3-D expert tensor");
            let codes: Vec<u8> = (0..experts * rows * cols / 2)
                .map(|_| next() as u8)
                .collect();
            let scales: Vec<u8> = (0..experts * rows * cols / 32)
                .map(|_| 124 + (next() % 5) as u8)
                .collect();
            let g = cols / 32;
            tensors.insert(
                format!("{p}_blocks"),
                ("U8".into(), vec![experts, rows, g, 16], codes.clone()),
            );
            tensors.insert(
                format!("{p}_scales"),
                ("U8".into(), vec![experts, rows, g], scales.clone()),
            );
            made.insert((layer, proj), (codes, scales, rows, cols));
        }
    }
    write_safetensors(&src.join("model.safetensors"), &tensors);
    let q4 = tmp.path().join("q4nx");
    convert(&src, &q4);
    let weights = Weights::open(&q4).unwrap();
    for ((layer, proj), (codes, scales, rows, cols)) in &made {
        let value = |e: usize, r: usize, c: usize| {
            let byte = codes[((e * rows + r) * cols + c) / 2];
            let code = if c.is_multiple_of(2) {
                byte & 15
            } else {
                byte >> 4
            };
            let scale = scales[(e * rows + r) * (cols / 32) + c / 32];
            E2M1[code as usize] * 2f32.powi(i32::from(scale) - 127)
        };
        for e in 0..experts {
            let parts: &[(&str, usize, usize)] = if *proj == "down_proj" {
                &[("down_proj", 1, 0)]
            } else {
                &[("gate_proj", 2, 0), ("up_proj", 2, 1)]
            };
            for &(part, step, offset) in parts {
                let name = format!("model.layers.{layer}.mlp.experts.{e}.{part}.weight");
                let Ok(Tensor::Q4_1(m)) = weights.get(&name) else {
                    panic!("{name} is Q4_1 tiles");
                };
                let got = m.dequantize();
                for r in 0..rows / step {
                    for group in 0..cols / 32 {
                        let want: Vec<f32> = (group * 32..(group + 1) * 32)
                            .map(|c| value(e, r * step + offset, c))
                            .collect();
                        // Q4_1: half a step of (max - min) / 15, and the BF16 rounding of the
                        // group's scale and minimum.
                        let (lo, hi) = want
                            .iter()
                            .fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                        let bound = (hi - lo) / 30.0 + (hi.abs() + lo.abs()) / 128.0 + 1e-6;
                        for (i, want) in want.iter().enumerate() {
                            let have = got[r * m.cols + group * 32 + i];
                            assert!(
                                (have - want).abs() <= bound,
                                "{name}[{r}, {}]: {have} vs {want} (bound {bound})",
                                group * 32 + i
                            );
                        }
                    }
                }
            }
        }
    }
    // And the model runs.
    let logits = load(&q4).logits(&[1, 2, 3]).unwrap();
    assert!(logits.iter().flatten().all(|v| v.is_finite()));
}

/// The 24 tokens run 6 times past the window of 4: decoding reads the sliding layers' window
/// from the cache as a prefill computes it.
#[test]
fn decode_and_prefill_give_the_same_logits() {
    let reference = reference(NAME);
    let tmp = tempfile::tempdir().unwrap();
    let q4 = tmp.path().join("q4nx");
    convert(&fixture(NAME), &q4);
    for (dir, bound) in [(fixture(NAME), 1e-5), (q4, 1e-3)] {
        let prefill = load(&dir).logits(&reference.tokens).expect("logits");
        let decode = decoded_logits(&mut load(&dir), &reference.tokens);
        let error = max_relative_error(&decode, &prefill);
        eprintln!("{dir:?}: decode vs prefill {error:.3e}");
        assert!(
            error <= bound,
            "{dir:?}: decode differs from prefill by {error}"
        );
    }
}

/// The experts and biases are quantized or kept BF16 as the other linears and vectors; the
/// Q4NX model is held to its dequantized weights as every family is, and its distance to
/// transformers on the original weights (the 4-bit rounding itself) printed and bounded
/// loosely.
#[test]
fn q4nx_matches_its_dequantized_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let (q4, dense) = (tmp.path().join("q4nx"), tmp.path().join("dequantized"));
    convert(&fixture(NAME).join("transformers"), &q4);
    let weights = Weights::open(&q4).unwrap();
    assert!(matches!(
        weights.get("model.layers.1.mlp.router.weight"),
        Ok(Tensor::Dense(t)) if t.dtype == q4nx::Dtype::Bf16 && t.shape == [4, 64]
    ));
    write_dequantized(&q4, &fixture(NAME), &dense, None);
    let reference = reference(NAME);
    let q_logits = load(&q4).logits(&reference.tokens).unwrap();
    let d_logits = load(&dense).logits(&reference.tokens).unwrap();
    let error = max_relative_error(&q_logits, &d_logits);
    let quantization = max_relative_error(&q_logits, &reference.logits);
    eprintln!(
        "{NAME}: q4nx vs its dequantized weights {error:.3e}; vs transformers on the original \
         weights (quantization error) {quantization:.3e}"
    );
    assert!(error <= Q4NX_TOLERANCE, "q4nx path differs by {error}");
    assert!(
        quantization < 1.0,
        "Q4_1 weights changed the logits by {quantization}"
    );
}

/// The sinks take part: with layer 0's sinks far below every score (weight 0), the logits
/// move away from transformers'.
#[test]
fn the_sinks_take_part() {
    let reference = reference(NAME);
    let dir = copy_files(NAME);
    let path = dir.path().join("model.safetensors");
    let mut tensors = read_safetensors(&path);
    let (dtype, _, bytes) = tensors.get_mut("model.layers.0.self_attn.sinks").unwrap();
    assert_eq!(dtype, "BF16");
    let minus = half::bf16::from_f32(-1e4).to_le_bytes();
    bytes
        .chunks_exact_mut(2)
        .for_each(|b| b.copy_from_slice(&minus));
    write_safetensors(&path, &tensors);
    let logits = load(dir.path()).logits(&reference.tokens).unwrap();
    let error = max_relative_error(&logits, &reference.logits);
    assert!(error > 1e-2, "without sinks the logits moved only {error}");
}

/// transformers' `num_parameters()`: embedding and head 320x64 each; per layer q 64x64 + 64,
/// k and v 32x64 + 32, o 64x64 + 64, 4 sinks, two norms of 64, a router 4x64 + 4 and 4
/// experts of gate_up 64x64 + 64 and down 32x64 + 64; the final norm.
#[test]
fn parameters_are_counted_as_transformers_counts_them() {
    let model = load(&fixture(NAME));
    assert_eq!(model.info().family, "gpt-oss");
    let attention = (64 * 64 + 64) + 2 * (32 * 64 + 32) + (64 * 64 + 64) + 4 + 2 * 64;
    let experts = (4 * 64 + 4) + 4 * ((64 * 64 + 64) + (32 * 64 + 64));
    let expected = 2 * 320 * 64 + 3 * (attention + experts) + 64;
    assert_eq!(model.info().parameter_count, expected);
}

#[test]
fn a_missing_sink_or_bias_is_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let q4 = tmp.path().join("q4nx");
    convert(&fixture(NAME), &q4);
    for missing in [
        "model.layers.1.self_attn.sinks",
        "model.layers.2.self_attn.o_proj.bias",
        "model.layers.0.mlp.router.bias",
        "model.layers.2.mlp.experts.1.down_proj.bias",
    ] {
        let broken = tmp.path().join(missing);
        write_dequantized(&q4, &fixture(NAME), &broken, Some(missing));
        let e = Model::load(&broken, &LoadOptions::default())
            .expect_err("refused")
            .to_string();
        assert!(e.contains(missing), "{e}");
        // And conversion refuses it too, naming it.
        std::fs::copy(
            fixture(NAME).join("config.json"),
            broken.join("config.json"),
        )
        .unwrap();
        let e = q4nx::convert(
            &broken,
            &tmp.path().join("out"),
            &Default::default(),
            &mut |_| {},
        )
        .expect_err("refused")
        .to_string();
        assert!(e.contains(missing), "{e}");
    }
    // A transformers checkpoint whose experts' tensor has another shape is named.
    let src = tmp.path().join("bad-hf");
    std::fs::create_dir(&src).unwrap();
    let hf = fixture(NAME).join("transformers");
    std::fs::copy(hf.join("config.json"), src.join("config.json")).unwrap();
    let mut tensors = read_safetensors(&hf.join("model.safetensors"));
    let down = tensors
        .get_mut("model.layers.1.mlp.experts.down_proj")
        .unwrap();
    down.1 = vec![4, 64, 32];
    write_safetensors(&src.join("model.safetensors"), &tensors);
    let e = q4nx::convert(
        &src,
        &tmp.path().join("out2"),
        &Default::default(),
        &mut |_| {},
    )
    .expect_err("refused")
    .to_string();
    assert!(e.contains("model.layers.1.mlp.experts.down_proj"), "{e}");
    assert!(e.contains("[4, 32, 64]"), "{e}");
}

/// Decode speed on 4 layers of gpt-oss-20b's real shape with random weights (hidden 2880, 64
/// heads of 64 over 8 KV heads, 32 experts of 2880, 4 per token, the 201 088-token head),
/// printed with the bytes a decoded token reads (attention, the router and 4 experts per
/// layer, the head: 721 MB). Opt-in, as it writes about 3.7 GB (the BF16 embedding 1.2 GB,
/// the experts 2.1 GB): `cargo test -p hearth-engine --release --test engine gpt_oss:: -- --ignored
/// --nocapture`; `HEARTH_THREADS` sets the threads. Measured on the shared 2-core host while
/// other builds ran: decode 8.4-11.1 tok/s at 1 thread, 6.3-8.3 at 2 (4.5-8.0 GB/s).
#[test]
#[ignore = "writes 3.7 GB of model and times it"]
fn speed_on_four_layers_of_gpt_oss_20b() {
    let (hidden, heads, kv_heads, head_dim, width, experts, used, vocab, layers) =
        (2880, 64, 8, 64, 2880, 32, 4, 201_088, 4);
    let config = serde_json::json!({
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": head_dim, "intermediate_size": width,
        "num_local_experts": experts, "num_experts_per_tok": used, "vocab_size": vocab,
        "sliding_window": 128, "max_position_embeddings": 131072, "tie_word_embeddings": false,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
            "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,
            "original_max_position_embeddings": 4096}
    })
    .to_string();
    // Q4_1 tiles: 5120 bytes per 32 x 256 weights (K padded to 256).
    let q4 = |rows: usize, cols: usize| (rows * cols.div_ceil(256) * 256) as f64 * 5120.0 / 8192.0;
    let attention = q4((heads + 2 * kv_heads) * head_dim, hidden) + q4(hidden, heads * head_dim);
    let chosen = used as f64 * (2.0 * q4(width, hidden) + q4(hidden, width));
    let router = (experts * hidden * 2) as f64;
    let per_token = layers as f64 * (attention + chosen + router) + q4(vocab, hidden);
    decode_speed("gpt-oss", &config, per_token);
}
