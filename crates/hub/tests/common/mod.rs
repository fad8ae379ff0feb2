//! A local HTTP server that imitates the Hugging Face Hub closely enough for `hearth-hub`:
//! `/api/models/{repo}/revision/{rev}`, `/api/models/{repo}/tree/{rev}` and
//! `/{repo}/resolve/{rev}/{file}`. Small files are served directly with `ETag` (git blob id)
//! and `X-Repo-Commit`; LFS files answer 302 with `X-Linked-Etag` (sha256), `X-Linked-Size`
//! and `X-Repo-Commit`, and their bytes come from `/cdn/{sha256}`. Bodies honour `Range`
//! (206 + `Content-Range`, 416 past the end).
//!
//! Faults, each applied once per file: cut the connection after N body bytes, stall after N
//! bytes, flip one byte, run a hook after N bytes (then send the rest slowly).

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// One file of a mock repository.
#[derive(Clone)]
pub struct MockFile {
    pub name: String,
    pub bytes: Vec<u8>,
    pub lfs: bool,
}

impl MockFile {
    pub fn sha256(&self) -> String {
        hex(&Sha256::digest(&self.bytes))
    }

    pub fn git_oid(&self) -> String {
        let mut h = Sha1::new();
        h.update(format!("blob {}\0", self.bytes.len()).as_bytes());
        h.update(&self.bytes);
        hex(&h.finalize())
    }
}

/// One logged request.
#[derive(Debug, Clone)]
pub struct Logged {
    pub path: String,
    pub range: Option<String>,
}

type Hook = Box<dyn FnMut() + Send>;

#[derive(Default)]
struct State {
    repos: HashMap<String, (String, Vec<MockFile>)>,
    log: Vec<Logged>,
    cut_after: HashMap<String, u64>,
    stall_after: HashMap<String, std::collections::VecDeque<(u64, Duration)>>,
    corrupt_at: HashMap<String, usize>,
    hook_after: HashMap<String, (u64, Hook)>,
    served: HashMap<String, u64>,
    declared_size: HashMap<String, u64>,
    /// (repository, tag) pairs the API answers for, as for `main`.
    tags: Vec<(String, String)>,
}

/// The running mock Hub.
#[derive(Clone)]
pub struct MockHub {
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl MockHub {
    pub fn start() -> MockHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &state);
                });
            }
        });
        MockHub { endpoint, state }
    }

    /// Adds a repository at commit `commit` holding `files`.
    pub fn add_repo(&self, repo: &str, commit: &str, files: Vec<MockFile>) {
        self.state
            .lock()
            .unwrap()
            .repos
            .insert(repo.to_string(), (commit.to_string(), files));
    }

    /// Makes `tag` a revision of `repo` (pointing at its commit).
    pub fn add_tag(&self, repo: &str, tag: &str) {
        self.state
            .lock()
            .unwrap()
            .tags
            .push((repo.to_string(), tag.to_string()));
    }

    /// Cuts the connection once after `n` body bytes of `file`.
    pub fn cut_after(&self, file: &str, n: u64) {
        self.state.lock().unwrap().cut_after.insert(file.into(), n);
    }

    /// For the next request of `file` (calls queue up), sends `n` body bytes and then nothing
    /// for `pause`.
    pub fn stall_after(&self, file: &str, n: u64, pause: Duration) {
        self.state
            .lock()
            .unwrap()
            .stall_after
            .entry(file.into())
            .or_default()
            .push_back((n, pause));
    }

    /// Flips the byte at `offset` of `file` every time it is served.
    pub fn corrupt(&self, file: &str, offset: usize) {
        self.state
            .lock()
            .unwrap()
            .corrupt_at
            .insert(file.into(), offset);
    }

    /// Once, after `n` body bytes of `file`, runs `hook`, then sends the rest in small slow
    /// pieces so the client sees what the hook changed before the file ends.
    pub fn hook_after(&self, file: &str, n: u64, hook: impl FnMut() + Send + 'static) {
        self.state
            .lock()
            .unwrap()
            .hook_after
            .insert(file.into(), (n, Box::new(hook)));
    }

    /// Lists `file` with `size` bytes in the tree answer, whatever its real size.
    pub fn declare_size(&self, file: &str, size: u64) {
        self.state
            .lock()
            .unwrap()
            .declared_size
            .insert(file.into(), size);
    }

    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    /// Body bytes of `file` sent so far, over all requests.
    pub fn served(&self, file: &str) -> u64 {
        self.state
            .lock()
            .unwrap()
            .served
            .get(file)
            .copied()
            .unwrap_or(0)
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    state.lock().unwrap().log.push(Logged {
        path: path.clone(),
        range: range.clone(),
    });
    let mut out = stream;
    let path_only = path.split('?').next().unwrap_or("").to_string();
    let parts: Vec<&str> = path_only.trim_start_matches('/').split('/').collect();

    // /api/models/{owner}/{name}/{revision|tree}/{rev}[/{folder…}] (a folder lists only the
    // files directly in it, as the Hub does)
    if parts.len() >= 6 && parts[0] == "api" && parts[1] == "models" {
        let repo = format!("{}/{}", parts[2], parts[3]);
        let rev = parts[5];
        let folder = (parts.len() > 6).then(|| parts[6..].join("/"));
        let (found, tagged) = {
            let s = state.lock().unwrap();
            let tagged = s.tags.iter().any(|(r, t)| *r == repo && t == rev);
            (s.repos.get(&repo).cloned(), tagged)
        };
        let Some((commit, files)) = found.filter(|(c, _)| rev == "main" || rev == c || tagged)
        else {
            return respond(
                &mut out,
                "404 Not Found",
                &[],
                br#"{"error":"Repository not found"}"#,
            );
        };
        let body = if parts[4] == "revision" {
            let siblings: Vec<_> = files
                .iter()
                .map(|f| serde_json::json!({"rfilename": f.name}))
                .collect();
            serde_json::json!({"id": repo, "sha": commit, "siblings": siblings})
        } else {
            let declared = state.lock().unwrap().declared_size.clone();
            let entries: Vec<_> = files
                .iter()
                .filter(|f| match &folder {
                    Some(folder) => f
                        .name
                        .strip_prefix(folder.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                        .is_some_and(|rest| !rest.contains('/')),
                    None => true,
                })
                .map(|f| {
                    let size = declared.get(&f.name).copied().unwrap_or(f.bytes.len() as u64);
                    let mut e = serde_json::json!({"type": "file", "oid": f.git_oid(), "size": size, "path": f.name});
                    if f.lfs {
                        e["lfs"] = serde_json::json!({"oid": f.sha256(), "size": size, "pointerSize": 134});
                    }
                    e
                })
                .collect();
            serde_json::Value::Array(entries)
        };
        return respond(&mut out, "200 OK", &[], body.to_string().as_bytes());
    }

    // /cdn/{sha256}
    if parts.len() == 2 && parts[0] == "cdn" {
        let file = state
            .lock()
            .unwrap()
            .repos
            .values()
            .flat_map(|(_, files)| files.iter())
            .find(|f| f.lfs && f.sha256() == parts[1])
            .cloned();
        return match file {
            Some(file) => send_body(&mut out, state, &file, range.as_deref(), &[]),
            None => respond(&mut out, "404 Not Found", &[], b"no such object"),
        };
    }

    // /{owner}/{name}/resolve/{rev}/{file or folder…/file}
    if parts.len() >= 5 && parts[2] == "resolve" {
        let wanted = parts[4..].join("/");
        let repo = format!("{}/{}", parts[0], parts[1]);
        let found = state.lock().unwrap().repos.get(&repo).cloned();
        let Some((commit, files)) = found.filter(|(c, _)| parts[3] == "main" || parts[3] == c)
        else {
            return respond(
                &mut out,
                "404 Not Found",
                &[("X-Error-Code", "RepoNotFound")],
                b"",
            );
        };
        let Some(file) = files.iter().find(|f| f.name == wanted).cloned() else {
            return respond(
                &mut out,
                "404 Not Found",
                &[("X-Error-Code", "EntryNotFound")],
                b"",
            );
        };
        if file.lfs {
            let location = format!("/cdn/{}?name={}", file.sha256(), file.name);
            let etag = format!("\"{}\"", file.sha256());
            let size = file.bytes.len().to_string();
            return respond(
                &mut out,
                "302 Found",
                &[
                    ("Location", &location),
                    ("X-Repo-Commit", &commit),
                    ("X-Linked-Etag", &etag),
                    ("X-Linked-Size", &size),
                    ("ETag", &etag),
                ],
                b"",
            );
        }
        let etag = format!("\"{}\"", file.git_oid());
        return send_body(
            &mut out,
            state,
            &file,
            range.as_deref(),
            &[("X-Repo-Commit", &commit), ("ETag", &etag)],
        );
    }
    respond(&mut out, "404 Not Found", &[], b"")
}

fn respond(
    out: &mut TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

fn send_body(
    out: &mut TcpStream,
    state: &Mutex<State>,
    file: &MockFile,
    range: Option<&str>,
    headers: &[(&str, &str)],
) -> std::io::Result<()> {
    let len = file.bytes.len() as u64;
    let start = match range
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split('-').next())
    {
        Some(s) => s.parse::<u64>().unwrap_or(0),
        None => 0,
    };
    if range.is_some() && start >= len {
        let content_range = format!("bytes */{len}");
        return respond(
            out,
            "416 Range Not Satisfiable",
            &[("Content-Range", &content_range)],
            b"",
        );
    }
    let mut body = file.bytes.clone();
    let (cut, stall, hook) = {
        let mut s = state.lock().unwrap();
        if let Some(&offset) = s.corrupt_at.get(&file.name) {
            body[offset] ^= 0x5a;
        }
        (
            s.cut_after.remove(&file.name),
            s.stall_after
                .get_mut(&file.name)
                .and_then(|q| q.pop_front()),
            s.hook_after.remove(&file.name),
        )
    };
    let mut head = if range.is_some() {
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{len}\r\n",
            len - 1
        )
    } else {
        "HTTP/1.1 200 OK\r\n".to_string()
    };
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n",
        len - start
    ));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    let body = &body[start as usize..];
    let count = |n: usize| {
        *state
            .lock()
            .unwrap()
            .served
            .entry(file.name.clone())
            .or_default() += n as u64;
    };
    if let Some(n) = cut {
        let n = (n as usize).min(body.len());
        out.write_all(&body[..n])?;
        count(n);
        out.flush()?;
        return out.shutdown(std::net::Shutdown::Both);
    }
    if let Some((n, pause)) = stall {
        let n = (n as usize).min(body.len());
        out.write_all(&body[..n])?;
        count(n);
        out.flush()?;
        std::thread::sleep(pause);
        return out.shutdown(std::net::Shutdown::Both);
    }
    if let Some((n, mut hook)) = hook {
        let n = (n as usize).min(body.len());
        out.write_all(&body[..n])?;
        count(n);
        out.flush()?;
        std::thread::sleep(Duration::from_millis(50));
        hook();
        for piece in body[n..].chunks(2048) {
            std::thread::sleep(Duration::from_millis(20));
            if out.write_all(piece).is_err() {
                return Ok(());
            }
            count(piece.len());
        }
        return out.flush();
    }
    out.write_all(body)?;
    count(body.len());
    out.flush()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fixture folders written by `tests/fixtures/hub/make_fixtures.py`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hub")
        .join(name)
}

/// The files of a fixture folder as a mock repository: `model.*` files via LFS, plus a
/// README.md that a pull must not download.
pub fn repo_files(fixture_name: &str) -> Vec<MockFile> {
    let dir = fixture(fixture_name);
    let mut files: Vec<MockFile> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            MockFile {
                lfs: name.starts_with("model."),
                bytes: std::fs::read(e.path()).unwrap(),
                name,
            }
        })
        .collect();
    files.push(MockFile {
        name: "README.md".into(),
        bytes: b"# a test model\n".to_vec(),
        lfs: false,
    });
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// A fresh, empty folder under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("hearth-hub-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
