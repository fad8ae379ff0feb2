//! `kill -9` of a process while it saves answers, as the app does while one streams (a row per
//! answer, its text saved piece by piece, then finished). The test runs itself again as that
//! process, kills it once the database holds a given number of finished answers (a moment
//! chosen by what is on disk, not by a clock), and reopens the history:
//! - the database is not set aside as damaged, and passes SQLite's integrity check;
//! - every answer that was finished is there, whole;
//! - the answer that was being written keeps the text saved so far (a prefix of what it was
//!   writing) and is marked interrupted, not lost or left "streaming".

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hearth_chat::conversations::{ConversationStore, MessageState, Role};

/// Set in the child: the database it writes to.
const CHILD_ENV: &str = "HEARTH_TEST_SAVING_CHILD_DB";
/// This test's name in the test binary, for `--exact`.
const TEST_NAME: &str = "kill_while_saving::kill_9_while_answers_are_saved_keeps_the_history";
const WORDS: [&str; 12] = [
    "Once ", "upon ", "a ", "time ", "a ", "small ", "fire ", "kept ", "a ", "house ", "warm", ".",
];

fn full_answer() -> String {
    WORDS.concat()
}

/// The child's work: conversations of questions and streamed answers, without end.
fn save_answers_forever(db: &Path) -> ! {
    let (store, _) = ConversationStore::open(db).expect("the child opens the database");
    loop {
        let conversation = store.create(&Default::default()).unwrap();
        for _ in 0..4 {
            store
                .add_message(
                    &conversation.id,
                    Role::User,
                    "Tell me a story",
                    MessageState::Complete,
                )
                .unwrap();
            let answer = store
                .add_message(
                    &conversation.id,
                    Role::Assistant,
                    "",
                    MessageState::Streaming,
                )
                .unwrap();
            let mut text = String::new();
            for word in WORDS {
                text.push_str(word);
                store.save_partial(answer.id, &text).unwrap();
            }
            store
                .finish_message(answer.id, &text, MessageState::Complete, None)
                .unwrap();
        }
    }
}

/// Finished answers in the database, read without disturbing the writer.
fn finished_answers(db: &Path) -> usize {
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    let _ = conn.busy_timeout(Duration::from_secs(5));
    conn.query_row(
        "SELECT count(*) FROM messages WHERE role = 'assistant' AND state = 'complete'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as usize)
    .unwrap_or(0)
}

#[test]
fn kill_9_while_answers_are_saved_keeps_the_history() {
    if let Some(db) = std::env::var_os(CHILD_ENV) {
        save_answers_forever(Path::new(&db));
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("conversations.db");
    let mut finished_before = 0;
    // Three runs, each killed a little further on, into the same database.
    for (run, kill_after) in [7usize, 23, 41].into_iter().enumerate() {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--test-threads=1"])
            .env(CHILD_ENV, &db)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let want = finished_before + kill_after;
        let end = Instant::now() + Duration::from_secs(60);
        while finished_answers(&db) < want {
            assert!(
                child.try_wait().unwrap().is_none(),
                "run {run}: the writer exited by itself"
            );
            assert!(
                Instant::now() < end,
                "run {run}: the writer made no progress"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let (store, recovery) = ConversationStore::open(&db).expect("the history opens");
        assert!(
            recovery.is_none(),
            "run {run}: the database was set aside: {recovery:?}"
        );
        let mut finished = 0;
        let mut interrupted = 0;
        for summary in store.list("").unwrap() {
            let conversation = store.get(&summary.id).unwrap();
            for message in conversation.messages {
                if message.role != Role::Assistant {
                    continue;
                }
                match message.state {
                    MessageState::Complete => {
                        assert_eq!(message.content, full_answer(), "a finished answer is whole");
                        finished += 1;
                    }
                    MessageState::Interrupted => {
                        assert!(
                            full_answer().starts_with(&message.content),
                            "the interrupted answer keeps what was saved: {:?}",
                            message.content
                        );
                        interrupted += 1;
                    }
                    other => panic!("run {run}: an answer left as {other:?}"),
                }
            }
        }
        assert!(
            finished >= want,
            "run {run}: {finished} finished answers, at least {want} were saved"
        );
        assert!(
            interrupted <= run + 1,
            "at most one interrupted answer per kill"
        );
        println!("run {run}: {finished} finished answers kept, {interrupted} interrupted");
        finished_before = finished;
        drop(store);
    }
}
