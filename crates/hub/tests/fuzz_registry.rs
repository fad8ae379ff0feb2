//! Property tests (a fuzz target) for the registry, `model_list.json`, which other tools
//! (FastFlowLM) write too: whatever it holds (hostile folder names, wrong types, truncated
//! text), listing, looking up and removing models never panics and never deletes anything
//! outside the models folder.
//!
//! CI runs a bounded number of cases; for a long run:
//! `PROPTEST_CASES=20000 cargo test -p hearth-hub --release --test fuzz_registry`.

mod common;

use common::TempDir;
use hearth_hub::Store;
use proptest::prelude::*;
use serde_json::{json, Value};

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

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
