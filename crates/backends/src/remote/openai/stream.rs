//! Reading a streamed answer: server-sent events (or one JSON answer from a server that does
//! not stream) into text pieces, the finish reason, usage and the server's timing fields.

use std::io::{BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::time::Instant;

use hearth_chat::backend::{BackendError, FailureKind, TextSink};
use serde::Deserialize;
use serde_json::Value;

use super::errors::{classify, clean, quote, Transport};
use super::{
    ChatRequest, OpenAiClient, ServerUsage, StreamOutcome, ANSWER_MARGIN_TOKENS,
    DEFAULT_MAX_TOKENS, MAX_BYTES_PER_TOKEN, MAX_JSON_BODY,
};
use crate::remote::sse::{EventReader, Item, SseError};
use hearth_wire::openai::{Choice, Delta, Reply};

/// What the worker reading an answer passes to the caller.
pub(super) enum Piece {
    /// Answer text; empty for a keep-alive comment.
    Text(String),
    /// The stream ended.
    End(Result<StreamOutcome, BackendError>),
}

/// One streamed answer being read.
pub(super) struct Stream<'c, 's, R: Read> {
    client: &'c OpenAiClient,
    request: &'c ChatRequest,
    events: EventReader<BufReader<R>>,
    on_text: TextSink<'s>,
    outcome: StreamOutcome,
    in_think: bool,
    done: bool,
    /// Text pieces passed on, and their bytes.
    texts: usize,
    text_bytes: usize,
    /// When text last came (or the stream began).
    last_text: Instant,
    /// Most pieces and bytes read before the answer is cut at its length.
    max_pieces: usize,
    max_bytes: usize,
}

impl<'c, 's, R: Read> Stream<'c, 's, R> {
    pub(super) fn new(
        client: &'c OpenAiClient,
        request: &'c ChatRequest,
        reader: BufReader<R>,
        on_text: TextSink<'s>,
        max_event_bytes: usize,
    ) -> Self {
        let asked = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
        let max_pieces = asked
            .saturating_add(asked / 4)
            .saturating_add(ANSWER_MARGIN_TOKENS);
        Stream {
            client,
            request,
            events: EventReader::new(reader, max_event_bytes),
            on_text,
            outcome: StreamOutcome::default(),
            in_think: false,
            done: false,
            texts: 0,
            text_bytes: 0,
            last_text: Instant::now(),
            max_pieces,
            max_bytes: max_pieces.saturating_mul(MAX_BYTES_PER_TOKEN),
        }
    }

    pub(super) fn run(&mut self, content_type: &str) -> Result<StreamOutcome, BackendError> {
        let json_body = content_type.contains("json") || {
            // No or another content type: look at the first byte.
            let peek = match self.events.get_mut().fill_buf() {
                Ok(peek) => peek,
                Err(e) => return Err(self.read_error(e)),
            };
            let first = peek.iter().find(|b| !b.is_ascii_whitespace()).copied();
            match first {
                Some(b'{') => true,
                Some(b'd' | b':' | b'e' | b'i' | b'r') | None => false,
                Some(_) => {
                    let start = String::from_utf8_lossy(&peek[..peek.len().min(80)]).to_string();
                    return Err(self.client.bad_reply(&format!(
                        "it is neither JSON nor an event stream (starts with {})",
                        quote(&start, self.client.key.as_ref())
                    )));
                }
            }
        };
        if json_body {
            self.read_json_answer()?;
        } else {
            self.read_events()?;
        }
        // FastFlowLM ends a failed generation with finish_reason "error" and no other word.
        if !self.outcome.cancelled && self.outcome.finish_reason.as_deref() == Some("error") {
            return Err(self.client.failed(
                FailureKind::Server,
                format!(
                    "The server at {} stopped the answer with an error. The part that arrived is \
                     kept. Check the server's log.",
                    self.client.base_url
                ),
            ));
        }
        Ok(std::mem::take(&mut self.outcome))
    }

    /// A whole JSON body instead of events: an error (FastFlowLM before the first chunk), or
    /// a server that ignored `stream: true` and sent the answer at once.
    fn read_json_answer(&mut self) -> Result<(), BackendError> {
        let mut text = String::new();
        self.events
            .get_mut()
            .take(MAX_JSON_BODY)
            .read_to_string(&mut text)
            .map_err(|e| self.read_error(e))?;
        let value = self.client.parse_json(&text)?;
        let reply = read_reply(&value);
        if let Some(error) = &reply.error {
            return Err(self.client.server_error(error));
        }
        let choice = reply.choices.first().ok_or_else(|| {
            self.client.bad_reply(&format!(
                "its JSON has no answer in it (starts with {})",
                quote(&text, self.client.key.as_ref())
            ))
        })?;
        self.note_model(&reply)?;
        if self.pass_choice(choice, choice.message.as_ref()).is_break() {
            self.outcome.cancelled = true;
            return Ok(());
        }
        self.note_finish(choice);
        self.note_usage(&reply);
        self.close_think();
        self.done = true;
        Ok(())
    }

    /// Server-sent events, one at a time as they arrive.
    fn read_events(&mut self) -> Result<(), BackendError> {
        loop {
            let item = match self.events.next_item() {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(SseError::Io(e)) => return Err(self.read_error(e)),
                Err(e @ SseError::EventTooLong { .. }) => {
                    return Err(self.client.bad_reply(&e.to_string()))
                }
            };
            let flow = match item {
                Item::Event { name, data } => self.handle_event(&name, &data)?,
                // A keep-alive: a chance for the caller to stop, but not text.
                Item::Comment => (self.on_text)(""),
                Item::Unknown(line) if self.texts == 0 && self.outcome.model.is_none() => {
                    return Err(self.client.bad_reply(&format!(
                        "it is not an event stream (a line reads {})",
                        quote(&line, self.client.key.as_ref())
                    )));
                }
                Item::Unknown(_) => ControlFlow::Continue(()), // ignored, as the format says
            };
            if flow.is_break() {
                self.outcome.cancelled = true;
                return Ok(());
            }
            if self.done {
                return Ok(());
            }
            if self.last_text.elapsed() >= self.client.options.read_timeout {
                return Err(self.client.no_text_error());
            }
        }
        self.close_think();
        if self.outcome.finish_reason.is_some() {
            // Some servers end with a finish_reason and close without [DONE].
            return Ok(());
        }
        let message = if self.texts == 0 {
            format!(
                "The server at {} ended its reply before any of the answer arrived. Check the \
                 server's log: it may have failed to load the model, or crashed.",
                self.client.base_url
            )
        } else {
            format!(
                "The answer from {} stopped before its end: the connection closed in the middle \
                 of the answer. The part that arrived is kept. The server may have crashed or \
                 restarted; check it and try again.",
                self.client.base_url
            )
        };
        Err(self.client.failed(FailureKind::Cut, message))
    }

    fn handle_event(&mut self, name: &str, data: &str) -> Result<ControlFlow<()>, BackendError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.close_think();
            self.done = true;
            return Ok(ControlFlow::Continue(()));
        }
        let value: Value = serde_json::from_str(data).map_err(|_| {
            self.client.bad_reply(&format!(
                "one of its events is not JSON ({})",
                quote(data, self.client.key.as_ref())
            ))
        })?;
        let reply = read_reply(&value);
        if let Some(error) = &reply.error {
            return Err(self.client.server_error(error));
        }
        if name == "error" {
            return Err(self.client.server_error(&value));
        }
        self.note_model(&reply)?;
        self.note_usage(&reply);
        let mut flow = ControlFlow::Continue(());
        if let Some(choice) = reply.choices.first() {
            flow = self.pass_choice(choice, choice.delta.as_ref());
            self.note_finish(choice);
        }
        Ok(flow)
    }

    /// Passes a choice's text on: a chat answer's in `chat` (its `delta`, or its whole
    /// `message`), a raw completion's in its `text`.
    fn pass_choice(&mut self, choice: &Choice, chat: Option<&Delta>) -> ControlFlow<()> {
        if let Some(delta) = chat {
            return self.pass_delta(delta);
        }
        match choice.text.as_deref() {
            Some(text) if !text.is_empty() => self.pass_text(text.to_owned()),
            _ => ControlFlow::Continue(()),
        }
    }

    /// Passes a delta's (or message's) text on: reasoning inside `<think>`…`</think>`.
    fn pass_delta(&mut self, delta: &Delta) -> ControlFlow<()> {
        let mut piece = String::new();
        if let Some(reasoning) = delta.reasoning_text() {
            if !self.in_think {
                piece.push_str("<think>");
                self.in_think = true;
            }
            piece.push_str(reasoning);
        }
        if let Some(content) = delta.content_text() {
            if self.in_think {
                piece.push_str("</think>");
                self.in_think = false;
            }
            piece.push_str(content);
        }
        if piece.is_empty() {
            return ControlFlow::Continue(());
        }
        self.pass_text(piece)
    }

    /// Passes a piece of the answer on, ending the answer at its length when the server goes
    /// on past `max_tokens`.
    fn pass_text(&mut self, piece: String) -> ControlFlow<()> {
        self.texts += 1;
        self.text_bytes += piece.len();
        self.last_text = Instant::now();
        if self.texts > self.max_pieces || self.text_bytes > self.max_bytes {
            // The server ignores max_tokens: end the answer at its length here.
            tracing::warn!(
                pieces = self.texts,
                bytes = self.text_bytes,
                max_tokens = ?self.request.max_tokens,
                "the server went on past the answer's length; Hearth stopped reading"
            );
            self.outcome.finish_reason = Some("length".into());
            self.close_think();
            self.done = true;
            return ControlFlow::Continue(());
        }
        (self.on_text)(&piece)
    }

    fn close_think(&mut self) {
        if self.in_think {
            self.in_think = false;
            // The stream is ending: a Break here has nothing left to stop.
            let _ = (self.on_text)("</think>");
        }
    }

    fn note_model(&mut self, reply: &Reply) -> Result<(), BackendError> {
        let Some(model) = reply.model.as_deref() else {
            return Ok(());
        };
        if self.outcome.model.is_none() {
            if self.request.require_model && model != self.request.model {
                return Err(self.client.failed(
                    FailureKind::WrongModel,
                    format!(
                        "The server at {} answered with the model {:?}, not {:?} that was asked \
                         for. Check which models the server has loaded.",
                        self.client.base_url,
                        clean(model, self.client.key.as_ref()),
                        self.request.model
                    ),
                ));
            }
            self.outcome.model = Some(model.to_owned());
        }
        Ok(())
    }

    fn note_finish(&mut self, choice: &Choice) {
        if let Some(reason) = &choice.finish_reason {
            self.outcome.finish_reason = Some(reason.clone());
        }
    }

    fn note_usage(&mut self, reply: &Reply) {
        if let Some(usage) = &reply.usage {
            let count = |n: Option<u64>| n.map(|n| n as usize);
            self.outcome.usage = Some(ServerUsage {
                prompt_tokens: count(usage.prompt_tokens),
                completion_tokens: count(usage.completion_tokens),
            });
            let t = &mut self.outcome.timings;
            t.load_secs = usage.load_duration.or(t.load_secs);
            t.prefill_secs = usage.prefill_duration_ttft.or(t.prefill_secs);
            t.prefill_tokens_per_s = usage.prefill_speed_tps.or(t.prefill_tokens_per_s);
            t.decode_secs = usage.decoding_duration.or(t.decode_secs);
            t.decode_tokens_per_s = usage.decoding_speed_tps.or(t.decode_tokens_per_s);
        }
        // llama.cpp's server: milliseconds and rates in a `timings` object.
        if let Some(timings) = &reply.timings {
            let t = &mut self.outcome.timings;
            t.prefill_secs = timings.prompt_ms.map(|ms| ms / 1000.0).or(t.prefill_secs);
            t.prefill_tokens_per_s = timings.prompt_per_second.or(t.prefill_tokens_per_s);
            t.decode_secs = timings.predicted_ms.map(|ms| ms / 1000.0).or(t.decode_secs);
            t.decode_tokens_per_s = timings.predicted_per_second.or(t.decode_tokens_per_s);
        }
    }

    fn read_error(&self, error: std::io::Error) -> BackendError {
        let error = ureq::Error::from(error);
        let stalled = matches!(
            classify(&error, false),
            Transport::ReadTimeout | Transport::ConnectTimeout
        );
        let url = &self.client.base_url;
        let secs = OpenAiClient::secs(self.client.options.read_timeout);
        if stalled {
            let message = if self.texts > 0 {
                format!(
                    "The server at {url} stopped sending for {secs} in the middle of the answer. \
                     The part that arrived is kept. The server may be overloaded or stuck; try \
                     again."
                )
            } else {
                format!(
                    "The server at {url} started its reply but sent nothing more for {secs}. It \
                     may be overloaded or stuck; try again, or restart it."
                )
            };
            self.client.failed(FailureKind::Timeout, message)
        } else {
            self.client.failed(
                FailureKind::Cut,
                format!(
                    "The answer from {url} stopped before its end: the connection broke in the \
                     middle of the answer. The part that arrived is kept. The server may have \
                     crashed or restarted; check it and try again."
                ),
            )
        }
    }
}

/// A reply's fields as the wire types read them; JSON that is not an object reads as empty.
fn read_reply(value: &Value) -> Reply {
    Reply::deserialize(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::openai::testing::{client, kind, request};
    use crate::remote::openai::MAX_EVENT_BYTES;

    /// Reads `body` as a stream with `content_type`, collecting the text passed on.
    fn read(
        body: &str,
        content_type: &str,
        req: &ChatRequest,
    ) -> (Result<StreamOutcome, BackendError>, Vec<String>) {
        read_limited(body, content_type, req, MAX_EVENT_BYTES)
    }

    /// [`read`] with events of at most `max_event_bytes`. Empty pieces (keep-alives) are not
    /// collected.
    fn read_limited(
        body: &str,
        content_type: &str,
        req: &ChatRequest,
        max_event_bytes: usize,
    ) -> (Result<StreamOutcome, BackendError>, Vec<String>) {
        let client = client();
        let mut pieces = Vec::new();
        let mut sink = |t: &str| {
            if !t.is_empty() {
                pieces.push(t.to_owned());
            }
            ControlFlow::Continue(())
        };
        let reader = BufReader::new(body.as_bytes());
        let result =
            Stream::new(&client, req, reader, &mut sink, max_event_bytes).run(content_type);
        (result, pieces)
    }

    #[test]
    fn usage_in_the_last_chunk_with_null_timings() {
        let body = concat!(
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
            ": keep-alive\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
            "data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":null},\"finish_reason\":\"stop\"}],",
            "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2,\"load_duration\":0.0,",
            "\"prefill_duration_ttft\":0.21,\"prefill_speed_tps\":null,\"decoding_duration\":0.5,\"decoding_speed_tps\":40.5}}\n\n",
            "data: [DONE]\n\n"
        );
        let (out, pieces) = read(body, "text/event-stream", &request());
        let out = out.unwrap();
        assert_eq!(pieces, ["Hel", "lo"]);
        assert_eq!(out.finish_reason.as_deref(), Some("stop"));
        assert_eq!(out.model.as_deref(), Some("m"));
        assert_eq!(
            out.usage,
            Some(ServerUsage {
                prompt_tokens: Some(12),
                completion_tokens: Some(2)
            })
        );
        assert_eq!(out.timings.prefill_secs, Some(0.21));
        assert_eq!(out.timings.prefill_tokens_per_s, None);
        assert_eq!(out.timings.decode_tokens_per_s, Some(40.5));
        assert_eq!(out.timings.load_secs, Some(0.0));
    }

    #[test]
    fn llama_cpp_timings_are_read() {
        let body = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],\"timings\":{\"prompt_n\":5,\"prompt_ms\":250.0,\"prompt_per_second\":20.0,\"predicted_ms\":1000.0,\"predicted_per_second\":9.5}}\r\n\r\ndata: [DONE]\r\n\r\n";
        let (out, _) = read(body, "text/event-stream", &request());
        let out = out.unwrap();
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert_eq!(out.timings.prefill_secs, Some(0.25));
        assert_eq!(out.timings.decode_secs, Some(1.0));
        assert_eq!(out.timings.decode_tokens_per_s, Some(9.5));
        assert_eq!(out.usage, None);
    }

    #[test]
    fn reasoning_is_wrapped_in_think_tags() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\" ok\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Yes\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let (out, pieces) = read(body, "text/event-stream", &request());
        out.unwrap();
        assert_eq!(pieces.concat(), "<think>hmm ok</think>Yes");
        // Reasoning only, then the end: the tag is still closed.
        let body = "data: {\"choices\":[{\"delta\":{\"reasoning\":\"x\"}}]}\n\ndata: [DONE]\n\n";
        let (_, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(pieces.concat(), "<think>x</think>");
    }

    #[test]
    fn an_error_with_status_200_is_an_error() {
        let (out, _) = read(
            "{\"error\":\"Failed to load qwen3:1.7b model!\"}",
            "application/json",
            &request(),
        );
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Server);
        assert!(e.to_string().contains("Failed to load"), "{e}");
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"boom sk-SECRET\",\"code\":500}}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(pieces, ["a"]);
        assert!(e.to_string().contains("boom <hidden>"), "{e}");
    }

    #[test]
    fn a_stream_without_an_end_is_cut() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(kind(&out.unwrap_err()), FailureKind::Cut);
        assert_eq!(pieces, ["a"]);
        // A finish_reason without [DONE] is a complete answer.
        let body =
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n";
        let (out, _) = read(body, "", &request());
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("stop"));
        // Nothing at all: cut too, and said so.
        let (out, _) = read("", "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Cut);
        assert!(
            e.to_string().contains("before any of the answer arrived"),
            "{e}"
        );
    }

    #[test]
    fn non_json_and_non_sse_are_bad_replies() {
        for (body, ct) in [
            ("<html>502 Bad Gateway</html>", "text/html"),
            ("data: hello\n\n", "text/event-stream"),
            ("{not json", "application/json"),
            ("hello there\n\n", "text/event-stream"),
        ] {
            let (out, _) = read(body, ct, &request());
            let e = out.unwrap_err();
            assert_eq!(kind(&e), FailureKind::BadReply, "{body}: {e}");
            assert!(e.to_string().contains("cannot read"), "{e}");
        }
    }

    #[test]
    fn a_whole_json_answer_is_accepted() {
        let body = r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let (out, pieces) = read(body, "application/json", &request());
        let out = out.unwrap();
        assert_eq!(pieces, ["Hi!"]);
        assert_eq!(out.usage.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn completion_text_pieces_are_read_streamed_or_whole() {
        let body =
            "data: {\"model\":\"m\",\"choices\":[{\"text\":\"Once\",\"finish_reason\":null}]}\n\n\
                    data: {\"choices\":[{\"text\":\" upon\",\"finish_reason\":\"length\"}]}\n\n\
                    data: [DONE]\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        assert_eq!(pieces, ["Once", " upon"]);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("length"));
        let whole = r#"{"model":"m","choices":[{"text":"Hi!","finish_reason":"stop"}]}"#;
        let (out, pieces) = read(whole, "application/json", &request());
        assert_eq!(pieces, ["Hi!"]);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn the_wrong_model_is_caught_before_its_text() {
        let mut req = request();
        req.require_model = true;
        let body =
            "data: {\"model\":\"llama3.2:1b\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &req);
        assert_eq!(kind(&out.unwrap_err()), FailureKind::WrongModel);
        assert!(pieces.is_empty());
    }

    #[test]
    fn break_stops_reading() {
        let client = client();
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n";
        let mut seen = Vec::new();
        let mut sink = |t: &str| {
            seen.push(t.to_owned());
            ControlFlow::Break(())
        };
        let req = request();
        let reader = BufReader::new(body.as_bytes());
        let out = Stream::new(&client, &req, reader, &mut sink, MAX_EVENT_BYTES)
            .run("text/event-stream")
            .unwrap();
        assert!(out.cancelled);
        assert_eq!(seen, ["a"]);
    }

    #[test]
    fn finish_reason_error_is_a_server_error() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::Server);
        assert!(
            e.to_string().contains("stopped the answer with an error"),
            "{e}"
        );
        assert_eq!(pieces, ["a"]);
    }

    #[test]
    fn multi_line_data_is_joined() {
        let body = "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"x\"}, \"finish_reason\":\"stop\"}]}\n\n";
        let (out, pieces) = read(body, "text/event-stream", &request());
        out.unwrap();
        assert_eq!(pieces, ["x"]);
    }

    fn chunk(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
    }

    #[test]
    fn an_event_is_bounded_in_all_its_data_lines() {
        // Each line is short, but together they pass the limit: refused, not gathered.
        let body = format!("{}\n\n", "data: 0123456789012345678\n".repeat(10));
        let (out, _) = read_limited(&body, "text/event-stream", &request(), 100);
        let e = out.unwrap_err();
        assert_eq!(kind(&e), FailureKind::BadReply, "{e}");
        assert!(e.to_string().contains("events is longer than"), "{e}");
        // Events under the limit, one after another, are all read.
        let body = format!("{}data: [DONE]\n\n", chunk("ab").repeat(20));
        let (out, pieces) = read_limited(&body, "text/event-stream", &request(), 100);
        out.unwrap();
        assert_eq!(pieces.concat(), "ab".repeat(20));
    }

    #[test]
    fn an_answer_past_max_tokens_ends_at_its_length() {
        let mut req = request();
        req.max_tokens = Some(8);
        let body = chunk("tok").repeat(1000);
        let (out, pieces) = read(&body, "text/event-stream", &req);
        let out = out.unwrap();
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert!(
            pieces.len() <= 8 + 2 + ANSWER_MARGIN_TOKENS,
            "{}",
            pieces.len()
        );
        // Few pieces of many bytes are bounded too.
        let big = "x".repeat(4000);
        let body = chunk(&big).repeat(100);
        let (out, pieces) = read(&body, "text/event-stream", &req);
        assert_eq!(out.unwrap().finish_reason.as_deref(), Some("length"));
        let bytes: usize = pieces.iter().map(String::len).sum();
        assert!(bytes <= (8 + 2 + ANSWER_MARGIN_TOKENS) * MAX_BYTES_PER_TOKEN + big.len());
    }
}
