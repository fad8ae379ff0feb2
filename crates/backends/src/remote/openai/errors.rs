//! What went wrong talking to a server, in plain words: transport failures, HTTP statuses, a
//! server's own error objects and replies Hearth cannot read. The key never appears in them.

use std::io::Read;
use std::time::Duration;

use hearth_chat::backend::{BackendError, FailureKind};
use serde_json::Value;

use super::{ApiKey, OpenAiClient, MAX_JSON_BODY, MAX_QUOTE};

impl OpenAiClient {
    pub(super) fn failed(&self, kind: FailureKind, message: String) -> BackendError {
        tracing::debug!(kind = ?kind, "{message}");
        BackendError::failed(kind, message)
    }

    pub(super) fn secs(d: Duration) -> String {
        let s = d.as_secs_f64();
        if s >= 1.0 && s.fract() == 0.0 {
            format!("{s:.0} s")
        } else {
            format!("{s:.1} s")
        }
    }

    /// A failure before any response arrived (connecting, sending, waiting for the headers).
    pub(super) fn request_error(&self, error: ureq::Error) -> BackendError {
        let url = &self.base_url;
        let https = url.starts_with("https://");
        match classify(&error, https) {
            Transport::Refused => self.failed(
                FailureKind::Refused,
                format!(
                    "Hearth could not reach the server at {url}: nothing is listening there. \
                     Check the address and that the server is running."
                ),
            ),
            Transport::Dns => self.failed(
                FailureKind::Dns,
                format!(
                    "Hearth could not find the server at {url}: its name does not resolve to an \
                     address. Check the spelling of the address, or use the server's IP address."
                ),
            ),
            Transport::Tls(detail) => self.failed(
                FailureKind::Tls,
                format!(
                    "Hearth could not set up a secure (https) connection to {url} ({detail}). \
                     If the server does not use https, use an http:// address; otherwise check \
                     its certificate."
                ),
            ),
            Transport::ConnectTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {url} did not accept a connection within {}. Check the \
                     address and that the server is up; a firewall may be dropping the \
                     connection.",
                    Self::secs(self.options.connect_timeout)
                ),
            ),
            Transport::ReadTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {url} took the request but sent nothing back for {}. It may be \
                     overloaded or stuck; try again, or restart it.",
                    Self::secs(self.options.read_timeout)
                ),
            ),
            Transport::Closed => self.failed(
                FailureKind::Cut,
                format!(
                    "The server at {url} closed the connection without answering. It may have \
                     crashed or restarted; check it and try again."
                ),
            ),
            Transport::Protocol(detail) => self.bad_reply(&format!("not HTTP ({detail})")),
            Transport::Other(detail) => self.failed(
                FailureKind::Refused,
                format!(
                    "Hearth could not talk to the server at {url} ({detail}). Check the address \
                     and that the server is running."
                ),
            ),
        }
    }

    /// A failure while reading a body whose headers arrived.
    pub(super) fn body_error(&self, error: ureq::Error) -> BackendError {
        match classify(&error, false) {
            Transport::ReadTimeout | Transport::ConnectTimeout => self.failed(
                FailureKind::Timeout,
                format!(
                    "The server at {} stopped sending for {} in the middle of its reply. It may \
                     be overloaded or stuck; try again.",
                    self.base_url,
                    Self::secs(self.options.read_timeout)
                ),
            ),
            _ => self.failed(
                FailureKind::Cut,
                format!(
                    "The reply from {} stopped before its end: the connection closed. The \
                     server may have crashed or restarted; check it and try again.",
                    self.base_url
                ),
            ),
        }
    }

    /// A stream that went on without text for longer than the read timeout.
    pub(super) fn no_text_error(&self) -> BackendError {
        self.failed(
            FailureKind::Timeout,
            format!(
                "The server at {} sent no text for {}, only signs that it is still there. It \
                 may be stuck; try again, or restart it.",
                self.base_url,
                Self::secs(self.options.read_timeout)
            ),
        )
    }

    /// A reply with a status other than 200.
    pub(super) fn status_error(
        &self,
        status: u16,
        headers: &ureq::http::HeaderMap,
        body: &str,
        model: Option<&str>,
    ) -> BackendError {
        let url = &self.base_url;
        let said = server_words(body, self.key.as_ref())
            .map(|w| format!(" It said: {w}"))
            .unwrap_or_default();
        match status {
            401 | 403 => {
                let message = if self.key.is_some() {
                    format!(
                        "The server at {url} refused the API key (HTTP {status}). Check the key \
                         in the remote server settings."
                    )
                } else {
                    format!(
                        "The server at {url} needs an API key (HTTP {status}). Add the key in \
                         the remote server settings."
                    )
                };
                self.failed(FailureKind::Auth, message)
            }
            404 => match model {
                Some(model) => self.failed(
                    FailureKind::ModelNotFound,
                    format!(
                        "The server at {url} has no model named {model:?} (HTTP 404). Choose one \
                         of the models it lists.{said}"
                    ),
                ),
                None => self.failed(
                    FailureKind::BadReply,
                    format!(
                        "The server at {url} has no /v1/models (HTTP 404): it may not be an \
                         OpenAI-compatible server, or the address needs another path in front \
                         of /v1."
                    ),
                ),
            },
            429 | 503 => {
                let retry = headers
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let when = match retry {
                    Some(secs) => format!("asks to wait {secs} s. Try again then."),
                    None => "cannot take the request now. Try again in a moment.".to_owned(),
                };
                tracing::debug!(status, retry_after = ?retry, "server busy");
                BackendError::Failed {
                    kind: FailureKind::Busy,
                    message: format!("The server at {url} is busy (HTTP {status}) and {when}"),
                    retry_after_secs: retry,
                }
            }
            300..=399 => {
                let to = headers
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .map(|l| format!(" to {}", quote(l, self.key.as_ref())))
                    .unwrap_or_default();
                self.failed(
                    FailureKind::BadReply,
                    format!(
                        "The server at {url} redirected the request{to} (HTTP {status}). Hearth \
                         does not follow redirects, so the API key never goes to another \
                         address: put the address it points to in the settings."
                    ),
                )
            }
            _ => {
                let message = match serde_json::from_str::<Value>(body)
                    .ok()
                    .and_then(|v| v.get("error").cloned())
                {
                    Some(error) => {
                        return self.failed(
                            FailureKind::Server,
                            format!(
                                "The server at {url} reported an error (HTTP {status}): {}",
                                error_words(&error, self.key.as_ref())
                            ),
                        )
                    }
                    None => format!(
                        "The server at {url} answered with HTTP {status}.{said} Check the \
                         server's log."
                    ),
                };
                self.failed(FailureKind::Server, message)
            }
        }
    }

    /// An `error` object or string a server sent in a 200 reply or in a stream.
    pub(super) fn server_error(&self, error: &Value) -> BackendError {
        let words = error_words(error, self.key.as_ref());
        let code = error
            .get("code")
            .and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
        let kind = match code {
            Some(401 | 403) => FailureKind::Auth,
            Some(404) => FailureKind::ModelNotFound,
            Some(429 | 503) => FailureKind::Busy,
            _ => FailureKind::Server,
        };
        self.failed(
            kind,
            format!("The server at {} reported an error: {words}", self.base_url),
        )
    }

    pub(super) fn bad_reply(&self, what: &str) -> BackendError {
        self.failed(
            FailureKind::BadReply,
            format!(
                "The server at {} sent a reply Hearth cannot read: {what}. Check that the \
                 address points at an OpenAI-compatible server (llama.cpp server, vLLM, \
                 Ollama, Lemonade).",
                self.base_url
            ),
        )
    }

    pub(super) fn parse_json(&self, text: &str) -> Result<Value, BackendError> {
        serde_json::from_str(text).map_err(|_| {
            self.bad_reply(&format!(
                "it is not JSON (starts with {})",
                quote(text, self.key.as_ref())
            ))
        })
    }
}

/// What went wrong on the wire, before the plain words.
pub(super) enum Transport {
    Refused,
    Dns,
    Tls(String),
    ConnectTimeout,
    ReadTimeout,
    Closed,
    Protocol(String),
    Other(String),
}

pub(super) fn classify(error: &ureq::Error, https: bool) -> Transport {
    use std::io::ErrorKind as K;
    match error {
        ureq::Error::HostNotFound => Transport::Dns,
        ureq::Error::Timeout(t) => match t {
            ureq::Timeout::Connect | ureq::Timeout::Resolve => Transport::ConnectTimeout,
            _ => Transport::ReadTimeout,
        },
        ureq::Error::Tls(what) => Transport::Tls((*what).to_owned()),
        ureq::Error::Rustls(e) => Transport::Tls(e.to_string()),
        ureq::Error::TlsRequired => Transport::Tls("the connection is not secured".into()),
        ureq::Error::Protocol(e) => Transport::Protocol(e.to_string()),
        ureq::Error::Io(e) => {
            if let Some(rustls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Transport::Tls(rustls.to_string());
            }
            match e.kind() {
                K::ConnectionRefused => Transport::Refused,
                K::TimedOut | K::WouldBlock => Transport::ReadTimeout,
                // A TLS handshake with something that does not speak TLS, or that hung up.
                K::InvalidData if https => Transport::Tls(e.to_string()),
                _ if https && e.to_string().contains("handshake") => Transport::Tls(e.to_string()),
                K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                    Transport::Closed
                }
                // std reports a failed getaddrinfo with this text and no distinct kind.
                _ if e.to_string().contains("failed to lookup address") => Transport::Dns,
                _ => Transport::Other(e.to_string()),
            }
        }
        other => Transport::Other(other.to_string()),
    }
}

pub(super) fn read_json_text(body: ureq::Body) -> Result<String, ureq::Error> {
    let mut text = String::new();
    body.into_with_config()
        .limit(MAX_JSON_BODY)
        .reader()
        .read_to_string(&mut text)
        .map_err(ureq::Error::from)?;
    Ok(text)
}

/// Text a server sent, safe to show: control characters dropped, the key (if echoed) hidden,
/// at most [`MAX_QUOTE`] characters, in quotes.
pub(super) fn quote(text: &str, key: Option<&ApiKey>) -> String {
    format!("\"{}\"", clean(text, key))
}

pub(super) fn clean(text: &str, key: Option<&ApiKey>) -> String {
    let mut text = text.trim().to_owned();
    if let Some(key) = key {
        text = text.replace(key.expose(), "<hidden>");
    }
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_QUOTE)
        .collect();
    if text.chars().count() > MAX_QUOTE {
        out.push('…');
    }
    out
}

/// The words of an `error` value: `{"message": ...}`, a plain string, or the JSON itself.
pub(super) fn error_words(error: &Value, key: Option<&ApiKey>) -> String {
    let text = match error {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_owned(),
            None => error.to_string(),
        },
        other => other.to_string(),
    };
    clean(&text, key)
}

/// What an error body says, when it says anything readable.
pub(super) fn server_words(body: &str, key: Option<&ApiKey>) -> Option<String> {
    if body.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match v.get("error").or_else(|| v.get("detail")) {
            Some(e) => Some(error_words(e, key)),
            None => Some(clean(body, key)),
        },
        Err(_) => Some(clean(body, key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::openai::testing::{client, kind};

    #[test]
    fn transport_failures_map_to_kinds_and_plain_words() {
        let c = client();
        let io = |kind: std::io::ErrorKind, text: &str| {
            ureq::Error::Io(std::io::Error::new(kind, text.to_owned()))
        };
        let cases = [
            (
                ureq::Error::Timeout(ureq::Timeout::Connect),
                FailureKind::Timeout,
                "did not accept a connection within 10 s",
            ),
            (
                ureq::Error::Timeout(ureq::Timeout::PerRead),
                FailureKind::Timeout,
                "sent nothing back for 60 s",
            ),
            (
                ureq::Error::HostNotFound,
                FailureKind::Dns,
                "does not resolve",
            ),
            (
                io(
                    std::io::ErrorKind::Other,
                    "failed to lookup address information: Name or service not known",
                ),
                FailureKind::Dns,
                "does not resolve",
            ),
            (
                io(std::io::ErrorKind::ConnectionRefused, "refused"),
                FailureKind::Refused,
                "nothing is listening there",
            ),
            (
                io(std::io::ErrorKind::ConnectionReset, "reset"),
                FailureKind::Cut,
                "closed the connection without answering",
            ),
            (
                ureq::Error::Tls("bad certificate"),
                FailureKind::Tls,
                "(bad certificate)",
            ),
        ];
        for (error, kind_wanted, words) in cases {
            let e = c.request_error(error);
            assert_eq!(kind(&e), kind_wanted, "{e}");
            assert!(e.to_string().contains(words), "{e}");
            assert!(e.to_string().contains("http://127.0.0.1:9"), "{e}");
        }
    }

    #[test]
    fn statuses_map_to_kinds_and_plain_words() {
        let c = client();
        let mut headers = ureq::http::HeaderMap::new();
        headers.insert("retry-after", "30".parse().unwrap());
        headers.insert("location", "http://elsewhere:1/v1/models".parse().unwrap());
        let cases = [
            (401, FailureKind::Auth, "refused the API key (HTTP 401)"),
            (403, FailureKind::Auth, "refused the API key (HTTP 403)"),
            (404, FailureKind::ModelNotFound, "no model named \"m\""),
            (429, FailureKind::Busy, "asks to wait 30 s"),
            (503, FailureKind::Busy, "busy (HTTP 503)"),
            (
                307,
                FailureKind::BadReply,
                "to \"http://elsewhere:1/v1/models\"",
            ),
            (500, FailureKind::Server, "(HTTP 500): out of memory"),
            (502, FailureKind::Server, "HTTP 502. It said: Bad Gateway"),
        ];
        for (status, kind_wanted, words) in cases {
            let body = match status {
                500 => r#"{"error":{"message":"out of memory"}}"#,
                502 => "Bad Gateway",
                _ => r#"{"error":"sk-SECRET is wrong"}"#,
            };
            let e = c.status_error(status, &headers, body, Some("m"));
            assert_eq!(kind(&e), kind_wanted, "{status}: {e}");
            assert!(e.to_string().contains(words), "{status}: {e}");
            assert!(!e.to_string().contains("SECRET"), "{status}: {e}");
        }
        let e = c.status_error(429, &headers, "", None);
        assert!(matches!(
            e,
            BackendError::Failed {
                retry_after_secs: Some(30),
                ..
            }
        ));
        let e = c.status_error(404, &headers, "", None);
        assert!(e.to_string().contains("has no /v1/models"), "{e}");
    }
}
