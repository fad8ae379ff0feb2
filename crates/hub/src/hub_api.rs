//! The few Hugging Face Hub endpoints Hearth uses, over a small blocking HTTP client (`ureq`).
//!
//! - `GET /api/models/{repo}/revision/{rev}`: the commit a branch or tag points to.
//! - `GET /api/models/{repo}/tree/{commit}[/{folder}]`: file names, sizes, git oids and LFS
//!   sha256, of the top level or of one folder (Piper voices live in nested folders).
//! - `GET /{repo}/resolve/{commit}/{file}`: the bytes, with `Range` for resuming. LFS files
//!   answer with a redirect carrying `X-Linked-Etag` (their sha256) and `X-Repo-Commit`;
//!   redirects are followed here by hand so those headers are seen and `Range` is kept.
//!
//! `HF_ENDPOINT` (mirrors, tests) and `HF_TOKEN` are honoured; the token is only ever sent to
//! the endpoint's own origin. In offline mode no method touches the network.

use std::io::Read;
use std::sync::mpsc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::progress::{DownloadControl, Request};

/// The public Hub, used when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Most redirects followed for one file.
const MAX_REDIRECTS: usize = 5;

/// The largest size a single repository file may declare (4 TiB); anything larger is refused
/// as a broken or hostile answer.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 42;

/// A file of a repository as the tree API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteFile {
    /// Path in the repository: a file name at the top level, or `folder/…/name` for a file
    /// listed by [`HubClient::file_info`] (checked with [`check_relative_path`]).
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

/// How long one API call (revision, file list) may take in all, body included, by default.
const API_TIMEOUT: Duration = Duration::from_secs(60);

/// A client of one Hub endpoint.
#[derive(Clone)]
pub struct HubClient {
    endpoint: String,
    token: Option<String>,
    offline: bool,
    agent: ureq::Agent,
    api_timeout: Duration,
}

/// Never shows the token, so that a `{:?}` in a log line cannot leak it.
impl std::fmt::Debug for HubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubClient")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("offline", &self.offline)
            .field("api_timeout", &self.api_timeout)
            .finish_non_exhaustive()
    }
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
            api_timeout: API_TIMEOUT,
        }
    }

    /// The same client with API calls (revision, file list) bounded by `timeout` in all,
    /// connection, headers and body together. File downloads have their own per-read window.
    pub fn with_api_timeout(mut self, timeout: Duration) -> HubClient {
        self.api_timeout = timeout;
        self
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

    /// The commit that `revision` (branch, tag or commit) of `repo` points to. A pause or
    /// cancel on `control` ends the wait at once ([`Error::Stopped`]).
    pub fn commit_of(
        &self,
        repo: &str,
        revision: &str,
        control: &DownloadControl,
    ) -> Result<String> {
        let url = format!(
            "{}/api/models/{}/revision/{}",
            self.endpoint,
            repo,
            encode_segment(revision)
        );
        let text = self.get_text(&url, repo, revision, control)?;
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

    /// The files at the top level of `repo` at `commit`. A pause or cancel on `control` ends
    /// the wait at once ([`Error::Stopped`]).
    pub fn files(
        &self,
        repo: &str,
        commit: &str,
        control: &DownloadControl,
    ) -> Result<Vec<RemoteFile>> {
        let url = format!(
            "{}/api/models/{}/tree/{}",
            self.endpoint,
            repo,
            encode_segment(commit)
        );
        let text = self.get_text(&url, repo, commit, control)?;
        parse_tree(&url, &text)
    }

    /// The size and checksums of the file at `path` (`folder/…/name`) in `repo` at `commit`,
    /// from the listing of its folder. A path that could leave a folder (`..`, absolute,
    /// backslashes) is refused before any request. A pause or cancel on `control` ends the
    /// wait at once ([`Error::Stopped`]).
    pub fn file_info(
        &self,
        repo: &str,
        commit: &str,
        path: &str,
        control: &DownloadControl,
    ) -> Result<RemoteFile> {
        check_relative_path(path).map_err(|detail| Error::BadResponse {
            url: format!("{}/{repo}", self.endpoint),
            detail: format!("the path {path:?} {detail}"),
        })?;
        let folder = path.rsplit_once('/').map(|(folder, _)| folder);
        let mut url = format!(
            "{}/api/models/{}/tree/{}",
            self.endpoint,
            repo,
            encode_segment(commit)
        );
        if let Some(folder) = folder {
            url.push('/');
            url.push_str(&encode_path(folder));
        }
        let text = self.get_text(&url, repo, commit, control)?;
        parse_folder(&url, &text, folder)?
            .into_iter()
            .find(|f| f.name == path)
            .ok_or_else(|| Error::RepoNotFound {
                repo: format!("{repo}/{path}"),
                revision: commit.to_string(),
                endpoint: self.endpoint.clone(),
            })
    }

    /// The download URL of `file` (a name, or a `folder/…/name` path) in `repo` at `commit`.
    pub fn resolve_url(&self, repo: &str, commit: &str, file: &str) -> String {
        format!(
            "{}/{}/resolve/{}/{}",
            self.endpoint,
            repo,
            encode_segment(commit),
            encode_path(file)
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

    /// GETs `url` on a thread of its own and waits for it, checking `control` every 50 ms: a
    /// blocking read cannot be interrupted, so a pause or cancel returns at once and leaves the
    /// thread to end by its own timeout.
    fn get_text(
        &self,
        url: &str,
        repo: &str,
        revision: &str,
        control: &DownloadControl,
    ) -> Result<String> {
        self.check_online(url)?;
        let (tx, rx) = mpsc::channel();
        let (client, url_owned, repo, revision) = (
            self.clone(),
            url.to_string(),
            repo.to_string(),
            revision.to_string(),
        );
        std::thread::Builder::new()
            .name("hub-api".into())
            .spawn(move || {
                let _ = tx.send(client.fetch_text(&url_owned, &repo, &revision));
            })
            .map_err(|e| Error::Network {
                url: url.to_string(),
                detail: format!("could not start the request: {e}"),
            })?;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(result) => return result,
                Err(mpsc::RecvTimeoutError::Timeout) => match control.request() {
                    Request::Run => {}
                    request => return Err(Error::Stopped { request }),
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::BadResponse {
                        url: url.to_string(),
                        detail: "the request ended without an answer".into(),
                    })
                }
            }
        }
    }

    fn fetch_text(&self, url: &str, repo: &str, revision: &str) -> Result<String> {
        // A server that sends headers and then stalls must not hang the pull: the whole call,
        // body included, is bounded.
        let mut request = self
            .agent
            .get(url)
            .config()
            .timeout_global(Some(self.api_timeout))
            .timeout_recv_body(Some(self.api_timeout))
            .build();
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

/// The top-level files of a tree answer from `url`, with every declared size bounded and
/// their sum checked, and names with control characters left out.
fn parse_tree(url: &str, text: &str) -> Result<Vec<RemoteFile>> {
    parse_folder(url, text, None)
}

/// The files directly in `folder` (`None`: the top level) of a tree answer from `url`, as
/// [`parse_tree`] keeps them; their names are full paths (`folder/name`).
fn parse_folder(url: &str, text: &str, folder: Option<&str>) -> Result<Vec<RemoteFile>> {
    let entries: Vec<TreeJson> = serde_json::from_str(text).map_err(|e| Error::BadResponse {
        url: url.to_string(),
        detail: e.to_string(),
    })?;
    let in_folder = |path: &str| match folder {
        None => !path.contains('/'),
        Some(folder) => path
            .strip_prefix(folder)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| !name.is_empty() && !name.contains('/')),
    };
    let files: Vec<RemoteFile> = entries
            .into_iter()
            .filter(|e| e.kind == "file" && in_folder(&e.path))
            .filter(|e| {
                // A name with control characters is no model file, and printing it could
                // drive the terminal: it is never fetched, and only shown escaped.
                let plain = !e.path.chars().any(char::is_control);
                if !plain {
                    tracing::warn!(file = %e.path.escape_debug(), "file with control characters in its name ignored");
                }
                plain
            })
            .map(|e| RemoteFile {
                size: e.lfs.as_ref().and_then(|l| l.size).unwrap_or(e.size),
                sha256: e.lfs.map(|l| l.oid.to_ascii_lowercase()),
                git_oid: e.oid.to_ascii_lowercase(),
                name: e.path,
            })
            .collect();
    // Sizes come from the server: each is bounded and their sum must not overflow, or
    // the free-space check downstream would be meaningless.
    let mut total: u64 = 0;
    for file in &files {
        if file.size > MAX_FILE_BYTES {
            return Err(Error::BadResponse {
                url: url.to_string(),
                detail: format!(
                    "{} is declared as {} bytes, more than any model file can be ({} bytes)",
                    file.name.escape_debug(),
                    file.size,
                    MAX_FILE_BYTES
                ),
            });
        }
        total = total
            .checked_add(file.size)
            .ok_or_else(|| Error::BadResponse {
                url: url.to_string(),
                detail: "the declared file sizes add up to more than 2^64 bytes".into(),
            })?;
    }
    Ok(files)
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

/// Percent-encodes a `folder/…/name` path segment by segment, keeping its slashes.
fn encode_path(path: &str) -> String {
    path.split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
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

/// Checks that `path`, a file's path as a manifest or the Hub gives it (`folder/…/name`),
/// stays inside the folder it is fetched into: no empty, `.` or `..` part, not absolute, no
/// backslash, NUL or control character. The error says why, to follow "the path … ".
pub(crate) fn check_relative_path(path: &str) -> std::result::Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.starts_with('/') {
        return Err("is absolute");
    }
    if path.contains('\\') {
        return Err("contains a backslash");
    }
    if path.chars().any(char::is_control) {
        return Err("contains control characters");
    }
    if path
        .split('/')
        .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err("has an empty, \".\" or \"..\" part and could leave its folder");
    }
    Ok(())
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
    fn nested_paths_keep_their_slashes_and_folders_list_only_their_own_files() {
        let client = HubClient::new("http://127.0.0.1:9", None, true);
        assert_eq!(
            client.resolve_url("o/v", "c1", "en/en_US/a b/x.onnx"),
            "http://127.0.0.1:9/o/v/resolve/c1/en/en_US/a%20b/x.onnx"
        );
        let text = r#"[
            {"type": "file", "oid": "a", "size": 3, "path": "en/en_US/x.onnx"},
            {"type": "file", "oid": "b", "size": 3, "path": "en/en_US/deeper/y.onnx"},
            {"type": "file", "oid": "c", "size": 3, "path": "en/en_USx.onnx"},
            {"type": "directory", "oid": "d", "size": 0, "path": "en/en_US/deeper"},
            {"type": "file", "oid": "e", "size": 3, "path": "top.json"}
        ]"#;
        let files = parse_folder("u", text, Some("en/en_US")).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["en/en_US/x.onnx"]);
        assert!(parse_folder("u", "{not json", Some("en")).is_err());
    }

    #[test]
    fn a_path_that_could_leave_the_folder_is_refused_before_any_request() {
        // Online client at a closed port: a request would fail with a network error instead.
        let client = HubClient::new("http://127.0.0.1:9", None, false);
        for bad in [
            "../x.onnx",
            "/etc/passwd",
            "en\\x.onnx",
            "en/../../x",
            "",
            "a//b",
        ] {
            let e = client
                .file_info("o/v", "c1", bad, &DownloadControl::new())
                .unwrap_err();
            assert!(matches!(e, Error::BadResponse { .. }), "{bad:?}: {e}");
        }
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
        let err = client
            .commit_of("a/b", "main", &DownloadControl::new())
            .unwrap_err();
        assert!(matches!(err, Error::Offline { .. }), "{err}");
    }

    #[test]
    fn tree_names_with_control_characters_are_left_out() {
        let text = r#"[
            {"type": "file", "oid": "a", "size": 3, "path": "config.json"},
            {"type": "file", "oid": "b", "size": 3, "path": "model\u001b[2J.q4nx"},
            {"type": "file", "oid": "c", "size": 3, "path": "tok\nenizer.json"}
        ]"#;
        let files = parse_tree("http://hub.local/api", text).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["config.json"]);
    }

    #[test]
    fn tree_sizes_are_bounded_and_their_sum_cannot_wrap() {
        let tree = |a: u64, b: u64| {
            format!(
                r#"[{{"type": "file", "oid": "a", "size": {a}, "path": "a.bin"}},
                    {{"type": "file", "oid": "b", "size": {b}, "path": "b.bin"}}]"#
            )
        };
        assert!(parse_tree("u", &tree(1 << 63, 1 << 63)).is_err());
        assert!(parse_tree("u", &tree(u64::MAX, 1)).is_err());
        assert!(parse_tree("u", &tree(MAX_FILE_BYTES + 1, 0)).is_err());
        assert_eq!(parse_tree("u", &tree(10, 20)).unwrap().len(), 2);
    }

    #[test]
    fn debug_output_never_shows_the_token() {
        let client = HubClient::new("http://hub.local", Some("hf_SeCrEt123".into()), false);
        let shown = format!("{client:?}");
        assert!(!shown.contains("hf_SeCrEt123"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }

    #[test]
    fn stalled_api_answer_times_out_instead_of_hanging() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for mut stream in listener.incoming().flatten().take(4) {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                // Headers promising a body, then nothing.
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[",
                );
                held.push(stream);
            }
            std::thread::sleep(Duration::from_secs(30));
        });
        let client =
            HubClient::new(&endpoint, None, false).with_api_timeout(Duration::from_millis(700));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(
                client
                    .files("owner/name", "main", &DownloadControl::new())
                    .map(|_| ()),
            );
        });
        let outcome = rx
            .recv_timeout(Duration::from_secs(15))
            .expect("the file list call must give up on a stalled body");
        assert!(outcome.is_err());
    }

    #[test]
    fn a_cancel_ends_a_stalled_file_list_at_once() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            if let Some(mut stream) = listener.incoming().flatten().next() {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                // Headers promising a body, one byte of it, then nothing until the client
                // gives up (its own timeout here is a minute).
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[",
                );
                let _ = stream.read(&mut buf);
            }
        });
        let client = HubClient::new(&endpoint, None, false);
        let control = DownloadControl::new();
        let canceller = control.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(client.files("owner/name", "main", &control));
        });
        std::thread::sleep(Duration::from_millis(200));
        canceller.cancel();
        let outcome = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a cancel ends the wait without waiting for the timeout");
        assert!(
            matches!(
                outcome,
                Err(Error::Stopped {
                    request: Request::Cancel
                })
            ),
            "{outcome:?}"
        );
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        fn tree_entry() -> impl Strategy<Value = serde_json::Value> {
            (
                prop::sample::select(vec!["file", "directory", "x"]),
                prop_oneof![
                    "\\PC{0,16}",
                    Just("a/b".to_owned()),
                    Just("ctl\u{1b}[2J.q4nx".to_owned())
                ],
                any::<u64>(),
                prop::option::of(any::<u64>()),
            )
                .prop_map(|(kind, path, size, lfs)| {
                    let mut e =
                        serde_json::json!({"type": kind, "path": path, "size": size, "oid": "ab"});
                    if let Some(size) = lfs {
                        e["lfs"] = serde_json::json!({"oid": "CD", "size": size});
                    }
                    e
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Whatever a tree answer holds, what is kept is plain top-level files whose sizes
            /// are bounded and add up without overflow; the rest is an error, never a panic.
            #[test]
            fn any_tree_answer_is_parsed_or_refused(
                entries in prop::collection::vec(tree_entry(), 0..8),
                cut in 0usize..3,
            ) {
                let text = serde_json::Value::from(entries).to_string();
                let mut keep = text.len() - text.len() * cut / 4;
                while !text.is_char_boundary(keep) {
                    keep -= 1;
                }
                let text = &text[..keep];
                if let Ok(files) = parse_tree("http://hub/x", text) {
                    let mut total: u64 = 0;
                    for f in &files {
                        prop_assert!(!f.name.contains('/') && !f.name.chars().any(char::is_control));
                        prop_assert!(f.size <= MAX_FILE_BYTES);
                        total = total.checked_add(f.size).expect("the sum was checked");
                    }
                }
            }
        }
    }

    #[test]
    fn token_goes_only_to_the_endpoint_origin() {
        let client = HubClient::new("http://hub.local:8080", Some("t".into()), false);
        assert_eq!(client.token_for("http://hub.local:8080/a/b"), Some("t"));
        assert_eq!(client.token_for("http://cdn.local/a/b"), None);
    }
}
