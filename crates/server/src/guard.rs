//! The DNS-rebinding and cross-site defence: a request must name this machine in its `Host`
//! header, and, when a browser sends an `Origin`, come from a page served by this machine.
//! A web page elsewhere can make a browser send requests to 127.0.0.1, but not with a loopback
//! `Host` (rebinding keeps the attacker's name) nor with a loopback `Origin`.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::AppError;
use crate::state::AppState;

/// Refuses requests with a foreign `Host` or `Origin` (403), before any handler runs.
pub async fn require_local(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = state.allowed_hosts();
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or_default());
    match host {
        None => {
            return forbidden_host("the request has no Host header; send one naming this machine")
        }
        Some(host) if !host_allowed(host_name(host), allowed) => {
            return forbidden_host(&format!(
                "requests for host '{host}' are refused: this server only answers requests \
                 addressed to this machine (localhost, 127.0.0.1 or [::1]), a defence against \
                 DNS rebinding"
            ));
        }
        Some(_) => {}
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !origin_allowed(origin, allowed) {
            return AppError::Forbidden {
                message: format!(
                    "requests from web pages at '{origin}' are refused: only pages served by \
                     this machine (localhost) may call this server"
                ),
                code: "forbidden_origin",
            }
            .into_response();
        }
    }
    next.run(request).await
}

fn forbidden_host(message: &str) -> Response {
    AppError::Forbidden {
        message: message.to_owned(),
        code: "forbidden_host",
    }
    .into_response()
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
}
