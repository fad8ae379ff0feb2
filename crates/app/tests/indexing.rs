//! Indexing the user's files in the background, without Tauri: Cancel keeps what was read and
//! embedded and Continue indexing finishes it; choosing another embedding model (an installed
//! Qwen3-Embedding, played by the engine's tiny random fixture) embeds the library again, keeps
//! each model's vectors apart, and going back to the bundled one (played by the tiny BERT
//! encoder) needs no new indexing. Cancel is pressed from inside the progress events, so where it
//! stops does not depend on time.
//!
//! It sets `HEARTH_EMBEDDING_MODEL` (to the tiny BERT encoder) for the whole process, so it is a
//! test binary of its own, not a module of `tests/app/`.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_app::documents::{DocumentEvent, DocumentSink, Documents, IndexStage};
use hearth_app::{App, ErrorCode, Home};
use hearth_documents::{search, EmbeddingModel, Library, Ranking};

fn engine_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/engine")
        .join(name)
}

/// The app with its folders in `dir`; the tiny BERT encoder stands in for the bundled model.
fn app(dir: &Path) -> App {
    std::env::set_var("HEARTH_EMBEDDING_MODEL", engine_fixture("tiny-bert"));
    let home = Home {
        data_dir: dir.join("data"),
        config_dir: dir.join("config"),
        state_dir: dir.join("state"),
        builtin: None,
        system_root: dir.join("no-system"),
    };
    App::open(home).unwrap()
}

/// A text file of `paragraphs` paragraphs, each its own passage or more.
fn text_file(dir: &Path, name: &str, paragraphs: usize) -> PathBuf {
    let text: Vec<String> = (0..paragraphs)
        .map(|i| {
            format!(
                "Paragraph {i} of {name}: the lighthouse keeper climbs the stairs at dusk, \
                 trims the wick, winds the clockwork that turns the lens, and writes the weather \
                 in the log before the ships pass the reef {i} times in the night."
            )
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, text.join("\n\n")).unwrap();
    path
}

/// Where a run's `Finished` arrives: whether it was cancelled, and the files it never read.
type Finished = mpsc::Receiver<(bool, Vec<String>)>;

/// A sink that records every event and hands `Finished` to the returned receiver; `on_event`
/// runs first on the indexing thread (to press Cancel at a chosen point).
fn sink(
    on_event: impl Fn(&DocumentEvent) + Send + Sync + 'static,
) -> (DocumentSink, Finished, Arc<Mutex<Vec<DocumentEvent>>>) {
    let (done, finished) = mpsc::channel();
    let done = Mutex::new(done);
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let sink: DocumentSink = Arc::new(move |event: DocumentEvent| {
        on_event(&event);
        if let DocumentEvent::Finished { cancelled, unread } = &event {
            done.lock()
                .unwrap()
                .send((*cancelled, unread.clone()))
                .unwrap();
        }
        seen.lock().unwrap().push(event);
    });
    (sink, finished, events)
}

/// Waits for a run's `Finished` (a bound only so that a broken run fails instead of hanging).
fn finished(rx: &Finished) -> (bool, Vec<String>) {
    rx.recv_timeout(Duration::from_secs(300))
        .expect("the indexing run ends with Finished")
}

#[test]
fn cancel_while_reading_keeps_the_files_read_and_names_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let files: Vec<PathBuf> = ["a.txt", "b.txt", "c.txt"]
        .iter()
        .map(|n| text_file(dir.path(), n, 2))
        .collect();
    let documents: Arc<Documents> = Arc::clone(app.documents());
    let canceller = Arc::clone(&documents);
    // Cancel as the first file starts: it is read, the two after it are not.
    let (events, rx, _) = sink(move |event| {
        if let DocumentEvent::Progress(p) = event {
            if p.stage == IndexStage::Reading && p.done == 0 {
                assert!(canceller.cancel_indexing(), "a run is going");
            }
        }
    });
    let conversation = "conversation-1";
    documents.attach(conversation, files, events).unwrap();
    let (cancelled, unread) = finished(&rx);
    assert!(cancelled);
    assert_eq!(unread, ["b.txt", "c.txt"], "the files never read, by name");
    assert!(!documents.is_indexing());
    let attached = documents.attached(conversation).unwrap();
    let names: Vec<&str> = attached.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["a.txt"], "what was read is kept and attached");
    assert!(attached[0].passages > 0 && !attached[0].indexing);
    assert!(!documents.cancel_indexing(), "nothing runs now");
}

#[test]
fn cancel_while_embedding_keeps_the_vectors_and_continue_indexing_finishes_them() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let file = text_file(dir.path(), "keeper.txt", 40);
    let documents = Arc::clone(app.documents());
    let canceller = Arc::clone(&documents);
    // Cancel as the first batch of passages is embedded: that batch is stored, no more.
    let (events, rx, cancelled_run) = sink(move |event| {
        if let DocumentEvent::Progress(p) = event {
            if p.stage == IndexStage::Embedding && p.done == 0 {
                canceller.cancel_indexing();
            }
        }
    });
    documents.attach("c", vec![file.clone()], events).unwrap();
    let (cancelled, unread) = finished(&rx);
    assert!(cancelled);
    assert!(unread.is_empty(), "the file was read before Cancel");
    let view = documents.library().unwrap();
    let passages = view.documents[0].passages;
    assert!(passages > 16, "more than one batch: {passages}");
    assert_eq!(
        view.waiting,
        passages - 16,
        "one batch of 16 embedded and kept"
    );
    assert!(!view.indexing);
    // Review #10 (S3): the file's row says it, in Your files, in the attachments and in the
    // Indexed event that the cancelled run sent.
    assert_eq!(view.documents[0].waiting, passages - 16);
    assert_eq!(documents.attached("c").unwrap()[0].waiting, passages - 16);
    let indexed = cancelled_run.lock().unwrap().iter().find_map(|e| match e {
        DocumentEvent::Indexed { document } => Some(document.waiting),
        _ => None,
    });
    assert_eq!(indexed, Some(passages - 16));

    // Meanwhile the file is found by keyword.
    let library = Library::open(&app.home().documents_db()).unwrap();
    let id = view.documents[0].id;
    let hits = search(&library, "clockwork", &[id], Ranking::Keyword, None, 5).unwrap();
    assert!(!hits.is_empty(), "keyword search works after a cancel");

    // Continue indexing embeds what is left, and only that.
    let (events, rx, seen) = sink(|_| {});
    documents.continue_indexing(events).unwrap();
    assert_eq!(finished(&rx), (false, Vec::new()));
    assert_eq!(documents.library().unwrap().waiting, 0);
    let embedded = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            DocumentEvent::Progress(p) if p.stage == IndexStage::Embedding => Some(p.total),
            _ => None,
        })
        .max();
    assert_eq!(
        embedded,
        Some(passages - 16),
        "it resumes where Cancel stopped"
    );
}

/// Installs the tiny Qwen3 embedding fixture as the catalog's Qwen3-Embedding-0.6B would be
/// (imported, then marked with the catalog id a download records).
fn install_qwen3_embedding(app: &App) {
    let store = app.home().store();
    store
        .import(
            &engine_fixture("tiny-qwen3-embedding"),
            &hearth_hub::ImportOptions {
                name: Some("Qwen3-Embedding-0.6B".into()),
                move_files: false,
            },
        )
        .unwrap();
    let registry = store.registry_path();
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&registry).unwrap()).unwrap();
    fn mark(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                if map.contains_key("imported_from") {
                    map.insert("catalog_id".into(), "qwen3-embedding-0.6b".into());
                }
                map.values_mut().for_each(mark);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(mark),
            _ => {}
        }
    }
    mark(&mut json);
    std::fs::write(&registry, json.to_string()).unwrap();
}

#[test]
fn another_embedding_model_embeds_the_library_again_and_keeps_each_models_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let documents = Arc::clone(app.documents());
    let file = text_file(dir.path(), "keeper.txt", 4);
    documents
        .attach_now("c", std::slice::from_ref(&file), &|_| {})
        .unwrap();
    let view = documents.library().unwrap();
    assert_eq!(view.embedding_model.as_deref(), Some("all-MiniLM-L6-v2"));
    assert!(view.embedding_choices.is_empty(), "nothing installed yet");
    assert_eq!(view.waiting, 0, "embedded by the bundled model");
    let passages = view.documents[0].passages;

    install_qwen3_embedding(&app);
    assert_eq!(
        documents.library().unwrap().embedding_choices,
        ["Qwen3-Embedding-0.6B"]
    );
    assert!(documents
        .choose_embedding_model(Some("Qwen3-Embedding-0.6B"))
        .unwrap());
    assert!(!documents
        .choose_embedding_model(Some("Qwen3-Embedding-0.6B"))
        .unwrap());
    let view = documents.library().unwrap();
    assert_eq!(
        view.embedding_model.as_deref(),
        Some("Qwen3-Embedding-0.6B")
    );
    assert_eq!(
        view.waiting, passages,
        "no vector of the new model yet: found by keyword meanwhile"
    );
    assert_eq!(
        view.documents[0].waiting, passages,
        "review #10 (S3): the file's row says how many are not indexed yet"
    );
    assert_eq!(
        documents.embedder().unwrap().model_id(),
        "Qwen3-Embedding-0.6B-64d",
        "the decoder runs now"
    );

    let (events, rx, _) = sink(|_| {});
    documents.continue_indexing(events).unwrap();
    assert_eq!(finished(&rx), (false, Vec::new()));
    assert_eq!(documents.library().unwrap().waiting, 0);
    assert_eq!(documents.library().unwrap().documents[0].waiting, 0);
    let library = Library::open(&app.home().documents_db()).unwrap();
    assert_eq!(
        library.count_without_vectors("tiny-bert-32d").unwrap(),
        0,
        "the bundled model's vectors are kept beside the new ones"
    );
    assert_eq!(
        library
            .count_without_vectors("Qwen3-Embedding-0.6B-64d")
            .unwrap(),
        0
    );
    // Searching by meaning now compares the question with the Qwen3 vectors only.
    let embedder = documents.embedder().unwrap();
    let id = documents.library().unwrap().documents[0].id;
    let hits = search(
        &library,
        "who winds the lens?",
        &[id],
        Ranking::Semantic,
        Some(&*embedder),
        3,
    )
    .unwrap();
    assert_eq!(hits.len(), 3);

    // Back to the bundled model: its vectors are there, nothing to index.
    assert!(documents.choose_embedding_model(None).unwrap());
    let view = documents.library().unwrap();
    assert_eq!(view.embedding_model.as_deref(), Some("all-MiniLM-L6-v2"));
    assert_eq!(view.waiting, 0);

    let error = documents
        .choose_embedding_model(Some("nonesuch"))
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::NotFound);
    assert!(
        error.message.contains("nonesuch") && error.message.contains("Models"),
        "{}",
        error.message
    );
}
