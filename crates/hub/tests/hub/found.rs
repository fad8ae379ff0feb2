//! Models already on this computer: fixture trees in the layouts Ollama, LM Studio, Jan and the
//! Hugging Face cache use (a real Ollama manifest over a blob that is a small valid GGUF, an HF
//! snapshot whose files link to blobs), with an unsupported architecture, a split and a
//! truncated GGUF, a missing folder and a symbolic link loop. The scan lists each with the
//! importer's verdict and never changes anything it reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::TempDir;
use hearth_hub::{
    import_found, scan_found, FoundFormat, FoundModel, FoundRoots, FoundSource, Store,
};
use q4nx::gguf::write::tiny_model;
use q4nx::gguf::Value;
use sha2::{Digest, Sha256};

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An Ollama store with `model` under `namespace/model:tag`, its blob holding `gguf`.
fn ollama_model(root: &Path, namespace: &str, model: &str, tag: &str, gguf: &[u8]) {
    let digest = hex(gguf);
    write(&root.join(format!("blobs/sha256-{digest}")), gguf);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "digest": "sha256:00", "size": 2},
        "layers": [
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:11", "size": 3},
            {"mediaType": "application/vnd.ollama.image.model",
             "digest": format!("sha256:{digest}"), "size": gguf.len()}
        ]
    });
    write(
        &root.join(format!(
            "manifests/registry.local/{namespace}/{model}/{tag}"
        )),
        serde_json::to_string_pretty(&manifest).unwrap().as_bytes(),
    );
}

/// A safetensors file holding only `model.embed_tokens.weight` (2x2 BF16).
fn small_safetensors() -> Vec<u8> {
    let header =
        br#"{"model.embed_tokens.weight":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}"#;
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header);
    out.extend_from_slice(&[0u8; 8]);
    out
}

/// An HF cache snapshot of `org/name` whose files are links into `blobs/`, as the cache keeps them.
fn hf_snapshot(hub: &Path, org: &str, name: &str, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let repo = hub.join(format!("models--{org}--{name}"));
    let snapshot = repo.join("snapshots/0123456789abcdef");
    std::fs::create_dir_all(&snapshot).unwrap();
    write(&repo.join("refs/main"), b"0123456789abcdef");
    for (file, bytes) in files {
        let blob = repo.join(format!("blobs/{}", hex(bytes)));
        write(&blob, bytes);
        std::os::unix::fs::symlink(format!("../../blobs/{}", hex(bytes)), snapshot.join(file))
            .unwrap();
    }
    snapshot
}

fn config(arch: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "architectures": [arch], "model_type": "llama", "hidden_size": 64,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 64, "vocab_size": 32, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true
    }))
    .unwrap()
}

/// Every path under `root` (links not followed) with its size, link target and modified time.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            let link = std::fs::read_link(e.path()).ok();
            out.insert(
                e.path(),
                format!("{} {:?} {:?}", meta.len(), link, meta.modified().unwrap()),
            );
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

struct Fixture {
    tmp: TempDir,
    roots: FoundRoots,
    tiny: Vec<u8>,
}

fn fixture() -> Fixture {
    let tmp = TempDir::new("found");
    let home = tmp.0.join("home");
    let tiny = tiny_model("llama").finish();
    let phi = tiny_model("phimoe").finish();
    let split = tiny_model("llama")
        .kv("split.no", Value::U16(0))
        .kv("split.count", Value::U16(3))
        .finish();

    let ollama = home.join(".ollama/models");
    ollama_model(&ollama, "library", "tiny", "latest", &tiny);
    ollama_model(&ollama, "someone", "phi", "4b", &phi);

    let lmstudio = home.join(".lmstudio/models");
    write(&lmstudio.join("pub/Tiny-GGUF/Tiny.Q4_1.gguf"), &tiny);
    write(&lmstudio.join("pub/Tiny-GGUF/mmproj-Tiny-f16.gguf"), &phi);
    write(
        &lmstudio.join("pub/Big-GGUF/Big-00001-of-00003.gguf"),
        &split,
    );

    let jan = home.join("jan/models");
    write(&jan.join("tiny-jan/model.gguf"), &tiny);
    write(&jan.join("broken/broken.gguf"), &tiny[..tiny.len() - 100]);
    std::os::unix::fs::symlink(&jan, jan.join("tiny-jan/loop")).unwrap();

    let hub = home.join(".cache/huggingface/hub");
    hf_snapshot(
        &hub,
        "org",
        "Tiny-GGUF",
        &[("tiny-q4_1.gguf", tiny.clone())],
    );
    let files = |arch: &str| {
        vec![
            ("config.json", config(arch)),
            ("tokenizer.json", b"{}".to_vec()),
            ("tokenizer_config.json", b"{}".to_vec()),
            ("model.safetensors", small_safetensors()),
        ]
    };
    hf_snapshot(&hub, "org", "tiny-st", &files("LlamaForCausalLM"));
    hf_snapshot(&hub, "org", "phi-st", &files("PhiMoEForCausalLM"));
    let committed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/tiny-safetensors");
    let real: Vec<(String, Vec<u8>)> = std::fs::read_dir(committed)
        .unwrap()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let real: Vec<(&str, Vec<u8>)> = real.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    hf_snapshot(&hub, "org", "tiny-real", &real);

    let roots = FoundRoots {
        ollama: vec![ollama, home.join("no-such-ollama")],
        lmstudio: vec![lmstudio, home.join(".cache/lm-studio/models")],
        jan: vec![jan],
        huggingface: vec![hub],
        ..FoundRoots::default()
    };
    Fixture { tmp, roots, tiny }
}

fn by_name<'a>(found: &'a [FoundModel], name: &str) -> &'a FoundModel {
    found
        .iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("{name} not found in {found:#?}"))
}

#[test]
fn each_programs_models_are_found_with_the_importers_verdict() {
    let f = fixture();
    let found = scan_found(&f.roots);

    let tiny = by_name(&found, "tiny:latest");
    assert_eq!(tiny.source, FoundSource::Ollama);
    assert_eq!(tiny.format, FoundFormat::Gguf);
    assert_eq!(tiny.size_bytes, f.tiny.len() as u64);
    assert_eq!(tiny.architecture.as_deref(), Some("llama"));
    assert!(tiny.runnable, "{tiny:?}");
    assert_eq!(tiny.reason, None);
    assert_eq!(tiny.import_name, "tiny-latest");
    assert!(
        tiny.path.to_string_lossy().contains("blobs/sha256-"),
        "the blob is what gets imported: {tiny:?}"
    );

    let phi = by_name(&found, "someone/phi:4b");
    assert_eq!(phi.architecture.as_deref(), Some("phimoe"));
    assert!(!phi.runnable);
    let reason = phi.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("Phi-3.5-MoE models are not supported yet"),
        "says in plain words which family is not run: {reason}"
    );

    let lm = by_name(&found, "Tiny.Q4_1");
    assert_eq!(lm.source, FoundSource::Lmstudio);
    assert!(lm.runnable, "{lm:?}");
    assert!(
        !found.iter().any(|m| m.name.starts_with("mmproj")),
        "vision projectors are not models"
    );
    let split = by_name(&found, "Big-00001-of-00003");
    assert!(!split.runnable);
    assert!(
        split.reason.as_deref().unwrap().contains("part 1 of 3"),
        "{split:?}"
    );

    let jan = by_name(&found, "tiny-jan");
    assert_eq!(jan.source, FoundSource::Jan);
    assert!(jan.runnable, "{jan:?}");
    let broken = by_name(&found, "broken");
    assert!(!broken.runnable);
    assert!(
        broken.reason.as_deref().unwrap().contains("truncated"),
        "{broken:?}"
    );
    assert_eq!(
        found
            .iter()
            .filter(|m| m.source == FoundSource::Jan)
            .count(),
        2,
        "the link loop adds nothing: {found:#?}"
    );

    let hf = by_name(&found, "org/Tiny-GGUF/tiny-q4_1");
    assert_eq!(hf.source, FoundSource::Huggingface);
    assert!(hf.runnable, "a linked snapshot file is read: {hf:?}");
    assert_eq!(hf.size_bytes, f.tiny.len() as u64, "the blob's size");

    let st = by_name(&found, "org/tiny-st");
    assert_eq!(st.format, FoundFormat::Safetensors);
    assert_eq!(st.architecture.as_deref(), Some("LlamaForCausalLM"));
    assert!(!st.runnable, "it holds only the embedding");
    assert!(st.reason.is_some());
    assert!(st.size_bytes > small_safetensors().len() as u64);
    let pst = by_name(&found, "org/phi-st");
    assert!(
        pst.reason.as_deref().unwrap().contains("PhiMoEForCausalLM"),
        "{pst:?}"
    );
    let real = by_name(&found, "org/tiny-real");
    assert!(real.runnable, "{real:?}");
    assert_eq!(real.architecture.as_deref(), Some("LlamaForCausalLM"));
    assert_eq!(found.len(), 10, "{found:#?}");
}

#[test]
fn scanning_writes_nothing() {
    let f = fixture();
    let before = tree(&f.tmp.0);
    let first = scan_found(&f.roots);
    let second = scan_found(&f.roots);
    assert_eq!(first, second, "the same folders give the same list");
    assert_eq!(tree(&f.tmp.0), before, "the scan only reads");
}

#[test]
fn a_walk_stops_at_its_bounds() {
    let f = fixture();
    let roots = FoundRoots {
        max_depth: 1,
        ..f.roots.clone()
    };
    let found = scan_found(&roots);
    assert!(
        !found.iter().any(|m| m.source == FoundSource::Lmstudio),
        "LM Studio's files are two folders down"
    );
    let roots = FoundRoots {
        max_entries: 1,
        ..f.roots
    };
    assert!(scan_found(&roots).len() < 10);
}

#[test]
fn a_found_gguf_is_imported_and_left_as_it_was() {
    let f = fixture();
    let store = Store::at(f.tmp.0.join("data"));
    let found = scan_found(&f.roots);
    let tiny = by_name(&found, "tiny:latest");
    let mut phases = Vec::new();
    let model = import_found(
        &store,
        &tiny.path,
        Some(tiny.import_name.clone()),
        false,
        &mut |p| phases.push(p.phase),
    )
    .expect("import");
    assert_eq!(model.name, "tiny-latest");
    assert_eq!(std::fs::read(&tiny.path).unwrap(), f.tiny, "only read");
    assert!(phases.contains(&hearth_hub::Phase::Converting));
    assert_eq!(phases.last(), Some(&hearth_hub::Phase::Done));
    assert_eq!(store.list().unwrap().len(), 1);
    // Linked where Ollama keeps it, not copied (issue 49).
    let linked = model.linked.expect("a found GGUF is linked");
    assert_eq!(linked.file, tiny.path.canonicalize().unwrap());
    assert_eq!(model.format, hearth_hub::WeightFormat::Gguf);
    assert!(
        !model.folder.join("model.q4nx").exists(),
        "no copy of the weights"
    );
}

#[test]
fn a_found_gguf_is_copied_when_asked() {
    let f = fixture();
    let store = Store::at(f.tmp.0.join("data"));
    let found = scan_found(&f.roots);
    let tiny = by_name(&found, "tiny:latest");
    let model = import_found(&store, &tiny.path, None, true, &mut |_| {}).expect("copy");
    assert_eq!(model.linked, None);
    assert_eq!(model.format, hearth_hub::WeightFormat::Q4nx);
    assert!(model.folder.join("model.q4nx").is_file());
    assert_eq!(std::fs::read(&tiny.path).unwrap(), f.tiny, "only read");
}

#[test]
fn a_found_safetensors_snapshot_is_copied_never_moved() {
    let f = fixture();
    let store = Store::at(f.tmp.0.join("data"));
    let found = scan_found(&f.roots);
    let real = by_name(&found, "org/tiny-real");
    let before = tree(&real.path);
    let model = import_found(
        &store,
        &real.path,
        Some(real.import_name.clone()),
        false,
        &mut |_| {},
    )
    .expect("import");
    assert_eq!(model.name, "org-tiny-real");
    assert_eq!(
        tree(&real.path),
        before,
        "the snapshot's links are where they were"
    );
    assert!(model.folder.join("model.safetensors").is_file());
    assert!(
        !std::fs::symlink_metadata(model.folder.join("model.safetensors"))
            .unwrap()
            .is_symlink(),
        "the store holds the bytes, not a link into the cache"
    );
}

#[test]
fn the_entry_budget_is_for_the_whole_scan_not_each_walk() {
    // The review (N10): 20 HF repos x 20 snapshot links to one big folder took 63 s, each walk
    // with its own 20,000 entries. Here, a small copy: an LM Studio folder of 50 files uses the
    // budget of 54 entries, so the Jan root after it gets only what is left.
    let tmp = TempDir::new("found-budget");
    let lmstudio = tmp.0.join("lmstudio");
    for i in 0..50 {
        write(&lmstudio.join(format!("pub/repo/f{i:02}.txt")), b"x");
    }
    let jan = tmp.0.join("jan");
    write(&jan.join("a/b/c/tiny.gguf"), &tiny_model("llama").finish());
    let roots = |max_entries| FoundRoots {
        lmstudio: vec![lmstudio.clone()],
        jan: vec![jan.clone()],
        max_entries,
        ..FoundRoots::default()
    };
    assert_eq!(scan_found(&roots(1000)).len(), 1, "found with a big budget");
    // LM Studio takes 52 entries (two folders and 50 files), Jan needs 4.
    assert!(
        scan_found(&roots(54)).is_empty(),
        "the LM Studio walk spent the scan's budget"
    );
}

#[test]
fn snapshots_linked_to_one_folder_are_judged_once() {
    let tmp = TempDir::new("found-links");
    let hub = tmp.0.join("hub");
    let big = tmp.0.join("big");
    write(&big.join("tiny.gguf"), &tiny_model("llama").finish());
    for r in 0..4 {
        let snapshots = hub.join(format!("models--org--r{r}/snapshots"));
        std::fs::create_dir_all(&snapshots).unwrap();
        for s in 0..4 {
            std::os::unix::fs::symlink(&big, snapshots.join(format!("rev{s}"))).unwrap();
        }
    }
    let roots = FoundRoots {
        huggingface: vec![hub],
        ..FoundRoots::default()
    };
    assert_eq!(scan_found(&roots).len(), 1, "{:#?}", scan_found(&roots));
}

#[test]
fn the_models_judged_in_one_scan_are_capped() {
    let tmp = TempDir::new("found-models");
    let jan = tmp.0.join("jan");
    let tiny = tiny_model("llama").finish();
    for i in 0..5 {
        write(&jan.join(format!("m{i}/model.gguf")), &tiny);
    }
    let roots = FoundRoots {
        jan: vec![jan],
        max_models: 3,
        ..FoundRoots::default()
    };
    assert_eq!(scan_found(&roots).len(), 3);
}

#[test]
fn a_huge_config_json_in_a_snapshot_is_refused_unread() {
    // The review (N10): a 1 GB sparse config.json cost 1 GB of memory. Here 64 MiB, sparse.
    let tmp = TempDir::new("found-config");
    let hub = tmp.0.join("hub");
    let snapshot = hf_snapshot(
        &hub,
        "org",
        "huge-config",
        &[
            ("tokenizer.json", b"{}".to_vec()),
            ("tokenizer_config.json", b"{}".to_vec()),
            ("model.safetensors", small_safetensors()),
        ],
    );
    let config = std::fs::File::create(snapshot.join("config.json")).unwrap();
    config.set_len(64 << 20).unwrap();
    let roots = FoundRoots {
        huggingface: vec![hub],
        ..FoundRoots::default()
    };
    let found = scan_found(&roots);
    let model = by_name(&found, "org/huge-config");
    assert!(!model.runnable);
    let reason = model.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("larger than 1024 KiB"), "{reason}");
}

#[test]
fn an_unreadable_gguf_is_listed_as_unreadable_not_as_another_format() {
    // /proc/self/mem is a regular file whose first bytes cannot be read (EIO), whoever runs
    // the test (root reads a chmod 000 file).
    let tmp = TempDir::new("found-unreadable");
    let lmstudio = tmp.0.join("lmstudio");
    std::fs::create_dir_all(lmstudio.join("pub/repo")).unwrap();
    std::os::unix::fs::symlink("/proc/self/mem", lmstudio.join("pub/repo/x.gguf")).unwrap();
    let roots = FoundRoots {
        lmstudio: vec![lmstudio],
        ..FoundRoots::default()
    };
    let found = scan_found(&roots);
    let reason = found[0].reason.as_deref().unwrap_or_default();
    assert!(reason.contains("cannot be read"), "{reason}");
}

#[test]
fn a_256_mib_hostile_gguf_in_a_watched_folder_is_listed_not_fatal() {
    // The review's N3 reproduction, under LM Studio's folder: a u8 array of 2^28 (sparse).
    // Before, `list --found` aborted on an 8 GiB allocation.
    let tmp = TempDir::new("found-hostile");
    let lmstudio = tmp.0.join("lmstudio");
    let path = lmstudio.join("p/r/evil.gguf");
    let mut head = b"GGUF".to_vec();
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend_from_slice(&0u64.to_le_bytes());
    head.extend_from_slice(&1u64.to_le_bytes());
    head.extend_from_slice(&10u64.to_le_bytes());
    head.extend_from_slice(b"evil.bytes");
    head.extend_from_slice(&9u32.to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    head.extend_from_slice(&(1u64 << 28).to_le_bytes());
    write(&path, &head);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(head.len() as u64 + (1 << 28) + 32)
        .unwrap();
    let roots = FoundRoots {
        lmstudio: vec![lmstudio],
        ..FoundRoots::default()
    };
    let found = scan_found(&roots);
    assert_eq!(found.len(), 1);
    assert!(!found[0].runnable);
    assert!(
        found[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("general.architecture")),
        "{:?}",
        found[0].reason
    );
}
