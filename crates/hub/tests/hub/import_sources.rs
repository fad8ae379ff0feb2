//! `import DIR` copies only what is the model's (issue 39, the review's N2, N8 and N11): links
//! out of the folder, `/proc` and device files are refused naming the file, a Hugging Face
//! snapshot's links into its `blobs/` are fine, copies are never more readable than their
//! source, `--move` from inside the store is refused, and a killed GGUF import leaves nothing
//! hidden behind once the next import runs.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::common::{fixture, TempDir};
use hearth_hub::{Error, GgufImportOptions, ImportOptions, Store};

/// A copy of the tiny Q4NX fixture at `dir`.
fn model_folder(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    for entry in std::fs::read_dir(fixture("tiny-q4nx")).unwrap().flatten() {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir.to_path_buf()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn import(store: &Store, dir: &Path, name: &str) -> Result<hearth_hub::InstalledModel, Error> {
    store.import(
        dir,
        &ImportOptions {
            name: Some(name.into()),
            move_files: false,
        },
    )
}

#[test]
fn a_link_out_of_the_folder_is_refused_naming_the_file() {
    // The review's reproduction: kernel.xclbin -> ../../secret (0600), installed 0644 before.
    let tmp = TempDir::new("links-out");
    let secret = tmp.0.join("secret");
    std::fs::write(&secret, b"TOP-SECRET").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let dir = model_folder(&tmp.0.join("Downloads/m"));
    symlink("../../secret", dir.join("kernel.xclbin")).unwrap();
    let store = Store::at(tmp.0.join("data"));
    let err = import(&store, &dir, "evil").unwrap_err().to_string();
    assert!(
        err.contains("kernel.xclbin") && err.contains("outside the folder"),
        "{err}"
    );
    assert!(store.list().unwrap().is_empty(), "nothing registered");
    assert!(!store.models_dir().join("evil").exists());

    // -> /proc/self/environ (HF_TOKEN on disk before) and -> /proc/self/pagemap (disk filled).
    for target in ["/proc/self/environ", "/proc/self/pagemap"] {
        std::fs::remove_file(dir.join("kernel.xclbin")).unwrap();
        symlink(target, dir.join("kernel.xclbin")).unwrap();
        let err = import(&store, &dir, "q").unwrap_err().to_string();
        assert!(err.contains("kernel.xclbin"), "{target}: {err}");
    }
    assert!(store.list().unwrap().is_empty());
}

#[test]
fn a_link_to_a_file_inside_the_folder_is_copied() {
    let tmp = TempDir::new("links-in");
    let dir = model_folder(&tmp.0.join("m"));
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::write(dir.join("kernels/attn.xclbin"), b"kernel").unwrap();
    symlink("kernels/attn.xclbin", dir.join("attn.xclbin")).unwrap();
    let store = Store::at(tmp.0.join("data"));
    let model = import(&store, &dir, "ok").unwrap();
    assert_eq!(
        std::fs::read(model.folder.join("attn.xclbin")).unwrap(),
        b"kernel"
    );
    assert!(!model.folder.join("attn.xclbin").is_symlink(), "a copy");
}

#[test]
fn a_hugging_face_snapshot_links_into_its_blobs() {
    let tmp = TempDir::new("snapshot");
    let repo = tmp.0.join("hub/models--org--tiny");
    let snapshot = repo.join("snapshots/0123abc");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    for entry in std::fs::read_dir(fixture("tiny-q4nx")).unwrap().flatten() {
        let blob = repo
            .join("blobs")
            .join(format!("b-{}", entry.file_name().to_string_lossy()));
        std::fs::copy(entry.path(), &blob).unwrap();
        symlink(&blob, snapshot.join(entry.file_name())).unwrap();
    }
    let store = Store::at(tmp.0.join("data"));
    import(&store, &snapshot, "from-cache").expect("links into blobs/ are the model's");

    // The same links from a folder that is not a cache snapshot lead out of it.
    let other = tmp.0.join("elsewhere/m");
    std::fs::create_dir_all(&other).unwrap();
    for entry in std::fs::read_dir(&snapshot).unwrap().flatten() {
        let target = std::fs::read_link(entry.path()).unwrap();
        symlink(target, other.join(entry.file_name())).unwrap();
    }
    let err = import(&store, &other, "not-cache").unwrap_err().to_string();
    assert!(err.contains("outside the folder"), "{err}");
}

#[test]
fn a_device_file_or_pipe_in_the_folder_is_refused() {
    let tmp = TempDir::new("device");
    let dir = model_folder(&tmp.0.join("m"));
    // A named pipe: opening it for reading would block for ever.
    let fifo = dir.join("attn.xclbin");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let store = Store::at(tmp.0.join("data"));
    let err = import(&store, &dir, "pipe").unwrap_err().to_string();
    assert!(
        err.contains("attn.xclbin") && err.contains("not a regular file"),
        "{err}"
    );
    // A link to a device is refused as leaving the folder.
    std::fs::remove_file(&fifo).unwrap();
    symlink("/dev/zero", dir.join("attn.xclbin")).unwrap();
    let err = import(&store, &dir, "dev").unwrap_err().to_string();
    assert!(err.contains("attn.xclbin"), "{err}");
}

#[test]
fn copies_are_never_more_readable_than_their_source() {
    let tmp = TempDir::new("modes");
    let dir = model_folder(&tmp.0.join("m"));
    std::fs::set_permissions(
        dir.join("config.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::set_permissions(
        dir.join("model.q4nx"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let store = Store::at(tmp.0.join("data"));
    let model = import(&store, &dir, "modes").unwrap();
    assert_eq!(mode(&model.folder.join("config.json")), 0o600);
    assert_eq!(
        mode(&model.folder.join("model.q4nx")) & !0o644,
        0,
        "masked by 0644"
    );

    // --move hard-links only files already within 0644; a wider one is copied, and the
    // user's file keeps its mode until it is removed.
    let dir = model_folder(&tmp.0.join("m2"));
    std::fs::set_permissions(
        dir.join("model.q4nx"),
        std::fs::Permissions::from_mode(0o775),
    )
    .unwrap();
    let model = store
        .import(
            &dir,
            &ImportOptions {
                name: Some("moved".into()),
                move_files: true,
            },
        )
        .unwrap();
    assert_eq!(mode(&model.folder.join("model.q4nx")) & !0o644, 0);
}

#[test]
fn an_extra_file_larger_than_its_use_is_refused() {
    let tmp = TempDir::new("sizes");
    let dir = model_folder(&tmp.0.join("m"));
    // A sparse 65 MiB kernel: more than any NPU kernel binary.
    let kernel = std::fs::File::create(dir.join("mm.xclbin")).unwrap();
    kernel.set_len(65 << 20).unwrap();
    let store = Store::at(tmp.0.join("data"));
    let err = import(&store, &dir, "big").unwrap_err().to_string();
    assert!(err.contains("mm.xclbin") && err.contains("bytes"), "{err}");
    // A companion *.q4nx larger than model.q4nx itself.
    std::fs::remove_file(dir.join("mm.xclbin")).unwrap();
    let len = std::fs::metadata(dir.join("model.q4nx")).unwrap().len();
    let extra = std::fs::File::create(dir.join("vision.q4nx")).unwrap();
    extra.set_len(len + 1).unwrap();
    let err = import(&store, &dir, "big").unwrap_err().to_string();
    assert!(err.contains("vision.q4nx"), "{err}");
}

#[test]
fn move_from_inside_the_store_is_refused_and_the_model_stays_whole() {
    // The review's N8: `import <store>/models/a --name b --move` emptied model a.
    let tmp = TempDir::new("move-store");
    let store = Store::at(tmp.0.join("data"));
    let a = import(&store, &fixture("tiny-q4nx"), "a").unwrap();
    let err = store
        .import(
            &a.folder,
            &ImportOptions {
                name: Some("b".into()),
                move_files: true,
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::MoveFromStore { .. }), "{err}");
    assert!(a.folder.join("model.q4nx").is_file(), "a keeps its files");
    assert!(a.folder.join("config.json").is_file());
    // A copy is fine.
    import(&store, &a.folder, "b").expect("copying a registered model's folder");
    assert!(a.folder.join("model.q4nx").is_file());
}

#[test]
fn a_killed_gguf_import_leaves_nothing_hidden_after_the_next_import() {
    // The review's N11: a killed GGUF import left downloads/.gguf-<name>/ (up to a whole
    // converted model) and every import left .gguf-<name>.lock.
    let tmp = TempDir::new("gguf-leftovers");
    let store = Store::at(tmp.0.join("data"));
    let downloads = store.downloads_dir();
    std::fs::create_dir_all(downloads.join(".gguf-killed/model")).unwrap();
    std::fs::write(downloads.join(".gguf-killed/model/model.q4nx"), [0u8; 4096]).unwrap();
    std::fs::write(downloads.join(".gguf-killed.lock"), b"").unwrap();

    let file = tmp.0.join("tiny.gguf");
    std::fs::write(&file, q4nx::gguf::write::tiny_model("llama").finish()).unwrap();
    store
        .import_gguf(&file, &GgufImportOptions::default(), &mut |_| {})
        .unwrap();
    let left: Vec<String> = std::fs::read_dir(&downloads)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "nothing hidden left behind: {left:?}");
}

#[test]
fn the_work_of_a_running_gguf_import_is_left_alone() {
    let tmp = TempDir::new("gguf-running");
    let store = Store::at(tmp.0.join("data"));
    let downloads = store.downloads_dir();
    std::fs::create_dir_all(downloads.join(".gguf-running")).unwrap();
    // Another process's import holds the lock (flock, as the store takes it).
    let lock = std::fs::File::create(downloads.join(".gguf-running.lock")).unwrap();
    // SAFETY: `lock` is an open file; flock only reads the descriptor.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) },
        0
    );
    assert_eq!(store.clear_abandoned_imports(), 0);
    assert!(downloads.join(".gguf-running").is_dir(), "its lock is held");
    drop(lock);
    store.clear_abandoned_imports();
    assert!(!downloads.join(".gguf-running").exists());
}

#[test]
fn an_unreadable_gguf_says_it_cannot_be_read() {
    // /proc/self/mem: a regular file whose first bytes cannot be read (EIO), even by root.
    let err = hearth_hub::gguf_magic(Path::new("/proc/self/mem")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(!hearth_hub::gguf_magic(&fixture("tiny-q4nx").join("config.json")).unwrap());
}
