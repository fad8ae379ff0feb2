//! The DNS-rebinding and cross-site defence: a request must name this machine in its `Host`
//! header, and, when a browser sends an `Origin`, come from a page served by this machine.
//! A web page elsewhere can make a browser send requests to 127.0.0.1, but not with a loopback
//! `Host` (rebinding keeps the attacker's name) nor with a loopback `Origin`.
//!
//! Besides this machine's own pages, the operator may allow other origins, as Ollama's
//! `OLLAMA_ORIGINS` does (`app://obsidian.md`, `chrome-extension://ID`, `vscode-webview://*`).
//! Allowed origins get CORS headers, and their preflight `OPTIONS` requests are answered here.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{Api, AppError};
use crate::state::AppState;

/// Request headers a browser page may send (Ollama's list, with the OpenAI SDK's own).
const ALLOW_HEADERS: &str = "Authorization, Content-Type, User-Agent, Accept, X-Requested-With, \
     OpenAI-Beta, x-stainless-arch, x-stainless-async, x-stainless-custom-poll-interval, \
     x-stainless-helper-method, x-stainless-lang, x-stainless-os, x-stainless-package-version, \
     x-stainless-poll-helper, x-stainless-retry-count, x-stainless-runtime, \
     x-stainless-runtime-version, x-stainless-timeout";

/// Methods a page may use.
const ALLOW_METHODS: &str = "GET, POST, HEAD, OPTIONS";

/// How long a browser may keep a preflight's answer: 12 hours, as Ollama's CORS layer.
const PREFLIGHT_MAX_AGE: &str = "43200";

/// Refuses requests with a foreign `Host` or `Origin` (403), before any handler runs; answers
/// the preflight of an allowed origin, and adds CORS headers to its responses.
pub async fn require_local(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let api = Api::of_path(request.uri().path());
    let allowed = state.allowed_hosts();
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or_default());
    match host {
        None => {
            return forbidden_host(
                "the request has no Host header; send one naming this machine",
                api,
            )
        }
        Some(host) if !host_allowed(host_name(host), allowed) => {
            return forbidden_host(
                &format!(
                    "requests for host '{host}' are refused: this server only answers requests \
                 addressed to this machine (localhost, 127.0.0.1 or [::1]), a defence against \
                 DNS rebinding"
                ),
                api,
            );
        }
        Some(_) => {}
    }
    let Some(origin) = headers.get(header::ORIGIN).cloned() else {
        return next.run(request).await;
    };
    let origin_text = origin.to_str().unwrap_or_default();
    if !origin_allowed(origin_text, allowed) && !origin_listed(origin_text, state.allowed_origins())
    {
        return AppError::Forbidden {
            message: format!(
                "requests from web pages at '{origin_text}' are refused: only pages served by \
                 this machine (localhost) and the origins allowed with --allow-origin or \
                 HEARTH_ORIGINS may call this server"
            ),
            code: "forbidden_origin",
        }
        .into_response_for(api);
    }
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOW_HEADERS),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE),
        );
        response
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}

fn forbidden_host(message: &str, api: Api) -> Response {
    AppError::Forbidden {
        message: message.to_owned(),
        code: "forbidden_host",
    }
    .into_response_for(api)
}

/// Whether `origin` matches an entry of the operator's list: exactly (any case), or an entry
/// with one `*` standing for any run of characters (`vscode-webview://*`), as Ollama's CORS
/// layer matches `OLLAMA_ORIGINS`.
fn origin_listed(origin: &str, listed: &[String]) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    if origin.is_empty() || origin == "null" {
        return false;
    }
    listed.iter().any(|entry| {
        let entry = entry.trim().to_ascii_lowercase();
        match entry.split_once('*') {
            None => entry == origin,
            Some((prefix, suffix)) => {
                origin.len() >= prefix.len() + suffix.len()
                    && origin.starts_with(prefix)
                    && origin.ends_with(suffix)
            }
        }
    })
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]`, `[v6]:port`), brackets
/// removed.
fn host_name(host: &str) -> &str {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Whether `name` (no port, no brackets) is this machine: `localhost`, a `*.localhost` name
/// (RFC 6761 keeps those on loopback), a loopback address, or a name the operator allowed.
fn host_allowed(name: &str, allowed: &[String]) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    if let Ok(ip) = name.parse::<IpAddr>() {
        if ip.is_loopback() {
            return true;
        }
    }
    !name.is_empty() && allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// Whether an `Origin` (`scheme://host[:port]`) is a page served by this machine. The opaque
/// origin `null` (sandboxed frames, local files) is refused.
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if scheme.is_empty() || rest.contains('/') {
        return false;
    }
    host_allowed(host_name(rest), allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_and_without_ports_are_allowed() {
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1",
            "127.0.0.1:11435",
            "127.1.2.3",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(host_allowed(host_name(host), &[]), "{host} is this machine");
        }
    }

    #[test]
    fn foreign_hosts_are_refused() {
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "192.168.1.5",
            "0.0.0.0",
            "[::]",
            "",
            "127.0.0.1.nip.io",
        ] {
            assert!(
                !host_allowed(host_name(host), &[]),
                "{host} is not this machine"
            );
        }
    }

    #[test]
    fn operator_allowed_hosts_pass() {
        let allowed = vec!["192.168.1.5".to_owned()];
        assert!(host_allowed(host_name("192.168.1.5:8080"), &allowed));
        assert!(!host_allowed(host_name("192.168.1.6:8080"), &allowed));
    }

    #[test]
    fn origins_must_be_loopback_pages() {
        assert!(origin_allowed("http://localhost:5173", &[]));
        assert!(origin_allowed("https://127.0.0.1", &[]));
        assert!(origin_allowed("http://[::1]:3000", &[]));
        assert!(origin_allowed("tauri://localhost", &[]));
        assert!(!origin_allowed("null", &[]));
        assert!(!origin_allowed("https://evil.example", &[]));
        assert!(!origin_allowed("http://localhost.evil.example", &[]));
        assert!(!origin_allowed("http://localhost/path", &[]));
        assert!(!origin_allowed("localhost", &[]));
    }

    #[test]
    fn listed_origins_match_exactly_or_by_one_wildcard() {
        let listed: Vec<String> = [
            "app://obsidian.md",
            "vscode-webview://*",
            "chrome-extension://abcdef",
            "https://*.example.org",
        ]
        .map(String::from)
        .to_vec();
        assert!(origin_listed("app://obsidian.md", &listed));
        assert!(origin_listed("APP://Obsidian.md", &listed));
        assert!(origin_listed("vscode-webview://1234-abcd", &listed));
        assert!(origin_listed("chrome-extension://abcdef", &listed));
        assert!(origin_listed("https://notes.example.org", &listed));
        assert!(!origin_listed("https://example.org.evil.com", &listed));
        assert!(!origin_listed("app://obsidian.md.evil", &listed));
        assert!(!origin_listed("chrome-extension://other", &listed));
        assert!(!origin_listed("null", &listed));
        assert!(!origin_listed("app://obsidian.md", &[]), "empty by default");
    }
}
