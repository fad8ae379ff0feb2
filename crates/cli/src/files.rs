//! `--file` of `hearth run` and `hearth chat`: what the terminal says about the user's files
//! (each file read, and that passages go to a remote server) and the numbered sources printed
//! after the answer. Indexing and grounding are the app's (`hearth_app::ask::Files` for an
//! unsaved turn, a conversation's attached files for a saved one): the same passages within
//! the same share of the context, under the same instruction to cite.

use std::io::Write;
use std::path::PathBuf;

use hearth_app::ask::Files;
use hearth_app::documents::{remote_notice, DocumentEvent, Source};
use hearth_app::grounding::source_line;
use hearth_app::{Home, Session};

use crate::terminal::safe;

/// Indexes `paths` into the document library in `home` for unsaved turns (a file indexed
/// before and unchanged is not read again), saying what was read unless `quiet`; a file that
/// cannot be read is an error naming it.
pub fn index(home: &Home, paths: &[PathBuf], quiet: bool) -> anyhow::Result<Files> {
    Ok(Files::index(home, paths, &|event| report(&event, quiet))?)
}

/// With a model on a remote server, says that passages of the files go there (giving `--file`
/// is the user's consent).
pub fn tell_remote(session: &Session) {
    if session.kind().leaves_this_computer() {
        let notice = remote_notice(&session.backend.info().device);
        eprintln!("hearth: {}", safe(&notice.message));
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

/// Prints the sources after an answer: "Sources:" and one "[n] file, place" line for each
/// the answer used, then "Also read:" and the rest the model was given.
pub fn print_sources(out: &mut impl Write, sources: &[Source]) {
    if sources.is_empty() {
        return;
    }
    let (also, used): (Vec<&Source>, Vec<&Source>) = sources
        .iter()
        .partition(|s| s.used == hearth_app::citations::SourceUse::AlsoRead);
    let mut text = String::new();
    for (title, group) in [("Sources", used), ("Also read", also)] {
        if group.is_empty() {
            continue;
        }
        text.push_str(&format!("\n{title}:\n"));
        for s in group {
            text.push_str(&safe(&source_line(s)));
            text.push('\n');
        }
    }
    // A closed stdout ends the output, not the program's work.
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
