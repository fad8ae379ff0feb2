//! `--file` of `hearth run` and `hearth chat`: the user's files indexed into Hearth's document
//! library and given to the model as the app gives a conversation's (`hearth_app::documents`:
//! the same passages within the same share of the context, the same instruction to cite), and
//! the numbered sources printed after the answer.

use std::io::Write;
use std::path::PathBuf;

use hearth_app::documents::{Document, DocumentEvent, Documents, EmbeddingModel, Source};
use hearth_app::grounding::{ground_for, source_line, Grounding};

use crate::terminal::safe;

/// Files given with `--file`, indexed.
pub struct Files {
    documents: Documents,
    read: Vec<Document>,
    /// Whether the user was told that passages go to a remote server.
    told: std::cell::Cell<bool>,
}

impl Files {
    /// Indexes `paths` into the library in Hearth's data folder (a file indexed before and
    /// unchanged is not read again); a file that cannot be read is an error naming it.
    pub fn index(paths: &[PathBuf], quiet: bool) -> anyhow::Result<Files> {
        let documents = Documents::in_home(&crate::model_args::home()?);
        let read = documents.index_now(paths, &|event| report(&event, quiet))?;
        Ok(Files {
            documents,
            read,
            told: Default::default(),
        })
    }

    /// What the model on `backend` is given for `question` (None when no file has text).
    pub fn ground(
        &self,
        question: &str,
        backend: &dyn hearth_chat::Backend,
        max_tokens: usize,
    ) -> anyhow::Result<Option<Grounding>> {
        if backend.info().kind.leaves_this_computer() && !self.told.replace(true) {
            let notice = hearth_app::documents::remote_notice(&backend.info().device);
            eprintln!("hearth: {}", safe(&notice.message));
        }
        let embedder = self.documents.embedder();
        Ok(self.documents.with_library(|library| {
            ground_for(
                library,
                embedder.as_deref().map(|m| m as &dyn EmbeddingModel),
                &self.read,
                question,
                backend,
                max_tokens,
            )
        })?)
    }
}

/// Tells on stderr what indexing did with each file.
pub fn report(event: &DocumentEvent, quiet: bool) {
    if quiet {
        return;
    }
    if let DocumentEvent::Indexed { document } = event {
        let passages = document.passages;
        eprintln!(
            "hearth: {} read ({passages} passage{})",
            safe(&document.name),
            if passages == 1 { "" } else { "s" }
        );
    }
}

/// Prints the sources after an answer: "Sources:" and one "[n] file, place" line each.
pub fn print_sources(out: &mut impl Write, sources: &[Source]) {
    if sources.is_empty() {
        return;
    }
    let mut text = String::from("\nSources:\n");
    for s in sources {
        text.push_str(&safe(&source_line(s)));
        text.push('\n');
    }
    // A closed stdout ends the output, not the program's work.
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
