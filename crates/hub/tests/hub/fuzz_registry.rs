//! Property tests (a fuzz target) for the registry, `model_list.json`, which other tools
//! (FastFlowLM) write too: whatever it holds (hostile folder names, wrong types, truncated
//! text), listing, looking up and removing models never panics and never deletes anything
//! outside the models folder.
//!
//! Entries written by Hearth read back as written, and fields other tools wrote are kept.
//!
//! Runs are reproducible: a fixed number of cases from a fixed seed, no failure-persistence
//! file, nothing timed. For a long run:
//! `PROPTEST_CASES=20000 cargo test -p hearth-hub --release --test hub fuzz_registry::`.

use std::collections::BTreeMap;

use crate::common::TempDir;
use hearth_hub::registry::{FlmDetails, FlmEntry, Registry};
use hearth_hub::Store;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use serde_json::{json, Value};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `cases` cases from a fixed seed, without a failure-persistence file.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(0x464c_4d52),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn folder_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "ok",
            "",
            ".",
            "..",
            "../victim",
            "../../victim",
            "a/b",
            "/abs",
            "ok\u{1b}]0;x\u{7}",
            "models",
            "victim",
        ])
        .prop_map(str::to_owned),
        "[a-z./]{0,12}",
    ]
}

fn entry() -> impl Strategy<Value = Value> {
    (
        folder_name(),
        any::<u64>(),
        prop::bool::ANY,
        prop::bool::ANY,
    )
        .prop_map(|(name, size, with_details, wrong_type)| {
            let mut e = json!({"name": name, "size": size, "files": ["config.json"]});
            if with_details {
                e["details"] = json!({"family": "llama", "format": "q4nx"});
            }
            if wrong_type {
                e["files"] = json!(7);
            }
            e
        })
}

fn registry() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(("[a-z]{1,6}", "[a-z0-9.]{1,4}", entry()), 0..5),
        prop::option::of(folder_name()),
        0usize..4,
    )
        .prop_map(|(entries, default, cut)| {
            let mut models = serde_json::Map::new();
            for (family, size, e) in entries {
                models
                    .entry(family)
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .unwrap()
                    .insert(size, e);
            }
            let text =
                json!({"model_path": "/x", "models": models, "hearth": {"default": default}})
                    .to_string();
            // Sometimes truncated, as a crash of another writer could leave it.
            let mut keep = text.len() - text.len() * cut / 8;
            while !text.is_char_boundary(keep) {
                keep -= 1;
            }
            text[..keep].to_owned()
        })
}

/// An entry as Hearth or FastFlowLM writes it, with fields Hearth does not know.
fn flm_entry() -> impl Strategy<Value = FlmEntry> {
    (
        "[a-z][a-z0-9.-]{0,10}",
        any::<u64>(),
        prop::collection::vec("[a-z.]{1,12}", 0..4),
        prop::option::of(any::<u64>()),
        "[a-z0-9-]{1,8}",
        any::<bool>(),
        prop::option::of("[a-zA-Z ]{0,10}"),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(name, size, files, context, family, think, label, vlm)| {
            let mut extra = serde_json::Map::new();
            if let Some(label) = label {
                extra.insert("label".into(), json!(label));
            }
            FlmEntry {
                name,
                url: String::new(),
                size,
                flm_min_version: None,
                files,
                default_context_length: context,
                vlm,
                details: FlmDetails {
                    family,
                    think,
                    think_toggleable: false,
                    parameter_size: "1B".into(),
                    quantization_level: "Q4_1".into(),
                    extra: Default::default(),
                },
                hearth: None,
                extra,
            }
        })
}

proptest! {
    #![proptest_config(config(cases(64)))]

    #[test]
    fn entries_read_back_as_written_with_foreign_fields_kept(
        entries in prop::collection::vec(("[a-z]{1,6}", "[a-z0-9.]{1,4}", flm_entry()), 0..6),
    ) {
        let tmp = TempDir::new("fuzz-registry-trip");
        let registry = Registry::new(tmp.0.join("model_list.json"), tmp.0.join("models"));
        let mut expected: BTreeMap<String, BTreeMap<String, FlmEntry>> = BTreeMap::new();
        for (family, size, entry) in &entries {
            expected.entry(family.clone()).or_default().insert(size.clone(), entry.clone());
        }
        registry
            .update(|file| {
                file.models = expected.clone();
                Ok(())
            })
            .unwrap();
        let read = registry.read().unwrap();
        prop_assert_eq!(&read.models, &expected);
        // Another tool's top-level field survives Hearth's next write.
        let mut raw: Value =
            serde_json::from_slice(&std::fs::read(registry.path()).unwrap()).unwrap();
        raw["flm_extra"] = json!({"kept": true});
        std::fs::write(registry.path(), raw.to_string()).unwrap();
        registry.update(|_| Ok(())).unwrap();
        let raw: Value =
            serde_json::from_slice(&std::fs::read(registry.path()).unwrap()).unwrap();
        prop_assert_eq!(&raw["flm_extra"], &json!({"kept": true}));
    }

    #[test]
    fn any_registry_is_read_or_refused_and_nothing_outside_models_is_deleted(
        text in registry(),
        asked in prop::collection::vec(folder_name(), 1..4),
    ) {
        let tmp = TempDir::new("fuzz-registry");
        let root = tmp.0.join("data");
        let store = Store::at(root.clone());
        std::fs::create_dir_all(store.models_dir().join("ok")).unwrap();
        std::fs::write(store.models_dir().join("ok/config.json"), "{}").unwrap();
        // What a hostile entry would reach: beside and above the store.
        for canary in [root.join("victim"), tmp.0.join("victim")] {
            std::fs::create_dir_all(&canary).unwrap();
            std::fs::write(canary.join("keep"), "mine").unwrap();
        }
        std::fs::write(store.registry_path(), &text).unwrap();
        let _ = store.list();
        let _ = store.default_model();
        let _ = store.partial_downloads();
        for name in &asked {
            let _ = store.get(name);
            let _ = store.remove(name);
        }
        for canary in [root.join("victim/keep"), tmp.0.join("victim/keep")] {
            prop_assert!(canary.is_file(), "{} was deleted by {text}", canary.display());
        }
        prop_assert!(store.models_dir().is_dir(), "the models folder itself stays");
    }
}

#[test]
fn a_registry_larger_than_any_list_of_models_is_refused_unread() {
    // Sparse: 64 MiB of zeros costs nothing to make, and must cost nothing to refuse.
    let tmp = TempDir::new("registry-huge");
    let store = Store::at(tmp.0.join("data"));
    std::fs::create_dir_all(store.root()).unwrap();
    let file = std::fs::File::create(store.registry_path()).unwrap();
    file.set_len(64 << 20).unwrap();
    let err = store.list().unwrap_err().to_string();
    assert!(err.contains("larger than 16 MiB"), "{err}");
}
