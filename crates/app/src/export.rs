//! Conversations exported as Markdown or JSON files.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use hearth_chat::conversations::{Conversation, Role};

/// Export file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ExportFormat {
    /// Readable Markdown.
    Markdown,
    /// Everything, as JSON (`{"format": "hearth-conversation", "version": 1, ...}`).
    Json,
}

/// The conversation as Markdown: title, system prompt, each message, answer receipts.
pub fn to_markdown(c: &Conversation) -> String {
    let mut out = format!("# {}\n\n", c.title);
    if !c.settings.system_prompt.trim().is_empty() {
        out.push_str(&format!(
            "**System prompt:** {}\n\n",
            c.settings.system_prompt.trim()
        ));
    }
    for m in &c.messages {
        let who = match m.role {
            Role::User => "You",
            Role::Assistant => "Assistant",
        };
        out.push_str(&format!("## {who}\n\n{}\n\n", m.content.trim_end()));
        if let Some(r) = &m.receipt {
            out.push_str(&format!(
                "> {} · {} · {} prompt + {} answer tokens · first token {:.2} s · {:.1} tok/s\n\n",
                r.model_name,
                r.backend,
                r.prompt_tokens,
                r.generated_tokens,
                r.ttft_secs,
                r.tokens_per_second
            ));
        }
    }
    out
}

#[derive(Serialize)]
struct JsonExport<'a> {
    format: &'static str,
    version: u32,
    conversation: &'a Conversation,
}

/// The conversation as pretty JSON, with a format tag and version.
pub fn to_json(c: &Conversation) -> String {
    serde_json::to_string_pretty(&JsonExport {
        format: "hearth-conversation",
        version: 1,
        conversation: c,
    })
    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// A file name from a title: letters, digits, spaces, dashes; at most 60 characters.
pub fn file_stem(title: &str) -> String {
    let stem: String = title
        .chars()
        .map(|ch| {
            if ch.is_alphanumeric() || ch == ' ' || ch == '-' {
                ch
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(60)
        .collect();
    if stem.is_empty() {
        "conversation".into()
    } else {
        stem
    }
}

fn render(c: &Conversation, format: ExportFormat) -> (&'static str, String) {
    match format {
        ExportFormat::Markdown => ("md", to_markdown(c)),
        ExportFormat::Json => ("json", to_json(c)),
    }
}

/// Write the export to `path`, a file the user chose in the save dialog (which asked before
/// replacing one). Written beside it under a temporary name first, then renamed.
pub fn write_to(path: &Path, c: &Conversation, format: ExportFormat) -> std::io::Result<PathBuf> {
    let (_, text) = render(c, format);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".partial");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    Ok(path.to_path_buf())
}

/// Write the export into `dir` under a name that does not overwrite anything; returns the path.
pub fn write(dir: &Path, c: &Conversation, format: ExportFormat) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let (ext, text) = render(c, format);
    let stem = file_stem(&c.title);
    let mut path = dir.join(format!("{stem}.{ext}"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stem} ({n}).{ext}"));
        n += 1;
    }
    // Write to a temporary name first so a crash never leaves half a file under the real name.
    let tmp = dir.join(format!(".{stem}.{ext}.partial"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_chat::conversations::{Message, MessageState};
    use hearth_chat::ConversationSettings;

    fn sample() -> Conversation {
        Conversation {
            id: "ab".into(),
            title: "Tides / moon?".into(),
            created_at: 1,
            updated_at: 2,
            settings: ConversationSettings {
                system_prompt: "Be brief.".into(),
                ..Default::default()
            },
            messages: vec![
                Message {
                    id: 1,
                    role: Role::User,
                    content: "Why tides?".into(),
                    state: MessageState::Complete,
                    receipt: None,
                    created_at: 1,
                    branches: Vec::new(),
                },
                Message {
                    id: 2,
                    role: Role::Assistant,
                    content: "The **moon**.".into(),
                    state: MessageState::Complete,
                    receipt: None,
                    created_at: 2,
                    branches: Vec::new(),
                },
            ],
            versions: Vec::new(),
        }
    }

    #[test]
    fn markdown_has_title_prompt_and_turns() {
        let md = to_markdown(&sample());
        assert!(md.starts_with("# Tides / moon?\n"));
        assert!(md.contains("**System prompt:** Be brief."));
        assert!(md.contains("## You\n\nWhy tides?"));
        assert!(md.contains("## Assistant\n\nThe **moon**."));
    }

    #[test]
    fn json_round_trips() {
        let json: serde_json::Value = serde_json::from_str(&to_json(&sample())).unwrap();
        assert_eq!(json["format"], "hearth-conversation");
        let back: Conversation = serde_json::from_value(json["conversation"].clone()).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn files_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), &sample(), ExportFormat::Markdown).unwrap();
        let b = write(dir.path(), &sample(), ExportFormat::Markdown).unwrap();
        assert_eq!(a.file_name().unwrap(), "Tides moon.md");
        assert_eq!(b.file_name().unwrap(), "Tides moon (2).md");
        assert_eq!(file_stem("///"), "conversation");
    }

    #[test]
    fn a_chosen_path_is_written_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("my chat.json");
        let written = write_to(&path, &sample(), ExportFormat::Json).unwrap();
        assert_eq!(written, path);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["conversation"]["title"], "Tides / moon?");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the export itself is left");
        assert!(write_to(Path::new("/"), &sample(), ExportFormat::Json).is_err());
    }
}
