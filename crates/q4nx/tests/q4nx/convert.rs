//! `convert`: a Hugging Face folder in, a Q4NX folder out that reads back, validates and
//! dequantizes to the source within the Q4_1 bound.

use crate::common;

use std::path::{Path, PathBuf};

use common::{tiny_llama_json, write_hf_folder};
use half::bf16;
use q4nx::layout::padded_cols;
use q4nx::quantize::error_bound;
use q4nx::{convert, validate_dir, ConvertOptions, Family, Tensor, Variant, WeightFormat, Weights};

fn run(src: &Path, dst: &Path, variant: Variant) -> Result<q4nx::ConvertReport, q4nx::Error> {
    let mut calls = 0;
    let options = ConvertOptions {
        variant,
        threads: Some(2),
    };
    let report = convert(src, dst, &options, &mut |p| {
        assert!(p.bytes_done <= p.bytes_total);
        calls += 1;
    });
    if report.is_ok() {
        assert!(calls > 0, "progress was reported");
    }
    report
}

/// Every row of a quantized tensor is within the Q4_1 bound of the source row.
fn assert_close(name: &str, tiles: &q4nx::TileMatrix, source: &[f32], rows: usize, k: usize) {
    assert_eq!(
        (tiles.rows, tiles.cols),
        (rows, padded_cols(k)),
        "{name} geometry"
    );
    let mut row = vec![0f32; tiles.cols];
    for r in 0..rows {
        tiles.dequantize_row(r, &mut row);
        for g in (0..k).step_by(32) {
            let group = &source[r * k + g..r * k + (g + 32).min(k)];
            let lo = group.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = group.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let bound = error_bound(lo, hi);
            for (i, v) in group.iter().enumerate() {
                let got = row[g + i];
                assert!(
                    (got - v).abs() <= bound,
                    "{name} row {r} col {}: {got} vs {v}",
                    g + i
                );
            }
        }
    }
}

#[test]
fn tied_llama_converts_reads_back_and_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("out");
    let originals = write_hf_folder(&src, &tiny_llama_json(true));
    let report = run(&src, &dst, Variant::Faithful).unwrap();
    assert!(report.warnings.is_empty());
    assert_eq!(report.tensors, 1 + 2 * 9 + 2);
    for f in [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
    ] {
        assert!(dst.join(f).is_file(), "{f} copied");
        assert!(report.copied.iter().any(|c| c == f));
    }
    assert_eq!(
        std::fs::read_to_string(dst.join("config.json")).unwrap(),
        tiny_llama_json(true),
        "config.json is copied as it is"
    );
    assert!(
        !tmp.path().join(".out.partial").exists(),
        "no partial folder left"
    );

    let config = validate_dir(&dst).unwrap();
    assert_eq!(config.family, Family::Llama);
    let w = Weights::open(&dst).unwrap();
    assert_eq!(w.format(), WeightFormat::Q4nx);
    let on_disk = std::fs::metadata(dst.join("model.q4nx")).unwrap().len();
    assert_eq!(on_disk, report.q4nx_bytes, "reported size is the file size");
    assert!(w.data_bytes() + 8 < on_disk, "header + data");

    // Embedding and norms: BF16 of the source.
    for name in [
        "model.embed_tokens.weight",
        "model.layers.1.input_layernorm.weight",
    ] {
        let Tensor::Dense(d) = w.get(name).unwrap() else {
            panic!("{name} is dense")
        };
        assert_eq!(d.dtype, q4nx::Dtype::Bf16);
        let expected: Vec<f32> = originals[name]
            .iter()
            .map(|v| bf16::from_f32(*v).to_f32())
            .collect();
        assert_eq!(d.to_f32(), expected, "{name}");
    }
    // Linears: within the bound, K = 96 padded to 256.
    for (name, n, k) in [
        ("model.layers.0.self_attn.q_proj.weight", 256, 64),
        ("model.layers.0.self_attn.k_proj.weight", 64, 64),
        ("model.layers.1.mlp.down_proj.weight", 64, 96),
    ] {
        let Tensor::Q4_1(t) = w.get(name).unwrap() else {
            panic!("{name} is Q4_1")
        };
        assert_close(name, &t, &originals[name], n, k);
    }
    // Tied: lm_head is an explicit quantized copy of the embedding.
    let Tensor::Q4_1(head) = w.get("lm_head.weight").unwrap() else {
        panic!("lm_head is Q4_1")
    };
    assert_close(
        "lm_head.weight",
        &head,
        &originals["model.embed_tokens.weight"],
        96,
        64,
    );
}

#[test]
fn untied_llama_keeps_its_lm_head_and_reads_without_config() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("out");
    let originals = write_hf_folder(&src, &tiny_llama_json(false));
    run(&src, &dst, Variant::Faithful).unwrap();
    // Hearth's metadata lets the file be read without config.json.
    let w = Weights::open_file(&dst.join("model.q4nx"), None).unwrap();
    let Tensor::Q4_1(head) = w.get("lm_head.weight").unwrap() else {
        panic!("lm_head is Q4_1")
    };
    assert_close("lm_head", &head, &originals["lm_head.weight"], 96, 64);
}

#[test]
fn flm_qwen3_variant_replicates_kv_heads_and_adds_unit_norms() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("out-flm-qwen3");
    let originals = write_hf_folder(&src, &tiny_llama_json(false));
    let report = run(&src, &dst, Variant::FlmQwen3).unwrap();
    assert_eq!(report.warnings.len(), 1);
    assert!(report.warnings[0].contains("does not compute the same function"));
    let config = validate_dir(&dst).unwrap();
    assert_eq!(config.family, Family::Qwen3);
    assert_eq!((config.num_key_value_heads, config.head_dim), (8, 32));
    assert_eq!(
        config.rope_theta, 500000.0,
        "rope_theta kept (written top-level)"
    );
    let w = Weights::open(&dst).unwrap();
    let Tensor::Dense(norm) = w.get("model.layers.0.self_attn.k_norm.weight").unwrap() else {
        panic!("k_norm is dense")
    };
    assert_eq!(norm.to_f32(), vec![1.0; 32]);
    // Each of the 2 source KV heads becomes 4 identical heads.
    let name = "model.layers.1.self_attn.v_proj.weight";
    let Tensor::Q4_1(v) = w.get(name).unwrap() else {
        panic!("v_proj is Q4_1")
    };
    assert_eq!(v.rows, 8 * 32);
    let source = &originals[name];
    let replicated: Vec<f32> = (0..256)
        .flat_map(|o| {
            let src_row = (o / 32) / 4 * 32 + o % 32;
            source[src_row * 64..(src_row + 1) * 64].to_vec()
        })
        .collect();
    assert_close(name, &v, &replicated, 256, 64);
}

#[test]
fn existing_destination_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("out");
    write_hf_folder(&src, &tiny_llama_json(true));
    std::fs::create_dir(&dst).unwrap();
    std::fs::write(dst.join("keep.txt"), "mine").unwrap();
    let e = run(&src, &dst, Variant::Faithful).unwrap_err().to_string();
    assert!(e.contains("already exists and is not empty"), "{e}");
    assert_eq!(
        std::fs::read_to_string(dst.join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn a_failed_convert_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let dst = tmp.path().join("out");
    write_hf_folder(&src, &tiny_llama_json(true));
    // Put a NaN into the last tensor of the second shard (found only while streaming).
    let shard = src.join("model-00002-of-00002.safetensors");
    let mut bytes = std::fs::read(&shard).unwrap();
    let n = bytes.len();
    bytes[n - 2..].copy_from_slice(&bf16::NAN.to_le_bytes());
    std::fs::write(&shard, bytes).unwrap();
    let e = run(&src, &dst, Variant::Faithful).unwrap_err().to_string();
    assert!(e.contains("non-finite"), "{e}");
    assert!(!dst.exists(), "no output folder");
    assert!(
        !tmp.path().join(".out.partial").exists(),
        "no partial folder"
    );
}

/// A tiny Llama source folder, and beside the output `out` a `.out.partial` folder holding
/// `files` (name, contents), as an interrupted conversion, or someone else, left it.
struct WithPartial {
    _tmp: tempfile::TempDir,
    src: PathBuf,
    dst: PathBuf,
    partial: PathBuf,
}

fn with_partial(files: &[(&str, &str)]) -> WithPartial {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    write_hf_folder(&src, &tiny_llama_json(true));
    let partial = tmp.path().join(".out.partial");
    std::fs::create_dir(&partial).unwrap();
    for (name, contents) in files {
        std::fs::write(partial.join(name), contents).unwrap();
    }
    WithPartial {
        dst: tmp.path().join("out"),
        _tmp: tmp,
        src,
        partial,
    }
}

#[test]
fn stale_partial_output_is_cleaned_up() {
    let t = with_partial(&[(".hearth-convert-partial", ""), ("model.q4nx", "half")]);
    run(&t.src, &t.dst, Variant::Faithful).unwrap();
    assert!(!t.partial.exists());
    validate_dir(&t.dst).unwrap();
}

#[test]
fn an_empty_partial_folder_left_by_a_kill_is_cleared_and_the_output_has_no_marker() {
    // A kill between making the folder and marking it leaves it empty.
    let t = with_partial(&[]);
    run(&t.src, &t.dst, Variant::Faithful).unwrap();
    assert!(!t.partial.exists());
    assert!(!t.dst.join(".hearth-convert-partial").exists());
    validate_dir(&t.dst).unwrap();
}

#[test]
fn a_partial_folder_hearth_did_not_make_is_kept() {
    let t = with_partial(&[("notes.txt", "mine")]);
    let e = run(&t.src, &t.dst, Variant::Faithful)
        .unwrap_err()
        .to_string();
    assert!(e.contains("was not made by hearth convert"), "{e}");
    assert_eq!(std::fs::read(t.partial.join("notes.txt")).unwrap(), b"mine");
}

#[test]
fn unknown_source_tensors_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    write_hf_folder(&src, &tiny_llama_json(true));
    let index = src.join("model.safetensors.index.json");
    let extra = src.join("extra.safetensors");
    common::write_safetensors(
        &extra,
        &[common::Raw {
            name: "model.layers.0.self_attn.q_proj.bias".into(),
            dtype: q4nx::Dtype::F32,
            shape: vec![256],
            bytes: vec![0; 1024],
        }],
        &Default::default(),
    );
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    json["weight_map"]["model.layers.0.self_attn.q_proj.bias"] = "extra.safetensors".into();
    std::fs::write(&index, json.to_string()).unwrap();
    let e = run(&src, &tmp.path().join("out"), Variant::Faithful)
        .unwrap_err()
        .to_string();
    assert!(e.contains("q_proj.bias"), "{e}");
}

#[test]
fn converting_a_q4nx_folder_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("hf");
    let out = tmp.path().join("out");
    write_hf_folder(&src, &tiny_llama_json(true));
    run(&src, &out, Variant::Faithful).unwrap();
    let e = run(&out, &tmp.path().join("again"), Variant::Faithful)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already holds a Q4NX model"), "{e}");
}

/// A multimodal Gemma 3 (`Gemma3ForConditionalGeneration`, as google/gemma-3-4b-it is saved)
/// converts to the same model.q4nx as its language model alone: the tiny Gemma 3 fixture's
/// tensors renamed `language_model.model.*` (and `model.language_model.*`, as transformers 5
/// saves them), sharded, beside a vision tower and projector that are left out and said so.
#[test]
fn a_multimodal_gemma3_converts_its_language_model_only() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-gemma3");
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain.q4nx");
    run(&fixture, &plain, Variant::Faithful).unwrap();

    let bytes = std::fs::read(fixture.join("model.safetensors")).unwrap();
    let header = q4nx::container::parse(&bytes, &fixture).unwrap();
    let text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json")).unwrap())
            .unwrap();
    let config = serde_json::json!({
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": text,
        "vision_config": {"hidden_size": 8},
    });
    let vision = |name: &str| common::Raw {
        name: name.into(),
        dtype: q4nx::Dtype::F32,
        shape: vec![2, 4],
        bytes: vec![0; 32],
    };
    for (layout, rename) in [
        (
            "old",
            (|n: &str| format!("language_model.{n}")) as fn(&str) -> String,
        ),
        ("new", |n: &str| match n.strip_prefix("model.") {
            Some(rest) => format!("model.language_model.{rest}"),
            None => n.to_string(),
        }),
    ] {
        let src = tmp.path().join(layout);
        std::fs::create_dir_all(&src).unwrap();
        for file in [
            "tokenizer.json",
            "tokenizer_config.json",
            "generation_config.json",
        ] {
            std::fs::copy(fixture.join(file), src.join(file)).unwrap();
        }
        std::fs::write(src.join("config.json"), config.to_string()).unwrap();
        let text_tensors: Vec<common::Raw> = header
            .tensors
            .iter()
            .map(|t| common::Raw {
                name: rename(&t.name),
                dtype: t.dtype,
                shape: t.shape.clone(),
                bytes: bytes[t.range.clone()].to_vec(),
            })
            .collect();
        let prefix = if layout == "old" { "" } else { "model." };
        let others = [
            vision(&format!(
                "{prefix}vision_tower.vision_model.embeddings.patch_embedding.weight"
            )),
            vision(&format!(
                "{prefix}multi_modal_projector.mm_input_projection_weight"
            )),
        ];
        let shards = [
            ("a.safetensors", &text_tensors[..]),
            ("b.safetensors", &others[..]),
        ];
        let mut map = serde_json::Map::new();
        for (file, tensors) in shards {
            common::write_safetensors(&src.join(file), tensors, &Default::default());
            for t in tensors {
                map.insert(t.name.clone(), file.into());
            }
        }
        std::fs::write(
            src.join("model.safetensors.index.json"),
            serde_json::json!({"metadata": {}, "weight_map": map}).to_string(),
        )
        .unwrap();

        let out = tmp.path().join(format!("{layout}.q4nx"));
        let report = run(&src, &out, Variant::Faithful).unwrap();
        assert_eq!(report.config.family, Family::Gemma3, "{layout}");
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("reads text only")),
            "{layout}: {:?}",
            report.warnings
        );
        assert!(
            std::fs::read(out.join("model.q4nx")).unwrap()
                == std::fs::read(plain.join("model.q4nx")).unwrap(),
            "{layout}: model.q4nx differs from the language model's own conversion"
        );
    }
}
