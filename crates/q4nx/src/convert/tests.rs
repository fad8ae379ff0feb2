//! What a conversion writes into config.json.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{convert, without_quantization_config, ConvertOptions};
use crate::{Tensor, Weights};

/// The released gpt-oss-20b's `quantization_config`: its experts are MXFP4 blocks.
const RELEASED_GPT_OSS: &str = r#"{"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}"#;

fn tiny_gpt_oss() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-gpt-oss")
}

fn object(text: &str) -> serde_json::Map<String, Value> {
    serde_json::from_str(text).expect("a JSON object")
}

#[test]
fn quantization_config_is_dropped_and_nothing_else() {
    let source = std::fs::read_to_string(tiny_gpt_oss().join("config.json")).unwrap();
    let mut with_key = object(&source);
    with_key.insert(
        "quantization_config".into(),
        serde_json::from_str(RELEASED_GPT_OSS).unwrap(),
    );
    let text = serde_json::to_string_pretty(&Value::Object(with_key)).unwrap();
    let out = without_quantization_config(text).unwrap();
    assert_eq!(object(&out), object(&source));
    assert!(out.ends_with("}\n"));
}

#[test]
fn a_config_without_the_key_is_kept_byte_for_byte() {
    let source = std::fs::read_to_string(tiny_gpt_oss().join("config.json")).unwrap();
    assert_eq!(without_quantization_config(source.clone()).unwrap(), source);
}

#[test]
fn malformed_config_text_is_an_error_in_words() {
    for text in ["", "[1, 2]", "{\"quantization_config\": ", "not json"] {
        let e = without_quantization_config(text.to_string()).unwrap_err();
        assert!(e.to_string().contains("not a JSON object"), "{text:?}: {e}");
    }
}

/// A gpt-oss folder that says its experts are MXFP4 converts to a folder whose experts are
/// Q4_1 tiles and whose config.json no longer says MXFP4.
#[test]
fn a_converted_gpt_oss_does_not_claim_mxfp4() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for name in [
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        std::fs::copy(tiny_gpt_oss().join(name), src.join(name)).unwrap();
    }
    let source = std::fs::read_to_string(tiny_gpt_oss().join("config.json")).unwrap();
    let mut with_key = object(&source);
    with_key.insert(
        "quantization_config".into(),
        serde_json::from_str(RELEASED_GPT_OSS).unwrap(),
    );
    std::fs::write(
        src.join("config.json"),
        serde_json::to_string_pretty(&Value::Object(with_key)).unwrap(),
    )
    .unwrap();

    let dst = tmp.path().join("q4nx");
    convert(&src, &dst, &ConvertOptions::default(), &mut |_| {}).unwrap();

    let written = std::fs::read_to_string(dst.join("config.json")).unwrap();
    assert!(!written.contains("quantization_config"), "{written}");
    assert!(!written.contains("mxfp4"), "{written}");
    assert_eq!(object(&written), object(&source));
    let weights = Weights::open(&dst).unwrap();
    let expert = "model.layers.0.mlp.experts.0.gate_proj.weight";
    assert!(
        matches!(weights.get(expert), Ok(Tensor::Q4_1(_))),
        "{expert} is Q4_1 tiles"
    );
}
