//! A GGUF file added to the store is linked, not copied (issue 49): the store grows by a small
//! folder, the registry records the file; a file moved, changed or deleted is said plainly and
//! can be found again (the same model only); removing the model never touches the file; the
//! copy stays available; a Q4NX model keeps its file as it is.

use std::path::{Path, PathBuf};

use crate::common::TempDir;
use hearth_hub::{
    import_found, Error, GgufImportOptions, ImportOptions, LinkState, Store, WeightFormat,
};

/// The committed fixture GGUFs (made by llama.cpp's tools; see tests/fixtures/gguf).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf")
        .join(name)
}

/// `name` of the fixtures copied into `dir` (a link points at it: the committed file stays).
fn copy_fixture(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(fixture(name), &to).unwrap();
    to
}

fn link(store: &Store, file: &Path, name: &str) -> hearth_hub::InstalledModel {
    let options = GgufImportOptions {
        name: Some(name.into()),
        threads: None,
    };
    store
        .link_gguf(file, &options, &mut |_| {})
        .expect("link")
        .0
}

/// Every file under `dir` whose name ends with `suffix`.
fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_linked_gguf_costs_a_small_folder_and_the_registry_names_the_file() {
    let tmp = TempDir::new("link-size");
    let store = Store::at(tmp.0.join("data"));
    for (fixture_name, name) in [
        ("tiny-llama3-q8_0.gguf", "tiny-llama"),
        ("tiny-gemma3-q8_0.gguf", "tiny-gemma"),
    ] {
        let file = copy_fixture(&tmp.0, fixture_name);
        let before = std::fs::read(&file).unwrap();
        let options = GgufImportOptions {
            name: Some(name.into()),
            threads: None,
        };
        let (model, report) = store.link_gguf(&file, &options, &mut |_| {}).expect("link");
        assert_eq!(model.format, WeightFormat::Gguf);
        assert_eq!(
            model.source,
            format!("link:{}", file.canonicalize().unwrap().display())
        );
        let linked = model.linked.clone().expect("linked");
        assert_eq!(linked.file, file.canonicalize().unwrap());
        assert_eq!(linked.state, LinkState::Ready);
        assert!(model.folder.join(hearth_hub::LINK_FILE).is_file());
        assert!(
            files_ending(store.root(), ".q4nx").is_empty(),
            "no Q4NX copy"
        );
        assert!(
            files_ending(store.root(), ".gguf").is_empty(),
            "no GGUF copy"
        );
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "the file is only read"
        );

        // What the store grew by: the small folder (config, tokenizer, template, link), no
        // weight: under 5% of the file even for these tiny models, whose vocabulary is a large
        // part of the file (a real model's folder is a far smaller part: README).
        let folder = hearth_hub::dir_size(&model.folder);
        let file_bytes = before.len() as u64;
        let header = report.link.header_bytes;
        assert_eq!(folder, report.folder_bytes, "the folder is what q4nx wrote");
        assert!(
            folder * 20 < file_bytes,
            "{fixture_name}: the store grew by {folder} B for a file of {file_bytes} B (5% or more)"
        );
        eprintln!(
            "{fixture_name}: file {file_bytes} B (header {header} B), linked folder {folder} B ({:.1}% of the file)",
            100.0 * folder as f64 / file_bytes as f64
        );
    }
    // The registry says "link" with the path, and FastFlowLM's fields stay in its schema.
    let text = std::fs::read_to_string(store.registry_path()).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entry = json["models"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|sizes| sizes.as_object().unwrap().values())
        .find(|e| e["name"] == "tiny-llama")
        .unwrap()
        .clone();
    assert_eq!(entry["hearth"]["source"], "link");
    assert_eq!(entry["hearth"]["format"], "gguf");
    assert!(entry["hearth"]["linked"]["path"]
        .as_str()
        .unwrap()
        .ends_with("tiny-llama3-q8_0.gguf"));
    assert_eq!(
        entry["hearth"]["linked"]["header_sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    assert_eq!(entry["hearth"]["backends"], serde_json::json!(["cpu"]));
}

#[test]
fn removing_a_linked_model_never_deletes_the_gguf() {
    let tmp = TempDir::new("link-rm");
    let store = Store::at(tmp.0.join("data"));
    let file = copy_fixture(&tmp.0, "tiny-llama3-q8_0.gguf");
    let before = std::fs::read(&file).unwrap();
    let model = link(&store, &file, "tiny");
    let removed = store.remove("tiny").expect("remove");
    assert_eq!(removed.name, "tiny");
    assert!(
        removed.freed_bytes < before.len() as u64,
        "only the small folder was freed"
    );
    assert!(!model.folder.exists(), "Hearth's folder is gone");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the GGUF is where it was, unchanged"
    );
    assert!(store.list().unwrap().is_empty());

    // The same when the file had been moved away first: the model goes, the file stays.
    let model = link(&store, &file, "tiny");
    let moved = tmp.0.join("elsewhere.gguf");
    std::fs::rename(&file, &moved).unwrap();
    store
        .remove("tiny")
        .expect("remove a model whose file moved");
    assert!(!model.folder.exists());
    assert_eq!(std::fs::read(&moved).unwrap(), before);
}

#[test]
fn a_moved_changed_or_deleted_file_is_said_plainly() {
    let tmp = TempDir::new("link-gone");
    let store = Store::at(tmp.0.join("data"));
    let file = copy_fixture(&tmp.0, "tiny-llama3-q8_0.gguf");
    let bytes = std::fs::read(&file).unwrap();
    link(&store, &file, "tiny");
    let state = || store.get("tiny").unwrap().linked.unwrap().state;
    assert_eq!(state(), LinkState::Ready);
    assert_eq!(store.get("tiny").unwrap().unavailable(), None);

    // Moved away (or deleted by the program that owns it: `ollama rm`).
    let moved = tmp.0.join("moved.gguf");
    std::fs::rename(&file, &moved).unwrap();
    assert_eq!(state(), LinkState::Missing);
    let words = store
        .get("tiny")
        .unwrap()
        .unavailable()
        .expect("unavailable");
    assert!(
        words.ends_with("was moved or changed since you added it: find it, or remove it"),
        "{words}"
    );
    assert!(
        words.contains("tiny-llama3-q8_0.gguf"),
        "names the file: {words}"
    );

    // Back, but rewritten (one byte of the weights changed, so its time changes too).
    let mut changed = bytes.clone();
    *changed.last_mut().unwrap() ^= 1;
    std::fs::write(&file, &changed).unwrap();
    set_mtime_far(&file);
    assert_eq!(state(), LinkState::Changed);
    assert!(store.get("tiny").unwrap().unavailable().is_some());

    // Cut short.
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(state(), LinkState::Changed);

    // Deleted.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(state(), LinkState::Missing);
    assert_eq!(
        store.list().unwrap().len(),
        1,
        "still listed, as unavailable"
    );
}

/// Sets `file`'s modification time to a fixed past moment, so a rewrite is seen as a change
/// even on a file system whose clock is coarse.
fn set_mtime_far(file: &Path) {
    let past = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(file)
        .unwrap()
        .set_modified(past)
        .unwrap();
}

#[test]
fn find_it_relinks_the_same_model_and_refuses_another_file() {
    let tmp = TempDir::new("link-find");
    let store = Store::at(tmp.0.join("data"));
    let file = copy_fixture(&tmp.0, "tiny-llama3-q8_0.gguf");
    link(&store, &file, "tiny");
    let real = file.canonicalize().unwrap();
    store.set_default("tiny").unwrap();
    let sub = tmp.0.join("new-place");
    std::fs::create_dir_all(&sub).unwrap();
    let moved = sub.join("renamed.gguf");
    std::fs::rename(&file, &moved).unwrap();
    assert_eq!(
        store.get("tiny").unwrap().linked.unwrap().state,
        LinkState::Missing
    );

    // Another model is refused, and the entry stays as it was.
    let other = copy_fixture(&tmp.0, "tiny-gemma3-q8_0.gguf");
    let err = store.relink("tiny", &other).unwrap_err();
    assert!(matches!(err, Error::DifferentFile { .. }), "{err}");
    assert!(err.to_string().contains("is a different file"), "{err}");
    let still = store.get("tiny").unwrap();
    assert_eq!(still.linked.unwrap().file, real);

    // A file that is not GGUF at all is "a different file" too, never a crash.
    let junk = tmp.0.join("junk.gguf");
    std::fs::write(&junk, b"not a model").unwrap();
    assert!(matches!(
        store.relink("tiny", &junk),
        Err(Error::DifferentFile { .. })
    ));

    // The same model where it went: linked again, same name, still the default.
    let found = store.relink("tiny", &moved).expect("relink");
    assert_eq!(found.name, "tiny");
    assert!(found.is_default);
    let linked = found.linked.unwrap();
    assert_eq!(linked.file, moved.canonicalize().unwrap());
    assert_eq!(linked.state, LinkState::Ready);
    assert!(found.source.ends_with("renamed.gguf"), "{}", found.source);
    let link_text = std::fs::read_to_string(found.folder.join(hearth_hub::LINK_FILE)).unwrap();
    assert!(
        link_text.contains("renamed.gguf"),
        "the engine's link moved too: {link_text}"
    );
    assert_eq!(store.list().unwrap().len(), 1);
    let leftovers: Vec<_> = std::fs::read_dir(store.downloads_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(leftovers.is_empty(), "no work folder left: {leftovers:?}");

    // A model whose files are Hearth's own has nothing to find.
    let copied = store
        .import_gguf(
            &moved,
            &GgufImportOptions {
                name: Some("copied".into()),
                threads: Some(1),
            },
            &mut |_| {},
        )
        .unwrap()
        .0;
    assert!(matches!(
        store.relink(&copied.name, &moved),
        Err(Error::NotLinked { .. })
    ));
}

#[test]
fn the_copy_setting_copies_and_is_off_by_default() {
    let tmp = TempDir::new("link-copy");
    let store = Store::at(tmp.0.join("data"));
    assert!(!store.copy_models(), "linking is the default");
    let file = copy_fixture(&tmp.0, "tiny-llama3-q8_0.gguf");
    let linked = import_found(
        &store,
        &file,
        Some("linked".into()),
        store.copy_models(),
        &mut |_| {},
    )
    .unwrap();
    assert!(linked.linked.is_some());

    store.set_copy_models(true).unwrap();
    assert!(store.copy_models());
    let copied = import_found(
        &store,
        &file,
        Some("copied".into()),
        store.copy_models(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(copied.linked, None);
    assert_eq!(copied.format, WeightFormat::Q4nx);
    assert!(copied.folder.join("model.q4nx").is_file());
    // The setting survives other registry writes, and can be turned off again.
    store.set_default("linked").unwrap();
    assert!(store.copy_models());
    store.set_copy_models(false).unwrap();
    assert!(!store.copy_models());
}

#[test]
fn a_q4nx_model_keeps_its_file_and_a_gguf_is_not_converted_unless_asked() {
    let tmp = TempDir::new("link-npu");
    let store = Store::at(tmp.0.join("data"));
    // A Q4NX folder, as FastFlowLM's NPU models are: made here by the copy path.
    let file = copy_fixture(&tmp.0, "tiny-llama3-q8_0.gguf");
    let q4nx_dir = tmp.0.join("npu-model");
    q4nx::gguf::import_gguf(&file, &q4nx_dir, Some(1), &mut |_| {}).unwrap();
    let original = std::fs::read(q4nx_dir.join("model.q4nx")).unwrap();
    let npu = store
        .import(
            &q4nx_dir,
            &ImportOptions {
                name: Some("npu-model".into()),
                move_files: false,
            },
        )
        .unwrap();
    assert_eq!(npu.format, WeightFormat::Q4nx);
    assert_eq!(npu.linked, None);
    assert_eq!(
        std::fs::read(npu.folder.join("model.q4nx")).unwrap(),
        original,
        "FastFlowLM's Q4NX file is kept byte for byte"
    );

    // Linking the GGUF writes no Q4NX file anywhere in the store.
    let before = files_ending(store.root(), ".q4nx");
    link(&store, &file, "tiny");
    assert_eq!(
        files_ending(store.root(), ".q4nx"),
        before,
        "the GGUF is not converted"
    );
}

/// The real Qwen2.5-Coder-0.5B Q4_K_M (`scripts/real-models.sh` fetches it into
/// target/real-models): what linking it adds to the store. Opt in:
/// `cargo test -p hearth-hub --test hub gguf_link:: -- --ignored --nocapture`.
#[test]
#[ignore = "needs target/real-models (scripts/real-models.sh)"]
fn the_real_qwen_file_costs_under_5_percent() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/real-models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    let tmp = TempDir::new("link-real");
    let store = Store::at(tmp.0.join("data"));
    let model = link(&store, &file, "qwen2.5-coder-0.5b");
    let folder = hearth_hub::dir_size(&model.folder);
    let file_bytes = std::fs::metadata(&file).unwrap().len();
    eprintln!(
        "{}: file {file_bytes} B, linked folder {folder} B ({:.2}% of the file)",
        file.display(),
        100.0 * folder as f64 / file_bytes as f64
    );
    assert!(folder * 20 < file_bytes);
}
