//! Hearth's local HTTP API, in the two shapes other programs already speak: OpenAI's (chat
//! completions and legacy completions, plain and streamed) and Ollama's (`/api/chat`,
//! `/api/generate`, `/api/show`, `/api/tags`, `/api/ps`, ...). Every route answers through the
//! same loop as the app, over one [`hearth_chat::Backend`] at a time, every model opened through
//! the app (`hearth_app::Session`): Hearth's CPU engine (models loaded on demand, see
//! [`LocalModels`]), the NPU through FastFlowLM, or a remote server.
//!
//! Routes: `GET /v1/models`, `GET /v1/models/{id}`, `POST /v1/chat/completions`,
//! `POST /v1/completions`; `POST /api/chat`, `POST /api/generate`, `POST /api/show`,
//! `GET /api/tags`, `GET /api/ps`, `GET /api/version`; `POST /v1/embeddings`, `POST /api/embed`
//! and `POST /api/embeddings` with the embedding model a request names
//! ([`ServerOptions::embedding_models`]); `POST /v1/audio/transcriptions` with a speech model
//! from [`ServerOptions::speech_models_dir`], run on this machine;
//! `GET /` says the server runs. Every request must be addressed to this machine
//! (loopback `Host`, and a loopback or operator-allowed `Origin` when a browser sends one). One
//! generation runs at a time on a blocking thread; a few requests may wait, more get 503.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hearth_app::session::{BackendKind, OpenOptions};
//! use hearth_app::{Home, LocalModel, Session};
//! use hearth_server::{AppState, ServerOptions};
//! let home = Home::for_user(None)?;
//! let model = LocalModel::folder("models/demo".into());
//! let options = OpenOptions { require_chat: true, ..OpenOptions::default() };
//! let session = Session::open(&home, &model, BackendKind::Cpu, options)?;
//! let state = AppState::new(session.backend, ServerOptions::default());
//! let listener = std::net::TcpListener::bind("127.0.0.1:11435")?;
//! hearth_server::serve_blocking(listener, state)?;
//! # Ok(()) }
//! ```

mod catalog;
mod chat;
mod completions;
mod connections;
mod embedding_models;
mod embeddings;
mod error;
mod guard;
mod held;
mod models;
pub mod ollama;
pub mod openai;
mod running;
mod share;
mod speech_models;
mod state;
mod transcriptions;
mod worker;

use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Router};

pub use catalog::{LoadSettings, LocalModels};
pub use embedding_models::EmbeddingSource;
pub use error::{Api, AppError, Error, OllamaError};
pub use hearth_wire::{KeepAlive, DEFAULT_KEEP_ALIVE};
pub use held::{HeldModel, Unavailable};
pub use running::{start, RunningServer};
pub use share::Sharing;
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
        .route("/v1/completions", post(completions::completions))
        .route("/api/chat", post(ollama::chat::chat))
        .route("/api/generate", post(ollama::generate::generate))
        .route("/api/show", post(ollama::models::show))
        .route("/api/tags", get(ollama::models::tags))
        .route("/api/ps", get(ollama::models::ps))
        .route("/api/version", get(ollama::models::version))
        .route("/v1/embeddings", post(embeddings::openai_embeddings))
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_embeddings))
        .route(
            transcriptions::PATH,
            post(transcriptions::transcriptions).layer(DefaultBodyLimit::max(
                body_limit.max(transcriptions::MAX_UPLOAD_BYTES),
            )),
        )
        .route("/", get(running))
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::require_local,
        ))
        .with_state(state)
}

/// `GET /`: what Ollama's clients probe to see a server is up.
async fn running() -> &'static str {
    "Hearth is running"
}

async fn route_not_found(method: Method, uri: Uri) -> Response {
    AppError::RouteNotFound {
        what: format!("{method} {}", uri.path()),
    }
    .into_response_for(Api::of_path(uri.path()))
}

async fn method_not_allowed(uri: Uri) -> Response {
    AppError::MethodNotAllowed.into_response_for(Api::of_path(uri.path()))
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
    let state_for_sweep = state.clone();
    let router = app(state).layer(middleware::from_fn_with_state(
        (options.body_timeout, options.body_limit),
        body_timeout,
    ));
    tokio::spawn(unload_when_expired(state_for_sweep));
    connections::serve_connections(
        listener,
        router,
        options.max_connections,
        options.header_timeout,
    )
    .await;
    Ok(())
}

/// Unloads a model whose keep-alive ended, checking about once a second.
async fn unload_when_expired(state: AppState) {
    let mut tick = tokio::time::interval(EXPIRY_CHECK);
    loop {
        tick.tick().await;
        state.unload_expired(std::time::Instant::now());
    }
}

/// How often [`unload_when_expired`] looks.
const EXPIRY_CHECK: Duration = Duration::from_secs(1);

/// Reads the whole request body within `timeout` (bodies are bounded by the body limit), so a
/// client that trickles its body cannot hold a connection and a queue place forever.
async fn body_timeout(
    axum::extract::State((timeout, limit)): axum::extract::State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let api = Api::of_path(parts.uri.path());
    // Sound files have a larger limit of their own.
    let limit = if parts.uri.path() == transcriptions::PATH {
        limit.max(transcriptions::MAX_UPLOAD_BYTES)
    } else {
        limit
    };
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) => {
            // Past the body limit, or a broken stream: refuse without reading more.
            tracing::debug!("request body refused: {e}");
            AppError::PayloadTooLarge { limit }.into_response_for(api)
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
