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
mod error;
mod guard;
mod models;
pub mod openai;
mod state;

use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::{get, post};
use axum::{middleware, Router};

pub use error::{AppError, Error};
pub use state::{AppState, ServerOptions, DEFAULT_BODY_LIMIT, DEFAULT_QUEUE};

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

/// Serves [`app`] on `listener` until the process ends (or the socket fails), on a small
/// runtime of its own; generation runs on its blocking threads.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> Result<(), Error> {
    axum::serve(listener, app(state)).await?;
    Ok(())
}

/// [`serve`] for callers without an async runtime: builds a single-threaded one (the model's
/// work runs on blocking threads, so one thread is enough for the HTTP side).
pub fn serve_blocking(listener: std::net::TcpListener, state: AppState) -> Result<(), Error> {
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        serve(listener, state).await
    })
}
