//! `hearth import` end to end through the binary, with files from outside Hearth: names taken
//! from a GGUF file are shown escaped (the review's N7), an unreadable file says it cannot be
//! read, and `--move` out of Hearth's own store is refused (N8).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use q4nx::gguf::write::{tiny_model, GgufWriter};
use q4nx::gguf::Value;

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
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn a_gguf_name_with_escape_sequences_is_shown_escaped() {
    let home = Home::new();
    let file = home.path().join("tiny.gguf");
    let hostile = "\x1b]0;PWNED\x07\x1b[2J evil \u{202e}fdp.exe";
    // The tiny model, rewritten with the hostile general.name.
    let tiny = tiny_model("llama").finish();
    let parsed = q4nx::gguf::parse(&tiny, Path::new("tiny.gguf")).unwrap();
    let mut w = GgufWriter::new(3);
    for (k, v) in &parsed.metadata {
        let v = if k == "general.name" {
            Value::String(hostile.into())
        } else {
            v.clone()
        };
        w.kv(k, v);
    }
    for t in &parsed.tensors {
        w.tensor(&t.name, &t.dims, t.kind, &tiny[t.range.clone()]);
    }
    std::fs::write(&file, w.finish()).unwrap();

    // A copy converts the file and says its `general.name`; a link does not print it.
    let out = home.run(&["import", "--copy", file.to_str().unwrap(), "--name", "evil"]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        !all.contains('\x1b'),
        "no raw ESC reaches the terminal: {all:?}"
    );
    assert!(!all.contains('\u{202e}'), "no raw bidi override: {all:?}");
    assert!(all.contains("\\u{1b}]0;PWNED"), "shown as text: {all}");
    assert!(all.contains("\\u{202e}"), "shown as text: {all}");
}

#[test]
fn an_unreadable_file_says_it_cannot_be_read() {
    let home = Home::new();
    // /proc/self/mem is a regular file whose first bytes cannot be read (EIO), even by root.
    let link = home.path().join("model.gguf");
    std::os::unix::fs::symlink("/proc/self/mem", &link).unwrap();
    let out = home.run(&["import", link.to_str().unwrap()]);
    let all = text(&out);
    assert!(!out.status.success());
    assert!(all.contains("cannot be read"), "{all}");
    assert!(!all.contains("not a GGUF file"), "{all}");
}

#[test]
fn move_out_of_the_store_is_refused_and_the_model_still_runs() {
    let home = Home::new();
    let out = home.run(&[
        "import",
        repo("tests/fixtures/hub/tiny-q4nx").to_str().unwrap(),
        "--name",
        "a",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let a = home.path().join("data/hearth/models/a");
    let out = home.run(&["import", a.to_str().unwrap(), "--name", "b", "--move"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("inside Hearth's model store"), "{all}");
    assert!(a.join("model.q4nx").is_file() && a.join("config.json").is_file());
}
