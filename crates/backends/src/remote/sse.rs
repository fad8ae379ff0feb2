//! Server-sent events (`text/event-stream`), read from a byte stream with a bound on each
//! event: all the lines of one event together (every `data:` line, comments and other
//! fields) may hold at most `max_event_bytes`, so a server cannot grow one event without end,
//! whether as one endless line or as many `data:` lines with no blank line between them.
//!
//! Lines end with `\n` (a `\r` before it is dropped). A blank line ends an event; the end of
//! the stream ends the last one. `data:` lines are joined with `\n`, as the format says.

use std::io::{self, BufRead, Read};

/// One thing read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An event: its `event:` name (empty when none) and its joined `data:` lines.
    Event {
        /// The `event:` field.
        name: String,
        /// The `data:` lines, joined with `\n`.
        data: String,
    },
    /// A comment line (`: keep-alive`): it carries nothing, but shows the server is there.
    Comment,
    /// A line with a field the format does not know (kept so a caller can tell a stream that
    /// is not an event stream at all).
    Unknown(String),
}

/// What went wrong while reading events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// The connection failed or timed out.
    #[error("reading the event stream failed: {0}")]
    Io(#[from] io::Error),
    /// One event's lines add up to more than the limit.
    #[error("one of its events is longer than {}", limit_words(*.limit))]
    EventTooLong {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// "4 MiB" for whole mebibytes, else the bytes.
fn limit_words(limit: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if limit >= MIB && limit.is_multiple_of(MIB) {
        format!("{} MiB", limit / MIB)
    } else {
        format!("{limit} bytes")
    }
}

/// Reads events from `reader` one at a time, each bounded by `max_event_bytes`.
#[derive(Debug)]
pub struct EventReader<R> {
    reader: R,
    max_event_bytes: usize,
    /// Bytes of the event being gathered so far (all its lines).
    event_bytes: usize,
    name: String,
    data: String,
    has_data: bool,
    line: Vec<u8>,
    /// The last line had no newline: the stream ends after it.
    pending_end: bool,
    ended: bool,
}

impl<R: BufRead> EventReader<R> {
    /// A reader of `reader` allowing at most `max_event_bytes` per event.
    pub fn new(reader: R, max_event_bytes: usize) -> Self {
        EventReader {
            reader,
            max_event_bytes,
            event_bytes: 0,
            name: String::new(),
            data: String::new(),
            has_data: false,
            line: Vec::new(),
            pending_end: false,
            ended: false,
        }
    }

    /// The underlying reader (to look at the first bytes before reading events).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.reader
    }

    /// The next event, comment or unknown line; `None` at the end of the stream. After an
    /// error the reader should be dropped.
    pub fn next_item(&mut self) -> Result<Option<Item>, SseError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let (text, at_end) = if self.pending_end {
                (String::new(), true)
            } else {
                let at_end = self.read_line()?;
                (String::from_utf8_lossy(&self.line).into_owned(), at_end)
            };
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            if !text.is_empty() {
                // The last line may have no newline: it counts, then the event ends.
                self.pending_end = at_end;
                match self.field(text) {
                    Some(item) => return Ok(Some(item)),
                    None => continue,
                }
            }
            self.ended = at_end;
            // A blank line (or the end) dispatches the event gathered so far.
            self.event_bytes = 0;
            if self.has_data || !self.name.is_empty() {
                self.has_data = false;
                return Ok(Some(Item::Event {
                    name: std::mem::take(&mut self.name),
                    data: std::mem::take(&mut self.data),
                }));
            }
        }
    }

    /// Takes in one non-blank line; returns an item for comments and unknown fields.
    fn field(&mut self, text: &str) -> Option<Item> {
        if text.starts_with(':') {
            return Some(Item::Comment);
        }
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                None
            }
            "event" => {
                self.name = value.to_owned();
                None
            }
            "id" | "retry" => None,
            _ => Some(Item::Unknown(text.to_owned())),
        }
    }

    /// Reads one line into `self.line`, counting its text against the event's budget; true
    /// when the stream ended (the line is then empty, or the last one, without a newline).
    fn read_line(&mut self) -> Result<bool, SseError> {
        self.line.clear();
        let room = self.max_event_bytes.saturating_sub(self.event_bytes);
        // Room for the text and its "\r\n": a line that fills it all is too long.
        let n = (&mut self.reader)
            .take(room as u64 + 2)
            .read_until(b'\n', &mut self.line)?;
        let ends = self.line.ends_with(b"\n");
        let text_len = n - usize::from(ends) - usize::from(self.line.ends_with(b"\r\n"));
        if text_len > room {
            return Err(SseError::EventTooLong {
                limit: self.max_event_bytes,
            });
        }
        self.event_bytes += text_len;
        Ok(!ends)
    }
}
