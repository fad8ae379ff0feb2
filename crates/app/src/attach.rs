//! Files a person hands Hearth, as a front end asks: picked in its dialog, dropped on the
//! window, or chosen from the library. Attaching or detaching returns the conversation's files
//! and the remote notice (what [`App::conversation_documents`] gives), so the front end need not
//! ask again; a dropped model is imported as [`App::import_model`] imports a path.
//!
//! The work is [`crate::documents::Documents`]' (the library, indexing) and
//! [`crate::drop`]'s (what a drop holds, kept under its token); this module only joins them
//! on [`App`], so neither of them needs to know the app.

use std::path::PathBuf;

use hearth_documents::DocumentId;

use crate::app::App;
use crate::documents::{ConversationDocuments, DocumentSink};
use crate::drop::{DropKind, Dropped};
use crate::error::{Error, ErrorCode, Result};
use crate::model_store::{InstalledModel, Progress};

impl App {
    /// Attaches `paths` (from the front end's own picker) to `conversation_id`; they are
    /// indexed in the background, reporting to `events`.
    pub fn attach_files(
        &self,
        conversation_id: &str,
        paths: Vec<PathBuf>,
        events: DocumentSink,
    ) -> Result<ConversationDocuments> {
        self.documents.attach(conversation_id, paths, events)?;
        self.conversation_documents(conversation_id)
    }

    /// Attaches a file already in the library to `conversation_id`.
    pub fn attach_document(
        &self,
        conversation_id: &str,
        id: DocumentId,
    ) -> Result<ConversationDocuments> {
        self.documents.attach_known(conversation_id, id)?;
        self.conversation_documents(conversation_id)
    }

    /// Takes a file off `conversation_id` (it stays in the library).
    pub fn detach_document(
        &self,
        conversation_id: &str,
        id: DocumentId,
    ) -> Result<ConversationDocuments> {
        self.documents.detach(conversation_id, id)?;
        self.conversation_documents(conversation_id)
    }

    /// Classifies files dropped on the window (their paths from the window system, never from
    /// the web view) and keeps what the front end may act on under the drop's token.
    pub fn register_drop(&self, paths: &[PathBuf]) -> Dropped {
        self.drops.register(paths)
    }

    /// Attaches the documents of the drop `token` (once) to `conversation_id`, as
    /// [`crate::App::attach_files`] does.
    pub fn attach_dropped(
        &self,
        conversation_id: &str,
        token: &str,
        events: DocumentSink,
    ) -> Result<ConversationDocuments> {
        let paths = self.drops.take(token, DropKind::Documents)?;
        self.attach_files(conversation_id, paths, events)
    }

    /// Imports the model of the drop `token` (once), as [`crate::App::import_model`] imports a
    /// path: a GGUF file is converted, a model folder copied; the original stays.
    pub fn import_dropped(
        &self,
        token: &str,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<InstalledModel> {
        let paths = self.drops.take(token, DropKind::Model)?;
        let [path] = paths.as_slice() else {
            return Err(Error::new(
                ErrorCode::Internal,
                "That drop does not hold one model. Drop the model again.",
            ));
        };
        self.import_model(path, None, progress)
    }
}
