//! A GGUF linked, not copied (`q4nx::gguf::link_gguf`): the folder it writes, the tensors a
//! linked folder serves, and the plain errors for a file that was moved, deleted, truncated or
//! changed, and for a damaged link.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use q4nx::gguf::{link_gguf, GgmlType, GgufLink, LINK_FILE};
use q4nx::{Error, Tensor, WeightFormat, Weights};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf")
        .join(name)
}

/// A copy of a fixture in `dir` (a test may move or change it), linked into `dir/model`.
fn linked(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let gguf = dir.join(name);
    std::fs::copy(fixture(name), &gguf).unwrap();
    let model = dir.join("model");
    link_gguf(&gguf, &model, &mut |_| {}).unwrap();
    (gguf, model)
}

#[test]
fn a_link_holds_no_weights_and_serves_the_files_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let (gguf, model) = linked(dir.path(), "tiny-llama3-q8_0.gguf");
    let mut names: Vec<String> = std::fs::read_dir(&model)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "config.json",
            "generation_config.json",
            LINK_FILE,
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let link = GgufLink::read(&model).unwrap();
    assert_eq!(link.path, std::fs::canonicalize(&gguf).unwrap());
    assert_eq!(link.bytes, std::fs::metadata(&gguf).unwrap().len());
    let config = std::fs::read_to_string(model.join("config.json")).unwrap();
    assert!(config.contains("\"rope_interleaved\": true"), "{config}");

    let w = Weights::open(&model).unwrap();
    assert_eq!(w.format(), WeightFormat::Gguf);
    assert_eq!(w.path(), link.path);
    match w.get("model.layers.0.self_attn.q_proj.weight").unwrap() {
        Tensor::Gguf(m) => {
            assert_eq!(m.kind, GgmlType::Q8_0);
            assert_eq!(m.bytes.len(), m.rows * m.kind.bytes_for(m.cols));
        }
        other => panic!("{}", other.describe()),
    }
    match w.get("model.norm.weight").unwrap() {
        Tensor::Dense(d) => assert!(d.dtype.is_float()),
        other => panic!("{}", other.describe()),
    }
}

#[test]
fn gemma_norms_come_back_as_hugging_faces_w() {
    let dir = tempfile::tempdir().unwrap();
    let (gguf, model) = linked(dir.path(), "tiny-gemma3-q8_0.gguf");
    let file = q4nx::gguf::GgufFile::open(&gguf).unwrap();
    let info = file.header().tensor("output_norm.weight").unwrap().clone();
    let mut stored = vec![0f32; info.elements() as usize];
    q4nx::gguf::dequantize(info.kind, file.data(&info), &mut stored);
    let w = Weights::open(&model).unwrap();
    let Tensor::Dense(norm) = w.get("model.norm.weight").unwrap() else {
        panic!("a norm is dense");
    };
    let served = norm.to_f32();
    for (s, v) in stored.iter().zip(&served) {
        assert_eq!(*v, s - 1.0);
    }
}

fn open_err(model: &Path) -> String {
    let e = Weights::open(model).unwrap_err();
    let text = e.to_string();
    match e {
        Error::LinkedFileMissing { .. } | Error::LinkedFileChanged { .. } => {
            assert!(
                text.contains("was moved or changed since you added it")
                    && text.contains("find it, or remove it"),
                "{text}"
            );
        }
        Error::BadLink { .. } => assert!(text.contains("add the file again"), "{text}"),
        other => panic!("not a link error: {other}"),
    }
    text
}

#[test]
fn a_moved_deleted_truncated_or_changed_file_is_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let (gguf, model) = linked(dir.path(), "tiny-qwen2-q8_0.gguf");
    let original = std::fs::read(&gguf).unwrap();
    let times = std::fs::metadata(&gguf).unwrap().modified().unwrap();
    let set_time = |p: &Path| {
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(times)
            .unwrap()
    };

    // Moved.
    let moved = dir.path().join("elsewhere.gguf");
    std::fs::rename(&gguf, &moved).unwrap();
    let e = open_err(&model);
    assert!(e.contains("not there any more"), "{e}");
    std::fs::rename(&moved, &gguf).unwrap();
    Weights::open(&model).unwrap();

    // Truncated (same time kept, so only the size tells).
    std::fs::File::options()
        .write(true)
        .open(&gguf)
        .unwrap()
        .set_len(original.len() as u64 - 1000)
        .unwrap();
    set_time(&gguf);
    let e = open_err(&model);
    assert!(e.contains("bytes"), "{e}");

    // Rewritten with the same size and time but another header byte.
    std::fs::write(&gguf, &original).unwrap();
    set_time(&gguf);
    Weights::open(&model).unwrap();
    let at = original.windows(4).position(|w| w == b"qwen").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&gguf)
        .unwrap()
        .write_all_at(b"QWEN", at as u64)
        .unwrap();
    set_time(&gguf);
    let e = open_err(&model);
    assert!(e.contains("header"), "{e}");

    // Touched: the same bytes at another time count as changed.
    std::fs::write(&gguf, &original).unwrap();
    let e = open_err(&model);
    assert!(e.contains("modified"), "{e}");

    // Deleted.
    std::fs::remove_file(&gguf).unwrap();
    open_err(&model);
}

#[test]
fn a_damaged_link_file_is_refused_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let (_gguf, model) = linked(dir.path(), "tiny-llama3-q8_0.gguf");
    let good = std::fs::read_to_string(model.join(LINK_FILE)).unwrap();
    let link = GgufLink::read(&model).unwrap();
    let cases = [
        String::new(),
        "[]".into(),
        "{\"version\": 1}".into(),
        good.replace("\"version\": 1", "\"version\": 2"),
        good.replace(&link.header_sha256, "zz"),
        good.replace(&link.path.display().to_string(), "relative.gguf"),
        good.replace(
            &format!("\"header_bytes\": {}", link.header_bytes),
            "\"header_bytes\": 18446744073709551615",
        ),
        good.replace('}', ", \"extra\": 1}"),
        "x".repeat(100_000),
    ];
    for case in cases {
        std::fs::write(model.join(LINK_FILE), &case).unwrap();
        let e = Weights::open(&model).unwrap_err();
        assert!(matches!(e, Error::BadLink { .. }), "{case:.80}: {e}");
        open_err(&model);
    }
    std::fs::write(model.join(LINK_FILE), [0xff, 0xfe, 0x00]).unwrap();
    open_err(&model);
}

#[test]
fn linking_refuses_what_importing_refuses_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, b"hello, not a model").unwrap();
    let model = dir.path().join("model");
    let e = link_gguf(&not_gguf, &model, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a GGUF file"), "{e}");
    let missing = dir.path().join("missing.gguf");
    assert!(link_gguf(&missing, &model, &mut |_| {}).is_err());
    let mut w = q4nx::gguf::write::tiny_model("phimoe");
    let phi = dir.path().join("phi.gguf");
    std::fs::write(&phi, w.kv("x", q4nx::gguf::Value::U32(1)).finish()).unwrap();
    let e = link_gguf(&phi, &model, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not one Hearth runs"), "{e}");
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.gguf", "phi.gguf"]);
}

#[test]
fn a_linked_model_copies_into_huge_pages_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (_gguf, model) = linked(dir.path(), "tiny-gemma3-q8_0.gguf");
    let mapped = Weights::open(&model).unwrap();
    let mut copied = Weights::open(&model).unwrap();
    copied.copy_into_huge_pages().unwrap();
    assert_eq!(mapped.names(), copied.names());
    assert_eq!(mapped.data_bytes(), copied.data_bytes());
    for name in mapped.names() {
        let bytes = |w: &Weights| match w.get(name).unwrap() {
            Tensor::Gguf(m) => m.bytes.to_vec(),
            Tensor::Dense(d) => d.bytes.to_vec(),
            other => panic!("{name}: {}", other.describe()),
        };
        assert_eq!(bytes(&mapped), bytes(&copied), "{name}");
    }
}
