//! Issue 53 in the app, without Tauri: a folder dropped attaches the files Hearth reads inside
//! it (and says what it skipped), a file that cannot be read is reported by its code and is not
//! kept in the library unless the user asks (Keep in Your files), and the rest of a drop is not
//! lost to it.
//!
//! It sets `HEARTH_EMBEDDING_MODEL` (to no model: keyword search only) for the whole process, so it
//! is a test binary of its own, not a module of `tests/app/`.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_app::documents::{DocumentEvent, DocumentSink};
use hearth_app::drop::DropKind;
use hearth_app::{App, Home};

/// The app with its folders in `dir` (keyword search only; no model is needed to index).
fn app(dir: &Path) -> App {
    std::env::set_var("HEARTH_EMBEDDING_MODEL", dir.join("no-embedding-model"));
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: dir.join("no-system"),
    };
    App::open(home).unwrap()
}

/// Indexing events, to wait for.
fn events() -> (DocumentSink, Receiver<DocumentEvent>) {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let sink: DocumentSink = Arc::new(move |event| {
        let _ = tx.lock().unwrap().send(event);
    });
    (sink, rx)
}

/// The events until the run's `Finished` (none after a minute is a failure).
fn until_finished(rx: &Receiver<DocumentEvent>) -> Vec<DocumentEvent> {
    let mut seen = Vec::new();
    loop {
        let event = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("indexing ends");
        let done = matches!(event, DocumentEvent::Finished { .. });
        seen.push(event);
        if done {
            return seen;
        }
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_dropped_folder_attaches_its_documents_and_an_unreadable_one_is_not_kept_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&Default::default()).unwrap();
    let folder = dir.path().join("Tax papers");
    write(
        &folder.join("notes.md"),
        b"# Rent\n\nThe rent is 900 euros a month.",
    );
    write(
        &folder.join("2024/letter.txt"),
        b"The tax office wrote about the 2024 return.",
    );
    write(
        &folder.join("broken.pdf"),
        b"%PDF-1.7 this is not really a PDF",
    );
    write(&folder.join("song.mp3"), b"ID3");

    let drop = app.register_drop(std::slice::from_ref(&folder));
    assert_eq!(drop.kind, DropKind::Documents, "{}", drop.reason);
    assert_eq!(drop.names, ["Tax papers"], "the UI gets the folder's name");
    assert_eq!(drop.folders[0].files, 3);
    assert!(
        drop.reason
            .contains("Tax papers: 3 files attached; 1 skipped: 1 is not a document"),
        "{}",
        drop.reason
    );
    let (sink, rx) = events();
    app.attach_dropped(&c.id, drop.token.as_deref().unwrap(), sink.clone())
        .unwrap();
    let seen = until_finished(&rx);
    let failed: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            DocumentEvent::Failed {
                name,
                error,
                failure,
            } => Some((name.clone(), error.clone(), *failure)),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{seen:?}");
    let (name, error, failure) = &failed[0];
    // A name listing every file is the whole run failing (the library or the index): say why.
    assert_eq!(name, "broken.pdf", "{}: {:?}", error.message, error.detail);
    assert!(!error.code.is_empty());
    assert_eq!(error.params["file"], "broken.pdf", "the name, not the path");
    let attached = app.conversation_documents(&c.id).unwrap().documents;
    let mut names: Vec<_> = attached.iter().map(|d| d.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["letter.txt", "notes.md"], "the readable ones");
    let library = app.documents().library().unwrap();
    assert_eq!(
        library.documents.len(),
        2,
        "the unreadable file is not kept in Your files"
    );

    // Keep in Your files: read again and kept with why; a number is kept once.
    let failure = failure.expect("a failure to keep");
    app.documents().keep_failed(failure, sink.clone()).unwrap();
    until_finished(&rx);
    let library = app.documents().library().unwrap();
    let kept = library
        .documents
        .iter()
        .find(|d| d.name == "broken.pdf")
        .expect("kept when asked");
    assert!(kept.error.is_some(), "kept with why it could not be read");
    assert!(app.documents().keep_failed(failure, sink).is_err());
}

#[cfg(unix)]
#[test]
fn a_folder_with_a_link_loop_and_a_link_out_attaches_what_is_inside_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let c = app.create_conversation(&Default::default()).unwrap();
    let folder = dir.path().join("loop");
    write(&folder.join("a.txt"), b"alpha words");
    write(&dir.path().join("secret/b.txt"), b"not in the folder");
    std::os::unix::fs::symlink(&folder, folder.join("again")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), folder.join("out")).unwrap();
    let drop = app.register_drop(&[folder]);
    assert_eq!(drop.folders[0].files, 1, "{}", drop.reason);
    let (sink, rx) = events();
    app.attach_dropped(&c.id, drop.token.as_deref().unwrap(), sink)
        .unwrap();
    until_finished(&rx);
    let attached = app.conversation_documents(&c.id).unwrap().documents;
    assert_eq!(
        attached.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["a.txt"]
    );
}
