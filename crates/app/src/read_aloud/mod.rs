//! Read aloud: an answer spoken in its language, starting with its first sentence while the
//! rest is still being written, stoppable at any moment.
//!
//! - [`text`]: the streamed markdown cut into sentences in plain words (no code blocks,
//!   markdown symbols, addresses or citation markers);
//! - [`language`]: which of Hearth's languages an answer is in;
//! - [`voice`]: the synthesizer programs (espeak-ng, or Piper where installed with a voice),
//!   one process per sentence, tied to Hearth so none outlives it;
//! - [`voices`]: Piper voices as downloads the person asks for (Settings › Read aloud).
//!
//! [`ReadAloud`] reads one thing at a time. [`ReadAloud::begin`] starts a reading (stopping
//! the one before) on its own thread, [`ReadAloud::feed`] gives it the answer as it streams,
//! [`ReadAloud::finish`] says the answer is complete, and [`ReadAloud::stop`] kills the
//! sentence being said and returns when no process of the reading is left.
//! [`ReadAloud::speak`] reads a finished answer; [`ReadAloud::follow`] follows an answer
//! being written from its [`ChatEvent`]s ("always read answers").
//!
//! The language is the caller's when given; otherwise the answer's ([`language::detect`] on
//! what is known when the first sentence is said), else the fallback (the app's language).
//! It is chosen once per reading, so an answer quoting another language keeps one voice.
//!
//! What happens is told through the listener given to [`ReadAloud::new`]: a
//! [`ReadAloudEvent`] when a reading starts, ends (said, or stopped) or fails.

pub mod language;
pub mod text;
pub mod voice;
pub mod voices;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;

use crate::error::{Error, ErrorCode};
use crate::settings::Language;
use crate::turn::ChatEvent;
use text::SentenceStream;
use voice::{Output, Said, Synthesizer, VoiceError};

/// The event the desktop app emits to its window for each [`ReadAloudEvent`].
pub const READ_ALOUD_EVENT: &str = "read-aloud";

/// The environment variable that makes readings write WAV files into a folder instead of
/// playing them (the desktop app's end-to-end tests run on machines without a sound device).
pub const WAV_FOLDER_VARIABLE: &str = "HEARTH_TEST_READ_ALOUD_DIR";

/// What a reading did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ReadAloudEvent {
    /// A reading began.
    Started {
        /// The answer read, when it is one.
        message_id: Option<i64>,
    },
    /// A reading ended.
    Ended {
        /// The answer read, when it is one.
        message_id: Option<i64>,
        /// It was stopped before its end.
        stopped: bool,
    },
    /// A reading failed; nothing more of it is said.
    Failed {
        /// The answer read, when it is one.
        message_id: Option<i64>,
        /// Why, in plain words.
        error: Error,
    },
}

/// How readings are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAloudConfig {
    /// Where speech goes.
    pub output: Output,
    /// Where Piper voices are looked for.
    pub voices: Option<PathBuf>,
}

impl ReadAloudConfig {
    /// To the speakers, with Piper voices from `voices`; into WAV files instead when
    /// [`WAV_FOLDER_VARIABLE`] names a folder.
    pub fn from_env(voices: Option<PathBuf>) -> Self {
        let output = match std::env::var_os(WAV_FOLDER_VARIABLE) {
            Some(dir) if !dir.is_empty() => Output::WavFiles(PathBuf::from(dir)),
            _ => Output::Speakers,
        };
        ReadAloudConfig { output, voices }
    }
}

type Listener = Box<dyn Fn(ReadAloudEvent) + Send + Sync>;

/// Reads answers aloud, one at a time (see the module's documentation).
pub struct ReadAloud {
    config: ReadAloudConfig,
    listener: Arc<Listener>,
    current: Mutex<Option<Reading>>,
}

impl std::fmt::Debug for ReadAloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAloud")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One reading: its sentence stream, the queue its thread says, and the thread.
struct Reading {
    message_id: Option<i64>,
    stream: SentenceStream,
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
    stop: AtomicBool,
}

#[derive(Default)]
struct QueueState {
    sentences: VecDeque<String>,
    /// All that is known of the answer so far, for choosing its language.
    known: String,
    finished: bool,
    /// The processes of the sentence being said.
    pids: Vec<u32>,
}

impl ReadAloud {
    /// A reader with `config`, telling `listener` what happens.
    pub fn new(
        config: ReadAloudConfig,
        listener: impl Fn(ReadAloudEvent) + Send + Sync + 'static,
    ) -> Self {
        ReadAloud {
            config,
            listener: Arc::new(Box::new(listener)),
            current: Mutex::new(None),
        }
    }

    /// Reads `text` (a whole answer) aloud: `message_id` names it in the events; `language`,
    /// when given and not `System`, is its language, else the answer's own or `fallback`.
    pub fn speak(
        &self,
        message_id: Option<i64>,
        text: &str,
        language: Option<Language>,
        fallback: Language,
    ) -> Result<(), Error> {
        self.begin(message_id, language, fallback)?;
        self.feed(text);
        self.finish();
        Ok(())
    }

    /// Starts reading an answer that will come through [`ReadAloud::feed`], stopping the
    /// reading before. Fails at once, with nothing started, when espeak-ng is missing.
    pub fn begin(
        &self,
        message_id: Option<i64>,
        language: Option<Language>,
        fallback: Language,
    ) -> Result<(), Error> {
        self.stop();
        let synthesizer = Synthesizer::find(self.config.voices.as_deref()).map_err(to_error)?;
        if let Output::WavFiles(folder) = &self.config.output {
            std::fs::create_dir_all(folder).map_err(|e| {
                Error::new(
                    ErrorCode::Storage,
                    format!("Could not make the folder {}: {e}", folder.display()),
                )
            })?;
        }
        let queue = Arc::new(Queue::default());
        let chosen = language.filter(|l| *l != Language::System);
        let worker = Worker {
            queue: queue.clone(),
            synthesizer,
            output: self.config.output.clone(),
            language: chosen,
            fallback,
            message_id,
            listener: self.listener.clone(),
        };
        (self.listener)(ReadAloudEvent::Started { message_id });
        let thread = std::thread::Builder::new()
            .name("hearth-read-aloud".into())
            .spawn(move || worker.run())
            .map_err(|e| {
                Error::new(
                    ErrorCode::Internal,
                    format!("Reading aloud could not start: {e}"),
                )
            })?;
        *lock(&self.current) = Some(Reading {
            message_id,
            stream: SentenceStream::new(),
            queue,
            thread: Some(thread),
        });
        Ok(())
    }

    /// Gives the reading the next piece of its answer.
    pub fn feed(&self, piece: &str) {
        let mut current = lock(&self.current);
        if let Some(reading) = current.as_mut() {
            let sentences = reading.stream.push(piece);
            reading.queue.add(sentences, false);
        }
    }

    /// The reading's answer is complete: what is left of it is read, then the reading ends.
    pub fn finish(&self) {
        let mut current = lock(&self.current);
        if let Some(reading) = current.as_mut() {
            let sentences = reading.stream.finish();
            reading.queue.add(sentences, true);
        }
    }

    /// Stops the reading at once; returns when none of its processes is left. Nothing
    /// happens when nothing is being read.
    pub fn stop(&self) {
        let reading = lock(&self.current).take();
        if let Some(mut reading) = reading {
            reading.queue.stop.store(true, Ordering::SeqCst);
            reading.queue.changed.notify_all();
            if let Some(thread) = reading.thread.take() {
                let _ = thread.join();
            }
        }
    }

    /// The answer being read (`Some(None)`: a text that is not a saved answer), or `None`
    /// when nothing is.
    pub fn reading(&self) -> Option<Option<i64>> {
        let current = lock(&self.current);
        current
            .as_ref()
            .filter(|r| r.thread.as_ref().is_some_and(|t| !t.is_finished()))
            .map(|r| r.message_id)
    }

    /// The processes saying the current sentence (for tests that check none is left).
    pub fn speaking_pids(&self) -> Vec<u32> {
        let current = lock(&self.current);
        current
            .as_ref()
            .map(|r| lock(&r.queue.state).pids.clone())
            .unwrap_or_default()
    }

    /// Follows an answer being written: its start begins a reading (in the answer's
    /// language, else `fallback`), its pieces feed it, its end (done or failed) finishes it.
    /// A missing espeak-ng is told through the listener.
    pub fn follow(&self, event: &ChatEvent, fallback: Language) {
        match event {
            ChatEvent::Started {
                assistant_message, ..
            } => {
                let id = Some(assistant_message.id);
                if let Err(error) = self.begin(id, None, fallback) {
                    (self.listener)(ReadAloudEvent::Failed {
                        message_id: id,
                        error,
                    });
                }
            }
            ChatEvent::Token { text } => self.feed(text),
            ChatEvent::Done { .. } | ChatEvent::Error { .. } => self.finish(),
            _ => {}
        }
    }
}

impl Drop for ReadAloud {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Queue {
    fn add(&self, sentences: Vec<String>, finished: bool) {
        let mut state = lock(&self.state);
        for sentence in sentences {
            if state.known.len() < 4096 {
                state.known.push_str(&sentence);
                state.known.push(' ');
            }
            state.sentences.push_back(sentence);
        }
        state.finished |= finished;
        self.changed.notify_all();
    }
}

/// The thread of one reading.
struct Worker {
    queue: Arc<Queue>,
    synthesizer: Synthesizer,
    output: Output,
    language: Option<Language>,
    fallback: Language,
    message_id: Option<i64>,
    listener: Arc<Listener>,
}

impl Worker {
    fn run(self) {
        let message_id = self.message_id;
        let event = match self.say_all() {
            Ok(Said::Done) => ReadAloudEvent::Ended {
                message_id,
                stopped: false,
            },
            Ok(Said::Stopped) => ReadAloudEvent::Ended {
                message_id,
                stopped: true,
            },
            Err(error) => {
                tracing::warn!("read aloud: {error}");
                ReadAloudEvent::Failed {
                    message_id,
                    error: to_error(error),
                }
            }
        };
        (self.listener)(event);
    }

    fn say_all(&self) -> Result<Said, VoiceError> {
        let mut language = self.language;
        let mut index = 0;
        loop {
            let (sentence, known) = {
                let mut state = lock(&self.queue.state);
                loop {
                    if self.queue.stop.load(Ordering::SeqCst) {
                        return Ok(Said::Stopped);
                    }
                    if let Some(sentence) = state.sentences.pop_front() {
                        break (sentence, state.known.clone());
                    }
                    if state.finished {
                        return Ok(Said::Done);
                    }
                    state = self
                        .queue
                        .changed
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner());
                }
            };
            let language =
                *language.get_or_insert_with(|| language::detect(&known).unwrap_or(self.fallback));
            index += 1;
            let utterance = self
                .synthesizer
                .start(&sentence, language, &self.output, index)?;
            lock(&self.queue.state).pids = utterance.pids();
            let said = utterance.wait(&self.queue.stop);
            lock(&self.queue.state).pids.clear();
            if said? == Said::Stopped {
                return Ok(Said::Stopped);
            }
        }
    }
}

/// The language a reading falls back to: the app's (`chosen`), or the desktop session's when
/// the app follows it.
pub fn app_language(chosen: Language) -> Language {
    match chosen {
        Language::System => crate::settings::system_language(|name| std::env::var(name).ok()),
        chosen => chosen,
    }
}

/// A voice error as the app's error: code `unsupported`, with a detail the UI translates.
fn to_error(error: VoiceError) -> Error {
    let message = error.to_string();
    let plain = Error::new(ErrorCode::Unsupported, message);
    match error {
        VoiceError::EspeakMissing => plain.detail("espeakMissing", &[]),
        VoiceError::VoiceMissing { language } => {
            plain.detail("voiceMissing", &[("language", language)])
        }
        VoiceError::NoSoundDevice => plain.detail("noSoundDevice", &[]),
        VoiceError::Failed { program, detail } => plain.detail(
            "readAloudFailed",
            &[("program", program), ("detail", detail)],
        ),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
