//! `kill -9` of the `hearth` command in the middle of its work: a download, an import (copy
//! and `--move`) and a conversion. Each run is killed at a moment chosen by what is on disk
//! (the staging folder appears, half the weights are copied, the model folder is in place, the
//! partial download holds N bytes), never by a clock. Afterwards:
//! - every registered model is whole: each file it lists is there with its size and sha256;
//! - nothing half-written is registered;
//! - nothing the user had is lost: the source folder is as it was (or, once the model is
//!   registered, each missing source file is in the model, byte for byte);
//! - the same command, run again, finishes the work (a download resumes where it stopped).

use crate::mockhub;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hearth_hub::{sha256_file, Store};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A private home: data and config folders of its own.
struct Home(tempfile::TempDir);

impl Home {
    fn new() -> Home {
        Home(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let d = self.path();
        let mut command = Command::new(env!("CARGO_BIN_EXE_hearth"));
        command
            .args(args)
            .env("HOME", d)
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("XDG_CACHE_HOME", d.join("cache"))
            .env_remove("HEARTH_DEMO_MODEL")
            .env_remove("HEARTH_LOG")
            .env_remove("HF_TOKEN");
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("hearth runs")
    }

    fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("hearth starts")
    }

    fn data(&self) -> PathBuf {
        self.path().join("data/hearth")
    }

    fn store(&self) -> Store {
        Store::at(self.data())
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Polls until `moment` holds, then kills `child` with SIGKILL. Returns whether it was killed
/// (false: the command finished first). Bounded: gives up on the moment after a minute.
fn kill_at(child: &mut Child, moment: impl Fn() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if moment() {
            child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
            child.wait().unwrap();
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the moment to kill never came within a minute");
}

/// Every registered model is whole: each file its entry lists exists with that size and sha256.
fn assert_registered_models_are_whole(store: &Store) {
    for model in store.list().expect("the registry still reads") {
        for (file, record) in &model.files {
            let path = model.folder.join(file);
            let size = std::fs::metadata(&path)
                .unwrap_or_else(|e| {
                    panic!("{} is registered but {file} is missing: {e}", model.name)
                })
                .len();
            assert_eq!(size, record.size, "{} {file}: size", model.name);
            assert_eq!(
                sha256_file(&path).unwrap().sha256,
                record.sha256,
                "{} {file}: content",
                model.name
            );
        }
    }
}

/// Name, size and sha256 of each file in `dir`.
fn snapshot(dir: &Path) -> BTreeMap<String, (u64, String)> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let path = e.path();
            let size = e.metadata().unwrap().len();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, (size, sha256_file(&path).unwrap().sha256))
        })
        .collect()
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// A model folder of about 90 MB (random Q4_1 weights in a larger shape, with the demo model's
/// tokenizer and chat template), so that copying it takes long enough to be interrupted.
fn big_model(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let demo = repo("models/demo");
    for file in [
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        std::fs::copy(demo.join(file), dir.join(file)).unwrap();
    }
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(demo.join("config.json")).unwrap()).unwrap();
    config["hidden_size"] = 1024.into();
    config["intermediate_size"] = 2816.into();
    config["num_hidden_layers"] = 12.into();
    config["num_attention_heads"] = 16.into();
    config["num_key_value_heads"] = 4.into();
    config["head_dim"] = 64.into();
    let text = serde_json::to_string_pretty(&config).unwrap();
    std::fs::write(dir.join("config.json"), &text).unwrap();
    let parsed = q4nx::ModelConfig::from_json(&text).unwrap();
    q4nx::synthetic::write_random_model(dir, &parsed, 7).unwrap();
}

/// One import run killed at `moment`, then checked and run again.
fn import_killed(move_files: bool, moment_name: &str, moment: fn(&Home) -> bool) {
    let home = Home::new();
    let source = home.path().join("my-model");
    big_model(&source);
    let before = snapshot(&source);
    let source_arg = source.to_str().unwrap();
    let mut args = vec!["import", source_arg, "--name", "big"];
    if move_files {
        args.push("--move");
    }
    let mut child = home.spawn(&args);
    let killed = kill_at(&mut child, || moment(&home));
    println!("import (move: {move_files}) at \"{moment_name}\": killed {killed}");

    let store = home.store();
    assert_registered_models_are_whole(&store);
    let registered = store.get("big").ok();
    let now = snapshot(&source);
    for (file, record) in &before {
        match (now.get(file), &registered) {
            (Some(kept), _) => assert_eq!(kept, record, "{file} in the source changed"),
            (None, Some(model)) => {
                let installed = model.folder.join(file);
                assert_eq!(
                    (
                        file_size(&installed),
                        sha256_file(&installed).unwrap().sha256
                    ),
                    record.clone(),
                    "{file} left the source and is not in the model"
                );
            }
            (None, None) => panic!(
                "{file} left the source but no model is registered (killed at \"{moment_name}\")"
            ),
        }
    }

    // The same command again finishes the job (or says it is already done).
    let again = home.run(&args);
    if registered.is_some() {
        assert!(
            !again.status.success() && stderr(&again).contains("big"),
            "a second import of a registered name is refused: {}",
            stderr(&again)
        );
    } else {
        assert!(
            again.status.success(),
            "the second import: {}",
            stderr(&again)
        );
    }
    let model = store.get("big").expect("registered after the second run");
    assert!(model.files.contains_key("model.q4nx"), "{:?}", model.files);
    assert_registered_models_are_whole(&store);
    assert!(
        !store.downloads_dir().join("big").exists(),
        "the staging folder is gone"
    );
    if move_files {
        assert!(
            !source.join("model.q4nx").exists(),
            "a finished --move takes the weights out of the source"
        );
    } else {
        assert_eq!(snapshot(&source), before, "a copy leaves the source alone");
    }
}

fn staging_exists(home: &Home) -> bool {
    home.data().join("downloads/big/files").is_dir()
}

fn half_copied(home: &Home) -> bool {
    let staged = home.data().join("downloads/big/files/model.q4nx");
    let whole = file_size(&home.path().join("my-model/model.q4nx"));
    file_size(&staged) >= whole / 2
}

fn model_folder_in_place(home: &Home) -> bool {
    home.data().join("models/big").is_dir()
}

#[test]
fn kill_9_during_an_import_loses_nothing_and_the_import_can_be_run_again() {
    for move_files in [false, true] {
        import_killed(move_files, "the staging folder appears", staging_exists);
        import_killed(move_files, "half the weights are staged", half_copied);
        import_killed(
            move_files,
            "the model folder is in place",
            model_folder_in_place,
        );
    }
}

#[test]
fn kill_9_during_a_download_registers_nothing_and_the_pull_resumes() {
    let hub = mockhub::MockHub::start();
    let repo_name = "hearth-test/Tiny-Q4NX";
    hub.add_repo(
        repo_name,
        "0123456789abcdef0123456789abcdef01234567",
        mockhub::repo_files("tiny-q4nx"),
    );
    // The first request of the weights stops sending after 60 000 bytes; the command is
    // killed once its partial file holds them.
    const AT: u64 = 60_000;
    hub.stall_after("model.q4nx", AT, Duration::from_secs(30));
    let home = Home::new();
    let pull = |home: &Home| {
        let mut command = home.command(&["pull", repo_name]);
        command
            .env("HF_ENDPOINT", &hub.endpoint)
            .env_remove("HEARTH_OFFLINE")
            .env_remove("HF_HUB_OFFLINE");
        command
    };
    let mut child = pull(&home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let downloads = home.data().join("downloads");
    let part_holds = || {
        walk_files(&downloads)
            .iter()
            .any(|p| p.extension().is_some_and(|e| e == "part") && file_size(p) >= AT)
    };
    assert!(
        kill_at(&mut child, part_holds),
        "the pull finished before the kill"
    );

    let store = home.store();
    assert!(store.list().unwrap().is_empty(), "nothing is registered");
    let again = pull(&home).output().unwrap();
    assert!(
        again.status.success(),
        "the second pull: {}",
        stderr(&again)
    );
    assert_registered_models_are_whole(&store);
    assert_eq!(store.list().unwrap().len(), 1);
    let last = hub
        .log()
        .into_iter()
        .rfind(|l| l.path.starts_with("/cdn/"))
        .expect("the weights were fetched");
    assert_eq!(
        last.range.as_deref(),
        Some(format!("bytes={AT}-").as_str()),
        "the second run resumed where the first was killed"
    );
}

#[test]
fn kill_9_during_a_conversion_leaves_no_output_and_the_conversion_can_be_run_again() {
    let home = Home::new();
    let source = repo("tests/fixtures/hub/tiny-safetensors");
    let out = home.path().join("converted");
    let args = ["convert", source.to_str().unwrap(), out.to_str().unwrap()];
    let partial = home.path().join(".converted.partial");
    // Two moments: the folder appears (the kill may land before it is marked as Hearth's), and
    // the weights file is being written into it.
    let moments: [&dyn Fn() -> bool; 2] = [&|| partial.is_dir(), &|| {
        partial.join("model.q4nx").is_file()
    }];
    for (i, moment) in moments.iter().enumerate() {
        let mut child = home.spawn(&args);
        let killed = kill_at(&mut child, moment);
        println!("convert, moment {i}: killed {killed}");
        if killed {
            assert!(!out.exists(), "a killed conversion leaves no output folder");
        } else {
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
    let again = home.run(&args);
    assert!(
        again.status.success(),
        "the convert after the kills: {}",
        stderr(&again)
    );
    assert!(out.join("model.q4nx").is_file());
    assert!(!out.join(".hearth-convert-partial").exists());
    assert!(!partial.exists(), "the partial folder is cleared");
    let imported = home.run(&["import", out.to_str().unwrap(), "--name", "converted"]);
    assert!(imported.status.success(), "{}", stderr(&imported));
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk_files(&path));
        } else {
            found.push(path);
        }
    }
    found
}
