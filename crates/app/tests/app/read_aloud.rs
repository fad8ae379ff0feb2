//! Read aloud with the real espeak-ng (installed by scripts/setup.sh): an answer streamed in
//! pieces is said sentence by sentence into WAV files, a reading is stopped mid-way with no
//! process left, and speaking to the sound device either works or says there is none.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hearth_app::read_aloud::voice::Output;
use hearth_app::read_aloud::{ReadAloud, ReadAloudConfig, ReadAloudEvent};
use hearth_app::settings::Language;

type Events = Arc<Mutex<Vec<ReadAloudEvent>>>;

fn reader(output: Output) -> (ReadAloud, Events) {
    let events: Events = Arc::default();
    let seen = events.clone();
    let config = ReadAloudConfig {
        output,
        voices: None,
    };
    let reader = ReadAloud::new(config, move |event| seen.lock().unwrap().push(event));
    (reader, events)
}

/// Waits (up to a minute: the machine may be busy) until `done` holds.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wavs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn ended(events: &Events) -> Option<ReadAloudEvent> {
    events
        .lock()
        .unwrap()
        .iter()
        .find(|e| !matches!(e, ReadAloudEvent::Started { .. }))
        .cloned()
}

/// Whether process `pid` still exists as a child of this one that has not been reaped.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            // "pid (comm) state ppid ...": the fields after the command's closing bracket.
            let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
            let fields: Vec<&str> = after.split_whitespace().collect();
            fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(std::process::id())
                && fields.first() != Some(&"Z")
        })
        .unwrap_or(false)
}

#[test]
fn a_streamed_answer_is_said_sentence_by_sentence_starting_before_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, events) = reader(Output::WavFiles(dir.path().to_path_buf()));
    reader.begin(Some(7), None, Language::En).unwrap();
    reader.feed("# The sky\n\nThe sky is blue because air scatters blue light [1]. ");
    // The first sentence is said while the answer is still being written.
    wait_for("the first sentence", || wavs(dir.path()).len() == 1);
    reader.feed("\n```\nnot read. at all.\n```\nSunsets are red.");
    reader.finish();
    wait_for("the end", || ended(&events).is_some());
    assert_eq!(
        ended(&events),
        Some(ReadAloudEvent::Ended {
            message_id: Some(7),
            stopped: false
        })
    );
    assert_eq!(
        events.lock().unwrap()[0],
        ReadAloudEvent::Started {
            message_id: Some(7)
        }
    );
    // "The sky", the first sentence, "Sunsets are red.": the code block is not read.
    assert_eq!(wavs(dir.path()), ["0001.wav", "0002.wav", "0003.wav"]);
    for name in wavs(dir.path()) {
        let wav = std::fs::read(dir.path().join(name)).unwrap();
        assert!(wav.starts_with(b"RIFF"));
    }
    assert_eq!(reader.reading(), None);
}

#[test]
fn a_reading_is_stopped_mid_way_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, events) = reader(Output::WavFiles(dir.path().to_path_buf()));
    // Long sentences, so one is being said when the stop comes.
    let sentence = "This is a long sentence that goes on and on, with many words in it, so that \
                    saying it takes a while even for a fast synthesizer like this one. ";
    let answer = sentence.repeat(200);
    reader
        .speak(None, &answer, Some(Language::En), Language::En)
        .unwrap();
    wait_for("a sentence being said", || {
        !reader.speaking_pids().is_empty()
    });
    let pids = reader.speaking_pids();
    reader.stop();
    assert!(
        pids.iter().all(|&pid| !alive(pid)),
        "no espeak-ng is left after the stop: {pids:?}"
    );
    assert_eq!(reader.reading(), None);
    assert_eq!(
        ended(&events),
        Some(ReadAloudEvent::Ended {
            message_id: None,
            stopped: true
        })
    );
    assert!(
        wavs(dir.path()).len() < 200,
        "stopped before its end: {} sentences written",
        wavs(dir.path()).len()
    );
    // Stopping again, with nothing being read, does nothing.
    reader.stop();
    assert_eq!(events.lock().unwrap().len(), 2);
}

#[test]
fn a_new_reading_stops_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, events) = reader(Output::WavFiles(dir.path().to_path_buf()));
    reader.begin(Some(1), None, Language::De).unwrap();
    reader.feed("Der Himmel ist blau. Das ist so.");
    reader
        .speak(Some(2), "Zweite Antwort.", None, Language::En)
        .unwrap();
    wait_for("the second reading's end", || {
        events.lock().unwrap().iter().any(|e| {
            matches!(
                e,
                ReadAloudEvent::Ended {
                    message_id: Some(2),
                    ..
                }
            )
        })
    });
    let events = events.lock().unwrap();
    assert_eq!(
        events[1],
        ReadAloudEvent::Ended {
            message_id: Some(1),
            stopped: true
        }
    );
    assert_eq!(
        events[2],
        ReadAloudEvent::Started {
            message_id: Some(2)
        }
    );
}

#[test]
fn speaking_to_the_sound_device_works_or_says_there_is_none() {
    let (reader, events) = reader(Output::Speakers);
    reader.speak(Some(3), "Hi.", None, Language::En).unwrap();
    wait_for("the end", || ended(&events).is_some());
    match ended(&events).unwrap() {
        ReadAloudEvent::Ended { stopped, .. } => assert!(!stopped),
        ReadAloudEvent::Failed { error, .. } => {
            assert_eq!(error.detail.as_deref(), Some("noSoundDevice"), "{error:?}");
            assert!(
                error.message.contains("No sound device"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
}
