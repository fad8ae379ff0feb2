//! A small HTTP/1.1 client for FastFlowLM's server on 127.0.0.1, shaped by its habits: it
//! closes the connection after every response (so each request opens its own, and nothing is
//! reused), streams answers as Server-Sent Events in chunked transfer encoding, and reports
//! most errors in HTTP 200 bodies (the caller looks for an `error` key in every JSON body).
//!
//! Loopback only: no TLS, no proxies, no redirects.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// A whole response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// The body as text.
    pub body: String,
}

/// What a POST returned: an event stream, or a plain body (an error, or a non-streamed answer).
#[derive(Debug)]
pub enum Reply {
    /// `text/event-stream`: read the events one by one; dropping it closes the connection
    /// (FastFlowLM then cancels the answer).
    Events(EventStream),
    /// Anything else, read whole.
    Body(Response),
}

fn connect(port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// `GET path`, waiting at most `timeout` for connecting and for each read.
pub fn get(port: u16, path: &str, timeout: Duration) -> io::Result<Response> {
    let mut stream = connect(port, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nAccept: application/json\r\n\r\n"
    )?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader)?;
    let body = read_body(reader, &head)?;
    Ok(Response {
        status: head.status,
        body,
    })
}

/// `POST path` with a JSON body; `read_timeout` bounds each wait for data (a slow first token
/// included).
pub fn post_json(
    port: u16,
    path: &str,
    body: &str,
    connect_timeout: Duration,
    read_timeout: Duration,
) -> io::Result<Reply> {
    let mut stream = connect(port, connect_timeout)?;
    stream.set_read_timeout(Some(read_timeout))?;
    stream.set_write_timeout(Some(read_timeout))?;
    // One write: headers and body go out together.
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: text/event-stream, application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    stream.flush()?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader)?;
    if head.content_type.starts_with("text/event-stream") {
        let body: Box<dyn Read + Send> = if head.chunked {
            Box::new(Chunked::new(reader))
        } else {
            Box::new(reader)
        };
        Ok(Reply::Events(EventStream {
            lines: BufReader::new(body),
        }))
    } else {
        let body = read_body(reader, &head)?;
        Ok(Reply::Body(Response {
            status: head.status,
            body,
        }))
    }
}

struct Head {
    status: u16,
    content_type: String,
    content_length: Option<usize>,
    chunked: bool,
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection without answering",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("not an HTTP status line: {:?}", line.trim())))?;
    let mut head = Head {
        status,
        content_type: String::new(),
        content_length: None,
        chunked: false,
    };
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("the headers ended early"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            return Ok(head);
        }
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "content-type" => head.content_type = v.to_ascii_lowercase(),
                "content-length" => head.content_length = v.parse().ok(),
                "transfer-encoding" => head.chunked = v.eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
    }
}

fn read_body<R: BufRead + Send + 'static>(reader: R, head: &Head) -> io::Result<String> {
    let mut bytes = Vec::new();
    if head.chunked {
        Chunked::new(reader).read_to_end(&mut bytes)?;
    } else if let Some(n) = head.content_length {
        reader.take(n as u64).read_to_end(&mut bytes)?;
        if bytes.len() < n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the body ended early",
            ));
        }
    } else {
        let mut r = reader;
        r.read_to_end(&mut bytes)?;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Chunked transfer decoding; the end is the zero-length chunk. A connection closed before it
/// is an `UnexpectedEof` error.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Chunked<R> {
    fn new(inner: R) -> Self {
        Chunked {
            inner,
            left: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed in the middle of the answer",
                ));
            }
            let size = line.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| bad(format!("bad chunk size {:?}", line.trim())))?;
            if self.left == 0 {
                // Trailer (none expected) and the final blank line.
                let mut rest = String::new();
                let _ = self.inner.read_line(&mut rest);
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed in the middle of the answer",
            ));
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// Server-Sent Events from a response body.
pub struct EventStream {
    lines: BufReader<Box<dyn Read + Send>>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// The next event's data (its `data:` lines joined by newlines); `None` when the body ended
    /// properly. A connection cut before the end is an error.
    pub fn next_data(&mut self) -> io::Result<Option<String>> {
        let mut data: Option<String> = None;
        let mut line = String::new();
        loop {
            line.clear();
            if self.lines.read_line(&mut line)? == 0 {
                return Ok(data);
            }
            let l = line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if data.is_some() {
                    return Ok(data);
                }
                continue;
            }
            if let Some(v) = l.strip_prefix("data:") {
                let v = v.strip_prefix(' ').unwrap_or(v);
                match data.as_mut() {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(v);
                    }
                    None => data = Some(v.to_string()),
                }
            }
            // Comments (`:`), `event:`, `id:` and `retry:` carry nothing FastFlowLM uses.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(reply: &'static [u8]) -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // The whole request (it ends with the body `{}`), so closing sends no reset.
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.ends_with(b"{}") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            s.write_all(reply).unwrap();
        });
        port
    }

    #[test]
    fn chunked_events_are_read_in_order() {
        let port = serve_once(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nf\r\ndata: {\"a\":1}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n");
        let Reply::Events(mut events) = post_json(
            port,
            "/x",
            "{}",
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
        .unwrap() else {
            panic!("expected events");
        };
        assert_eq!(events.next_data().unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(events.next_data().unwrap().as_deref(), Some("[DONE]"));
        assert_eq!(events.next_data().unwrap(), None);
    }

    #[test]
    fn a_cut_stream_is_an_error() {
        let port = serve_once(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nf\r\ndata: {\"a\":1}\n\n\r\n");
        let Reply::Events(mut events) = post_json(
            port,
            "/x",
            "{}",
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
        .unwrap() else {
            panic!("expected events");
        };
        assert!(events.next_data().unwrap().is_some());
        let e = events.next_data().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn error_bodies_come_whole() {
        let port = serve_once(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"error\":\"boom\"}\n");
        let Reply::Body(r) = post_json(
            port,
            "/x",
            "{}",
            Duration::from_secs(2),
            Duration::from_secs(2),
        )
        .unwrap() else {
            panic!("expected a body");
        };
        assert_eq!((r.status, r.body.as_str()), (200, "{\"error\":\"boom\"}\n"));
    }
}
