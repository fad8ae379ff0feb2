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
//! `GET /` says the server runs. A request body is at most [`ServerOptions::body_limit`] (4 MB
//! by default; past it, a 413 in the route's JSON error shape), except on the routes that carry
//! pictures, which take the bounded pictures on top ([`body_limit_for`]), and the transcription
//! route, which takes a sound file. Every request must be addressed to this machine
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

/// The routes whose requests may carry pictures (OpenAI's `image_url` parts, Ollama's
/// `images`).
pub const PICTURE_ROUTES: [&str; 3] = ["/v1/chat/completions", "/api/chat", "/api/generate"];

/// What the most pictures a message may carry weigh in a request: [`MAX_PICTURES`] of the
/// largest picture ([`MAX_PICTURE_BYTES`]) in base64.
///
/// [`MAX_PICTURES`]: hearth_chat::picture::MAX_PICTURES
/// [`MAX_PICTURE_BYTES`]: hearth_chat::picture::MAX_PICTURE_BYTES
pub const PICTURES_BODY_BYTES: usize =
    hearth_chat::picture::MAX_PICTURES * hearth_chat::picture::MAX_PICTURE_BYTES.div_ceil(3) * 4;

/// The largest body the route `path` takes when the server's limit is `limit`: on a route that
/// carries pictures ([`PICTURE_ROUTES`]), `limit` for the text and [`PICTURES_BODY_BYTES`] for
/// the pictures (with the default limit, 4 MB and four 20 MB pictures: about 111 MB); on the
/// transcription route, at least a sound file's bound; elsewhere `limit`.
pub fn body_limit_for(path: &str, limit: usize) -> usize {
    if PICTURE_ROUTES.contains(&path) {
        limit.saturating_add(PICTURES_BODY_BYTES)
    } else if path == transcriptions::PATH {
        limit.max(transcriptions::MAX_UPLOAD_BYTES)
    } else {
        limit
    }
}

/// The whole API as a router; tests call it with `tower::ServiceExt::oneshot`, no socket.
pub fn app(state: AppState) -> Router {
    let body_limit = state.options().body_limit;
    // A route with a bound of its own: the inner limit is the one read.
    let bounded = |path: &str| DefaultBodyLimit::max(body_limit_for(path, body_limit));
    Router::new()
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{id}", get(models::get_model))
        .route(
            "/v1/chat/completions",
            post(chat::chat_completions).layer(bounded("/v1/chat/completions")),
        )
        .route("/v1/completions", post(completions::completions))
        .route(
            "/api/chat",
            post(ollama::chat::chat).layer(bounded("/api/chat")),
        )
        .route(
            "/api/generate",
            post(ollama::generate::generate).layer(bounded("/api/generate")),
        )
        .route("/api/show", post(ollama::models::show))
        .route("/api/tags", get(ollama::models::tags))
        .route("/api/ps", get(ollama::models::ps))
        .route("/api/version", get(ollama::models::version))
        .route("/v1/embeddings", post(embeddings::openai_embeddings))
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_embeddings))
        .route(
            transcriptions::PATH,
            post(transcriptions::transcriptions).layer(bounded(transcriptions::PATH)),
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

/// Reads the whole request body within `timeout` (bodies are bounded by the route's limit,
/// [`body_limit_for`]), so a client that trickles its body cannot hold a connection and a queue
/// place forever.
async fn body_timeout(
    axum::extract::State((timeout, limit)): axum::extract::State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let api = Api::of_path(parts.uri.path());
    // Pictures and sound files have larger limits of their own.
    let limit = body_limit_for(parts.uri.path(), limit);
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
