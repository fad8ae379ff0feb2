//! Hearth's product core, shared by every front end (the desktop app, `hearth`, the server),
//! with no Tauri, HTTP serving or UI in it. A front end parses its input, calls one function
//! here, and shows the result or the [`Error`].
//!
//! - [`home`]: where Hearth keeps things (the one XDG resolution) and the model store on it;
//! - [`models`]: the models Hearth can open, with where each can run; [`model_card`]: what a
//!   listing says of one without loading it (the server's model lists);
//! - [`session`]: a model opened on a backend, and the one rule for the best backend;
//! - [`app`]: the state a running front end shares ([`App`]: the conversation database, the
//!   model in use, busy and stop flags, notices);
//! - [`selection`]: choosing the model in use, and the app's status at start;
//! - [`turn`]: one turn of a conversation: plan, stream, save;
//! - [`ask`]: a turn that is not saved (`hearth run`, `hearth chat --no-save`), and the power
//!   rule and answer-loop call it shares with [`turn`];
//! - [`documents`]: the user's files: the document library, files attached to a conversation,
//!   indexing; [`grounding`]: how a file becomes a cited answer (the passages a turn reads);
//! - [`drop`]: files dropped on the window, classified once (a model, documents, a picture, or
//!   neither, with why) and kept under a token the front end acts by; [`attach`]: the
//!   front end's attach, detach and drop commands over [`documents`] and [`drop`];
//! - [`open_file`]: a file of the library opened in the person's own program, at the cited page
//!   where that program allows;
//! - [`conversations`], [`export`]: the saved conversations and their export files (pictures
//!   beside a Markdown export, inside a JSON one);
//! - [`pictures`]: pictures given with a message: checked from bytes, a file or a drop, read
//!   back to show, or handed to the documents' path to read their text;
//! - [`model_store`]: the Models area (catalog, downloads, import, remove, default);
//! - [`npu`]: the NPU's status and power, loading onto it, its self-test and the comparison
//!   with the processor; [`fidelity`] keeps the self-test results;
//! - [`read_aloud`]: answers read aloud by espeak-ng (or Piper), sentence by sentence as
//!   they are written;
//! - [`remote`]: the remote server's settings;
//! - [`settings`]: the app-wide settings;
//! - [`speech`]: speech to text: the speech models' folder, loading one, transcribing a file;
//!   [`voice`]: speaking to the app (the microphone's one recording, heard on stop);
//! - [`share`]: what the "Let other apps on this computer use Hearth" switch shows;
//! - [`error`]: the one error every function returns, a code and a plain message.

pub mod app;
pub mod ask;
pub mod attach;
pub mod citations;
pub mod conversations;
pub mod documents;
pub mod drop;
pub mod error;
pub mod export;
pub mod fidelity;
pub mod grounding;
pub mod home;
mod loading;
mod lock;
pub mod model_card;
pub mod model_store;
pub mod models;
pub mod npu;
pub mod open_file;
pub mod pictures;
pub mod read_aloud;
pub mod remote;
pub mod selection;
pub mod session;
pub mod settings;
pub mod share;
pub mod speech;
pub mod turn;
pub mod voice;

pub use app::App;
pub use error::{Error, ErrorCode, Result};
pub use home::Home;
pub use models::LocalModel;
pub use session::{best_backend, ModelStatus, Session};
