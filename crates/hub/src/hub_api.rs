//! The few Hugging Face Hub endpoints Hearth uses, over a small blocking HTTP client (`ureq`).
//!
//! - `GET /api/models/{repo}/revision/{rev}`: the commit a branch or tag points to.
//! - `GET /api/models/{repo}/tree/{commit}`: file names, sizes, git oids and LFS sha256.
//! - `GET /{repo}/resolve/{commit}/{file}`: the bytes, with `Range` for resuming. LFS files
//!   answer with a redirect carrying `X-Linked-Etag` (their sha256) and `X-Repo-Commit`;
//!   redirects are followed here by hand so those headers are seen and `Range` is kept.
//!
//! `HF_ENDPOINT` (mirrors, tests) and `HF_TOKEN` are honoured; the token is only ever sent to
//! the endpoint's own origin. In offline mode no method touches the network.

use std::io::Read;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The public Hub, used when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Most redirects followed for one file.
const MAX_REDIRECTS: usize = 5;

/// A file of a repository as the tree API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteFile {
    /// File name (top level of the repository).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Git blob id (sha1 of `blob <len>\0<content>`).
    pub git_oid: String,
    /// sha256 of the content, for files stored with Git LFS.
    pub sha256: Option<String>,
}

/// An open download of one file.
pub struct FileBody {
    /// Offset of the first byte the reader yields: the requested offset, or 0 when the server
    /// ignored `Range` and sent the whole file.
    pub start: u64,
    /// Total size of the file, from `Content-Range`, `X-Linked-Size` or `Content-Length`.
    pub total: Option<u64>,
    /// `X-Linked-Etag` (the LFS sha256) or, failing that, `ETag`, without quotes.
    pub etag: Option<String>,
    /// `X-Repo-Commit`.
    pub repo_commit: Option<String>,
    /// The bytes.
    pub reader: Box<dyn Read + Send>,
}

/// What opening a file at an offset gave.
pub enum Opened {
    /// Bytes follow.
    Body(FileBody),
    /// The offset is the end of the file (HTTP 416): nothing is left to fetch.
    Complete,
}

#[derive(Deserialize)]
struct RevisionJson {
    sha: String,
}

#[derive(Deserialize)]
struct TreeJson {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    oid: String,
    #[serde(default)]
    lfs: Option<LfsJson>,
}

#[derive(Deserialize)]
struct LfsJson {
    oid: String,
    #[serde(default)]
    size: Option<u64>,
}

/// A client of one Hub endpoint.
#[derive(Debug, Clone)]
pub struct HubClient {
    endpoint: String,
    token: Option<String>,
    offline: bool,
    agent: ureq::Agent,
}

impl HubClient {
    /// A client of `endpoint` (no trailing slash needed).
    pub fn new(endpoint: &str, token: Option<String>, offline: bool) -> HubClient {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .user_agent(concat!("hearth/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HubClient {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
            offline,
            agent,
        }
    }

    /// A client configured from the environment: `HF_ENDPOINT`, `HF_TOKEN`, and offline mode if
    /// `offline` is true or `HEARTH_OFFLINE` / `HF_HUB_OFFLINE` is set to 1, true or yes.
    pub fn from_env(offline: bool) -> HubClient {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = std::env::var("HF_TOKEN").ok();
        HubClient::new(&endpoint, token, offline || offline_from_env())
    }

    /// The endpoint in use.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Whether the network is forbidden.
    pub fn is_offline(&self) -> bool {
        self.offline
    }

    /// The commit that `revision` (branch, tag or commit) of `repo` points to.
    pub fn commit_of(&self, repo: &str, revision: &str) -> Result<String> {
        let url = format!(
            "{}/api/models/{}/revision/{}",
            self.endpoint,
            repo,
            encode_segment(revision)
        );
        let text = self.get_text(&url, repo, revision)?;
        let info: RevisionJson = serde_json::from_str(&text).map_err(|e| Error::BadResponse {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        if info.sha.is_empty() {
            return Err(Error::BadResponse {
                url,
                detail: "no commit sha".into(),
            });
        }
        Ok(info.sha)
    }

    /// The files at the top level of `repo` at `commit`.
    pub fn files(&self, repo: &str, commit: &str) -> Result<Vec<RemoteFile>> {
        let url = format!(
            "{}/api/models/{}/tree/{}",
            self.endpoint,
            repo,
            encode_segment(commit)
        );
        let text = self.get_text(&url, repo, commit)?;
        let entries: Vec<TreeJson> =
            serde_json::from_str(&text).map_err(|e| Error::BadResponse {
                url: url.clone(),
                detail: e.to_string(),
            })?;
        Ok(entries
            .into_iter()
            .filter(|e| e.kind == "file" && !e.path.contains('/'))
            .map(|e| RemoteFile {
                size: e.lfs.as_ref().and_then(|l| l.size).unwrap_or(e.size),
                sha256: e.lfs.map(|l| l.oid.to_ascii_lowercase()),
                git_oid: e.oid.to_ascii_lowercase(),
                name: e.path,
            })
            .collect())
    }

    /// The download URL of `file` in `repo` at `commit`.
    pub fn resolve_url(&self, repo: &str, commit: &str, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            self.endpoint,
            repo,
            encode_segment(commit),
            encode_segment(file)
        )
    }

    /// Opens `file` from byte `from` on. Reading the body fails with a time-out after
    /// `window`, so a silent connection never blocks for longer than that.
    pub fn open(
        &self,
        repo: &str,
        commit: &str,
        file: &str,
        from: u64,
        window: Duration,
    ) -> Result<Opened> {
        let mut url = self.resolve_url(repo, commit, file);
        let mut etag = None;
        let mut linked_size = None;
        let mut repo_commit = None;
        for _ in 0..=MAX_REDIRECTS {
            self.check_online(&url)?;
            let mut request = self
                .agent
                .get(&url)
                .config()
                .timeout_recv_body(Some(window))
                .build();
            if from > 0 {
                request = request.header("Range", format!("bytes={from}-"));
            }
            if let Some(token) = self.token_for(&url) {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            let response = request.call().map_err(|e| network(&url, e))?;
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| {
                        v.trim()
                            .trim_start_matches("W/")
                            .trim_matches('"')
                            .to_string()
                    })
            };
            repo_commit = repo_commit.or_else(|| header("x-repo-commit"));
            etag = etag.or_else(|| header("x-linked-etag"));
            linked_size =
                linked_size.or_else(|| header("x-linked-size").and_then(|s| s.parse::<u64>().ok()));
            let status = response.status().as_u16();
            match status {
                301 | 302 | 303 | 307 | 308 => {
                    let location = header("location").ok_or_else(|| Error::BadResponse {
                        url: url.clone(),
                        detail: format!("redirect {status} without Location"),
                    })?;
                    url = join_url(&url, &location);
                    continue;
                }
                200 | 206 => {
                    let etag = etag.or_else(|| header("etag"));
                    let (start, total) = if status == 206 {
                        let range = header("content-range").unwrap_or_default();
                        let (start, total) =
                            parse_content_range(&range).ok_or_else(|| Error::BadResponse {
                                url: url.clone(),
                                detail: format!("unreadable Content-Range {range:?}"),
                            })?;
                        if start != from {
                            return Err(Error::BadResponse {
                                url,
                                detail: format!("asked for bytes from {from}, got from {start}"),
                            });
                        }
                        (start, total.or(linked_size))
                    } else {
                        let length = header("content-length").and_then(|s| s.parse::<u64>().ok());
                        (0, linked_size.or(length))
                    };
                    return Ok(Opened::Body(FileBody {
                        start,
                        total,
                        etag,
                        repo_commit,
                        reader: Box::new(response.into_body().into_reader()),
                    }));
                }
                416 => return Ok(Opened::Complete),
                401 | 404 => {
                    return Err(Error::RepoNotFound {
                        repo: format!("{repo}/{file}"),
                        revision: commit.to_string(),
                        endpoint: self.endpoint.clone(),
                    })
                }
                403 => {
                    return Err(Error::AccessDenied {
                        repo: repo.to_string(),
                        status,
                    })
                }
                _ => return Err(Error::HttpStatus { url, status }),
            }
        }
        Err(Error::BadResponse {
            url,
            detail: format!("more than {MAX_REDIRECTS} redirects"),
        })
    }

    fn get_text(&self, url: &str, repo: &str, revision: &str) -> Result<String> {
        self.check_online(url)?;
        let mut request = self.agent.get(url);
        if let Some(token) = self.token_for(url) {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.call().map_err(|e| network(url, e))?;
        match response.status().as_u16() {
            200 => response
                .body_mut()
                .read_to_string()
                .map_err(|e| network(url, e)),
            401 | 404 => Err(Error::RepoNotFound {
                repo: repo.to_string(),
                revision: revision.to_string(),
                endpoint: self.endpoint.clone(),
            }),
            403 => Err(Error::AccessDenied {
                repo: repo.to_string(),
                status: 403,
            }),
            status => Err(Error::HttpStatus {
                url: url.to_string(),
                status,
            }),
        }
    }

    fn check_online(&self, url: &str) -> Result<()> {
        if self.offline {
            return Err(Error::Offline {
                what: url.to_string(),
            });
        }
        Ok(())
    }

    fn token_for(&self, url: &str) -> Option<&str> {
        let token = self.token.as_deref()?;
        (origin(url) == origin(&self.endpoint)).then_some(token)
    }
}

/// Whether the environment asks for offline mode.
pub fn offline_from_env() -> bool {
    ["HEARTH_OFFLINE", "HF_HUB_OFFLINE"].iter().any(|name| {
        std::env::var(name)
            .map(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "true" | "yes" | "on"
                )
            })
            .unwrap_or(false)
    })
}

/// Whether `text` looks like a Hub repository id `owner/name`.
pub fn is_repo_id(text: &str) -> bool {
    let Some((owner, name)) = text.split_once('/') else {
        return false;
    };
    let part = |s: &str| {
        !s.is_empty()
            && s.len() <= 96
            && !s.starts_with(['.', '-'])
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    part(owner) && part(name)
}

fn network(url: &str, err: ureq::Error) -> Error {
    Error::Network {
        url: url.to_string(),
        detail: err.to_string(),
    }
}

/// Percent-encodes one URL path segment (keeps RFC 3986 unreserved characters).
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map(|i| i + 3).unwrap_or(0);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// Resolves a `Location` header against the URL that sent it.
fn join_url(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        location.to_string()
    } else if let Some(rest) = location.strip_prefix("//") {
        let scheme = base.split("://").next().unwrap_or("https");
        format!("{scheme}://{rest}")
    } else if location.starts_with('/') {
        format!("{}{location}", origin(base))
    } else {
        let without_query = base.split(['?', '#']).next().unwrap_or(base);
        let dir = &without_query[..without_query
            .rfind('/')
            .map(|i| i + 1)
            .unwrap_or(without_query.len())];
        format!("{dir}{location}")
    }
}

/// Parses `bytes START-END/TOTAL` (TOTAL may be `*`).
fn parse_content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let (start, _end) = range.split_once('-')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    Some((start.trim().parse().ok()?, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_are_owner_slash_name() {
        assert!(is_repo_id("julianmb/MiniCPM5-2B-NPU2"));
        assert!(is_repo_id("FastFlowLM/Qwen3-1.7B-NPU2"));
        for bad in [
            "", "noslash", "a/b/c", "/b", "a/", "../x", "a/.git", "a b/c",
        ] {
            assert!(!is_repo_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn revisions_and_files_are_encoded_as_one_segment() {
        assert_eq!(encode_segment("refs/pr/1"), "refs%2Fpr%2F1");
        assert_eq!(encode_segment("model.q4nx"), "model.q4nx");
        let client = HubClient::new("http://127.0.0.1:9/", None, true);
        assert_eq!(
            client.resolve_url("a/b", "main", "my file.json"),
            "http://127.0.0.1:9/a/b/resolve/main/my%20file.json"
        );
    }

    #[test]
    fn redirects_resolve_absolute_root_relative_and_relative() {
        let base = "http://h:1/a/b/resolve/c/f?x=1";
        assert_eq!(join_url(base, "https://cdn/x"), "https://cdn/x");
        assert_eq!(join_url(base, "/api/x"), "http://h:1/api/x");
        assert_eq!(join_url(base, "g"), "http://h:1/a/b/resolve/c/g");
        assert_eq!(join_url(base, "//cdn/y"), "http://cdn/y");
    }

    #[test]
    fn content_range_parses_and_rejects_garbage() {
        assert_eq!(
            parse_content_range("bytes 10-99/100"),
            Some((10, Some(100)))
        );
        assert_eq!(parse_content_range("bytes 10-99/*"), Some((10, None)));
        assert_eq!(parse_content_range("items 1-2/3"), None);
        assert_eq!(parse_content_range("bytes x-1/2"), None);
    }

    #[test]
    fn offline_client_refuses_before_any_request() {
        let client = HubClient::new("http://127.0.0.1:9", None, true);
        let err = client.commit_of("a/b", "main").unwrap_err();
        assert!(matches!(err, Error::Offline { .. }), "{err}");
    }

    #[test]
    fn token_goes_only_to_the_endpoint_origin() {
        let client = HubClient::new("http://hub.local:8080", Some("t".into()), false);
        assert_eq!(client.token_for("http://hub.local:8080/a/b"), Some("t"));
        assert_eq!(client.token_for("http://cdn.local/a/b"), None);
    }
}
