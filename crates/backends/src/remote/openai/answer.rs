//! Asking for an answer: a chat (`POST /v1/chat/completions`) or raw completion
//! (`POST /v1/completions`) request is posted with `stream: true`, and its text is handed to
//! the caller as it arrives. [`stream`](super::stream) reads the reply on a worker thread, so a
//! caller waiting on a silent server still gets an empty piece now and then to check its Stop.

use std::io::BufReader;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::time::Instant;

use hearth_chat::backend::{BackendError, FailureKind, TextSink};

use super::errors::read_json_text;
use super::stream::{Piece, Stream};
use super::{ChatRequest, OpenAiClient, StreamOutcome, MAX_EVENT_BYTES, STOP_CHECK_EVERY};

impl OpenAiClient {
    /// Streams the answer to `request` (`POST /v1/chat/completions`, `stream: true`), passing
    /// its text to `on_text` as it arrives; `ControlFlow::Break(())` from `on_text` drops the
    /// connection and ends with [`StreamOutcome::cancelled`] set.
    ///
    /// The answer is read on a worker thread, so `on_text` is also called with an empty piece
    /// every [`STOP_CHECK_EVERY`] while nothing arrives: a Stop is seen even when the server
    /// sends no text. The answer is bounded: each event by [`MAX_EVENT_BYTES`], its length by
    /// `max_tokens` plus a margin (then it ends as `finish_reason` "length"), and a stream with
    /// no text for [`ClientOptions::read_timeout`](super::ClientOptions::read_timeout)
    /// (keep-alive comments or not) is a stall.
    pub fn stream_chat(
        &self,
        request: &ChatRequest,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        self.stream(request, None, on_text)
    }

    /// Streams the continuation of the raw `prompt` (`POST /v1/completions`, `stream: true`,
    /// no chat template), with `request`'s model and settings; its messages are not sent.
    /// Read, bounded and stopped exactly as [`OpenAiClient::stream_chat`], each event's text
    /// taken from `choices[0].text`.
    pub fn stream_completion(
        &self,
        request: &ChatRequest,
        prompt: &str,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        self.stream(request, Some(prompt), on_text)
    }

    /// A chat answer (`raw_prompt` None) or a raw completion, read on a worker thread.
    fn stream(
        &self,
        request: &ChatRequest,
        raw_prompt: Option<&str>,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        // Bounded, so a server faster than the caller waits for it.
        let (tx, rx) = mpsc::sync_channel::<Piece>(64);
        let client = self.clone();
        let worker_request = request.clone();
        let worker_prompt = raw_prompt.map(str::to_owned);
        let spawned = std::thread::Builder::new()
            .name("hearth-answer-stream".into())
            .spawn(move || {
                let sender = tx.clone();
                let prompt = worker_prompt.as_deref();
                let result = client.stream_here(&worker_request, prompt, &mut |text: &str| {
                    // A send fails once the caller stopped listening: stop reading then.
                    match sender.send(Piece::Text(text.to_owned())) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(_) => ControlFlow::Break(()),
                    }
                });
                let _ = tx.send(Piece::End(result));
            });
        if let Err(e) = spawned {
            tracing::warn!("no thread to read the answer on ({e}); reading it here");
            return self.stream_here(request, raw_prompt, on_text);
        }
        // A backstop for a server that keeps a line open with a byte now and then: the worker
        // sees only whole lines.
        let no_text_limit = self.options.read_timeout + STOP_CHECK_EVERY;
        let mut last_text = Instant::now();
        loop {
            let piece = match rx.recv_timeout(STOP_CHECK_EVERY) {
                Ok(Piece::End(result)) => return result,
                Ok(Piece::Text(text)) => text,
                Err(mpsc::RecvTimeoutError::Timeout) => String::new(),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.failed(
                        FailureKind::Cut,
                        format!(
                            "Reading the answer from {} failed inside Hearth. The part that \
                             arrived is kept; try again.",
                            self.base_url
                        ),
                    ))
                }
            };
            if !piece.is_empty() {
                last_text = Instant::now();
            } else if last_text.elapsed() >= no_text_limit {
                return Err(self.no_text_error());
            }
            if on_text(&piece).is_break() {
                // Dropping the receiver ends the worker at its next piece.
                return Ok(StreamOutcome {
                    cancelled: true,
                    ..StreamOutcome::default()
                });
            }
        }
    }

    /// [`OpenAiClient::stream`] on this thread: `on_text` is called only as the stream gives
    /// something (text, or an empty piece for a keep-alive comment).
    fn stream_here(
        &self,
        request: &ChatRequest,
        raw_prompt: Option<&str>,
        on_text: TextSink<'_>,
    ) -> Result<StreamOutcome, BackendError> {
        let (url, body) = match raw_prompt {
            None => (
                format!("{}/v1/chat/completions", self.base_url),
                request.body(),
            ),
            Some(prompt) => (
                format!("{}/v1/completions", self.base_url),
                request.completion_body(prompt),
            ),
        };
        tracing::debug!(url = %url, model = %request.model, "streaming an answer");
        let mut http = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "text/event-stream, application/json");
        if let Some(key) = &self.key {
            http = http.header("Authorization", format!("Bearer {}", key.expose()));
        }
        let response = http.send(body).map_err(|e| self.request_error(e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if status != 200 {
            let text = read_json_text(response.into_body()).unwrap_or_default();
            return Err(self.status_error(status, &headers, &text, Some(&request.model)));
        }
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let reader = response.into_body().into_reader();
        let reader = BufReader::with_capacity(16 * 1024, reader);
        Stream::new(self, request, reader, on_text, MAX_EVENT_BYTES).run(&content_type)
    }
}
