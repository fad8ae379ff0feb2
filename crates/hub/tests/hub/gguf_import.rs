//! Importing a GGUF file into the store: a tiny Llama GGUF built here (Q4_1 linears, a Q8_0
//! tied embedding, F32 norms) is converted, registered and listed; a damaged one is refused
//! with nothing registered and nothing left behind; the GGUF itself is never changed.

use crate::common::TempDir;
use hearth_hub::{Error, GgufImportOptions, Store, WeightFormat};
use q4nx::gguf::write::tiny_model;

#[test]
fn a_gguf_file_is_converted_registered_and_left_unchanged() {
    let tmp = TempDir::new("gguf");
    let store = Store::at(tmp.0.join("data"));
    let file = tmp.0.join("Tiny-Llama.Q4_1.gguf");
    let bytes = tiny_model("llama").finish();
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
    let bytes = tiny_model("llama").finish();
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
