//! A bounded load test of the real accept loop on loopback: rounds of concurrent streaming
//! clients, clients that hang up in the middle of an answer, and slow readers. Every reply is
//! a 200 or the documented 503 (`server_busy`), the server still answers afterwards, and it
//! keeps no file descriptor and no memory from the rounds once the clients are gone.
//!
//! Bounded in count (3 rounds of 12 clients, 48 new tokens each) and in time (every socket
//! read has a timeout, every wait a limit); loopback only.
//!
//! A test binary of its own, not a module of `tests/server/`: it counts this process's open
//! file descriptors and its memory, which other tests running beside it would change.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hearth_backends::CpuBackend;
use hearth_server::{AppState, ServerOptions};

const ROUNDS: usize = 3;
const CLIENTS: usize = 12;

fn start() -> SocketAddr {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, "tiny-qwen3", &Default::default(), None).unwrap();
    let state = AppState::new(
        Box::new(backend),
        ServerOptions {
            queue: 6,
            max_connections: 64,
            header_timeout: Duration::from_secs(2),
            body_timeout: Duration::from_secs(2),
            ..ServerOptions::default()
        },
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || hearth_server::serve_blocking(listener, state));
    addr
}

/// How a client behaves.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// Reads the whole stream.
    Reader,
    /// Hangs up after the first event of the answer.
    HangsUp,
    /// Reads a few bytes at a time with pauses.
    Slow,
}

/// What a client saw: the status code, and whether it read the stream to its `[DONE]`.
#[derive(Debug)]
struct Seen {
    status: u16,
    body: String,
}

fn streaming_request(seed: usize) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"tiny-qwen3","messages":[{{"role":"user","content":"Tell me story {seed}"}}],"stream":true,"temperature":0.8,"seed":{seed},"max_tokens":48}}"#
    );
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn run_client(addr: SocketAddr, kind: Client, seed: usize) -> Seen {
    let mut stream = TcpStream::connect(addr).expect("connect to the server");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(&streaming_request(seed)).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("a status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {status_line:?}"));
    let mut body = String::new();
    match kind {
        Client::Reader => {
            let _ = reader.read_to_string(&mut body);
        }
        Client::HangsUp => {
            // Up to the first event after the headers, then drop the connection.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line.starts_with("data:") || line.contains("\"error\"") {
                    break;
                }
                line.clear();
            }
            body = line;
        }
        Client::Slow => {
            let mut buf = [0u8; 16];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                body.push_str(&String::from_utf8_lossy(&buf[..n]));
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    Seen { status, body }
}

/// The process's open file descriptors (the server runs in this process).
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Resident memory of this process, in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Waits (at most `limit`) until `check` holds; returns whether it did.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

#[test]
fn concurrent_streams_hang_ups_and_slow_readers_leave_nothing_behind() {
    let addr = start();
    // One answer first, so the model's buffers and the runtime's threads exist before the
    // baseline is taken.
    let first = run_client(addr, Client::Reader, 0);
    assert_eq!(first.status, 200, "{}", first.body);
    let baseline_fds = open_descriptors();
    let mut resident_after = Vec::new();
    let (mut answered, mut busy) = (0, 0);

    for round in 0..ROUNDS {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let kind = [Client::Reader, Client::HangsUp, Client::Slow][i % 3];
                let seed = round * CLIENTS + i + 1;
                std::thread::spawn(move || (kind, run_client(addr, kind, seed)))
            })
            .collect();
        for client in clients {
            let (kind, seen) = client.join().expect("a client thread panicked");
            match seen.status {
                200 => {
                    answered += 1;
                    if !matches!(kind, Client::HangsUp) {
                        assert!(
                            seen.body.contains("data: [DONE]"),
                            "a {kind:?} client's stream did not end with [DONE]: {}",
                            seen.body
                        );
                    }
                }
                503 => {
                    busy += 1;
                    if !matches!(kind, Client::HangsUp) {
                        assert!(seen.body.contains("server_busy"), "{}", seen.body);
                    }
                }
                other => panic!("a {kind:?} client got {other}: {}", seen.body),
            }
        }
        assert!(
            eventually(Duration::from_secs(20), || open_descriptors()
                <= baseline_fds + 2),
            "round {round}: {} descriptors open after the clients left, {baseline_fds} before",
            open_descriptors()
        );
        resident_after.push(resident_kib());
    }
    println!("{answered} answered, {busy} turned away with 503; resident KiB after each round: {resident_after:?}");
    assert!(
        answered >= ROUNDS * 2,
        "too few answers ({answered}) for the queue of 6"
    );
    // Memory settles after the first round: later rounds add no more than a little noise.
    let growth = resident_after[ROUNDS - 1].saturating_sub(resident_after[0]);
    assert!(
        growth < 16 * 1024,
        "resident memory grew by {growth} KiB between the first and last round: {resident_after:?}"
    );

    // The server still answers a plain request.
    let after = run_client(addr, Client::Reader, 99);
    assert_eq!(after.status, 200, "{}", after.body);
    assert!(after.body.contains("data: [DONE]"));
}
