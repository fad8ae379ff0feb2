//! Input from outside Hearth, end to end through the binary: a model whose chat template never
//! ends is refused by `import` and `convert` before anything is written or registered.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Three nested loops of 100,000 iterations.
const ENDLESS_TEMPLATE: &str = "{% set ns = namespace(n=0) %}{% for a in range(100000) %}\
    {% for b in range(100000) %}{% for c in range(100000) %}{% set ns.n = ns.n + 1 %}\
    {% endfor %}{% endfor %}{% endfor %}{{ ns.n }}";

/// A private home (data and config folders of its own).
struct Home(tempfile::TempDir);

impl Home {
    fn new() -> Home {
        Home(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn run(&self, args: &[&str]) -> Output {
        let d = self.path();
        Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(args)
            .env("HOME", d)
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("HEARTH_OFFLINE", "1")
            .env_remove("HEARTH_DEMO_MODEL")
            .env_remove("HEARTH_LOG")
            .output()
            .expect("hearth runs")
    }

    /// A copy of `fixture` in `<home>/<name>`, with `template` as its chat_template.jinja.
    fn model_with_template(&self, fixture: &str, name: &str, template: &str) -> PathBuf {
        let dir = self.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(repo(fixture)).unwrap().flatten() {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        std::fs::write(dir.join("chat_template.jinja"), template).unwrap();
        dir
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn import_refuses_a_model_whose_chat_template_never_ends() {
    let home = Home::new();
    let dir = home.model_with_template("tests/fixtures/hub/tiny-q4nx", "looper", ENDLESS_TEMPLATE);
    let out = home.run(&["import", dir.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("looper")
            && err.contains("was stopped")
            && err.contains("nothing was registered"),
        "the refusal names the model and says nothing was registered: {err}"
    );
    let list = home.run(&["list", "--json"]);
    assert!(
        !String::from_utf8_lossy(&list.stdout).contains("looper"),
        "the model is not listed"
    );
    assert!(dir.join("model.q4nx").is_file(), "the source is untouched");
}

#[test]
fn convert_refuses_a_model_whose_chat_template_never_ends() {
    let home = Home::new();
    let src = home.model_with_template("tests/fixtures/engine/tiny-llama", "src", ENDLESS_TEMPLATE);
    let out_dir = home.path().join("out");
    let out = home.run(&["convert", src.to_str().unwrap(), out_dir.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("was stopped"), "{err}");
    assert!(!out_dir.exists(), "nothing was written");
}

#[test]
fn absurd_numbers_are_refused_with_a_plain_message() {
    let home = Home::new();
    let model = repo("tests/fixtures/engine/tiny-llama");
    let model = model.to_str().unwrap();
    let cases: [&[&str]; 7] = [
        &["run", "--model", model, "--context", "100000000", "hi"],
        &[
            "run",
            "--model",
            model,
            "--context",
            "18446744073709551615",
            "hi",
        ],
        &["run", "--model", model, "--threads", "100000000", "hi"],
        &[
            "run",
            "--model",
            model,
            "--max-tokens",
            "18446744073709551615",
            "hi",
        ],
        &["run", "--model", model, "--temperature", "nan", "hi"],
        &["serve", "--model", model, "--queue", "18446744073709551615"],
        &["serve", "--model", model, "--queue", "2305843009213693952"],
    ];
    for args in cases {
        let out = home.run(args);
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?} exits with 2 (a usage error), not a crash: {err}"
        );
        assert!(
            err.contains("invalid value") && !err.contains("panicked"),
            "{args:?} says which value is wrong: {err}"
        );
    }
}

#[test]
fn text_from_a_model_file_cannot_drive_the_terminal() {
    let home = Home::new();
    // The template's own error message carries escape sequences (red text, a new title).
    let dir = home.model_with_template(
        "tests/fixtures/engine/tiny-llama",
        "painter",
        "{{ raise_exception('\x1b[31mpwned\x1b]0;TITLE\x07') }}",
    );
    let out = home.run(&["run", "--model", dir.to_str().unwrap(), "hi"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("pwned"), "the message is shown: {err}");
    assert!(
        !err.contains('\x1b') && !err.contains('\x07'),
        "but its control characters are escaped: {err:?}"
    );
}

/// Whether this test may make a network namespace of its own (`unshare -n`, as root or with
/// user namespaces); when not, the caller prints why and skips.
fn can_unshare_network() -> Result<(), String> {
    match Command::new("unshare").args(["-n", "true"]).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(e) => Err(format!("unshare cannot run: {e}")),
    }
}

#[test]
fn without_any_network_list_and_run_work_and_a_pull_fails_plainly() {
    if let Err(reason) = can_unshare_network() {
        eprintln!("skipped: no network namespace can be made here ({reason})");
        return;
    }
    let home = Home::new();
    let offline = |args: &[&str]| {
        let d = home.path();
        Command::new("unshare")
            .arg("-n")
            .arg(env!("CARGO_BIN_EXE_hearth"))
            .args(args)
            .env("HOME", d)
            .env("XDG_DATA_HOME", d.join("data"))
            .env("XDG_CONFIG_HOME", d.join("config"))
            .env("HEARTH_DEMO_MODEL", repo("models/demo"))
            .env("HF_ENDPOINT", "https://huggingface.co")
            .env_remove("HEARTH_OFFLINE")
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("HEARTH_LOG")
            .output()
            .expect("hearth runs")
    };
    let list = offline(&["list"]);
    assert!(list.status.success(), "list: {}", stderr(&list));
    assert!(String::from_utf8_lossy(&list.stdout).contains("demo"));

    let run = offline(&[
        "run",
        "--model",
        "demo",
        "--backend",
        "cpu",
        "--max-tokens",
        "4",
        "-q",
        "Hello",
    ]);
    assert!(run.status.success(), "run: {}", stderr(&run));

    let pull = offline(&["pull", "someone/some-model"]);
    let err = stderr(&pull);
    assert_eq!(pull.status.code(), Some(2), "{err}");
    assert!(
        err.contains("could not reach") && err.contains("network") && !err.contains("panicked"),
        "the pull says the network is unreachable: {err}"
    );
    assert!(
        !home
            .path()
            .join("data/hearth/downloads/some-model")
            .exists(),
        "a failed pull leaves no trace"
    );
}
