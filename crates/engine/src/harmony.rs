//! gpt-oss's harmony format, read back: the ids a harmony model generates become the text
//! Hearth shows, `<think>reasoning</think>answer`, streamed as they come.
//!
//! A harmony model writes messages, each a header then a body:
//! `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…<|return|>`.
//! The header (the role after `<|start|>`, a recipient such as ` to=functions.f`, the channel
//! after `<|channel|>`, a content type after `<|constrain|>`) is never shown. The `analysis`
//! channel's text goes inside `<think>…</think>` (the UI folds it, as it folds Qwen3's
//! thinking); every other channel's text is the answer: `final`, and `commentary` too, shown
//! plainly (Hearth declares no tools, so commentary is a preamble meant for the reader; a tool
//! call a model writes anyway shows as its arguments' text, and its `<|call|>` ends the answer).
//! `<|return|>` and `<|call|>` end generation ([`HarmonyTokens::stop_ids`]); `<|end|>` only ends
//! a message, so it must not.
//!
//! A model is harmony when its vocabulary has harmony's header tokens ([`HarmonyTokens::find`]),
//! whatever its name. Malformed sequences never panic and lose no text: text outside any
//! message, or a header too long to be one, is shown as answer text.

use crate::tokenizer::{TextStream, TextTokenizer};
use crate::Error;

/// The longest header text read before it is taken for answer text: real headers
/// (`assistant to=functions.get_weather<|channel|>commentary <|constrain|>json`) hold under
/// 100 bytes.
const MAX_HEADER_BYTES: usize = 256;

/// The ids of harmony's special tokens in a vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarmonyTokens {
    /// `<|start|>`: a message's header begins (its role follows).
    pub start: u32,
    /// `<|end|>`: a message ends; more may follow.
    pub end: u32,
    /// `<|message|>`: the header ends, the body begins.
    pub message: u32,
    /// `<|channel|>`: the channel's name follows.
    pub channel: u32,
    /// `<|return|>`: the answer is done (a stop token).
    pub return_: Option<u32>,
    /// `<|call|>`: a tool call is done (a stop token).
    pub call: Option<u32>,
    /// `<|constrain|>`: the body's content type follows (part of the header).
    pub constrain: Option<u32>,
}

impl HarmonyTokens {
    /// Harmony's tokens in `tokenizer`'s vocabulary, if it speaks harmony: it has `<|start|>`,
    /// `<|end|>`, `<|message|>` and `<|channel|>`.
    pub fn find(tokenizer: &TextTokenizer) -> Option<Self> {
        let id = |token: &str| tokenizer.token_to_id(token);
        Some(HarmonyTokens {
            start: id("<|start|>")?,
            end: id("<|end|>")?,
            message: id("<|message|>")?,
            channel: id("<|channel|>")?,
            return_: id("<|return|>"),
            call: id("<|call|>"),
            constrain: id("<|constrain|>"),
        })
    }

    /// The ids that end a harmony answer: `<|return|>` and `<|call|>` (not `<|end|>`, which
    /// ends one message of several).
    pub fn stop_ids(&self) -> impl Iterator<Item = u32> {
        self.return_.into_iter().chain(self.call)
    }

    /// Whether `id` is one of the tokens that structure messages.
    fn structures(&self, id: u32) -> bool {
        [self.start, self.end, self.message, self.channel].contains(&id)
            || [self.return_, self.call, self.constrain].contains(&Some(id))
    }
}

/// Where the reader is in the generated messages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    /// In a header: its text so far, and where the channel's name starts in it (after
    /// `<|channel|>`) and ends (at `<|constrain|>`).
    Header {
        text: String,
        channel_from: Option<usize>,
        channel_to: Option<usize>,
    },
    /// In a message's body (whether it is reasoning is `HarmonyStream::in_think`).
    Body,
    /// After a message's `<|end|>`, before the next `<|start|>`.
    Between,
}

impl Place {
    fn header() -> Self {
        Place::Header {
            text: String::new(),
            channel_from: None,
            channel_to: None,
        }
    }
}

/// Generated ids of a harmony model to shown text, `<think>analysis</think>answer`.
pub struct HarmonyStream<'t> {
    tokens: HarmonyTokens,
    text: TextStream<'t>,
    place: Place,
    /// Whether a `<think>` was written and not yet closed.
    in_think: bool,
    /// Whether answer text was shown since the last reasoning: a message after it starts a
    /// new paragraph.
    answered: bool,
}

impl<'t> HarmonyStream<'t> {
    /// A reader of what follows a prompt ending in `<|start|>assistant` (as the template's
    /// generation prompt does): the first ids are the rest of a header.
    pub fn new(tokenizer: &'t TextTokenizer, tokens: HarmonyTokens) -> Self {
        HarmonyStream {
            tokens,
            text: tokenizer.stream(),
            place: Place::header(),
            in_think: false,
            answered: false,
        }
    }

    /// A reader of what follows `prompt`, which it reads from its last `<|start|>` on to know
    /// where the answer stands: in a header (a chat prompt), in a body (an answer continued:
    /// its text is shown at once, and a continued analysis is closed by a `</think>` when it
    /// ends), or outside harmony altogether (a plain completion, shown as it comes).
    pub fn after(
        tokenizer: &'t TextTokenizer,
        tokens: HarmonyTokens,
        prompt: &[u32],
    ) -> Result<Self, Error> {
        let mut stream = HarmonyStream::new(tokenizer, tokens);
        stream.place = Place::Body;
        let from = prompt
            .iter()
            .rposition(|&id| id == tokens.start)
            .or_else(|| prompt.iter().position(|&id| tokens.structures(id)));
        for &id in prompt.iter().skip(from.unwrap_or(prompt.len())) {
            stream.step(id)?;
        }
        // The prompt's part of a header (the role) is not the answer's to show.
        if let Place::Header {
            text,
            channel_from,
            channel_to,
        } = &mut stream.place
        {
            let from = channel_from.unwrap_or(text.len());
            text.replace_range(..from, "");
            *channel_from = channel_from.map(|_| 0);
            *channel_to = channel_to.map(|to| to - from);
        }
        Ok(stream)
    }

    /// The text to show after `id`, if any.
    pub fn step(&mut self, id: u32) -> Result<Option<String>, Error> {
        if self.tokens.structures(id) {
            return Ok(self.structure(id));
        }
        let Some(piece) = self.text.step(id)? else {
            return Ok(None);
        };
        Ok(match &mut self.place {
            Place::Header { text, .. } => {
                text.push_str(&piece);
                if text.len() <= MAX_HEADER_BYTES {
                    return Ok(None);
                }
                // Not a header after all: the model writes plain text.
                let text = std::mem::take(text);
                self.open(false, text)
            }
            Place::Body => {
                self.answered |= !self.in_think;
                Some(piece)
            }
            // Text outside any message: shown, not lost.
            Place::Between => self.open(false, piece),
        })
    }

    /// The text that closes what is open once generation has ended (a `</think>` of an
    /// answer cut short in its analysis, or a plain answer held as a header).
    pub fn finish(&mut self) -> Option<String> {
        let held = match std::mem::replace(&mut self.place, Place::Between) {
            // A header cut short is dropped; text with no header structure at all is the
            // model's plain answer.
            Place::Header {
                text,
                channel_from: None,
                ..
            } if !is_bare_header(&text) => Some(text),
            _ => None,
        };
        let mut out = String::new();
        if let Some(text) = held {
            out.extend(self.open(false, text));
        }
        if self.in_think {
            self.in_think = false;
            out.push_str("</think>");
        }
        Some(out).filter(|o| !o.is_empty())
    }

    /// What a structural token changes, and the text it makes shown.
    fn structure(&mut self, id: u32) -> Option<String> {
        let t = self.tokens;
        if id == t.start {
            self.place = Place::header();
        } else if id == t.channel {
            match &mut self.place {
                Place::Header {
                    text, channel_from, ..
                } => *channel_from = Some(text.len()),
                // A channel without `<|start|>` (or `<|end|>`) before it still opens a header.
                _ => {
                    self.place = Place::Header {
                        text: String::new(),
                        channel_from: Some(0),
                        channel_to: None,
                    }
                }
            }
        } else if Some(id) == t.constrain {
            if let Place::Header {
                text, channel_to, ..
            } = &mut self.place
            {
                channel_to.get_or_insert(text.len());
            }
        } else if id == t.message {
            if let Place::Header {
                text,
                channel_from,
                channel_to,
            } = &self.place
            {
                let channel = channel_from
                    .and_then(|from| text.get(from..channel_to.unwrap_or(text.len())))
                    .unwrap_or("");
                // "analysis", or "commentary to=functions.f": the first word names it.
                let thinking = channel.split_whitespace().next() == Some("analysis");
                return self.open(thinking, String::new());
            }
        } else if self.place == Place::Body {
            // `<|end|>`, `<|return|>`, `<|call|>`: the message is done.
            self.place = Place::Between;
        }
        None
    }

    /// Opens a body (the analysis channel's when `thinking`) whose first text is `text`: the
    /// text to show, with the `<think>` or `</think>` the change needs.
    fn open(&mut self, thinking: bool, text: String) -> Option<String> {
        self.place = Place::Body;
        let mut out = self.switch_to(thinking);
        if !thinking && self.answered {
            out.push_str("\n\n");
        }
        self.answered |= !thinking && !text.is_empty();
        out.push_str(&text);
        Some(out).filter(|o| !o.is_empty())
    }

    /// `<think>` or `</think>` when the text shown next is (`thinking`) or is not reasoning
    /// and the last was not or was; else nothing. Consecutive analysis messages share one.
    fn switch_to(&mut self, thinking: bool) -> String {
        if thinking == self.in_think {
            return String::new();
        }
        self.in_think = thinking;
        self.answered = false;
        match thinking {
            true => "<think>".to_owned(),
            false => "</think>".to_owned(),
        }
    }
}

/// Whether a header's text (before any `<|channel|>`) is what a header cut short holds: nothing,
/// a role (`assistant`), or a role and a recipient (`assistant to=functions.f`).
fn is_bare_header(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let role = words.next();
    let rest: Vec<&str> = words.collect();
    role.is_none_or(|r| ["assistant", "user", "system", "developer"].contains(&r))
        && rest.iter().all(|w| w.starts_with("to="))
}

/// Generated ids to the text shown: through [`HarmonyStream`] for a harmony model, else the
/// tokenizer's own stream (special tokens write nothing).
pub(crate) enum ShownText<'t> {
    Plain(TextStream<'t>),
    Harmony(HarmonyStream<'t>),
}

impl<'t> ShownText<'t> {
    /// The reader `tokenizer`'s model needs for what follows `prompt`.
    pub(crate) fn after(tokenizer: &'t TextTokenizer, prompt: &[u32]) -> Result<Self, Error> {
        Ok(match HarmonyTokens::find(tokenizer) {
            Some(tokens) => ShownText::Harmony(HarmonyStream::after(tokenizer, tokens, prompt)?),
            None => ShownText::Plain(tokenizer.stream()),
        })
    }

    /// The text to show after `id`, if any.
    pub(crate) fn step(&mut self, id: u32) -> Result<Option<String>, Error> {
        match self {
            ShownText::Plain(stream) => stream.step(id),
            ShownText::Harmony(stream) => stream.step(id),
        }
    }

    /// The text that closes what is open once generation has ended.
    pub(crate) fn finish(&mut self) -> Option<String> {
        match self {
            ShownText::Plain(_) => None,
            ShownText::Harmony(stream) => stream.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn tokenizer() -> TextTokenizer {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine/harmony/tokenizer.json");
        TextTokenizer::from_file(&path).unwrap()
    }

    /// The ids of `text`, its special tokens' spellings as those tokens.
    fn ids(tokenizer: &TextTokenizer, text: &str) -> Vec<u32> {
        tokenizer.encode(text, false).unwrap()
    }

    /// The pieces shown for `ids`, the last one what `finish` adds (if anything).
    fn pieces(tokenizer: &TextTokenizer, ids: &[u32]) -> Vec<String> {
        let tokens = HarmonyTokens::find(tokenizer).unwrap();
        let mut stream = HarmonyStream::new(tokenizer, tokens);
        let mut out: Vec<String> = ids
            .iter()
            .filter_map(|&id| stream.step(id).unwrap())
            .collect();
        out.extend(stream.finish());
        out
    }

    /// The text shown for the generated text `generated` (special tokens spelled out).
    fn shown(generated: &str) -> String {
        let tokenizer = tokenizer();
        pieces(&tokenizer, &ids(&tokenizer, generated)).concat()
    }

    #[test]
    fn the_fixture_spells_harmony_tokens_at_gpt_oss_ids() {
        let tokenizer = tokenizer();
        let found = HarmonyTokens::find(&tokenizer).unwrap();
        assert_eq!(
            found,
            HarmonyTokens {
                start: 200006,
                end: 200007,
                message: 200008,
                channel: 200005,
                return_: Some(200002),
                call: Some(200012),
                constrain: Some(200003),
            }
        );
        assert_eq!(found.stop_ids().collect::<Vec<_>>(), [200002, 200012]);
        let sequence = ids(&tokenizer, "<|channel|>analysis<|message|>");
        assert_eq!(sequence.first(), Some(&200005));
        assert_eq!(sequence.last(), Some(&200008));
    }

    #[test]
    fn a_vocabulary_without_harmony_tokens_is_not_harmony() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine/qwen3-tokenizer/tokenizer.json");
        let qwen3 = TextTokenizer::from_file(&path).unwrap();
        assert_eq!(HarmonyTokens::find(&qwen3), None);
        let plain = ShownText::after(&qwen3, &[]).unwrap();
        assert!(matches!(plain, ShownText::Plain(_)));
        let gpt_oss = tokenizer();
        let harmony = ShownText::after(&gpt_oss, &[]).unwrap();
        assert!(matches!(harmony, ShownText::Harmony(_)));
    }

    #[test]
    fn analysis_is_thinking_and_final_is_the_answer() {
        assert_eq!(
            shown(
                "<|channel|>analysis<|message|>User asks 2+2. It is 4.<|end|>\
                 <|start|>assistant<|channel|>final<|message|>The answer is **4**.<|return|>"
            ),
            "<think>User asks 2+2. It is 4.</think>The answer is **4**."
        );
        assert_eq!(shown("<|channel|>final<|message|>Hi!<|return|>"), "Hi!");
    }

    #[test]
    fn text_is_shown_as_it_comes_not_at_the_end() {
        let tokenizer = tokenizer();
        let sequence = ids(
            &tokenizer,
            "<|channel|>analysis<|message|>a b c<|end|><|start|>assistant<|channel|>final<|message|>d e f",
        );
        let tokens = HarmonyTokens::find(&tokenizer).unwrap();
        let mut stream = HarmonyStream::new(&tokenizer, tokens);
        let mut after_each = Vec::new();
        for &id in &sequence {
            after_each.push(stream.step(id).unwrap().unwrap_or_default());
        }
        // `<|message|>` opens the thinking at once, each token then shows its own text.
        let opened = after_each
            .iter()
            .position(|p| p.starts_with("<think>"))
            .unwrap();
        assert_eq!(sequence[opened], 200008);
        assert_eq!(after_each[opened..opened + 2], ["<think>", "a"]);
        assert_eq!(after_each.last().unwrap(), "f");
        assert_eq!(stream.finish(), None);
        assert_eq!(after_each.concat(), "<think>a b c</think>d e f");
    }

    #[test]
    fn a_stream_stopped_in_its_analysis_closes_its_thinking() {
        assert_eq!(
            shown("<|channel|>analysis<|message|>Hmm, the user wants"),
            "<think>Hmm, the user wants</think>"
        );
        // Cut in the next header: the header is never shown.
        assert_eq!(
            shown("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>fin"),
            "<think>x</think>"
        );
        assert_eq!(
            shown("<|channel|>analysis<|message|>x<|end|><|start|>assistant"),
            "<think>x</think>"
        );
        assert_eq!(shown("<|channel|>anal"), "");
        assert_eq!(shown(""), "");
    }

    #[test]
    fn consecutive_analysis_messages_share_one_thinking_block() {
        assert_eq!(
            shown(
                "<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis\
                 <|message|>two<|end|><|start|>assistant<|channel|>final<|message|>done"
            ),
            "<think>onetwo</think>done"
        );
    }

    #[test]
    fn commentary_and_tool_calls_are_shown_plainly() {
        assert_eq!(
            shown(
                "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant\
                 <|channel|>commentary<|message|>Let me look that up.<|end|><|start|>assistant\
                 <|channel|>final<|message|>It is sunny."
            ),
            "<think>Need weather.</think>Let me look that up.\n\nIt is sunny."
        );
        // A tool call (Hearth declares no tools): the header, recipient and content type are
        // not shown, the arguments are; `<|call|>` ends the answer.
        assert_eq!(
            shown(
                "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant to=functions.get_weather\
                 <|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"
            ),
            "<think>Call it.</think>{\"city\":\"Paris\"}"
        );
        assert_eq!(
            shown("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>"),
            "{}"
        );
    }

    #[test]
    fn a_plain_answer_without_harmony_tokens_is_shown_whole() {
        assert_eq!(shown("Just plain text."), "Just plain text.");
        let long = "A long plain answer that goes on. ".repeat(20);
        let tokenizer = tokenizer();
        let shown_pieces = pieces(&tokenizer, &ids(&tokenizer, &long));
        assert_eq!(shown_pieces.concat(), long);
        assert!(
            shown_pieces.len() > 100,
            "shown as it comes once it is no header"
        );
    }

    #[test]
    fn malformed_sequences_lose_no_text() {
        for (generated, expected) in [
            // A body with no channel, text after `<|end|>` without `<|start|>`.
            ("<|message|>hello", "hello"),
            ("<|channel|>final<|message|>A<|end|>B", "A\n\nB"),
            // An unknown channel is answer text.
            ("<|channel|>weird<|message|>text", "text"),
            // A channel without `<|end|><|start|>` before it.
            (
                "<|channel|>analysis<|message|>x<|channel|>final<|message|>y",
                "<think>x</think>y",
            ),
            // Stray and repeated structure tokens.
            (
                "<|end|><|end|><|start|><|start|><|channel|>final<|message|><|message|>z",
                "z",
            ),
            ("<|return|><|constrain|><|call|>", ""),
            // Text before `<|channel|>` is a header's role or recipient: never shown.
            ("assistant <|channel|>final<|message|>there", "there"),
        ] {
            assert_eq!(shown(generated), expected, "{generated}");
        }
    }

    #[test]
    fn a_character_split_across_tokens_is_shown_whole() {
        // Byte-level tokens: "é" and "日" are written as 2 and 3 tokens.
        assert_eq!(
            shown("<|channel|>analysis<|message|>café<|end|><|start|>assistant<|channel|>final<|message|>日本"),
            "<think>café</think>日本"
        );
    }

    /// What is shown after the prompt `prompt` for the generated text `generated` (special
    /// tokens spelled out in both), piece by piece.
    fn shown_after(prompt: &str, generated: &str) -> Vec<String> {
        let tokenizer = tokenizer();
        let tokens = HarmonyTokens::find(&tokenizer).unwrap();
        let prompt = ids(&tokenizer, prompt);
        let mut stream = HarmonyStream::after(&tokenizer, tokens, &prompt).unwrap();
        let mut out: Vec<String> = ids(&tokenizer, generated)
            .into_iter()
            .filter_map(|id| stream.step(id).unwrap())
            .collect();
        out.extend(stream.finish());
        out
    }

    #[test]
    fn the_prompt_says_where_the_answer_stands() {
        let chat = "<|start|>user<|message|>Hi<|end|><|start|>assistant";
        let generated = "<|channel|>analysis<|message|>a<|end|><|start|>assistant\
                         <|channel|>final<|message|>b";
        assert_eq!(shown_after(chat, generated).concat(), shown(generated));
        assert_eq!(shown_after(chat, "Plain.").concat(), "Plain.");
        // A plain completion: no harmony in the prompt, text shown at once.
        assert_eq!(shown_after("Once upon", " a time")[0], " ");
        assert_eq!(shown_after("", "text").concat(), "text");
        // An answer continued in its final channel: shown at once, no header expected.
        let cut_answer = "<|start|>assistant<|channel|>final<|message|>The answer";
        assert_eq!(shown_after(cut_answer, " is 4")[0], " ");
        assert_eq!(shown_after(cut_answer, " is 4<|return|>").concat(), " is 4");
        // Continued in its analysis (already shown inside `<think>`): closed when it ends.
        let cut_thinking = "<|start|>assistant<|channel|>analysis<|message|>Hmm";
        let more = " ok<|end|><|start|>assistant<|channel|>final<|message|>Yes";
        assert_eq!(shown_after(cut_thinking, more).concat(), " ok</think>Yes");
        // Cut inside a header: the channel's name read on from the prompt.
        let cut_header = "<|start|>assistant<|channel|>anal";
        let rest = "ysis<|message|>x";
        assert_eq!(shown_after(cut_header, rest).concat(), "<think>x</think>");
    }

    /// Any sequence of the fixture's ids: no panic, and the thinking block is closed.
    #[test]
    fn random_sequences_never_panic_and_close_their_thinking() {
        let tokenizer = tokenizer();
        let vocab: Vec<u32> = (0..300).chain(199_998..=200_012).collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let len = (state % 40) as usize;
            let sequence: Vec<u32> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    vocab[(state % vocab.len() as u64) as usize]
                })
                .collect();
            let text = pieces(&tokenizer, &sequence).concat();
            assert_eq!(
                text.matches("<think>").count(),
                text.matches("</think>").count(),
                "{sequence:?}: {text:?}"
            );
        }
    }
}
