//! Markdown, cut at its headings: ATX (`## Title`) and setext (a line underlined with `===` or
//! `---`), not inside fenced code blocks nor in YAML front matter. Each section's text is the
//! file's own lines from its heading to the next one, unchanged, so a passage quotes the file.

use super::{Extracted, Format, Place, Section};

pub(super) fn extract(text: &str) -> Extracted {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut sections = Vec::new();
    let mut title = None;
    let mut current = Section {
        from_scan: false,
        place: Place::Whole,
        text: String::new(),
    };
    let mut fence: Option<&str> = None;
    let mut index = front_matter_end(&lines);
    current.text.extend(lines[..index].iter().copied());
    while index < lines.len() {
        let line = lines[index];
        if let Some(open) = fence {
            if line.trim_start().starts_with(open) {
                fence = None;
            }
        } else if let Some(marker) = fence_marker(line) {
            fence = Some(marker);
        } else if let Some((level, heading)) = heading_at(&lines, index) {
            if level == 1 && title.is_none() {
                title = Some(heading.clone());
            }
            sections.push(std::mem::replace(
                &mut current,
                Section {
                    from_scan: false,
                    place: Place::Heading(heading),
                    text: String::new(),
                },
            ));
            if atx_heading(line).is_none() {
                // A setext heading: its underline belongs to it.
                current.text.push_str(line);
                index += 1;
            }
        }
        current.text.push_str(lines[index]);
        index += 1;
    }
    sections.push(current);
    Extracted {
        scanned_pages: Vec::new(),
        format: Format::Markdown,
        title,
        sections,
    }
}

/// The heading level and text of the heading that starts at line `index`, if one does.
fn heading_at(lines: &[&str], index: usize) -> Option<(u8, String)> {
    let line = lines[index];
    if let Some(heading) = atx_heading(line) {
        return Some(heading);
    }
    let level = is_setext_underline(lines.get(index + 1).copied())?;
    let text = line.trim();
    let plain_line = !text.is_empty()
        && !line.starts_with("    ")
        && !text.starts_with(['-', '*', '+', '>', '|'])
        && atx_heading(line).is_none();
    plain_line.then(|| (level, text.to_owned()))
}

/// `# Title #` (up to three spaces of indent, one to six `#`, then a space or the end).
fn atx_heading(line: &str) -> Option<(u8, String)> {
    let trimmed = line.trim_end();
    let indent = trimmed.len() - trimmed.trim_start().len();
    if indent > 3 {
        return None;
    }
    let body = trimmed.trim_start();
    let level = body.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &body[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim_end();
    (!text.is_empty()).then(|| (level as u8, text.to_owned()))
}

/// 1 for a `===` underline, 2 for `---`.
fn is_setext_underline(line: Option<&str>) -> Option<u8> {
    let text = line?.trim();
    if text.len() >= 2 && text.bytes().all(|b| b == b'=') {
        Some(1)
    } else if text.len() >= 2 && text.bytes().all(|b| b == b'-') {
        Some(2)
    } else {
        None
    }
}

/// The fence that opens a fenced code block on this line (```` ``` ```` or `~~~`).
fn fence_marker(line: &str) -> Option<&'static str> {
    let body = line.trim_start();
    if body.starts_with("```") {
        Some("```")
    } else if body.starts_with("~~~") {
        Some("~~~")
    } else {
        None
    }
}

/// The number of lines of YAML front matter (`---` ... `---` at the very start), 0 if none.
fn front_matter_end(lines: &[&str]) -> usize {
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return 0;
    }
    lines
        .iter()
        .skip(1)
        .position(|line| matches!(line.trim_end(), "---" | "..."))
        .map_or(0, |closing| closing + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(text: &str) -> Vec<Place> {
        extract(text)
            .sections
            .into_iter()
            .map(|s| s.place)
            .collect()
    }

    #[test]
    fn atx_and_setext_headings_start_sections() {
        let text = "intro\n# Guide\nhello\nSetup\n-----\nsteps\n## Last ##\nend\n";
        let extracted = extract(text);
        assert_eq!(extracted.title.as_deref(), Some("Guide"));
        assert_eq!(
            places(text),
            [
                Place::Whole,
                Place::Heading("Guide".into()),
                Place::Heading("Setup".into()),
                Place::Heading("Last".into()),
            ]
        );
        assert_eq!(extracted.sections[2].text, "Setup\n-----\nsteps\n");
        let joined: String = extracted.sections.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(joined, text, "the sections together are the file");
    }

    #[test]
    fn hashes_in_code_blocks_and_tags_are_not_headings() {
        let text = "# Top\n```sh\n# a comment\n```\n#hashtag\n    # indented code\n";
        assert_eq!(places(text), [Place::Whole, Place::Heading("Top".into())]);
    }

    #[test]
    fn front_matter_is_not_a_setext_heading() {
        let text = "---\ntitle: x\n---\nbody\n## Part\nmore\n";
        assert_eq!(places(text), [Place::Whole, Place::Heading("Part".into())]);
    }

    #[test]
    fn a_list_item_over_a_rule_is_not_a_heading() {
        assert_eq!(places("- item\n---\n"), [Place::Whole]);
    }
}
