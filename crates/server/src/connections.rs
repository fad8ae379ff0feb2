//! The accept loop: how many connections are served at once, how long each may take to send
//! its request, and which one gives way when all slots are taken, so a flood of slow or silent
//! sockets cannot keep a real client waiting.
//!
//! - At most `max_connections` are served at once; past that, a new connection waits until one
//!   ends.
//! - A connection gets `header_timeout` to send each request's headers (and to stay idle between
//!   requests); one accepted while more than half the slots are taken gets a tenth of it (at
//!   least [`MIN_BUSY_HEADER_TIMEOUT`]), so a flood's sockets give their slots back quickly.
//! - When every slot is taken, the oldest connection that has not sent a request yet is closed
//!   to make room: a client that speaks at once is served ahead of sockets that stay silent.
//! - Accept errors are survived (out of file descriptors: it waits and retries).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use futures_util::future::{self, Either};
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{oneshot, Semaphore};

/// The shortest header timeout given under load.
pub const MIN_BUSY_HEADER_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the accept loop waits after an accept error that is not the peer's doing.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(200);

/// Connections that have not sent a request yet, oldest first, with a way to close each.
#[derive(Default)]
struct Silent {
    next_id: u64,
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Silent {
    fn lock(silent: &Mutex<Silent>) -> std::sync::MutexGuard<'_, Silent> {
        silent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Serves `router` on `listener` until the process ends, within the limits above.
pub(crate) async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    max_connections: usize,
    header_timeout: Duration,
) {
    let slots = Arc::new(Semaphore::new(max_connections));
    let silent = Arc::new(Mutex::new(Silent::default()));
    let busy_header_timeout = (header_timeout / 10)
        .max(MIN_BUSY_HEADER_TIMEOUT)
        .min(header_timeout);
    loop {
        // A free slot first: past the cap, new connections wait in the kernel's backlog,
        // except that a waiting connection makes the oldest silent one give way.
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                let stream = match accept(&listener).await {
                    Some(stream) => stream,
                    None => continue,
                };
                if let Some((_, close)) = Silent::lock(&silent).waiting.pop_first() {
                    tracing::debug!("all connections taken: closing the oldest silent one");
                    let _ = close.send(());
                }
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let timeout = busy_header_timeout;
                spawn_connection(stream, slot, &router, &silent, timeout);
                continue;
            }
        };
        let Some(stream) = accept(&listener).await else {
            continue;
        };
        let in_use = max_connections - slots.available_permits();
        let timeout = if in_use * 2 > max_connections {
            busy_header_timeout
        } else {
            header_timeout
        };
        spawn_connection(stream, slot, &router, &silent, timeout);
    }
}

/// The next connection; None after an error (already handled: logged, waited).
async fn accept(listener: &tokio::net::TcpListener) -> Option<tokio::net::TcpStream> {
    match listener.accept().await {
        Ok((stream, _)) => Some(stream),
        Err(e) if is_connection_error(&e) => None,
        Err(e) => {
            // Typically out of file descriptors: wait for some to close, keep serving.
            tracing::warn!("accept failed ({e}); retrying shortly");
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            None
        }
    }
}

/// Serves one connection on a task that holds `slot`; it counts as silent until its first
/// request arrives, and closes if made to give way before that.
fn spawn_connection(
    stream: tokio::net::TcpStream,
    slot: tokio::sync::OwnedSemaphorePermit,
    router: &Router,
    silent: &Arc<Mutex<Silent>>,
    header_timeout: Duration,
) {
    let (close_tx, close_rx) = oneshot::channel();
    let id = {
        let mut table = Silent::lock(silent);
        let id = table.next_id;
        table.next_id += 1;
        table.waiting.insert(id, close_tx);
        id
    };
    let spoke = Arc::new(AtomicBool::new(false));
    let inner = TowerToHyperService::new(router.clone());
    let service = {
        let silent = Arc::clone(silent);
        let spoke = Arc::clone(&spoke);
        hyper::service::service_fn(move |request| {
            if !spoke.swap(true, Ordering::Relaxed) {
                Silent::lock(&silent).waiting.remove(&id);
            }
            inner.call(request)
        })
    };
    let silent = Arc::clone(silent);
    tokio::spawn(async move {
        let _slot = slot;
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let mut connection = Box::pin(connection);
        let ended = match future::select(connection.as_mut(), close_rx).await {
            Either::Left((ended, _)) => ended,
            // Made to give way: dropping the connection closes it.
            Either::Right((Ok(()), _)) => Ok(()),
            // It spoke (its place among the silent is gone): served to its end.
            Either::Right((Err(_), _)) => connection.await,
        };
        if let Err(e) = ended {
            tracing::debug!("connection ended: {e}");
        }
        Silent::lock(&silent).waiting.remove(&id);
    });
}

fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
