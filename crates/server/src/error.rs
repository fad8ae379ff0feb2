//! Errors: [`AppError`] is what a request can fail with, turned into a status and a body in the
//! shape of the API the request used: OpenAI's `{"error": {"message", "type", "code"}}`, or
//! Ollama's `{"error": "..."}` for the `/api/` routes ([`Api`]); [`Error`] is what setting up a
//! server can fail with.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hearth_wire::ollama;
use hearth_wire::openai::{ApiError, ErrorReply};

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding or serving the socket failed.
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    /// A server setting is out of range.
    #[error("server: {0}")]
    InvalidOption(String),
}

/// Everything a request can fail with. Clients get a short, plain message; internals go to the
/// log.
#[derive(Debug)]
pub enum AppError {
    /// The request is malformed or asks for something invalid (400).
    BadRequest {
        /// What is wrong, in plain words.
        message: String,
        /// Which request field, if one.
        param: Option<&'static str>,
    },
    /// The prompt does not fit in the model's context (400, `context_length_exceeded`).
    ContextFull {
        /// Tokens the prompt needs.
        needed: usize,
        /// The context the model was loaded with.
        limit: usize,
    },
    /// The request names a model this server does not serve (404, `model_not_found`).
    ModelNotFound {
        /// The name asked for.
        requested: String,
        /// The models that are served, comma-separated.
        served: String,
    },
    /// A request asks for more context (`num_ctx`) than the model can have (400).
    ContextTooLarge {
        /// The model.
        model: String,
        /// Positions asked for.
        requested: usize,
        /// The most it can have.
        limit: usize,
        /// False when the model cannot be loaded again with more (a backend opened at start).
        reloadable: bool,
    },
    /// Loading a model failed (500): its files are damaged, or memory ran out.
    LoadFailed {
        /// The model.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// No such route (404).
    RouteNotFound {
        /// The method and path asked for.
        what: String,
    },
    /// The route exists but not with this method (405).
    MethodNotAllowed,
    /// The request came through a foreign `Host` or `Origin` (403).
    Forbidden {
        /// Why, in plain words.
        message: String,
        /// `forbidden_host` or `forbidden_origin`.
        code: &'static str,
    },
    /// The body is larger than the server accepts (413).
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Too many requests are already waiting for the model (503).
    Busy {
        /// How many requests may wait.
        queue: usize,
    },
    /// The model is lent by the desktop app, which is answering with it now (503).
    InUse,
    /// The backend behind the server (the NPU's FastFlowLM, a remote server) failed (502).
    Backend {
        /// What happened, in plain words.
        message: String,
    },
    /// Something failed inside the server (500); the details were logged.
    Internal,
}

impl AppError {
    /// A 400 about the field `param`.
    pub fn bad_field(param: &'static str, message: impl Into<String>) -> Self {
        AppError::BadRequest {
            message: message.into(),
            param: Some(param),
        }
    }

    /// A 400 not tied to one field.
    pub fn bad_request(message: impl Into<String>) -> Self {
        AppError::BadRequest {
            message: message.into(),
            param: None,
        }
    }

    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest { .. }
            | AppError::ContextFull { .. }
            | AppError::ContextTooLarge { .. } => StatusCode::BAD_REQUEST,
            AppError::ModelNotFound { .. } | AppError::RouteNotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            AppError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AppError::Forbidden { .. } => StatusCode::FORBIDDEN,
            AppError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Busy { .. } | AppError::InUse => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Backend { .. } => StatusCode::BAD_GATEWAY,
            AppError::Internal | AppError::LoadFailed { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message a client sees.
    pub fn message(&self) -> String {
        match self {
            AppError::BadRequest { message, .. }
            | AppError::Forbidden { message, .. }
            | AppError::Backend { message } => message.clone(),
            AppError::ContextFull { needed, limit } => format!(
                "the conversation is too long for the model's context: it needs {needed} tokens \
                 but the context holds {limit}; shorten or drop earlier messages, or restart \
                 the server with a larger --context"
            ),
            AppError::ModelNotFound { requested, served } => format!(
                "model '{requested}' not found; this server has: {served} (see GET /api/tags \
                 or GET /v1/models)"
            ),
            AppError::ContextTooLarge {
                model,
                requested,
                limit,
                reloadable: true,
            } => format!(
                "num_ctx {requested} is more than '{model}' can hold: it was trained for \
                 {limit} positions; use num_ctx {limit} or less"
            ),
            AppError::ContextTooLarge {
                model,
                requested,
                limit,
                reloadable: false,
            } => format!(
                "num_ctx {requested} is more than '{model}' was loaded with ({limit}); restart \
                 hearth serve with --context {requested}, or use num_ctx {limit} or less"
            ),
            AppError::LoadFailed { model, message } => {
                format!("could not load model '{model}': {message}")
            }
            AppError::RouteNotFound { what } => format!(
                "no such endpoint: {what}; this server offers the OpenAI routes GET /v1/models, \
                 POST /v1/chat/completions and POST /v1/completions, and the Ollama routes \
                 POST /api/chat, /api/generate, /api/show, GET /api/tags, /api/ps and \
                 /api/version"
            ),
            AppError::MethodNotAllowed => "this endpoint does not accept that method".to_owned(),
            AppError::PayloadTooLarge { limit } => format!(
                "the request body is larger than this server accepts ({} MB)",
                limit / (1024 * 1024)
            ),
            AppError::Busy { queue } => format!(
                "the server is busy: the model is answering and {queue} more requests are \
                 waiting; try again in a moment"
            ),
            AppError::InUse => "the server is busy: the model is answering in the Hearth app; \
                 try again in a moment"
                .to_owned(),
            AppError::Internal => {
                "the server failed to answer; the details are in its log".to_owned()
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            AppError::BadRequest { .. }
            | AppError::ContextFull { .. }
            | AppError::ContextTooLarge { .. }
            | AppError::ModelNotFound { .. }
            | AppError::RouteNotFound { .. }
            | AppError::MethodNotAllowed
            | AppError::PayloadTooLarge { .. } => "invalid_request_error",
            AppError::Forbidden { .. } => "permission_error",
            AppError::Busy { .. }
            | AppError::InUse
            | AppError::Backend { .. }
            | AppError::LoadFailed { .. }
            | AppError::Internal => "server_error",
        }
    }

    fn code(&self) -> Option<&'static str> {
        match self {
            AppError::BadRequest { .. } => None,
            AppError::ContextFull { .. } => Some("context_length_exceeded"),
            AppError::ContextTooLarge { .. } => Some("context_length_exceeded"),
            AppError::LoadFailed { .. } => Some("model_load_failed"),
            AppError::ModelNotFound { .. } => Some("model_not_found"),
            AppError::RouteNotFound { .. } => Some("not_found"),
            AppError::MethodNotAllowed => Some("method_not_allowed"),
            AppError::Forbidden { code, .. } => Some(code),
            AppError::PayloadTooLarge { .. } => Some("payload_too_large"),
            AppError::Busy { .. } | AppError::InUse => Some("server_busy"),
            AppError::Backend { .. } => Some("backend_failed"),
            AppError::Internal => Some("internal_error"),
        }
    }

    fn param(&self) -> Option<&'static str> {
        match self {
            AppError::BadRequest { param, .. } => *param,
            AppError::ContextFull { .. } => Some("messages"),
            AppError::ModelNotFound { .. } => Some("model"),
            _ => None,
        }
    }
}

impl From<hearth_chat::EngineError> for AppError {
    /// Engine errors a request can cause become 4xx; the rest are logged and become a 500.
    fn from(err: hearth_chat::EngineError) -> Self {
        use hearth_chat::EngineError as E;
        match err {
            E::ContextFull { needed, limit } => AppError::ContextFull { needed, limit },
            E::EmptyPrompt => {
                AppError::bad_field("messages", "the messages render to an empty prompt")
            }
            E::InvalidSampling { reason } => AppError::bad_request(reason),
            E::ChatTemplate { reason } => AppError::bad_field(
                "messages",
                format!("the model's chat template rejected these messages: {reason}"),
            ),
            limit @ E::ChatTemplateLimit { .. } => {
                AppError::bad_field("messages", limit.to_string())
            }
            E::ResponseFormat { reason } => {
                AppError::bad_field("format", format!("invalid format: {reason}"))
            }
            other => {
                tracing::error!(error = %other, "generation failed");
                AppError::Internal
            }
        }
    }
}

impl From<hearth_chat::BackendError> for AppError {
    /// The engine's errors as above; a backend that cannot do what was asked is the request's
    /// fault (400); a server or child process that failed is a bad gateway (502).
    fn from(err: hearth_chat::BackendError) -> Self {
        use hearth_chat::BackendError as E;
        match err {
            E::Engine(e) => AppError::from(e),
            E::Unsupported(message) => AppError::bad_request(message),
            other => AppError::Backend {
                message: other.to_string(),
            },
        }
    }
}

impl From<hearth_chat::AnswerError> for AppError {
    fn from(err: hearth_chat::AnswerError) -> Self {
        use hearth_chat::context::FitError;
        use hearth_chat::AnswerError as E;
        match err {
            E::NotStarted(FitError::TooLong { needed, limit }) => {
                AppError::ContextFull { needed, limit }
            }
            E::NotStarted(FitError::Backend(e)) | E::Failed { error: e, .. } => AppError::from(e),
        }
    }
}

/// Which API a request used, so its errors come in that API's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/...`: `{"error": {"message", "type", "param", "code"}}`.
    OpenAi,
    /// `/api/...`: `{"error": "..."}`, as Ollama answers.
    Ollama,
}

impl Api {
    /// The API a request path belongs to.
    pub fn of_path(path: &str) -> Api {
        if path == "/api" || path.starts_with("/api/") {
            Api::Ollama
        } else {
            Api::OpenAi
        }
    }
}

/// An error answered in Ollama's shape, `{"error": "..."}`, with the same status.
#[derive(Debug)]
pub struct OllamaError(pub AppError);

impl From<AppError> for OllamaError {
    fn from(err: AppError) -> Self {
        OllamaError(err)
    }
}

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        self.0.into_response_for(Api::Ollama)
    }
}

impl AppError {
    /// The error body in `api`'s shape (the status is the same in both).
    pub fn body(&self, api: Api) -> serde_json::Value {
        let message = self.message();
        match api {
            Api::Ollama => serde_json::json!(ollama::ErrorReply { error: message }),
            Api::OpenAi => serde_json::json!(ErrorReply {
                error: ApiError {
                    message,
                    kind: self.kind().to_owned(),
                    param: self.param().map(str::to_owned),
                    code: self.code().map(str::to_owned),
                }
            }),
        }
    }

    /// The response to send for this error in `api`'s shape.
    pub fn into_response_for(self, api: Api) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(%status, message = %self.message(), "request failed");
        } else {
            tracing::debug!(%status, message = %self.message(), "request refused");
        }
        let body = self.body(api);
        let mut response = (status, axum::Json(body)).into_response();
        match self {
            AppError::Busy { .. } | AppError::InUse => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
            }
            AppError::PayloadTooLarge { .. } => {
                // The rest of the body is not read, so the connection cannot carry another
                // request: say so, or a client reusing it finds it closed.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        self.into_response_for(Api::OpenAi)
    }
}
