//! Conversations exported as Markdown or JSON files, with the pictures their questions carry.
//!
//! - Markdown: the pictures are files in a folder beside the `.md` file, named
//!   `<the file's name> pictures/`, each `message-<its message's place>-picture-<its place>.<ext>`
//!   (both from 1, in conversation order), and linked from their message by that relative path.
//! - JSON: one file; the pictures are inside it, base64, in a top-level `pictures` list
//!   (`message_id`, `index`, `media_type`, `width`, `height`, `data`), beside what each message
//!   says of its pictures (`pictures`: index, type, size).
//!
//! Files are written under a temporary name, then renamed, so a crash never leaves half a file
//! under the real name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use hearth_chat::conversations::{Conversation, Role};
use hearth_chat::picture::base64;
use hearth_chat::Picture;

/// The pictures of a conversation's messages, by message id, in the order they were given.
pub type MessagePictures = BTreeMap<i64, Vec<Picture>>;

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
    to_markdown_linked(c, &BTreeMap::new())
}

/// The picture files of a Markdown export: (the message's id, the picture's place) to the file
/// name inside the pictures folder.
fn picture_names(c: &Conversation, pictures: &MessagePictures) -> BTreeMap<(i64, usize), String> {
    let mut names = BTreeMap::new();
    for (place, m) in c.messages.iter().enumerate() {
        for (k, picture) in pictures.get(&m.id).into_iter().flatten().enumerate() {
            names.insert(
                (m.id, k),
                format!(
                    "message-{:02}-picture-{}.{}",
                    place + 1,
                    k + 1,
                    picture.format.extension()
                ),
            );
        }
    }
    names
}

/// A relative path as a Markdown link target (spaces and the characters a link ends at, escaped).
fn link_target(path: &str) -> String {
    path.chars()
        .map(|ch| match ch {
            ' ' => "%20".to_string(),
            '(' => "%28".to_string(),
            ')' => "%29".to_string(),
            '<' => "%3C".to_string(),
            '>' => "%3E".to_string(),
            other => other.to_string(),
        })
        .collect()
}

/// The conversation as Markdown, each message followed by links to its pictures: `links` holds,
/// by (message id, picture place), the picture's path relative to the Markdown file.
fn to_markdown_linked(c: &Conversation, links: &BTreeMap<(i64, usize), String>) -> String {
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
        for ((_, k), path) in links.range((m.id, 0)..=(m.id, usize::MAX)) {
            out.push_str(&format!("![Picture {}]({})\n\n", k + 1, link_target(path)));
        }
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
    /// The pictures' bytes (absent when there are none, as in exports before pictures).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pictures: Vec<JsonPicture>,
}

/// A picture inside a JSON export.
#[derive(Serialize)]
struct JsonPicture {
    message_id: i64,
    index: usize,
    media_type: &'static str,
    width: u32,
    height: u32,
    /// The picture's bytes, base64.
    data: String,
}

/// The conversation as pretty JSON, with a format tag and version.
pub fn to_json(c: &Conversation) -> String {
    to_json_with(c, &BTreeMap::new())
}

/// The conversation as pretty JSON, its pictures inside it (base64).
pub fn to_json_with(c: &Conversation, pictures: &MessagePictures) -> String {
    let pictures = c
        .messages
        .iter()
        .flat_map(|m| {
            pictures
                .get(&m.id)
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(index, p)| JsonPicture {
                    message_id: m.id,
                    index,
                    media_type: p.format.media_type(),
                    width: p.width,
                    height: p.height,
                    data: base64(&p.bytes),
                })
        })
        .collect();
    serde_json::to_string_pretty(&JsonExport {
        format: "hearth-conversation",
        version: 1,
        conversation: c,
        pictures,
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

fn extension(format: ExportFormat) -> &'static str {
    match format {
        ExportFormat::Markdown => "md",
        ExportFormat::Json => "json",
    }
}

/// The folder a Markdown file's pictures go in: `<its name without .md> pictures`, beside it.
pub fn pictures_dir(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "conversation".into());
    path.with_file_name(format!("{stem} pictures"))
}

/// `bytes` written to `path` under a temporary name first, then renamed.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".partial");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Writes the export of `c` (with `pictures`) to the file `path`: a Markdown file's pictures
/// first, into [`pictures_dir`], then the file itself.
fn write_file(
    path: &Path,
    c: &Conversation,
    format: ExportFormat,
    pictures: &MessagePictures,
) -> std::io::Result<()> {
    let text = match format {
        ExportFormat::Json => to_json_with(c, pictures),
        ExportFormat::Markdown => {
            let names = picture_names(c, pictures);
            if names.is_empty() {
                to_markdown(c)
            } else {
                let dir = pictures_dir(path);
                std::fs::create_dir_all(&dir)?;
                let folder = dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let mut links = BTreeMap::new();
                for ((message_id, k), name) in names {
                    let picture = &pictures[&message_id][k];
                    write_whole(&dir.join(&name), &picture.bytes)?;
                    links.insert((message_id, k), format!("{folder}/{name}"));
                }
                to_markdown_linked(c, &links)
            }
        }
    };
    write_whole(path, text.as_bytes())
}

/// Write the export to `path`, a file the user chose in the save dialog (which asked before
/// replacing one). Written beside it under a temporary name first, then renamed; a Markdown
/// export's pictures go in [`pictures_dir`] beside it.
pub fn write_to(
    path: &Path,
    c: &Conversation,
    format: ExportFormat,
    pictures: &MessagePictures,
) -> std::io::Result<PathBuf> {
    write_file(path, c, format, pictures)?;
    Ok(path.to_path_buf())
}

/// Write the export into `dir` under a name that does not overwrite anything (nor a pictures
/// folder of that name); returns the path.
pub fn write(
    dir: &Path,
    c: &Conversation,
    format: ExportFormat,
    pictures: &MessagePictures,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let ext = extension(format);
    let stem = file_stem(&c.title);
    let taken = |path: &Path| path.exists() || pictures_dir(path).exists();
    let mut path = dir.join(format!("{stem}.{ext}"));
    let mut n = 2;
    while taken(&path) {
        path = dir.join(format!("{stem} ({n}).{ext}"));
        n += 1;
    }
    write_file(&path, c, format, pictures)?;
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
                    pictures: Vec::new(),
                },
                Message {
                    id: 2,
                    role: Role::Assistant,
                    content: "The **moon**.".into(),
                    state: MessageState::Complete,
                    receipt: None,
                    created_at: 2,
                    branches: Vec::new(),
                    pictures: Vec::new(),
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
        let a = write(
            dir.path(),
            &sample(),
            ExportFormat::Markdown,
            &MessagePictures::new(),
        )
        .unwrap();
        let b = write(
            dir.path(),
            &sample(),
            ExportFormat::Markdown,
            &MessagePictures::new(),
        )
        .unwrap();
        assert_eq!(a.file_name().unwrap(), "Tides moon.md");
        assert_eq!(b.file_name().unwrap(), "Tides moon (2).md");
        assert_eq!(file_stem("///"), "conversation");
    }

    #[test]
    fn a_chosen_path_is_written_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("my chat.json");
        let written = write_to(
            &path,
            &sample(),
            ExportFormat::Json,
            &MessagePictures::new(),
        )
        .unwrap();
        assert_eq!(written, path);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["conversation"]["title"], "Tides / moon?");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the export itself is left");
        assert!(write_to(
            Path::new("/"),
            &sample(),
            ExportFormat::Json,
            &MessagePictures::new()
        )
        .is_err());
    }

    fn pictured() -> (Conversation, MessagePictures) {
        let picture = |format, fill: u8| Picture {
            format,
            width: 4,
            height: 3,
            bytes: std::sync::Arc::from(vec![fill; 5]),
        };
        let mut pictures = MessagePictures::new();
        pictures.insert(
            1,
            vec![
                picture(hearth_chat::PictureFormat::Png, 1),
                picture(hearth_chat::PictureFormat::Jpeg, 2),
            ],
        );
        (sample(), pictures)
    }

    #[test]
    fn markdown_links_its_pictures_written_beside_it_by_message_order() {
        let dir = tempfile::tempdir().unwrap();
        let (c, pictures) = pictured();
        let md = write(dir.path(), &c, ExportFormat::Markdown, &pictures).unwrap();
        let folder = dir.path().join("Tides moon pictures");
        assert_eq!(
            std::fs::read(folder.join("message-01-picture-1.png")).unwrap(),
            vec![1; 5]
        );
        assert_eq!(
            std::fs::read(folder.join("message-01-picture-2.jpg")).unwrap(),
            vec![2; 5]
        );
        let text = std::fs::read_to_string(&md).unwrap();
        let question = text.find("Why tides?").unwrap();
        let link = text
            .find("![Picture 1](Tides%20moon%20pictures/message-01-picture-1.png)")
            .expect("the first picture is linked by its relative path");
        let answer = text.find("## Assistant").unwrap();
        assert!(
            question < link && link < answer,
            "under its question: {text}"
        );
        assert!(text.contains("![Picture 2](Tides%20moon%20pictures/message-01-picture-2.jpg)"));
        // A second export takes a new name, and its pictures a new folder.
        let again = write(dir.path(), &c, ExportFormat::Markdown, &pictures).unwrap();
        assert_eq!(again.file_name().unwrap(), "Tides moon (2).md");
        assert!(dir
            .path()
            .join("Tides moon (2) pictures/message-01-picture-1.png")
            .exists());
        let names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    }

    #[test]
    fn json_carries_its_pictures_as_base64() {
        let (c, pictures) = pictured();
        let json: serde_json::Value = serde_json::from_str(&to_json_with(&c, &pictures)).unwrap();
        let list = json["pictures"].as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0]["message_id"], 1);
        assert_eq!(list[1]["index"], 1);
        assert_eq!(list[1]["media_type"], "image/jpeg");
        assert_eq!(list[0]["data"], base64(&[1; 5]));
        let plain: serde_json::Value = serde_json::from_str(&to_json(&c)).unwrap();
        assert!(plain.get("pictures").is_none(), "no pictures, no list");
    }
}
