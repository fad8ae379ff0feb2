//! FastFlowLM's own `model.q4nx` layouts of Phi-4, LFM2, Qwen2 and Gemma 3 (as its converter
//! writes them from a GGUF, `q4nx/models/{phi4,lfm2,qwen2,gemma3}.py` with their
//! `configs/*.json`), built here from the tiny checkpoints, run on the CPU engine from the same
//! files:
//!
//! - **phi4**: q/k/v and gate/up split (Hearth runs Phi-3's fused matrices), `rope.short.weight`
//!   and `rope.long.weight` beside them, no Hearth metadata. Made from `hearth convert`'s tiles of
//!   `tiny-phi3` cut along their row blocks: the engine must compute exactly the same logits.
//! - **lfm2**: llama.cpp's names under `model.` (`model.token_embd.weight`, `shortconv.*`,
//!   `mlp.*`, ...), kernels squeezed to `[hidden, width]`, and Q4_0: signed codes in Q4_1-shaped
//!   tiles with every min 0 (FastFlowLM's default type for LFM2), quantized as ggml's Q4_0 from
//!   `tiny-lfm2`'s f32 weights. Against the engine on a safetensors folder of exactly those
//!   weights dequantized, within the tolerance of `q4nx_weights.rs` (the Q4 kernels round each
//!   activation to 8 bits; a tile read wrongly, e.g. unsigned, moves the logits far more).
//! - **gemma3**: `hearth convert`'s tiles of `tiny-gemma3` under the same names, no metadata,
//!   every norm stored as llama.cpp's `1 + w` and the embedding multiplied by √hidden, both
//!   rounded to BF16 from the f32 weights as FastFlowLM rounds them. Against `hearth convert`'s
//!   own file of the same tiles: only those roundings differ.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{fixture, max_relative_error, reference};
use half::{bf16, f16};
use hearth_engine::{LoadOptions, Model};
use q4nx::container::{encode_header, EntryToWrite};
use q4nx::tile::{pack_q4_1_tile, GROUP, GROUPS_PER_TILE, TILE_COLS, TILE_ROWS};
use q4nx::{ConvertOptions, Dtype, Tensor, Weights};

/// `q4nx_weights.rs`'s bound: the Q4 kernels' 8-bit activations on these tiny random models.
const TOLERANCE: f32 = 0.1;

/// A tensor to write: name, dtype, shape, bytes.
type Written = (String, Dtype, Vec<usize>, Vec<u8>);
type Tensors = Vec<Written>;
/// A change made to one written tensor.
type Edit = fn(&mut Written);

/// Writes `tensors` (name, dtype, shape, bytes) as a safetensors container named `file` in
/// `dir`, in the given order, with no metadata (as FastFlowLM's `save_file` writes it).
fn write_container(dir: &Path, file: &str, tensors: &Tensors) {
    write_container_with(dir, file, tensors, &BTreeMap::new());
}

/// [`write_container`] with `metadata`.
fn write_container_with(
    dir: &Path,
    file: &str,
    tensors: &Tensors,
    metadata: &BTreeMap<String, String>,
) {
    let entries: Vec<EntryToWrite> = tensors
        .iter()
        .map(|(name, dtype, shape, _)| EntryToWrite {
            name: name.clone(),
            dtype: *dtype,
            shape: shape.clone(),
        })
        .collect();
    let mut out = encode_header(&entries, metadata);
    for (_, _, _, bytes) in tensors {
        out.extend_from_slice(bytes);
    }
    std::fs::write(dir.join(file), out).unwrap();
}

fn copy_text_files(from: &Path, to: &Path) {
    for file in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        if from.join(file).exists() {
            std::fs::copy(from.join(file), to.join(file)).unwrap();
        }
    }
}

fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
        .collect()
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The phi4 layout: every tensor of `hearth convert`'s Q4NX of tiny-phi3, the fused matrices
/// cut into FastFlowLM's parts (whole row blocks of their tiles), the LongRoPE lists as BF16.
/// Written into `flm`, after `edit` changed the tensor list; `hearth` holds the conversion.
fn write_phi4(hearth: &Path, flm: &Path, edit: impl FnOnce(&mut Tensors)) {
    q4nx::convert(
        &fixture("tiny-phi3"),
        hearth,
        &ConvertOptions::default(),
        &mut |_| {},
    )
    .expect("converts");
    std::fs::create_dir_all(flm).unwrap();
    copy_text_files(hearth, flm);
    let config = q4nx::ModelConfig::from_path(&hearth.join("config.json")).unwrap();
    let weights = Weights::open(hearth).unwrap();
    let mut tensors = Vec::new();
    let mut split = 0;
    for name in weights.names() {
        match weights.get(name).unwrap() {
            Tensor::Dense(t) => {
                tensors.push((name.to_string(), t.dtype, t.shape.clone(), t.bytes.to_vec()))
            }
            Tensor::Q4_1(m) | Tensor::Q8(m) => {
                let tile = m.bytes.len() / (m.rows / TILE_ROWS * (m.cols / TILE_COLS));
                let block = m.cols / TILE_COLS * tile;
                let parts: Vec<(String, usize)> = if name.ends_with("qkv_proj.weight") {
                    let (q, kv) = (config.q_dim(), config.kv_dim());
                    ["q_proj", "k_proj", "v_proj"]
                        .iter()
                        .zip([q, kv, kv])
                        .map(|(p, rows)| (name.replace("qkv_proj", p), rows))
                        .collect()
                } else if name.ends_with("gate_up_proj.weight") {
                    let i = config.intermediate_size;
                    vec![
                        (name.replace("gate_up_proj", "gate_proj"), i),
                        (name.replace("gate_up_proj", "up_proj"), i),
                    ]
                } else {
                    vec![(name.to_string(), m.rows)]
                };
                split += parts.len() - 1;
                let mut at = 0;
                for (part, rows) in parts {
                    let len = rows / TILE_ROWS * block;
                    let bytes = m.bytes[at..at + len].to_vec();
                    at += len;
                    tensors.push((part, Dtype::I8, vec![len / tile, tile], bytes));
                }
                assert_eq!(at, m.bytes.len());
            }
            other => panic!("{} in a Q4NX file", other.describe()),
        }
    }
    assert_eq!(split, 3 * config.num_hidden_layers);
    let q4nx::RopeScaling::LongRope {
        short_factor,
        long_factor,
        ..
    } = &config.rope_scaling
    else {
        panic!("tiny-phi3 uses LongRoPE")
    };
    for (name, list) in [
        ("rope.short.weight", short_factor),
        ("rope.long.weight", long_factor),
    ] {
        tensors.push((name.into(), Dtype::Bf16, vec![list.len()], bf16_bytes(list)));
    }
    edit(&mut tensors);
    write_container(flm, "model.q4nx", &tensors);
}

#[test]
fn fastflowlm_phi4_layout_runs_as_the_fused_model() {
    let tmp = tempfile::tempdir().unwrap();
    let (hearth, flm) = (tmp.path().join("hearth"), tmp.path().join("flm"));
    write_phi4(&hearth, &flm, |_| {});
    // Complete as a model folder, as `hearth import` and the Hub's pull check it.
    q4nx::validate_dir(&flm).expect("validates");
    let tokens = reference("tiny-phi3").tokens;
    let logits = |dir: &Path| {
        let mut model = Model::load(dir, &LoadOptions::default()).expect("loads");
        assert_eq!(model.info().weight_format, "q4nx");
        model.logits(&tokens).unwrap()
    };
    let (ours, theirs) = (logits(&hearth), logits(&flm));
    let error = max_relative_error(&theirs, &ours);
    eprintln!("tiny-phi3: FastFlowLM's phi4 layout vs the fused Q4NX {error:.1e}");
    assert_eq!(error, 0.0, "the same tiles compute the same logits");
}

/// A part that is not 2-D tiles, or tiles of another kind than its siblings', cannot be fused:
/// refused in words naming the tensor, never a panic.
#[test]
fn fastflowlm_phi4_parts_that_do_not_fuse_are_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let k = "model.layers.0.self_attn.k_proj.weight";
    let cases: [(&str, Edit); 2] = [
        ("2-D tiles", |t| {
            t.1 = Dtype::Bf16;
            t.2 = vec![t.3.len() / 2];
        }),
        ("the same kind", |t| {
            t.2 = vec![1, 8704];
            t.3.resize(8704, 0);
        }),
    ];
    for (i, (says, edit)) in cases.into_iter().enumerate() {
        let (hearth, flm) = (
            tmp.path().join(format!("h{i}")),
            tmp.path().join(format!("f{i}")),
        );
        write_phi4(&hearth, &flm, |tensors| {
            edit(tensors.iter_mut().find(|t| t.0 == k).expect("k_proj"))
        });
        let e = match Model::load(&flm, &LoadOptions::default()) {
            Ok(_) => panic!("parts that do not fuse load"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(k) && e.contains(says) && e.contains("FastFlowLM"),
            "{e}"
        );
    }
}

/// ggml's Q4_0 of one group of 32: `d = max / -8` (max the value of largest magnitude), codes
/// `round(x / d) + 8` clamped to 15; returned as the signed code and d (its f16 rounded to BF16,
/// as FastFlowLM's converter stores it).
fn q4_0_group(values: &[f32]) -> ([i8; GROUP], bf16) {
    let max = values
        .iter()
        .copied()
        .fold(0f32, |m, v| if v.abs() > m.abs() { v } else { m });
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut codes = [0i8; GROUP];
    for (c, &v) in codes.iter_mut().zip(values) {
        *c = ((v * id + 8.5) as i8).min(15) - 8;
    }
    (codes, bf16::from_f32(f16::from_f32(d).to_f32()))
}

/// FastFlowLM's Q4_0 tiles of `w` (`[rows, cols]`): signed codes as nibbles, mins 0, K padded
/// with zero codes and scales; and the values they hold, `[rows, cols]`.
fn q4_0_tiles(w: &[f32], rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
    let padded = cols.div_ceil(TILE_COLS) * TILE_COLS;
    let col_tiles = padded / TILE_COLS;
    let mut tiles = vec![0u8; rows / TILE_ROWS * col_tiles * 5120];
    let mut values = vec![0f32; rows * cols];
    for rb in 0..rows / TILE_ROWS {
        for ct in 0..col_tiles {
            let mut codes = [[0u8; TILE_COLS]; TILE_ROWS];
            let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            let m = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            for r in 0..TILE_ROWS {
                let row = rb * TILE_ROWS + r;
                for g in 0..GROUPS_PER_TILE {
                    let c0 = ct * TILE_COLS + g * GROUP;
                    if c0 >= cols {
                        break;
                    }
                    let group = &w[row * cols + c0..row * cols + c0 + GROUP];
                    let (signed, scale) = q4_0_group(group);
                    d[r][g] = scale;
                    for (i, &s) in signed.iter().enumerate() {
                        codes[r][g * GROUP + i] = (s as u8) & 0x0f;
                        values[row * cols + c0 + i] = f32::from(s) * scale.to_f32();
                    }
                }
            }
            let t = rb * col_tiles + ct;
            pack_q4_1_tile(&codes, &d, &m, &mut tiles[t * 5120..(t + 1) * 5120]);
        }
    }
    (tiles, values)
}

/// FastFlowLM's name of an LFM2 tensor (its `configs/lfm2.json`).
fn flm_lfm2_name(hf: &str) -> String {
    match hf {
        "model.embed_tokens.weight" => return "model.token_embd.weight".into(),
        "model.embedding_norm.weight" => return "model.norm.weight".into(),
        _ => {}
    }
    [
        ("operator_norm", "input_layernorm"),
        ("ffn_norm", "post_attention_layernorm"),
        ("self_attn.out_proj", "self_attn.o_proj"),
        ("self_attn.q_layernorm", "self_attn.q_norm"),
        ("self_attn.k_layernorm", "self_attn.k_norm"),
        ("feed_forward.w1", "mlp.gate_proj"),
        ("feed_forward.w3", "mlp.up_proj"),
        ("feed_forward.w2", "mlp.down_proj"),
        ("conv.in_proj", "shortconv.in_proj"),
        ("conv.out_proj", "shortconv.out_proj"),
        ("conv.conv", "shortconv.conv"),
    ]
    .iter()
    .find(|(h, _)| hf.contains(&format!(".{h}.")))
    .map(|(h, f)| hf.replace(h, f))
    // q_proj, k_proj and v_proj keep their names.
    .unwrap_or_else(|| hf.to_string())
}

#[test]
fn fastflowlm_lfm2_q4_0_layout_runs_as_its_dequantized_weights() {
    q4_0_layout_runs_as_its_dequantized_weights("tiny-lfm2", flm_lfm2_name);
}

/// FastFlowLM's qwen2 files are Q4_0 too, under Hugging Face's names.
#[test]
fn fastflowlm_qwen2_q4_0_layout_runs_as_its_dequantized_weights() {
    q4_0_layout_runs_as_its_dequantized_weights("tiny-qwen2", str::to_string);
}

/// `fixture_name`'s f32 weights written as FastFlowLM's Q4_0 layout (names by `flm_name`, the head
/// from the embedding, 1-sized dimensions squeezed) run on the CPU engine within [`TOLERANCE`]
/// of a safetensors folder of exactly the values those tiles hold.
fn q4_0_layout_runs_as_its_dequantized_weights(fixture_name: &str, flm_name: fn(&str) -> String) {
    let tmp = tempfile::tempdir().unwrap();
    let (flm, dense) = (tmp.path().join("flm"), tmp.path().join("dense"));
    for dir in [&flm, &dense] {
        std::fs::create_dir_all(dir).unwrap();
        copy_text_files(&fixture(fixture_name), dir);
    }
    // The dequantized copy has its own head (FastFlowLM writes lm_head from the embedding).
    let path = dense.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["tie_word_embeddings"] = false.into();
    std::fs::write(&path, config.to_string()).unwrap();

    let source = Weights::open(&fixture(fixture_name)).unwrap();
    let (mut flm_tensors, mut dense_tensors) = (Vec::new(), Vec::new());
    for name in source.names() {
        let Tensor::Dense(t) = source.get(name).unwrap() else {
            panic!("the fixture's tensors are dense")
        };
        // The fixtures hold f32 (tiny-lfm2) or BF16 (tiny-qwen2) values.
        let w: Vec<f32> = match t.dtype {
            Dtype::F32 => t
                .bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            Dtype::Bf16 => t
                .bytes
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            other => panic!("{name}: {other:?}"),
        };
        let linear = t.shape.len() == 2 && name != "model.embed_tokens.weight";
        if linear {
            let (rows, cols) = (t.shape[0], t.shape[1]);
            let (tiles, values) = q4_0_tiles(&w, rows, cols);
            flm_tensors.push((
                flm_name(name),
                Dtype::I8,
                vec![tiles.len() / 5120, 5120],
                tiles,
            ));
            dense_tensors.push((
                name.to_string(),
                Dtype::F32,
                t.shape.clone(),
                f32_bytes(&values),
            ));
            continue;
        }
        // The embedding, norms and kernels in BF16 (kernels squeezed to [hidden, width]).
        let rounded: Vec<f32> = w.iter().map(|&v| bf16::from_f32(v).to_f32()).collect();
        let flm_shape: Vec<usize> = t.shape.iter().copied().filter(|&d| d != 1).collect();
        flm_tensors.push((flm_name(name), Dtype::Bf16, flm_shape, bf16_bytes(&w)));
        dense_tensors.push((
            name.to_string(),
            Dtype::F32,
            t.shape.clone(),
            f32_bytes(&rounded),
        ));
        if name == "model.embed_tokens.weight" && source.get("lm_head.weight").is_err() {
            let (rows, cols) = (t.shape[0], t.shape[1]);
            let (tiles, values) = q4_0_tiles(&w, rows, cols);
            flm_tensors.push((
                "lm_head.weight".into(),
                Dtype::I8,
                vec![tiles.len() / 5120, 5120],
                tiles,
            ));
            dense_tensors.push((
                "lm_head.weight".into(),
                Dtype::F32,
                t.shape.clone(),
                f32_bytes(&values),
            ));
        }
    }
    write_container(&flm, "model.q4nx", &flm_tensors);
    write_container(&dense, "model.safetensors", &dense_tensors);

    q4nx::validate_dir(&flm).expect("validates");
    let reference = reference(fixture_name);
    let mut model = Model::load(&flm, &LoadOptions::default()).expect("FastFlowLM's file loads");
    assert_eq!(model.info().weight_format, "q4nx");
    let ours = model.logits(&reference.tokens).unwrap();
    let mut plain = Model::load(&dense, &LoadOptions::default()).expect("dequantized loads");
    let theirs = plain.logits(&reference.tokens).unwrap();
    let error = max_relative_error(&ours, &theirs);
    let quantization = max_relative_error(&ours, &reference.logits);
    eprintln!(
        "{fixture_name}: FastFlowLM's Q4_0 layout vs its dequantized weights {error:.3e}; vs \
         transformers on the original weights {quantization:.3e}"
    );
    assert!(error <= TOLERANCE, "{error}");
}

/// A value and √hidden to another value.
type Rescale = fn(f32, f32) -> f32;

/// FastFlowLM's Gemma 3 file of `tiny-gemma3` in `flm`: `hearth convert`'s tiles (their head
/// included, which FastFlowLM also writes from the embedding), norms as `1 + w` and the
/// embedding times √hidden, both computed in f32 from the checkpoint and rounded to BF16, no
/// metadata. Beside it, in `same`, Hearth's own layout of exactly those values (norms `v - 1`,
/// the embedding `v / √hidden`, both exact in BF16 here) with Hearth's `producer` mark.
/// `edit` changes FastFlowLM's tensors before they are written. Returns the BF16 values
/// computed for `flm`'s norms and embedding.
fn write_gemma3(
    hearth: &Path,
    flm: &Path,
    same: &Path,
    edit: impl FnOnce(&mut Tensors),
) -> BTreeMap<String, Vec<u16>> {
    q4nx::convert(
        &fixture("tiny-gemma3"),
        hearth,
        &ConvertOptions::default(),
        &mut |_| {},
    )
    .expect("converts");
    for dir in [flm, same] {
        std::fs::create_dir_all(dir).unwrap();
        copy_text_files(hearth, dir);
    }
    let config = q4nx::ModelConfig::from_path(&hearth.join("config.json")).unwrap();
    let root = (config.hidden_size as f32).sqrt();
    assert_eq!(
        root, 8.0,
        "dividing by a power of two keeps the BF16 values exact"
    );
    let source = Weights::open(&fixture("tiny-gemma3")).unwrap();
    let weights = Weights::open(hearth).unwrap();
    let (mut tensors, mut own, mut written) = (Vec::new(), Vec::new(), BTreeMap::new());
    for name in weights.names() {
        match weights.get(name).unwrap() {
            Tensor::Dense(t) => {
                let Tensor::Dense(original) = source.get(name).unwrap() else {
                    panic!("{name} is dense in the checkpoint")
                };
                assert_eq!(original.dtype, Dtype::F32);
                let norm = name.ends_with("norm.weight");
                assert!(norm || name == "model.embed_tokens.weight", "{name}");
                let (to_flm, back): (Rescale, Rescale) = if norm {
                    (|w, _| 1.0 + w, |v, _| v - 1.0)
                } else {
                    (|w, root| w * root, |v, root| v / root)
                };
                let (mut flm_bits, mut own_bits) = (Vec::new(), Vec::new());
                for b in original.bytes.chunks_exact(4) {
                    let w = f32::from_le_bytes(b.try_into().unwrap());
                    let v = bf16::from_f32(to_flm(w, root)).to_f32();
                    let u = back(v, root);
                    assert_eq!(
                        bf16::from_f32(u).to_f32(),
                        u,
                        "{name}: {v} back is not BF16"
                    );
                    flm_bits.push(bf16::from_f32(v).to_bits());
                    own_bits.push(bf16::from_f32(u).to_bits());
                }
                let bytes = |bits: &[u16]| bits.iter().flat_map(|b| b.to_le_bytes()).collect();
                tensors.push((name.into(), Dtype::Bf16, t.shape.clone(), bytes(&flm_bits)));
                own.push((name.into(), Dtype::Bf16, t.shape.clone(), bytes(&own_bits)));
                written.insert(name.to_string(), flm_bits);
            }
            Tensor::Q4_1(m) | Tensor::Q8(m) => {
                let tile = m.bytes.len() / (m.rows / TILE_ROWS * (m.cols / TILE_COLS));
                let shape = vec![m.bytes.len() / tile, tile];
                tensors.push((name.into(), Dtype::I8, shape.clone(), m.bytes.to_vec()));
                own.push((name.into(), Dtype::I8, shape, m.bytes.to_vec()));
            }
            other => panic!("{} in a Q4NX file", other.describe()),
        }
    }
    edit(&mut tensors);
    write_container(flm, "model.q4nx", &tensors);
    let mark = BTreeMap::from([("producer".to_string(), "hearth (test)".to_string())]);
    write_container_with(same, "model.q4nx", &own, &mark);
    written
}

#[test]
fn fastflowlm_gemma3_layout_runs_as_hearths_own_file_of_its_values() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name);
    let (hearth, flm, same) = (dir("hearth"), dir("flm"), dir("same"));
    let written = write_gemma3(&hearth, &flm, &same, |_| {});
    q4nx::validate_dir(&flm).expect("validates");

    // At open, each norm is `v - 1` exactly and the embedding `v / embed_scale`.
    let config = q4nx::ModelConfig::from_path(&flm.join("config.json")).unwrap();
    let scale = config.gemma3.as_ref().unwrap().embed_scale;
    let weights = Weights::open(&flm).unwrap();
    for (name, bits) in &written {
        let Tensor::Dense(t) = weights.get(name).unwrap() else {
            panic!("{name} is dense")
        };
        let mut values = vec![0f32; bits.len()];
        assert!(q4nx::dtype::decode_f32(t.dtype, t.bytes, &mut values));
        for (v, &b) in values.iter().zip(bits) {
            let stored = bf16::from_bits(b).to_f32();
            if name.ends_with("norm.weight") {
                assert_eq!(v + 1.0, stored, "{name}");
            } else {
                // F16's step: 2^-11 relative, 2^-24 absolute among its subnormals.
                let back = v * scale;
                let step = (stored.abs() / 2048.0).max(scale * 2f32.powi(-25));
                assert!((back - stored).abs() <= step, "{name}: {back} {stored}");
            }
        }
    }

    let tokens = reference("tiny-gemma3").tokens;
    let logits = |dir: &Path| {
        let mut model = Model::load(dir, &LoadOptions::default()).expect("loads");
        assert_eq!(model.info().weight_format, "q4nx");
        model.logits(&tokens).unwrap()
    };
    let theirs = logits(&flm);
    let error = max_relative_error(&theirs, &logits(&same));
    let rounding = max_relative_error(&theirs, &logits(&hearth));
    eprintln!(
        "tiny-gemma3: FastFlowLM's layout vs Hearth's layout of its values {error:.1e}; vs \
         hearth convert's file of the checkpoint {rounding:.1e} (BF16 of 1 + w in every norm)"
    );
    // The same values, but for F16's rounding of the embedding's smallest values (under
    // 2^-14 · 8, the F16 subnormals): measured 0.
    assert!(error <= 1e-4, "{error}");
}

/// Rows and columns of FastFlowLM's gpt-oss tiles.
const HALF_COLS: usize = 128;
/// Bytes of one.
const HALF_TILE: usize = 2560;

/// ggml's MXFP4 magnitudes doubled.
const E2M1_DOUBLED: [f32; 8] = [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0];

/// FastFlowLM's 32 x 128 tiles of `w` (`[rows, cols]`, rows a multiple of 32), `[row block]
/// [column tile]`, quantized as `mxfp4` (ggml's `quantize_row_mxfp4_ref`: scale byte
/// `floor(log2(amax)) - 2 + 127`, nearest doubled E2M1 value) or as Q4_1 (min and max of each
/// group, BF16 scale and min); and the values they hold, `[rows, cols]`.
fn half_tiles(w: &[f32], rows: usize, cols: usize, mxfp4: bool) -> (Vec<Vec<Vec<u8>>>, Vec<f32>) {
    let halves = cols.div_ceil(HALF_COLS);
    let mut tiles = vec![vec![vec![0u8; HALF_TILE]; halves]; rows / TILE_ROWS];
    let mut values = vec![0f32; rows * cols];
    for row in 0..rows {
        let (rb, r) = (row / TILE_ROWS, row % TILE_ROWS);
        for c0 in (0..cols).step_by(GROUP) {
            let (tile, g) = (&mut tiles[rb][c0 / HALF_COLS], (c0 % HALF_COLS) / GROUP);
            let group = &w[row * cols + c0..row * cols + c0 + GROUP];
            let codes: Vec<u8> = if mxfp4 {
                let amax = group.iter().fold(0f32, |m, v| m.max(v.abs()));
                let e = if amax > 0.0 {
                    (amax.log2().floor() - 2.0 + 127.0) as u8
                } else {
                    0
                };
                let d = 2f32.powi(i32::from(e) - 128);
                tile[g * TILE_ROWS + r] = e;
                group
                    .iter()
                    .map(|&x| {
                        let value = |i: u8| {
                            let m = E2M1_DOUBLED[usize::from(i & 7)] * d;
                            if i & 8 != 0 {
                                -m
                            } else {
                                m
                            }
                        };
                        let best = (0..16u8)
                            .min_by(|&a, &b| {
                                (value(a) - x)
                                    .abs()
                                    .partial_cmp(&(value(b) - x).abs())
                                    .unwrap()
                            })
                            .unwrap();
                        (best, value(best))
                    })
                    .enumerate()
                    .map(|(i, (code, v))| {
                        values[row * cols + c0 + i] = v;
                        code
                    })
                    .collect()
            } else {
                let min = group.iter().copied().fold(f32::INFINITY, f32::min);
                let max = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let (d, m) = (bf16::from_f32((max - min) / 15.0), bf16::from_f32(min));
                let j = g * TILE_ROWS + r;
                tile[2 * j..2 * j + 2].copy_from_slice(&d.to_le_bytes());
                tile[256 + 2 * j..258 + 2 * j].copy_from_slice(&m.to_le_bytes());
                let (d, m) = (d.to_f32(), m.to_f32());
                group
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| {
                        let q = if d > 0.0 {
                            ((x - m) / d).round().clamp(0.0, 15.0)
                        } else {
                            0.0
                        };
                        values[row * cols + c0 + i] = q * d + m;
                        q as u8
                    })
                    .collect()
            };
            for (i, code) in codes.into_iter().enumerate() {
                let c = c0 % HALF_COLS + i;
                tile[512 + (r / 16) * 1024 + c * 8 + (r % 16) / 2] |= code << (4 * (r % 2));
            }
        }
    }
    (tiles, values)
}

/// `tiles` (`[row block][column tile]`) as FastFlowLM regroups them: row blocks padded with
/// zero tiles to a multiple of `pad`, then in groups of `group`, each group's column tiles in
/// turn: tile (rb, c) at `((rb / group) * C + c) * group + rb % group`.
fn regrouped(tiles: &[Vec<Vec<u8>>], pad: usize, group: usize) -> (Vec<usize>, Vec<u8>) {
    let halves = tiles[0].len();
    let row_blocks = tiles.len().div_ceil(pad) * pad;
    let mut out = vec![0u8; row_blocks * halves * HALF_TILE];
    for (rb, row) in tiles.iter().enumerate() {
        for (c, tile) in row.iter().enumerate() {
            let at = ((rb / group) * halves + c) * group + rb % group;
            out[at * HALF_TILE..(at + 1) * HALF_TILE].copy_from_slice(tile);
        }
    }
    (vec![row_blocks / group, halves, group, HALF_TILE], out)
}

/// FastFlowLM's gpt-oss file of `tiny-gpt-oss` in `flm`, and in `dense` the engine's
/// canonical safetensors of exactly the values its tiles hold (the rest BF16 as in the
/// checkpoint). Attention and head Q4_1, experts MXFP4, as FastFlowLM packs them. Its blocked
/// router copy, which needs 16 experts (the tiny model has 4) and which Hearth drops, is left
/// out.
fn write_gpt_oss(flm: &Path, dense: &Path) {
    for dir in [flm, dense] {
        std::fs::create_dir_all(dir).unwrap();
        copy_text_files(&fixture("tiny-gpt-oss"), dir);
    }
    let config = q4nx::ModelConfig::from_path(&flm.join("config.json")).unwrap();
    let moe = config.moe.clone().unwrap();
    let (hidden, width, experts) = (
        config.hidden_size,
        moe.expert_intermediate_size,
        moe.experts,
    );
    let source = Weights::open(&fixture("tiny-gpt-oss")).unwrap();
    let read = |name: &str| -> (Vec<usize>, Vec<f32>) {
        let Tensor::Dense(t) = source.get(name).unwrap() else {
            panic!("{name} is dense")
        };
        assert_eq!(t.dtype, Dtype::Bf16, "{name}");
        let values = t
            .bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect();
        (t.shape.clone(), values)
    };
    let (mut flm_tensors, mut dense_tensors): (Tensors, Tensors) = (Vec::new(), Vec::new());
    let keep = |flm_name: String, name: &str, flm_tensors: &mut Tensors, dense: &mut Tensors| {
        let (shape, values) = read(name);
        flm_tensors.push((flm_name, Dtype::Bf16, shape.clone(), bf16_bytes(&values)));
        dense.push((name.into(), Dtype::Bf16, shape, bf16_bytes(&values)));
    };
    let q4_1 = |name: &str, pad: usize, group: usize, flm_t: &mut Tensors, dense: &mut Tensors| {
        let (shape, w) = read(name);
        let (tiles, values) = half_tiles(&w, shape[0], shape[1], false);
        let (flm_shape, bytes) = regrouped(&tiles, pad, group);
        flm_t.push((name.into(), Dtype::I8, flm_shape, bytes));
        dense.push((name.into(), Dtype::F32, shape, f32_bytes(&values)));
    };
    keep(
        "model.embed_tokens.weight".into(),
        "model.embed_tokens.weight",
        &mut flm_tensors,
        &mut dense_tensors,
    );
    keep(
        "model.norm.weight".into(),
        "model.norm.weight",
        &mut flm_tensors,
        &mut dense_tensors,
    );
    q4_1("lm_head.weight", 2, 2, &mut flm_tensors, &mut dense_tensors);
    for layer in 0..config.num_hidden_layers {
        let p = format!("model.layers.{layer}.");
        for name in [
            "input_layernorm.weight",
            "post_attention_layernorm.weight",
            "self_attn.q_proj.bias",
            "self_attn.k_proj.bias",
            "self_attn.v_proj.bias",
            "self_attn.o_proj.bias",
            "mlp.router.bias",
        ] {
            keep(
                format!("{p}{name}"),
                &format!("{p}{name}"),
                &mut flm_tensors,
                &mut dense_tensors,
            );
        }
        keep(
            format!("{p}self_attn.sinks.weight"),
            &format!("{p}self_attn.sinks"),
            &mut flm_tensors,
            &mut dense_tensors,
        );
        for proj in ["q_proj", "k_proj", "v_proj", "o_proj"] {
            q4_1(
                &format!("{p}self_attn.{proj}.weight"),
                16,
                4,
                &mut flm_tensors,
                &mut dense_tensors,
            );
        }
        // The router row-major, K padded to 128 (`_prefill`).
        let (shape, router) = read(&format!("{p}mlp.router.weight"));
        let padded = hidden.div_ceil(HALF_COLS) * HALF_COLS;
        let mut prefill = vec![0f32; experts * padded];
        for (e, row) in router.chunks_exact(hidden).enumerate() {
            prefill[e * padded..e * padded + hidden].copy_from_slice(row);
        }
        flm_tensors.push((
            format!("{p}mlp.router.weight_prefill"),
            Dtype::Bf16,
            vec![experts, padded],
            bf16_bytes(&prefill),
        ));
        dense_tensors.push((
            format!("{p}mlp.router.weight"),
            Dtype::Bf16,
            shape,
            bf16_bytes(&router),
        ));

        // Experts: per expert, gate's and up's groups of 4 row blocks alternating, then down's,
        // each row block's biases in its first tile's padding; and the biases as [experts, N].
        let mut stacked = Vec::new();
        let mut sections = 0;
        for proj in ["gate", "up", "down"] {
            let mut biases = Vec::new();
            for e in 0..experts {
                let (_, bias) = read(&format!("{p}mlp.experts.{e}.{proj}_proj.bias"));
                biases.extend_from_slice(&bias);
                dense_tensors.push((
                    format!("{p}mlp.experts.{e}.{proj}_proj.bias"),
                    Dtype::Bf16,
                    vec![bias.len()],
                    bf16_bytes(&bias),
                ));
            }
            let rows = biases.len() / experts;
            flm_tensors.push((
                format!("{p}mlp.experts.{proj}_proj_bias"),
                Dtype::Bf16,
                vec![experts, rows],
                bf16_bytes(&biases),
            ));
        }
        for e in 0..experts {
            let mut parts = Vec::new();
            for proj in ["gate", "up", "down"] {
                let name = format!("{p}mlp.experts.{e}.{proj}_proj.weight");
                let (shape, w) = read(&name);
                let (mut tiles, values) = half_tiles(&w, shape[0], shape[1], true);
                let (_, bias) = read(&format!("{p}mlp.experts.{e}.{proj}_proj.bias"));
                for (rb, row) in tiles.iter_mut().enumerate() {
                    row[0][128..192].copy_from_slice(&bf16_bytes(&bias[rb * 32..rb * 32 + 32]));
                }
                dense_tensors.push((name, Dtype::F32, shape, f32_bytes(&values)));
                parts.push(regrouped(&tiles, 4, 4));
            }
            let halves = parts[0].0[1];
            let group_bytes = halves * 4 * HALF_TILE;
            let (gate, up, down) = (&parts[0].1, &parts[1].1, &parts[2].1);
            for g in 0..gate.len() / group_bytes {
                stacked.extend_from_slice(&gate[g * group_bytes..(g + 1) * group_bytes]);
                stacked.extend_from_slice(&up[g * group_bytes..(g + 1) * group_bytes]);
            }
            stacked.extend_from_slice(down);
            sections = (gate.len() + up.len() + down.len()) / group_bytes;
            assert_eq!(
                parts[2].0[1], halves,
                "FastFlowLM stacks the same column tiles"
            );
        }
        let halves = hidden.div_ceil(HALF_COLS);
        assert_eq!(width.div_ceil(HALF_COLS), halves);
        flm_tensors.push((
            format!("{p}ffn_gate_up_down_exps.weight"),
            Dtype::I8,
            vec![experts, sections, halves, 4, HALF_TILE],
            stacked,
        ));
    }
    write_container(flm, "model.q4nx", &flm_tensors);
    write_container(dense, "model.safetensors", &dense_tensors);
}

#[test]
fn fastflowlm_gpt_oss_layout_runs_as_its_dequantized_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let (flm, dense) = (tmp.path().join("flm"), tmp.path().join("dense"));
    write_gpt_oss(&flm, &dense);
    q4nx::validate_dir(&flm).expect("validates");

    // Every matrix read at open holds exactly the values its tiles hold: Q4_1 copied, MXFP4
    // as Q8.
    let (ours, theirs) = (Weights::open(&flm).unwrap(), Weights::open(&dense).unwrap());
    let mut matrices = 0;
    for name in theirs.names() {
        let Tensor::Dense(t) = theirs.get(name).unwrap() else {
            panic!("{name} is dense")
        };
        if t.dtype != Dtype::F32 {
            continue;
        }
        let m = match ours.get(name).unwrap() {
            Tensor::Q8(m) if name.contains(".experts.") => m,
            Tensor::Q4_1(m) if !name.contains(".experts.") => m,
            other => panic!("{name}: {}", other.describe()),
        };
        let cols = t.shape[1];
        let mut row = vec![0f32; m.cols];
        for (r, expected) in t.bytes.chunks_exact(cols * 4).enumerate() {
            m.dequantize_row(r, &mut row);
            for (c, b) in expected.chunks_exact(4).enumerate() {
                let want = f32::from_le_bytes(b.try_into().unwrap());
                assert_eq!(row[c], want, "{name} ({r}, {c})");
            }
        }
        matrices += 1;
    }
    let config = q4nx::ModelConfig::from_path(&flm.join("config.json")).unwrap();
    assert_eq!(matrices, config.num_hidden_layers * (4 + 4 * 3) + 1);

    let reference = reference("tiny-gpt-oss");
    let mut model = Model::load(&flm, &LoadOptions::default()).expect("FastFlowLM's file loads");
    assert_eq!(model.info().weight_format, "q4nx");
    let ours = model.logits(&reference.tokens).unwrap();
    let mut plain = Model::load(&dense, &LoadOptions::default()).expect("dequantized loads");
    let theirs = plain.logits(&reference.tokens).unwrap();
    let error = max_relative_error(&ours, &theirs);
    let quantization = max_relative_error(&ours, &reference.logits);
    eprintln!(
        "tiny-gpt-oss: FastFlowLM's layout (Q4_1 attention and head, MXFP4 experts read as Q8) \
         vs its dequantized weights {error:.3e}; vs transformers on the original weights \
         {quantization:.3e}"
    );
    assert!(error <= TOLERANCE, "{error}");
}

/// A damaged FastFlowLM gpt-oss file is refused in words naming the tensor: experts of another
/// shape, and an MXFP4 scale of 255 (not a number).
#[test]
fn fastflowlm_gpt_oss_damaged_experts_are_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let (flm, dense) = (tmp.path().join("flm"), tmp.path().join("dense"));
    write_gpt_oss(&flm, &dense);
    let path = flm.join("model.q4nx");
    let experts = "model.layers.1.ffn_gate_up_down_exps.weight";
    let original = std::fs::read(&path).unwrap();
    let refusal = |bytes: Vec<u8>| {
        std::fs::write(&path, bytes).unwrap();
        match Model::load(&flm, &LoadOptions::default()) {
            Ok(_) => panic!("a damaged file loads"),
            Err(e) => e.to_string(),
        }
    };
    // The first expert tile's first scale byte.
    let header = q4nx::container::parse(&original, &path).unwrap();
    let start = header
        .tensors
        .iter()
        .find(|t| t.name == experts)
        .unwrap()
        .range
        .start;
    let data = header.data_start;
    let mut nan = original.clone();
    nan[start] = 255;
    let e = refusal(nan);
    assert!(e.contains(experts) && e.contains("not a number"), "{e}");

    let text = String::from_utf8_lossy(&original[8..data]).into_owned();
    let shape = text.find(experts).unwrap();
    let mut renamed = original.clone();
    // The same tensor under a name that leaves layer 1 without experts.
    renamed[8 + shape..8 + shape + experts.len()]
        .copy_from_slice(experts.replace("layers.1", "layers.7").as_bytes());
    let e = refusal(renamed);
    assert!(e.contains(experts) && e.contains("lacks"), "{e}");
}

/// A FastFlowLM Gemma 3 norm that is not floats cannot be shifted back: refused in words
/// naming it.
#[test]
fn fastflowlm_gemma3_norm_not_in_floats_is_refused_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name);
    let norm = "model.layers.2.pre_feedforward_layernorm.weight";
    write_gemma3(&dir("hearth"), &dir("flm"), &dir("same"), |tensors| {
        let t = tensors.iter_mut().find(|t| t.0 == norm).expect("the norm");
        t.1 = Dtype::I8;
        t.2 = vec![t.3.len()];
    });
    let e = match Model::load(&dir("flm"), &LoadOptions::default()) {
        Ok(_) => panic!("an I8 norm loads"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(norm) && e.contains("FastFlowLM's Gemma 3"),
        "{e}"
    );
}
