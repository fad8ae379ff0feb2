//! Web pages (and EPUB chapters): the text a browser shows, cut at its headings (`<h1>`..`<h6>`).
//!
//! html5ever's tokenizer alone is enough: visible text needs no tree, only to know which tags
//! hide their content (`<script>`, `<style>`, `<template>`, `<noscript>`, the head but its
//! `<title>`), which ones end a line, and where `<pre>` keeps spaces. Character references are
//! decoded by the tokenizer; runs of white space collapse to one space, as a browser shows them.

use std::cell::RefCell;
use std::path::Path;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::LocalName;

use super::{Place, Section};

/// A page's title (its `<title>`, else its first `<h1>`) and its sections; the text before the
/// first heading has the place `Whole`.
pub(super) fn extract(html: &str) -> (Option<String>, Vec<Section>) {
    let tokenizer = Tokenizer::new(VisibleText::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    let _ = tokenizer.feed(&input);
    tokenizer.end();
    tokenizer.sink.page.into_inner().finish()
}

/// Which bytes of a web page name its encoding: a `charset=` among its first 1024 bytes (in a
/// `<meta>`, as browsers look for it), if it names one encoding_rs knows.
pub(super) fn declared_encoding(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")? + "charset=".len();
    let label: String = head[at..]
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
        .collect();
    encoding_rs::Encoding::for_label(label.as_bytes())
}

/// Decodes a web page's bytes: a byte-order mark, else its declared charset, else as
/// `text_encoding` decodes any text (UTF-8, else detected).
pub(super) fn decode(
    path: &Path,
    format: super::Format,
    bytes: &[u8],
) -> Result<String, super::ExtractError> {
    if encoding_rs::Encoding::for_bom(bytes).is_none() {
        if let Some(encoding) = declared_encoding(bytes) {
            // A page saying UTF-16 in ASCII is not UTF-16 (browsers read it as UTF-8).
            if encoding != encoding_rs::UTF_16LE && encoding != encoding_rs::UTF_16BE {
                return Ok(encoding.decode_without_bom_handling(bytes).0.into_owned());
            }
        }
    }
    super::text_encoding::decode(path, format, bytes)
}

#[derive(Default)]
struct VisibleText {
    page: RefCell<Page>,
}

#[derive(Default)]
struct Page {
    title: Option<String>,
    first_h1: Option<String>,
    sections: Vec<Section>,
    current: String,
    current_place: Option<Place>,
    /// Between `<hN>` and `</hN>`: the current section's text so far is its heading.
    in_heading: bool,
    heading_level: u8,
    /// The element whose content is hidden (`script`, `style`...), until its end tag.
    hidden: Option<LocalName>,
    in_head: bool,
    in_title: bool,
    title_text: String,
    pre_depth: usize,
}

impl Page {
    fn start_tag(&mut self, tag: &Tag) -> TokenSinkResult<()> {
        let name = &*tag.name;
        match name {
            "head" => self.in_head = true,
            "body" => self.in_head = false,
            "title" if !tag.self_closing => {
                self.in_title = true;
                return TokenSinkResult::RawData(RawKind::Rcdata);
            }
            "script" | "style" | "template" | "noscript" | "iframe" | "textarea" | "xmp"
                if !tag.self_closing =>
            {
                self.hidden = Some(tag.name.clone());
                return TokenSinkResult::RawData(if name == "script" {
                    RawKind::ScriptData
                } else if name == "textarea" {
                    RawKind::Rcdata
                } else {
                    RawKind::Rawtext
                });
            }
            "pre" | "listing" => {
                self.end_line();
                self.pre_depth += 1;
            }
            "br" => self.push_newline(),
            "td" | "th" => self.push_text(" "),
            "img" => {
                // An image's alt text stands for it on the page.
                if let Some(alt) = tag.attrs.iter().find(|a| &*a.name.local == "alt") {
                    self.push_text(&alt.value);
                }
            }
            _ => {
                if let Some(level) = heading_level(name) {
                    self.start_heading(level);
                } else if is_block(name) {
                    self.end_line();
                }
            }
        }
        TokenSinkResult::Continue
    }

    fn end_tag(&mut self, tag: &Tag) {
        let name = &*tag.name;
        match name {
            "head" => self.in_head = false,
            "title" => {
                self.in_title = false;
                let title = collapse_spaces(&self.title_text);
                if self.title.is_none() && !title.is_empty() {
                    self.title = Some(title);
                }
            }
            "pre" | "listing" => {
                self.pre_depth = self.pre_depth.saturating_sub(1);
                self.end_line();
            }
            _ => {
                if heading_level(name).is_some() {
                    self.end_heading();
                } else if is_block(name) {
                    self.end_line();
                }
            }
        }
    }

    fn characters(&mut self, text: &str) {
        if self.hidden.is_some() {
            return;
        }
        if self.in_title {
            self.title_text.push_str(text);
            return;
        }
        if self.in_head {
            return;
        }
        self.push_text(text);
    }

    fn push_text(&mut self, text: &str) {
        if self.pre_depth > 0 {
            self.current.push_str(text);
            return;
        }
        for (index, word) in text.split_ascii_whitespace().enumerate() {
            let space_before = index > 0 || text.starts_with(|c: char| c.is_ascii_whitespace());
            if space_before && !self.current.is_empty() && !self.current.ends_with([' ', '\n']) {
                self.current.push(' ');
            }
            self.current.push_str(word);
        }
        if text.ends_with(|c: char| c.is_ascii_whitespace())
            && !self.current.is_empty()
            && !self.current.ends_with([' ', '\n'])
        {
            self.current.push(' ');
        }
    }

    fn push_newline(&mut self) {
        let trimmed = self.current.trim_end_matches(' ').len();
        self.current.truncate(trimmed);
        self.current.push('\n');
    }

    /// Ends the current line unless the text already ends one.
    fn end_line(&mut self) {
        let trimmed = self.current.trim_end_matches(' ').len();
        self.current.truncate(trimmed);
        if !self.current.is_empty() && !self.current.ends_with('\n') {
            self.current.push('\n');
        }
    }

    fn start_heading(&mut self, level: u8) {
        if self.in_heading {
            self.end_heading();
        }
        self.close_section();
        self.in_heading = true;
        self.heading_level = level;
    }

    fn end_heading(&mut self) {
        if !std::mem::take(&mut self.in_heading) {
            return;
        }
        self.end_line();
        let heading = collapse_spaces(&self.current);
        if heading.is_empty() {
            // A heading with no text names nothing: its section goes on the previous one.
            if let Some(previous) = self.sections.pop() {
                let text = std::mem::replace(&mut self.current, previous.text);
                self.current_place = Some(previous.place);
                self.current.push_str(&text);
            }
            return;
        }
        if self.heading_level == 1 && self.first_h1.is_none() {
            self.first_h1 = Some(heading.clone());
        }
        self.current_place = Some(Place::Heading(heading));
    }

    fn close_section(&mut self) {
        self.end_line();
        let text = std::mem::take(&mut self.current);
        let place = self.current_place.take().unwrap_or(Place::Whole);
        self.sections.push(Section {
            from_scan: false,
            place,
            text,
        });
    }

    fn finish(mut self) -> (Option<String>, Vec<Section>) {
        self.end_heading();
        self.close_section();
        let sections = self
            .sections
            .into_iter()
            .filter(|section| !section.text.trim().is_empty())
            .collect();
        (self.title.or(self.first_h1), sections)
    }
}

impl TokenSink for VisibleText {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut page = self.page.borrow_mut();
        match token {
            Token::TagToken(tag) => match tag.kind {
                TagKind::StartTag if page.hidden.is_none() => return page.start_tag(&tag),
                TagKind::StartTag => {}
                TagKind::EndTag => {
                    if page.hidden.as_ref() == Some(&tag.name) {
                        page.hidden = None;
                    } else if page.hidden.is_none() {
                        page.end_tag(&tag);
                    }
                }
            },
            Token::CharacterTokens(text) => page.characters(&text),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

/// Elements a browser shows on lines of their own.
fn is_block(name: &str) -> bool {
    matches!(
        name,
        "p" | "div"
            | "li"
            | "ul"
            | "ol"
            | "dl"
            | "dt"
            | "dd"
            | "tr"
            | "table"
            | "thead"
            | "tbody"
            | "caption"
            | "section"
            | "article"
            | "aside"
            | "header"
            | "footer"
            | "nav"
            | "main"
            | "blockquote"
            | "figure"
            | "figcaption"
            | "hr"
            | "address"
            | "details"
            | "summary"
            | "form"
            | "fieldset"
            | "legend"
    )
}

fn collapse_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(html: &str) -> Vec<(Place, String)> {
        extract(html)
            .1
            .into_iter()
            .map(|s| (s.place, s.text))
            .collect()
    }

    #[test]
    fn visible_text_is_cut_at_headings() {
        let html = "<html><head><title>The  Guide</title><style>p{color:red}</style></head>\
            <body><p>Intro &amp; more</p><h1>Install</h1><p>Run <b>apt</b>\n  install.</p>\
            <script>var x = '<h2>no</h2>';</script><h2>Use &eacute;t&eacute;</h2><ul><li>one</li>\
            <li>two</li></ul><h3>A <em>b</em>c</h3></body></html>";
        let (title, _) = extract(html);
        assert_eq!(title.as_deref(), Some("The Guide"));
        assert_eq!(
            texts(html),
            [
                (Place::Whole, "Intro & more\n".to_owned()),
                (
                    Place::Heading("Install".into()),
                    "Install\nRun apt install.\n".to_owned()
                ),
                (
                    Place::Heading("Use été".into()),
                    "Use été\none\ntwo\n".to_owned()
                ),
                (Place::Heading("A bc".into()), "A bc\n".to_owned()),
            ]
        );
    }

    #[test]
    fn preformatted_text_keeps_its_spaces() {
        let sections = texts("<p>a</p><pre>x  =  1\n  y</pre><p>b</p>");
        assert_eq!(sections[0].1, "a\nx  =  1\n  y\nb\n");
    }

    #[test]
    fn self_closing_script_in_xhtml_hides_nothing() {
        let sections = texts("<head><script src='a.js'/></head><body><p>kept</p></body>");
        assert_eq!(sections[0].1, "kept\n");
    }

    #[test]
    fn an_empty_heading_joins_the_previous_section() {
        let sections = texts("<h1>A</h1><p>one</p><h2> </h2><p>two</p>");
        assert_eq!(sections.len(), 1);
        assert_eq!(sections[0].1, "A\none\ntwo\n");
    }

    #[test]
    fn the_declared_charset_is_found() {
        let page = b"<html><head><meta charset=\"windows-1251\"></head>";
        assert_eq!(declared_encoding(page), Some(encoding_rs::WINDOWS_1251));
        assert_eq!(declared_encoding(b"<p>no charset</p>"), None);
    }
}
