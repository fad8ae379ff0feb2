//! Hearth's local HTTP API: OpenAI-compatible chat completions (plain and streamed) and
//! Ollama-style readiness routes over one [`hearth_chat::Backend`] (Hearth's CPU engine, the NPU
//! through FastFlowLM, or a remote server), answering through the same loop as the app.
//!
//! Routes: `GET /v1/models`, `GET /v1/models/{id}`, `POST /v1/chat/completions`,
//! `GET /api/tags`, `GET /api/version`. Every request must be addressed to this machine
//! (loopback `Host`, and a loopback `Origin` when a browser sends one). One generation runs at a
//! time on a blocking thread; a few requests may wait, more get 503.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hearth_chat::CpuBackend;
//! use hearth_server::{AppState, ServerOptions};
//! let backend = CpuBackend::open("models/demo".as_ref(), "demo", &Default::default(), None)?;
//! backend.require_chat()?;
//! let state = AppState::new(Box::new(backend), ServerOptions::default());
//! let listener = std::net::TcpListener::bind("127.0.0.1:11435")?;
//! hearth_server::serve_blocking(listener, state)?;
//! # Ok(()) }
//! ```

mod chat;
mod connections;
mod error;
mod guard;
mod models;
pub mod openai;
mod state;

use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Router};

pub use error::{AppError, Error};
pub use state::{
    AppState, ServerOptions, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_QUEUE, MAX_QUEUE,
};

/// The whole API as a router; tests call it with `tower::ServiceExt::oneshot`, no socket.
pub fn app(state: AppState) -> Router {
    let body_limit = state.options().body_limit;
    Router::new()
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{id}", get(models::get_model))
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/api/tags", get(models::tags))
        .route("/api/version", get(models::version))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::require_local,
        ))
        .with_state(state)
}

async fn route_not_found(method: Method, uri: Uri) -> AppError {
    AppError::RouteNotFound {
        what: format!("{method} {}", uri.path()),
    }
}

async fn method_not_allowed() -> AppError {
    AppError::MethodNotAllowed
}

/// Serves [`app`] on `listener` until the process ends, on a small runtime of its own;
/// generation runs on its blocking threads.
///
/// The accept loop survives accept errors (out of file descriptors: it waits and retries),
/// serves at most `max_connections` connections at once, closes connections that are slow to
/// send headers or idle between requests (`header_timeout`, shorter under load) or slow to
/// send a body (`body_timeout`, 408), and is fair to a real client under a flood of silent
/// sockets (see `connections`).
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> Result<(), Error> {
    state.options().validate()?;
    let options = state.options().clone();
    let router = app(state).layer(middleware::from_fn_with_state(
        (options.body_timeout, options.body_limit),
        body_timeout,
    ));
    connections::serve_connections(
        listener,
        router,
        options.max_connections,
        options.header_timeout,
    )
    .await;
    Ok(())
}

/// Reads the whole request body within `timeout` (bodies are bounded by the body limit), so a
/// client that trickles its body cannot hold a connection and a queue place forever.
async fn body_timeout(
    axum::extract::State((timeout, limit)): axum::extract::State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => {
            // Past the body limit, or a broken stream: refuse without reading more.
            tracing::debug!("request body refused: {e}");
            AppError::PayloadTooLarge { limit }.into_response()
        }
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )
            .into_response(),
    }
}

/// [`serve`] for callers without an async runtime: builds a single-threaded one (the model's
/// work runs on blocking threads, so one thread is enough for the HTTP side).
pub fn serve_blocking(listener: std::net::TcpListener, state: AppState) -> Result<(), Error> {
    listener.set_nonblocking(true)?;
    // Timers are needed by the accept back-off and the connection timeouts.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        serve(listener, state).await
    })
}
