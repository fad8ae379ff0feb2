//! The local store: import, list, default, remove, and the registry under concurrent writers
//! (threads and separate processes).

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{fixture, TempDir};
use hearth_hub::registry::{FlmDetails, FlmEntry};
use hearth_hub::{Error, ImportOptions, Store, WeightFormat};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn import_copies_validates_hashes_and_registers_both_formats() {
    let tmp = TempDir::new("import");
    let store = Store::at(tmp.0.join("data"));
    let q4 = store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap();
    assert_eq!(q4.name, "tiny-q4nx");
    assert_eq!(q4.format, WeightFormat::Q4nx);
    assert!(q4.source.starts_with("import:"), "{}", q4.source);
    assert_eq!(q4.files.len(), 4);
    assert!(
        fixture("tiny-q4nx").join("model.q4nx").is_file(),
        "a copy leaves the source alone"
    );

    let st = store
        .import(
            &fixture("tiny-safetensors"),
            &ImportOptions {
                name: Some("Tiny-ST".into()),
                move_files: false,
            },
        )
        .unwrap();
    assert_eq!(st.format, WeightFormat::Safetensors);
    let names: Vec<String> = store.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names.len(), 2);

    let err = store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::NameTaken { .. }), "{err}");
}

/// A pull or import killed after writing the registry entry, before clearing its staging,
/// leaves `downloads/<name>`: it is not a paused download, and the next try of that name
/// clears it.
#[test]
fn the_leftover_staging_of_a_registered_model_is_not_a_download_and_is_cleared() {
    let tmp = TempDir::new("leftover");
    let store = Store::at(tmp.0.join("data"));
    store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap();
    let leftover = store.downloads_dir().join("tiny-q4nx");
    std::fs::create_dir_all(leftover.join("files")).unwrap();
    std::fs::write(leftover.join(".lock"), b"").unwrap();
    std::fs::write(
        leftover.join("download.json"),
        br#"{"query":"a/b","repo":"a/b","requested_revision":"main","commit":"0123",
            "catalog_id":null,"format":"q4nx","files":[]}"#,
    )
    .unwrap();
    assert!(store.partial_downloads().unwrap().is_empty());

    let err = store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::NameTaken { .. }), "{err}");
    assert!(!leftover.exists(), "the leftover staging is cleared");
    assert!(store
        .get("tiny-q4nx")
        .unwrap()
        .folder
        .join("model.q4nx")
        .is_file());
}

#[test]
fn import_refuses_folders_that_are_incomplete_or_invalid() {
    let tmp = TempDir::new("import-bad");
    let store = Store::at(tmp.0.join("data"));
    let incomplete = tmp.0.join("no-tokenizer");
    copy_dir(&fixture("tiny-q4nx"), &incomplete);
    std::fs::remove_file(incomplete.join("tokenizer.json")).unwrap();
    let err = store
        .import(&incomplete, &ImportOptions::default())
        .unwrap_err();
    assert!(err.to_string().contains("tokenizer.json"), "{err}");

    let truncated = tmp.0.join("truncated");
    copy_dir(&fixture("tiny-q4nx"), &truncated);
    let weights = truncated.join("model.q4nx");
    let len = std::fs::metadata(&weights).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&weights)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let err = store
        .import(&truncated, &ImportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidModel { .. }), "{err}");
    assert!(err.to_string().contains("Nothing was registered"), "{err}");
    assert!(store.list().unwrap().is_empty());
    assert!(!store.models_dir().join("truncated").exists());
}

#[test]
fn remove_frees_the_disk_and_reports_the_bytes() {
    let tmp = TempDir::new("rm");
    let store = Store::at(tmp.0.join("data"));
    let model = store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap();
    store.set_default(&model.name).unwrap();
    assert!(store.get("tiny-q4nx").unwrap().is_default);
    let removed = store.remove("TINY-Q4NX").unwrap();
    assert_eq!(removed.freed_bytes, model.size_bytes);
    assert!(!model.folder.exists());
    assert!(store.list().unwrap().is_empty());
    let err = store.remove("tiny-q4nx").unwrap_err();
    assert!(matches!(err, Error::NotInstalled { .. }), "{err}");
}

#[test]
fn builtin_model_is_listed_can_be_default_and_cannot_be_removed() {
    let tmp = TempDir::new("builtin");
    let store = Store::at(tmp.0.join("data")).with_builtin("demo", fixture("tiny-safetensors"));
    let list = store.list().unwrap();
    assert_eq!(list.len(), 1);
    assert!(list[0].builtin);
    assert_eq!(list[0].source, "built-in");
    store.set_default("demo").unwrap();
    assert!(store.default_model().unwrap().unwrap().is_default);
    assert!(store.remove("demo").is_err());
    assert!(fixture("tiny-safetensors")
        .join("model.safetensors")
        .is_file());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.root().join("model_list.json")).unwrap())
            .unwrap();
    assert!(
        json["models"].as_object().unwrap().is_empty(),
        "built-in is not in FastFlowLM's list"
    );
}

fn entry(name: &str) -> FlmEntry {
    FlmEntry {
        name: name.into(),
        url: String::new(),
        size: 1,
        flm_min_version: None,
        files: vec!["model.q4nx".into()],
        default_context_length: Some(4096),
        vlm: None,
        details: FlmDetails {
            family: "llama".into(),
            think: false,
            think_toggleable: false,
            parameter_size: "1B".into(),
            quantization_level: "Q4_1".into(),
            extra: Default::default(),
        },
        hearth: None,
        extra: Default::default(),
    }
}

/// Adds `count` entries named `<prefix>-<k>`, each in its own locked read-modify-write.
fn write_entries(root: &Path, prefix: &str, count: usize) {
    let store = Store::at(root.to_path_buf());
    for k in 0..count {
        let name = format!("{prefix}-{k}");
        store
            .registry()
            .update(|file| {
                file.models
                    .entry("w".into())
                    .or_default()
                    .insert(name.to_ascii_lowercase(), entry(&name));
                Ok(())
            })
            .unwrap();
    }
}

fn registered_names(root: &Path) -> BTreeMap<String, ()> {
    Store::at(root.to_path_buf())
        .registry()
        .read()
        .unwrap()
        .entries()
        .map(|(_, _, e)| (e.name.clone(), ()))
        .collect()
}

#[test]
fn concurrent_writers_in_threads_lose_no_entry() {
    let tmp = TempDir::new("threads");
    let root = tmp.0.clone();
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || write_entries(&root, &format!("t{t}"), 25))
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(registered_names(&root).len(), 150);
}

/// Child-process body of the test below (does nothing when run on its own).
#[test]
fn registry_writer_child() {
    if let (Ok(root), Ok(prefix)) = (
        std::env::var("HEARTH_TEST_WRITER_ROOT"),
        std::env::var("HEARTH_TEST_WRITER_PREFIX"),
    ) {
        write_entries(Path::new(&root), &prefix, 25);
    }
}

#[test]
fn concurrent_writers_in_separate_processes_lose_no_entry() {
    let tmp = TempDir::new("procs");
    let exe = std::env::current_exe().unwrap();
    // The child's name in this test binary: its module's path without the binary's name.
    let child_test = format!(
        "{}::registry_writer_child",
        module_path!().split_once("::").unwrap().1
    );
    let children: Vec<_> = (0..4)
        .map(|p| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    child_test.as_str(),
                    "--test-threads=1",
                    "--quiet",
                ])
                .env("HEARTH_TEST_WRITER_ROOT", &tmp.0)
                .env("HEARTH_TEST_WRITER_PREFIX", format!("p{p}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let names = registered_names(&tmp.0);
    assert_eq!(names.len(), 100, "every process's entries survive");
    let text = std::fs::read_to_string(tmp.0.join("model_list.json")).unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_ok(),
        "the file is whole JSON"
    );
}

/// Adds an entry by hand, as another tool sharing `model_list.json` could, tagged `tag`.
fn add_foreign_entry(store: &Store, tag: &str, folder_name: &str) {
    let (family, size) = tag.split_once(':').unwrap();
    store
        .registry()
        .update(|file| {
            file.models
                .entry(family.into())
                .or_default()
                .insert(size.into(), entry(folder_name));
            Ok(())
        })
        .unwrap();
}

#[test]
fn remove_never_deletes_outside_the_models_folder_whatever_the_registry_says() {
    let tmp = TempDir::new("rm-escape");
    let store = Store::at(tmp.0.join("data"));
    store
        .import(&fixture("tiny-q4nx"), &ImportOptions::default())
        .unwrap();
    let victim = tmp.0.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), b"precious").unwrap();

    add_foreign_entry(&store, "victim:latest", "../../victim");
    add_foreign_entry(&store, "empty:latest", "");
    for tag in ["victim:latest", "empty:latest"] {
        let err = store.remove(tag).unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err}");
        assert!(err.to_string().contains("Nothing was deleted"), "{err}");
    }
    assert!(victim.join("keep.txt").is_file(), "outside folder kept");
    assert!(
        store
            .models_dir()
            .join("tiny-q4nx")
            .join("model.q4nx")
            .is_file(),
        "other models kept"
    );
    let listed: Vec<String> = store.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(
        listed,
        vec!["tiny-q4nx".to_string()],
        "invalid entries are not listed"
    );
}

#[test]
fn install_never_deletes_a_folder_hearth_did_not_create() {
    let tmp = TempDir::new("stray");
    let store = Store::at(tmp.0.join("data"));
    let stray = store.models_dir().join("mine");
    std::fs::create_dir_all(&stray).unwrap();
    std::fs::write(stray.join("precious.txt"), b"mine").unwrap();
    std::fs::write(stray.join("config.json"), b"{}").unwrap();
    let options = ImportOptions {
        name: Some("mine".into()),
        move_files: false,
    };
    let err = store.import(&fixture("tiny-q4nx"), &options).unwrap_err();
    assert!(matches!(err, Error::FolderExists { .. }), "{err}");
    assert!(
        stray.join("precious.txt").is_file(),
        "the user's folder is kept"
    );
    assert!(store.list().unwrap().is_empty());

    // What a crash between the move and the registry write leaves is Hearth's, and replaced.
    let garbage = store.models_dir().join("crashed");
    std::fs::create_dir_all(&garbage).unwrap();
    std::fs::write(garbage.join(".hearth-installing"), b"").unwrap();
    let model = store
        .import(
            &fixture("tiny-q4nx"),
            &ImportOptions {
                name: Some("crashed".into()),
                move_files: false,
            },
        )
        .unwrap();
    assert!(model.folder.join("model.q4nx").is_file());
    assert!(!model.folder.join(".hearth-installing").exists());
}

fn folder_contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn failed_import_with_move_leaves_the_source_exactly_as_it_was() {
    let tmp = TempDir::new("import-move-fail");
    let source = tmp.0.join("mymodel");
    copy_dir(&fixture("tiny-q4nx"), &source);
    let before = folder_contents(&source);
    let store = Store::at(tmp.0.join("data"));
    // A file where the models folder should be: registration fails after the files moved.
    std::fs::create_dir_all(store.root()).unwrap();
    std::fs::write(store.models_dir(), b"not a folder").unwrap();
    let options = ImportOptions {
        name: Some("mine".into()),
        move_files: true,
    };
    store.import(&source, &options).unwrap_err();
    assert_eq!(folder_contents(&source), before, "the source is untouched");
    assert!(!store.downloads_dir().join("mine").exists());

    // Once the way is clear, the move succeeds and empties the source.
    std::fs::remove_file(store.models_dir()).unwrap();
    let model = store.import(&source, &options).unwrap();
    assert!(model.folder.join("model.q4nx").is_file());
    assert!(!source.join("model.q4nx").exists());
}

/// A model check like the engine's chat template check, refusing every model.
fn refuse_all(_dir: &Path, name: &str) -> Result<(), String> {
    Err(format!("the chat template of {name} was stopped"))
}

#[test]
fn import_runs_the_model_check_before_anything_is_registered_or_moved() {
    let tmp = TempDir::new("import-check");
    let store = Store::at(tmp.0.join("data")).with_model_check(refuse_all);
    let source = tmp.0.join("evil");
    copy_dir(&fixture("tiny-q4nx"), &source);
    let before = std::fs::read_dir(&source).unwrap().count();
    let err = store
        .import(
            &source,
            &ImportOptions {
                name: None,
                move_files: true,
            },
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::RefusedModel { name, .. } if name == "evil"),
        "{err}"
    );
    assert!(err.to_string().contains("nothing was registered"), "{err}");
    assert!(store.list().unwrap().is_empty(), "nothing is registered");
    assert_eq!(
        std::fs::read_dir(&source).unwrap().count(),
        before,
        "the source folder keeps every file, even with --move"
    );
    assert!(!store.models_dir().join("evil").exists());
}
