//! A server address Hearth can use: http or https, a host, an optional port and path, checked
//! and put in the one form requests are built from.

/// A server address that Hearth can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `scheme://host[:port][/path]`, without a trailing `/` or `/v1`.
    pub url: String,
    /// `host:port`, the port filled in from the scheme when not written.
    pub host_port: String,
    /// The host alone (no brackets around an IPv6 address).
    pub host: String,
}

/// Checks a server address and puts it in the form requests are built from: http or https
/// only, a host, no user name, query or fragment; a trailing `/` or `/v1` is dropped so either
/// form can be pasted. The error says what is wrong, in plain words.
pub fn parse_base_url(text: &str) -> Result<BaseUrl, String> {
    let text = text.trim();
    let bad = |why: &str| format!("Hearth cannot use the server address {text:?}: {why}");
    if text.is_empty() {
        return Err("no server address given: enter one like http://192.168.1.20:8000".into());
    }
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err(bad(
            "it has no http:// or https:// in front (for example http://192.168.1.20:8000)",
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(bad("only http:// and https:// addresses work")),
    };
    if rest.contains(['?', '#']) {
        return Err(bad("remove the part after ? or #"));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "it has a user name or password in it; put the key in the API key field instead",
        ));
    }
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err(bad("the IPv6 address has no closing ]"));
        };
        (host.to_owned(), after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host.to_owned(), Some(port)),
            None => (authority.to_owned(), None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return Err(bad(
            "the server name is missing or has characters names cannot have",
        ));
    }
    let port = match port {
        None | Some("") => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad("the port must be a number from 1 to 65535")),
        },
    };
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("the path has spaces or control characters"));
    }
    let mut path = path.trim_end_matches('/');
    if let Some(stripped) = path.strip_suffix("/v1") {
        path = stripped.trim_end_matches('/');
    }
    let authority = authority.to_ascii_lowercase();
    let shown_host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_ascii_lowercase()
    };
    Ok(BaseUrl {
        url: format!("{scheme}://{authority}{path}"),
        host_port: format!("{shown_host}:{port}"),
        host: host.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalized() {
        let u = parse_base_url("http://10.0.0.5:8000/v1/").unwrap();
        assert_eq!(u.url, "http://10.0.0.5:8000");
        assert_eq!(u.host_port, "10.0.0.5:8000");
        let u = parse_base_url(" HTTPS://Box.lan/api/v1 ").unwrap();
        assert_eq!(u.url, "https://box.lan/api");
        assert_eq!(u.host_port, "box.lan:443");
        let u = parse_base_url("http://[::1]:8080").unwrap();
        assert_eq!(u.host_port, "[::1]:8080");
        assert_eq!(u.host, "::1");
        assert_eq!(parse_base_url("http://gpu/").unwrap().url, "http://gpu");
    }

    #[test]
    fn bad_base_urls_say_why() {
        for (text, words) in [
            ("ftp://x", "only http:// and https://"),
            ("10.0.0.5:8000", "no http:// or https://"),
            ("http://user:pw@h", "API key field"),
            ("http://h:99999", "port"),
            ("http://h?x=1", "after ?"),
            ("http://", "server name"),
            ("", "no server address"),
        ] {
            let e = parse_base_url(text).unwrap_err();
            assert!(e.contains(words), "{text:?}: {e}");
        }
    }
}
