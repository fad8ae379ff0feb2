//! `hearth run --image`, end to end through the binary: against the FastFlowLM imitation's vision
//! model (`tests/flm-imitation`, a registry entry marked `vlm`; it answers from the bytes it was
//! sent: each picture's format, width x height and FNV-1a checksum) the picture arrives as the
//! check made it, and two go in the order given. A file that is not a picture, a fifth picture,
//! and a model that does not see (the demo model on the processor) are refused in words, before
//! any answer. The imitation is built next to `hearth` by `cargo build -p flm-imitation` (or
//! `cargo test --workspace`); without it the tests that need it say they were skipped.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use hearth_chat::picture::{check_picture, DEFAULT_LONGEST_SIDE};
use serde_json::Value;

const NAME: &str = "Demo-NPU2";

fn demo_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

/// A private home; `flm` is FastFlowLM's install there, when the test gives one.
struct Home {
    dir: tempfile::TempDir,
    flm: Option<PathBuf>,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
            flm: None,
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut command = common::hearth(self.dir.path());
        command
            .args(args)
            .env("PATH", "/usr/bin:/bin")
            .env("HEARTH_DEMO_MODEL", demo_model())
            .env_remove("HEARTH_LOG");
        match &self.flm {
            Some(flm) => command.env("HEARTH_FLM", flm),
            None => command.env_remove("HEARTH_FLM"),
        };
        command.output().expect("hearth runs")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `bytes` as the file `name` in the home; its path, as an argument.
    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.path(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_owned()
    }
}

/// FastFlowLM's install as the imitation (a wrapper `flm` next to `xclbins/NAME/`) and the demo
/// model imported as NAME, marked in the registry as a vision model as FastFlowLM's catalog
/// marks one; false (and the test skipped) when the imitation is not built.
fn install_vision_model(home: &mut Home) -> bool {
    let imitation = Path::new(env!("CARGO_BIN_EXE_hearth")).with_file_name("flm");
    if !imitation.is_file() {
        eprintln!(
            "SKIPPED: the FastFlowLM imitation is not built ({}); `cargo build -p flm-imitation` builds it",
            imitation.display()
        );
        return false;
    }
    let install = home.path("fastflowlm");
    std::fs::create_dir_all(install.join("xclbins").join(NAME)).unwrap();
    let flm = install.join("flm");
    std::fs::write(
        &flm,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", imitation.display()),
    )
    .unwrap();
    std::fs::set_permissions(&flm, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.flm = Some(flm);
    let import = home.run(&["import", demo_model().to_str().unwrap(), "--name", NAME]);
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let registry = home.path("data/hearth/model_list.json");
    let mut list: Value = serde_json::from_slice(&std::fs::read(&registry).unwrap()).unwrap();
    let mut marked = 0;
    for sizes in list["models"].as_object_mut().unwrap().values_mut() {
        for entry in sizes.as_object_mut().unwrap().values_mut() {
            if entry["name"] == NAME {
                entry["vlm"] = Value::Bool(true);
                marked += 1;
            }
        }
    }
    assert_eq!(marked, 1, "{list}");
    std::fs::write(&registry, list.to_string()).unwrap();
    true
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A `width` x `height` RGB PNG made here (one stored deflate block, so no compressor).
fn png(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0);
        for x in 0..width {
            raw.extend_from_slice(&[(x * 6) as u8, (y * 8) as u8, 128]);
        }
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    let len = raw.len() as u16;
    let mut z = vec![0x78, 0x01, 1];
    z.extend_from_slice(&len.to_le_bytes());
    z.extend_from_slice(&(!len).to_le_bytes());
    z.extend_from_slice(&raw);
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// What the imitation's vision model says of a picture file's bytes: its format, size and the
/// checksum of the picture as Hearth's check re-encodes it.
fn seen(file: &[u8]) -> String {
    let picture = check_picture(file, DEFAULT_LONGEST_SIDE).unwrap();
    let fnv1a = picture.bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!(
        "PNG {} x {}, checksum {fnv1a:08x}",
        picture.width, picture.height
    )
}

fn answer_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "hearth run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn refusal(out: &Output) -> String {
    assert!(!out.status.success(), "refused");
    assert!(out.stdout.is_empty(), "no answer was written");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn pictures_arrive_at_a_model_that_sees_them_in_the_order_given() {
    let mut home = Home::new();
    if !install_vision_model(&mut home) {
        return;
    }
    let chart = png(40, 30);
    let tall = png(20, 50);
    let first = home.file("chart.png", &chart);
    let second = home.file("tall.png", &tall);
    let ask = |images: &[&str]| {
        let mut args = vec!["run", "--model", NAME, "--backend", "npu", "--json"];
        for image in images {
            args.extend(["--image", image]);
        }
        args.push("What is in it?");
        answer_of(&home.run(&args))
    };

    let one = ask(&[&first]);
    assert_eq!(one["backend"], "npu", "{one}");
    assert_eq!(
        one["text"],
        format!("I see 1 picture: {}.", seen(&chart)),
        "the answer is made from the picture's bytes"
    );

    let two = ask(&[&second, &first]);
    assert_eq!(
        two["text"],
        format!("I see 2 pictures: {}; {}.", seen(&tall), seen(&chart)),
        "in the order given"
    );
}

#[test]
fn a_file_that_is_not_a_picture_and_a_fifth_picture_are_refused_in_words() {
    let home = Home::new();
    let notes = home.file("notes.png", b"%PDF-1.7 a document named like a picture");
    let out = home.run(&["run", "--model", "demo", "--image", &notes, "What is it?"]);
    let words = refusal(&out);
    assert!(
        words.contains("notes.png") && words.contains("is not a PNG, JPEG or WebP picture"),
        "{words}"
    );

    let dot = home.file("dot.png", &png(2, 2));
    let mut args = vec!["run", "--model", "demo"];
    for _ in 0..5 {
        args.extend(["--image", dot.as_str()]);
    }
    args.push("What are these?");
    let words = refusal(&home.run(&args));
    assert!(
        words.contains("5 pictures were given with --image; a message takes at most 4"),
        "{words}"
    );

    let gone = home.path("gone.png");
    let out = home.run(&[
        "run",
        "--model",
        "demo",
        "--image",
        gone.to_str().unwrap(),
        "?",
    ]);
    let words = refusal(&out);
    assert!(words.contains("cannot read the picture"), "{words}");
}

#[test]
fn a_model_that_does_not_see_is_refused_in_words() {
    let home = Home::new();
    let chart = home.file("chart.png", &png(40, 30));
    let out = home.run(&[
        "run",
        "--model",
        "demo",
        "--backend",
        "cpu",
        "--image",
        &chart,
        "What is in it?",
    ]);
    let words = refusal(&out);
    assert!(words.contains("does not see pictures"), "{words}");
}
