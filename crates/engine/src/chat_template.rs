//! The model's chat template (Jinja, as Hugging Face ships it), rendered with minijinja the way
//! transformers' `apply_chat_template` renders it: `trim_blocks` and `lstrip_blocks` on, Python
//! string methods available, `raise_exception`, a non-escaping `tojson` and `strftime_now`
//! (`template_date`).
//!
//! Hearth keeps an answer's reasoning in its text, `<think>…</think>answer`. A template that
//! reads an assistant turn's `thinking` (gpt-oss's harmony template) is given it that way,
//! the text after `</think>` as the content, as transformers' callers pass it; other templates
//! get the text whole (Qwen3's splits it itself). A template that reads `reasoning_effort`
//! (gpt-oss's) is given `"low"` when thinking is switched off.
//!
//! A template comes with a downloaded model, so it is outside input: every render runs within
//! [`limits`] (work, output size, nesting of blocks and of values), on a thread of its own with a
//! known stack, and [`check_chat_template`] refuses a model whose template goes past them before
//! the model is installed. `template_program` compiles the template with a check before every
//! store; `template_values` holds the checks and Hearth's own `tojson`.

use std::collections::BTreeMap;
use std::path::Path;

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, ErrorKind, Value};
use serde::{Deserialize, Serialize};

use crate::template_date;
use crate::template_program::{self, Program};
use crate::template_values::{limits, RenderGuard};
use crate::Error;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the assistant.
    System,
    /// The person.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The name templates see (`"system"`, `"user"`, `"assistant"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: String,
    /// Pictures given with it (user messages), checked and re-encoded by
    /// `hearth_chat::picture`. Only a backend that sees pictures takes them; the chat template
    /// never sees them (Hearth's engine has no vision encoder yet).
    #[serde(skip)]
    pub pictures: Vec<Picture>,
}

impl ChatMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
            pictures: Vec::new(),
        }
    }

    /// The same message with `pictures` given with it.
    pub fn with_pictures(mut self, pictures: Vec<Picture>) -> Self {
        self.pictures = pictures;
        self
    }
}

/// How a [`Picture`]'s bytes are encoded: Hearth re-encodes every picture it is given to one of
/// these two, which every vision server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PictureFormat {
    /// PNG (lossless: screenshots, drawings, anything with transparency).
    Png,
    /// JPEG (photos).
    Jpeg,
}

impl PictureFormat {
    /// The media type: `image/png` or `image/jpeg`.
    pub fn media_type(self) -> &'static str {
        match self {
            PictureFormat::Png => "image/png",
            PictureFormat::Jpeg => "image/jpeg",
        }
    }

    /// The usual file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            PictureFormat::Png => "png",
            PictureFormat::Jpeg => "jpg",
        }
    }
}

/// A picture given with a message: its encoded bytes (shared, so copies of a conversation do
/// not copy them) and its size in pixels.
#[derive(Clone, PartialEq, Eq)]
pub struct Picture {
    /// How `bytes` are encoded.
    pub format: PictureFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The encoded picture.
    pub bytes: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for Picture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Picture({} {}x{}, {} bytes)",
            self.format.media_type(),
            self.width,
            self.height,
            self.bytes.len()
        )
    }
}

/// A chat template (checked to compile) plus the special-token strings templates may print.
#[derive(Debug)]
pub struct ChatTemplate {
    /// The template source (also used to find the end-of-turn marker it writes).
    pub(crate) source: String,
    syntax: SyntaxConfig,
    special_tokens: BTreeMap<String, String>,
    /// The model it belongs to, as errors name it.
    model: String,
    /// The moment `strftime_now` writes (seconds since 1970, UTC); None for the clock's.
    fixed_time: Option<i64>,
}

impl ChatTemplate {
    /// Compiles `source`; `special_tokens` maps `bos_token`, `eos_token`, ... to their text.
    pub fn new(source: &str, special_tokens: BTreeMap<String, String>) -> Result<Self, String> {
        if source.len() > limits::SOURCE_BYTES {
            return Err(source_too_long(source.len()));
        }
        check_tag_tokens(source)?;
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| format!("{e:#}"))?;
        // Compiling recurses through the template's expressions: do it on the render stack.
        on_template_stack(|| template_program::compile(source, &syntax).map(drop))
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{e:#}"))?;
        Ok(ChatTemplate {
            source: source.to_owned(),
            syntax,
            special_tokens,
            model: "this model".to_owned(),
            fixed_time: None,
        })
    }

    /// The same template with `strftime_now` writing the moment `unix_seconds` (UTC) instead
    /// of the clock's: reproducible prompts, and tests that do not depend on the day.
    pub fn at_time(mut self, unix_seconds: i64) -> Self {
        self.fixed_time = Some(unix_seconds);
        self
    }

    /// Whether the template reads an assistant turn's `thinking` (see the module's note).
    fn reads_thinking(&self) -> bool {
        [".thinking", "\"thinking\"", "'thinking'"]
            .iter()
            .any(|spelling| self.source.contains(spelling))
    }

    /// Reads the template of a model folder: `chat_template.jinja` if present, else the
    /// `chat_template` of `tokenizer_config.json` (a string, or a list whose `default` entry is
    /// used). `Ok(None)` when the folder declares none. A template that goes past the
    /// [`limits`] on a small sample conversation is refused (see [`check_chat_template`]).
    pub fn from_dir(
        dir: &Path,
        tokenizer_config: Option<&serde_json::Value>,
    ) -> Result<Option<Self>, Error> {
        let model = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Self::read(dir, tokenizer_config, model)
    }

    /// [`ChatTemplate::from_dir`] with the model named `model` in errors.
    fn read(
        dir: &Path,
        tokenizer_config: Option<&serde_json::Value>,
        model: String,
    ) -> Result<Option<Self>, Error> {
        let special_tokens = special_token_strings(tokenizer_config);
        let Some((source, path)) = template_source(dir, tokenizer_config)? else {
            return Ok(None);
        };
        if source.len() > limits::SOURCE_BYTES {
            return Err(Error::ChatTemplateLimit {
                model,
                limit: source_too_long(source.len()),
            });
        }
        if let Err(limit) = check_tag_tokens(&source) {
            return Err(Error::ChatTemplateLimit { model, limit });
        }
        let mut template =
            ChatTemplate::new(&source, special_tokens).map_err(|reason| Error::Tokenizer {
                path,
                reason: format!("the chat template does not compile: {reason}"),
            })?;
        template.model = model;
        template.probe()?;
        Ok(Some(template))
    }

    /// Renders two small sample conversations: a template that goes past the [`limits`] even on
    /// those is refused. Other failures are not: a template may reject a conversation on
    /// purpose (a system turn, say) and still serve others.
    fn probe(&self) -> Result<(), Error> {
        let samples = [
            vec![ChatMessage::new(Role::User, "Hello!")],
            vec![
                ChatMessage::new(Role::System, "You are a helpful assistant."),
                ChatMessage::new(Role::User, "What is 2 + 2?"),
                ChatMessage::new(Role::Assistant, "4"),
                ChatMessage::new(Role::User, "And 3 + 3?"),
            ],
        ];
        for messages in &samples {
            if let Err(e @ Error::ChatTemplateLimit { .. }) = self.render(messages, true, None) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Renders `messages` as the model expects to read them.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        enable_thinking: Option<bool>,
    ) -> Result<String, Error> {
        self.render_measured(messages, add_generation_prompt, enable_thinking)
            .map(|(text, _)| text)
    }

    /// [`ChatTemplate::render`], with the fuel the render used and the fuel it had.
    fn render_measured(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        enable_thinking: Option<bool>,
    ) -> Result<(String, Fuel), Error> {
        let (message_count, text_bytes) = (messages.len(), messages_text_bytes(messages));
        let reads_thinking = self.reads_thinking();
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                let mut map = BTreeMap::new();
                map.insert("role".to_owned(), Value::from(m.role.as_str()));
                let split = match m.role {
                    Role::Assistant if reads_thinking => split_thinking(&m.content),
                    _ => None,
                };
                match split {
                    Some((thinking, answer)) => {
                        map.insert("thinking".to_owned(), Value::from(thinking));
                        map.insert("content".to_owned(), Value::from(answer));
                    }
                    None => {
                        map.insert("content".to_owned(), Value::from(m.content.clone()));
                    }
                }
                Value::from_object(map)
            })
            .collect();
        let mut ctx: BTreeMap<String, Value> = self
            .special_tokens
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        ctx.insert("messages".into(), Value::from(messages));
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        );
        if let Some(thinking) = enable_thinking {
            ctx.insert("enable_thinking".into(), Value::from(thinking));
        }
        // gpt-oss always reasons; the least it can is "low".
        if enable_thinking == Some(false) && self.source.contains("reasoning_effort") {
            ctx.insert("reasoning_effort".into(), Value::from("low"));
        }
        // The limits grow with the conversation.
        let budget = limits::BASE_FUEL
            .saturating_add(limits::FUEL_PER_MESSAGE.saturating_mul(message_count as u64))
            .saturating_add(limits::FUEL_PER_TEXT_BYTE.saturating_mul(text_bytes as u64));
        let output_limit = limits::BASE_OUTPUT_BYTES
            .saturating_add(limits::OUTPUT_PER_MESSAGE.saturating_mul(message_count))
            .saturating_add(limits::OUTPUT_PER_TEXT_BYTE.saturating_mul(text_bytes));
        let root = Value::from_object(ctx);
        let (text, used) = on_template_stack(|| self.run(root, budget, output_limit))??;
        let fuel = Fuel { used, budget };
        tracing::trace!(fuel.used, fuel.budget, "chat template rendered");
        Ok((text, fuel))
    }

    /// Compiles and renders the template with `root` as its context, within `fuel` and
    /// `output_limit`: the text and the fuel it used.
    fn run(&self, root: Value, fuel: u64, output_limit: usize) -> Result<(String, u64), Error> {
        let program: Program<'_> =
            template_program::compile(&self.source, &self.syntax).map_err(|e| {
                Error::ChatTemplate {
                    reason: format!("{e:#}"),
                }
            })?;
        let guard = RenderGuard::new(output_limit);
        let mut env = Environment::new();
        env.set_recursion_limit(limits::NESTING);
        env.set_fuel(Some(fuel));
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        let now = self.fixed_time.unwrap_or_else(template_date::now);
        env.add_function(
            "strftime_now",
            move |format: &str| -> Result<Value, minijinja::Error> {
                template_date::strftime(now, format)
                    .map(Value::from)
                    .map_err(|reason| minijinja::Error::new(ErrorKind::InvalidOperation, reason))
            },
        );
        guard.install(&mut env);
        let mut text = String::new();
        let rendered = minijinja::machinery::eval(
            &env,
            &program.instructions,
            root,
            &program.blocks,
            &mut minijinja::machinery::make_string_output(&mut text),
            AutoEscape::None,
        );
        match rendered {
            Ok((_, state)) => {
                let used = state.fuel_levels().map_or(0, |(consumed, _)| consumed);
                Ok((text, used))
            }
            Err(e) => Err(self.render_error(&e, guard.stopped())),
        }
    }

    /// A limit the render went past, in plain words (`stopped` when Hearth's own checks
    /// stopped it), or the template's own message.
    fn render_error(&self, e: &minijinja::Error, stopped: Option<String>) -> Error {
        let limit = stopped.or_else(|| match (e.kind(), e.detail()) {
            (ErrorKind::OutOfFuel, _) => Some(
                "it did far more work than any chat template needs (it loops without end or \
                 builds huge text)"
                    .to_owned(),
            ),
            (ErrorKind::InvalidOperation, Some("recursion limit exceeded")) => Some(format!(
                "it nests loops, macros or blocks more than {} levels deep",
                limits::NESTING
            )),
            _ => None,
        });
        match limit {
            Some(limit) => Error::ChatTemplateLimit {
                model: self.model.clone(),
                limit,
            },
            None => Error::ChatTemplate {
                reason: match e.detail() {
                    Some(detail) if e.kind() == ErrorKind::InvalidOperation => detail.to_owned(),
                    _ => format!("{e:#}"),
                },
            },
        }
    }
}

/// Checks the chat template of the model folder `dir` before the model is installed: it must
/// compile and render two small sample conversations within the [`limits`] every render runs
/// under. `model` is the name errors use. A folder without a template passes (it can still
/// complete raw prompts), and so does a template that merely rejects a sample (some refuse a
/// system turn on purpose).
///
/// `hearth import`, `hearth pull` and `hearth convert` call this (the first two through the
/// hub's model check), so that a model whose template would hang Hearth or fill the memory is
/// refused before it is registered, with a message naming the model.
pub fn check_chat_template(dir: &Path, model: &str) -> Result<(), Error> {
    let tokenizer_config = crate::json_file::read_json(&dir.join("tokenizer_config.json"))?;
    ChatTemplate::read(dir, tokenizer_config.as_ref(), model.to_owned()).map(drop)
}

/// A model folder's chat template, unchecked, and the file it came from: `chat_template.jinja`
/// if present, else the `chat_template` of `tokenizer_config.json` (a string, or a list whose
/// `default` entry is used). `Ok(None)` when the folder declares none. The one rule for where
/// a template is: loading reads it here, and so do model listings (the server's `/api/show`).
pub fn template_source(
    dir: &Path,
    tokenizer_config: Option<&serde_json::Value>,
) -> Result<Option<(String, std::path::PathBuf)>, Error> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        let text = std::fs::read_to_string(&jinja).map_err(|e| Error::Tokenizer {
            path: jinja.clone(),
            reason: e.to_string(),
        })?;
        return Ok(Some((text, jinja)));
    }
    let path = dir.join("tokenizer_config.json");
    let text = match tokenizer_config.and_then(|c| c.get("chat_template")) {
        Some(serde_json::Value::String(text)) => Some(text.as_str()),
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str()),
        _ => None,
    };
    Ok(text.map(|text| (text.to_owned(), path)))
}

/// The fuel one render used, out of its budget.
#[derive(Debug, Clone, Copy)]
struct Fuel {
    used: u64,
    budget: u64,
}

/// An assistant turn's text split into its reasoning and its answer when it starts with
/// `<think>` (white space before it allowed): the reasoning trimmed, and the answer after
/// `</think>` without the white space that leads it (all reasoning when `</think>` is missing,
/// an answer cut short while it reasoned).
fn split_thinking(content: &str) -> Option<(String, String)> {
    let rest = content.trim_start().strip_prefix("<think>")?;
    let (thinking, answer) = rest.split_once("</think>").unwrap_or((rest, ""));
    Some((thinking.trim().to_owned(), answer.trim_start().to_owned()))
}

/// Bytes of message text a render is given (its limits grow with it).
fn messages_text_bytes(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .fold(0usize, |sum, m| sum.saturating_add(m.content.len()))
}

/// `bos_token`, `eos_token`, `pad_token`, `unk_token` as text: tokenizer_config.json writes each
/// as a string or as an object with a `content` field.
fn special_token_strings(config: Option<&serde_json::Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for key in ["bos_token", "eos_token", "pad_token", "unk_token"] {
        let value = config.and_then(|c| c.get(key));
        let text = match value {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Object(o)) => {
                o.get("content").and_then(|c| c.as_str()).map(str::to_owned)
            }
            _ => None,
        };
        if let Some(text) = text {
            out.insert(key.to_owned(), text);
        }
    }
    out
}

/// The refusal of a template `bytes` long.
fn source_too_long(bytes: usize) -> String {
    format!(
        "it is {bytes} bytes long (at most {} KiB)",
        limits::SOURCE_BYTES >> 10
    )
}

/// Refuses a template with a tag of more than [`limits::TAG_TOKENS`] tokens, before minijinja
/// compiles it (see the limit). The count is lexical: a run of letters, digits and `_` is one
/// token, a string literal is one, any other character that is not white space is one.
/// Comments and `{% raw %}` blocks are skipped.
fn check_tag_tokens(source: &str) -> Result<(), String> {
    let bytes = source.as_bytes();
    let mut at = 0;
    while at + 1 < bytes.len() {
        let open = &bytes[at..at + 2];
        if open == b"{#" {
            at = find(bytes, at + 2, b"#}").map_or(bytes.len(), |end| end + 2);
            continue;
        }
        let close: &[u8] = match open {
            b"{{" => b"}}",
            b"{%" => b"%}",
            _ => {
                at += 1;
                continue;
            }
        };
        let (tokens, end) = tag_tokens(bytes, at + 2, close);
        if tokens > limits::TAG_TOKENS {
            let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
            return Err(format!(
                "the tag on line {line} holds more than {} tokens (real templates hold a few \
                 dozen); split its expression",
                limits::TAG_TOKENS
            ));
        }
        let body = source.get(at + 2..end).unwrap_or("");
        let word = body.trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        at = if open == b"{%" && word == "raw" {
            find(bytes, end, b"endraw").unwrap_or(bytes.len())
        } else {
            end + close.len()
        };
    }
    Ok(())
}

/// The tokens of the tag whose body starts at `from` (counted up to one past the limit), and
/// where its `close` stands (the end of the source when it is not closed).
fn tag_tokens(bytes: &[u8], from: usize, close: &[u8]) -> (usize, usize) {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let (mut at, mut tokens) = (from, 0);
    while at < bytes.len() && tokens <= limits::TAG_TOKENS {
        let b = bytes[at];
        if bytes[at..].starts_with(close) {
            return (tokens, at);
        }
        if b.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        tokens += 1;
        if b == b'\'' || b == b'"' {
            at += 1;
            while at < bytes.len() && bytes[at] != b {
                at += if bytes[at] == b'\\' { 2 } else { 1 };
            }
            at += 1;
        } else if word(b) {
            while at < bytes.len() && word(bytes[at]) {
                at += 1;
            }
        } else {
            at += 1;
        }
    }
    (tokens, at.min(bytes.len()))
}

/// Where `needle` first stands in `bytes` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
}

/// Runs `work` on a thread with a stack of [`limits::STACK_BYTES`], whatever the caller's
/// stack: how deep minijinja recurses is bounded by the limits, not by the caller.
fn on_template_stack<T: Send>(work: impl FnOnce() -> T + Send) -> Result<T, Error> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("chat-template".into())
            .stack_size(limits::STACK_BYTES)
            .spawn_scoped(scope, work)
            .map_err(|e| Error::ChatTemplate {
                reason: format!("cannot start the template thread: {e}"),
            })?;
        handle.join().map_err(|_| Error::ChatTemplate {
            reason: "the template renderer failed unexpectedly".to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(source: &str) -> ChatTemplate {
        let mut special = BTreeMap::new();
        special.insert("bos_token".to_owned(), "<s>".to_owned());
        ChatTemplate::new(source, special).expect("template compiles")
    }

    #[test]
    fn a_tag_of_too_many_tokens_is_refused_before_it_is_compiled() {
        // 100,000 links would keep minijinja's constant folding busy for minutes.
        let chain = format!("{{{{ 1{} }}}}", "~1".repeat(50_000));
        let err = ChatTemplate::new(&chain, BTreeMap::new()).expect_err("refused");
        assert!(err.contains("line 1 holds more than 4096 tokens"), "{err}");
        let near = format!("hi\n{{% set x = 1{} %}}{{{{ x }}}}", "~1".repeat(2000));
        assert!(ChatTemplate::new(&near, BTreeMap::new()).is_ok());
        let over = format!("hi\n\n{{% set x = 1{} %}}", "~1".repeat(2100));
        let err = ChatTemplate::new(&over, BTreeMap::new()).expect_err("refused");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn strings_comments_and_raw_blocks_are_not_counted_as_tokens() {
        let text = "a ~ ".repeat(5000);
        for source in [
            format!("{{{{ '{text}' ~ \"it's \\\" {text}\" }}}}"),
            format!("{{# {{{{ {text} }}}} #}}ok"),
            format!("{{%- raw -%}}{{{{ {text} }}}}{{%- endraw %}}ok"),
        ] {
            assert!(
                ChatTemplate::new(&source, BTreeMap::new()).is_ok(),
                "{source:.60}"
            );
        }
    }

    #[test]
    fn chatml_renders_with_generation_prompt() {
        let t = template(
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
             {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        );
        let text = t
            .render(&[ChatMessage::new(Role::User, "Hi")], true, None)
            .unwrap();
        assert_eq!(
            text,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn raise_exception_becomes_a_chat_template_error_with_its_message() {
        let t = template("{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}");
        let err = t
            .render(&[ChatMessage::new(Role::Assistant, "x")], false, None)
            .unwrap_err();
        assert!(err.to_string().contains("first must be user"), "{err}");
    }

    #[test]
    fn python_string_methods_and_special_tokens_are_available() {
        let t = template(
            "{{ bos_token }}{{ messages[0].content.split('</think>')[-1].lstrip('\\n') }}",
        );
        let text = t
            .render(
                &[ChatMessage::new(Role::User, "a</think>\n\nb")],
                false,
                None,
            )
            .unwrap();
        assert_eq!(text, "<s>b");
    }

    #[test]
    fn enable_thinking_is_undefined_unless_given() {
        let t = template(
            "{% if enable_thinking is defined %}{{ enable_thinking }}{% else %}unset{% endif %}",
        );
        assert_eq!(t.render(&[], false, None).unwrap(), "unset");
        assert_eq!(
            t.render(&[], false, Some(false)).unwrap(),
            "False",
            "as Jinja2 prints it"
        );
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let t = template("{{ {'a': [1, 'é<'], 'b': none} | tojson }}");
        assert_eq!(
            t.render(&[], false, None).unwrap(),
            r#"{"a": [1, "é<"], "b": null}"#
        );
    }

    #[test]
    fn tojson_with_an_indent_matches_python_json_dumps() {
        let t = template("{{ {'a': [1, 2.5], 'b': {}, 'c': []} | tojson(2) }}");
        assert_eq!(
            t.render(&[], false, None).unwrap(),
            "{\n  \"a\": [\n    1,\n    2.5\n  ],\n  \"b\": {},\n  \"c\": []\n}"
        );
    }

    #[test]
    fn values_as_deep_as_the_limit_are_stored_and_printed() {
        let depth = limits::VALUE_DEPTH;
        let source = format!(
            "{{% set ns = namespace(x=1) %}}{{% for i in range({depth}) %}}\
             {{% set ns.x = [ns.x] %}}{{% endfor %}}{{{{ ns.x | tojson }}}}"
        );
        let text = template(&source).render(&[], false, None).unwrap();
        assert_eq!(text, format!("{}1{}", "[".repeat(depth), "]".repeat(depth)));
        let one_more = source.replace(&format!("range({depth})"), &format!("range({})", depth + 1));
        let err = template(&one_more).render(&[], false, None).unwrap_err();
        assert!(matches!(err, Error::ChatTemplateLimit { .. }), "{err}");
    }

    #[test]
    fn a_flag_set_per_message_beside_a_long_list_stays_cheap() {
        // Only the assigned attribute is walked after `set ns.x`, not the whole namespace.
        let t = template(
            "{% set ns = namespace(all=messages, seen=0) %}{% for m in messages %}\
             {% set ns.seen = ns.seen + 1 %}{% endfor %}{{ ns.seen }}",
        );
        let messages = conversation(4_000, 10);
        let (text, fuel) = t.render_measured(&messages, false, None).unwrap();
        assert_eq!(text, "4000");
        assert!(fuel.used * 10 < fuel.budget, "{fuel:?}");
    }

    /// Alternating user and assistant turns (with a system turn first), `count` in all, each
    /// `bytes` long.
    fn conversation(count: usize, bytes: usize) -> Vec<ChatMessage> {
        let text = "word ".repeat(bytes / 5);
        let mut messages = vec![ChatMessage::new(Role::System, text.clone())];
        for i in 1..count {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            messages.push(ChatMessage::new(role, text.clone()));
        }
        messages
    }

    fn fixture_template(folder: &str) -> ChatTemplate {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/engine")
            .join(folder);
        let config = crate::json_file::read_json(&dir.join("tokenizer_config.json")).unwrap();
        ChatTemplate::from_dir(&dir, config.as_ref())
            .unwrap()
            .expect("the fixture has a template")
    }

    #[test]
    fn real_templates_use_a_small_fraction_of_the_limits() {
        for folder in ["qwen3-tokenizer", "tiny-llama", "harmony"] {
            let template = fixture_template(folder);
            // Many short turns, and a few as long as the app allows (100,000 characters).
            for (count, bytes) in [(1, 10), (4_000, 40), (9, 100_000)] {
                let messages = conversation(count, bytes);
                let (text, fuel) = template
                    .render_measured(&messages, true, Some(false))
                    .unwrap_or_else(|e| panic!("{folder}, {count} x {bytes} B: {e}"));
                eprintln!(
                    "{folder}: {count} messages of {bytes} B: fuel {} of {}, {} B out",
                    fuel.used,
                    fuel.budget,
                    text.len()
                );
                assert!(
                    fuel.used * 10 < fuel.budget,
                    "{folder} with {count} messages of {bytes} B used {} of {} fuel: the \
                     limits must leave real templates a wide margin",
                    fuel.used,
                    fuel.budget
                );
            }
        }
    }

    #[test]
    fn strftime_now_writes_the_given_moment_and_refuses_what_it_cannot_write() {
        let t = template("{{ strftime_now('%d %b %Y') }}").at_time(1_768_469_400);
        assert_eq!(t.render(&[], false, None).unwrap(), "15 Jan 2026");
        let err = template("{{ strftime_now('%Z') }}")
            .render(&[], false, None)
            .unwrap_err();
        assert!(
            err.to_string().contains("asks for the date as '%Z'"),
            "{err}"
        );
    }

    #[test]
    fn only_a_template_that_reads_thinking_gets_it_split_from_the_answer() {
        let answer = [ChatMessage::new(
            Role::Assistant,
            "<think>\nhmm\n</think>\n\nYes",
        )];
        let reads =
            template("{% for m in messages %}[{{ m.thinking }}|{{ m.content }}]{% endfor %}");
        assert_eq!(reads.render(&answer, false, None).unwrap(), "[hmm|Yes]");
        let whole = template("{% for m in messages %}[{{ m.content }}]{% endfor %}");
        assert_eq!(
            whole.render(&answer, false, None).unwrap(),
            "[<think>\nhmm\n</think>\n\nYes]"
        );
        // A user's text is never split.
        let user = [ChatMessage::new(Role::User, "<think>a</think>b")];
        assert_eq!(
            reads.render(&user, false, None).unwrap(),
            "[|<think>a</think>b]"
        );
    }

    #[test]
    fn thinking_off_asks_a_template_that_reads_reasoning_effort_for_low() {
        let t = template("{{ reasoning_effort | default('medium') }}");
        assert_eq!(t.render(&[], false, None).unwrap(), "medium");
        assert_eq!(t.render(&[], false, Some(true)).unwrap(), "medium");
        assert_eq!(t.render(&[], false, Some(false)).unwrap(), "low");
    }

    #[test]
    fn a_template_that_does_not_compile_is_an_error() {
        assert!(ChatTemplate::new("{% for %}", BTreeMap::new()).is_err());
    }
}
