//! The real accept loop on a loopback socket: a flood of idle connections neither kills the
//! server nor keeps it from answering, idle and slow connections are closed, and out-of-range
//! settings are refused with a plain message.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use hearth_backends::CpuBackend;
use hearth_server::{AppState, ServerOptions};

fn start(options: ServerOptions) -> SocketAddr {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, "tiny-qwen3", &Default::default(), None).unwrap();
    let state = AppState::new(Box::new(backend), options);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || hearth_server::serve_blocking(listener, state));
    addr
}

/// Sends `request` on a new connection and returns everything the server wrote.
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the server closed `stream` (end of file or reset) within `wait`.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn idle_flood_is_closed_and_legitimate_requests_still_answer() {
    let addr = start(ServerOptions {
        max_connections: 100,
        header_timeout: Duration::from_secs(1),
        body_timeout: Duration::from_secs(1),
        ..ServerOptions::default()
    });
    // More idle connections than the server serves at once (the rest wait in the backlog).
    let mut idle: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();

    let started = Instant::now();
    let answer = exchange(
        addr,
        b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(15));

    for stream in idle.iter_mut().take(5) {
        assert!(
            closed_within(stream, Duration::from_secs(10)),
            "an idle connection is closed after the header timeout"
        );
    }

    // A body that trickles in too slowly gets 408.
    let slow = exchange(
        addr,
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\"",
    );
    assert!(slow.starts_with("HTTP/1.1 408"), "{slow}");

    // And the server is still there.
    let again = exchange(
        addr,
        b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
}

#[test]
fn out_of_range_settings_are_refused_with_a_plain_message() {
    for options in [
        ServerOptions {
            queue: usize::MAX,
            ..ServerOptions::default()
        },
        ServerOptions {
            queue: 1 << 61,
            ..ServerOptions::default()
        },
        ServerOptions {
            max_connections: 0,
            ..ServerOptions::default()
        },
    ] {
        let err = options.validate().unwrap_err();
        assert!(err.to_string().contains("use"), "{err}");
    }
    assert!(ServerOptions::default().validate().is_ok());
    // Even unchecked, a huge queue neither panics nor turns every request away.
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/engine/tiny-qwen3");
    let backend = CpuBackend::open(&dir, "tiny-qwen3", &Default::default(), None).unwrap();
    let _ = AppState::new(
        Box::new(backend),
        ServerOptions {
            queue: usize::MAX,
            ..ServerOptions::default()
        },
    );
}
