//! What the client's tests share: a client of a closed port that holds a key, a one-message
//! request, and the kind of a failure.

use hearth_chat::backend::{BackendError, FailureKind};
use hearth_engine::{ChatMessage, Role};

use super::{ApiKey, ChatRequest, ClientOptions, OpenAiClient};

pub(super) fn client() -> OpenAiClient {
    OpenAiClient::new(
        "http://127.0.0.1:9/v1/",
        ApiKey::new("sk-SECRET"),
        ClientOptions::default(),
    )
    .unwrap()
}

pub(super) fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: vec![ChatMessage::new(Role::User, "hi")],
        ..Default::default()
    }
}

pub(super) fn kind(e: &BackendError) -> FailureKind {
    match e {
        BackendError::Failed { kind, .. } => *kind,
        other => panic!("not a failure: {other:?}"),
    }
}
