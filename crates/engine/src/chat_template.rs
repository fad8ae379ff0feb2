//! The model's chat template (Jinja, as Hugging Face ships it), rendered with minijinja the way
//! transformers' `apply_chat_template` renders it: `trim_blocks` and `lstrip_blocks` on, Python
//! string methods available, `raise_exception` and a non-escaping `tojson`.

use std::collections::BTreeMap;
use std::path::Path;

use minijinja::{Environment, ErrorKind, Value};
use serde::{Deserialize, Serialize};

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
}

impl ChatMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        ChatMessage {
            role,
            content: content.into(),
        }
    }
}

/// A compiled chat template plus the special-token strings templates may print.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The template source (used to find the end-of-turn marker it writes).
    pub(crate) source: String,
    special_tokens: BTreeMap<String, String>,
}

impl ChatTemplate {
    /// Compiles `source`; `special_tokens` maps `bos_token`, `eos_token`, ... to their text.
    pub fn new(source: &str, special_tokens: BTreeMap<String, String>) -> Result<Self, String> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| format!("{e:#}"))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<Value, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_filter("tojson", tojson);
        env.add_template_owned("chat", source.to_owned())
            .map_err(|e| format!("{e:#}"))?;
        Ok(ChatTemplate {
            env,
            source: source.to_owned(),
            special_tokens,
        })
    }

    /// Reads the template of a model folder: `chat_template.jinja` if present, else the
    /// `chat_template` of `tokenizer_config.json` (a string, or a list whose `default` entry is
    /// used). `Ok(None)` when the folder declares none.
    pub fn from_dir(
        dir: &Path,
        tokenizer_config: Option<&serde_json::Value>,
    ) -> Result<Option<Self>, Error> {
        let special_tokens = special_token_strings(tokenizer_config);
        let jinja = dir.join("chat_template.jinja");
        let (source, path) = if jinja.is_file() {
            let text = std::fs::read_to_string(&jinja).map_err(|e| Error::Tokenizer {
                path: jinja.clone(),
                reason: e.to_string(),
            })?;
            (text, jinja)
        } else {
            let path = dir.join("tokenizer_config.json");
            match tokenizer_config.and_then(|c| c.get("chat_template")) {
                Some(serde_json::Value::String(text)) => (text.clone(), path),
                Some(serde_json::Value::Array(list)) => {
                    let named = |name: &str| {
                        list.iter()
                            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(name))
                            .and_then(|t| t.get("template")?.as_str())
                    };
                    match named("default") {
                        Some(text) => (text.to_owned(), path),
                        None => return Ok(None),
                    }
                }
                _ => return Ok(None),
            }
        };
        ChatTemplate::new(&source, special_tokens)
            .map(Some)
            .map_err(|reason| Error::Tokenizer {
                path,
                reason: format!("the chat template does not compile: {reason}"),
            })
    }

    /// Renders `messages` as the model expects to read them.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        enable_thinking: Option<bool>,
    ) -> Result<String, Error> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                let mut map = BTreeMap::new();
                map.insert("role".to_owned(), Value::from(m.role.as_str()));
                map.insert("content".to_owned(), Value::from(m.content.clone()));
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
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| Error::ChatTemplate {
                reason: format!("{e:#}"),
            })?;
        template
            .render(Value::from_object(ctx))
            .map_err(|e| Error::ChatTemplate {
                reason: render_error(&e),
            })
    }
}

fn render_error(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(detail) if e.kind() == ErrorKind::InvalidOperation => detail.to_owned(),
        _ => format!("{e:#}"),
    }
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

/// Python's `json.dumps(value, ensure_ascii=False)` (with `indent=` when given), as transformers'
/// template environment defines `tojson`; minijinja's own escapes HTML characters.
fn tojson(value: &Value, indent: Option<usize>) -> Result<Value, minijinja::Error> {
    let json = to_json(value);
    let text = match indent {
        None => python_compact(&json),
        Some(n) => {
            let indent = vec![b' '; n];
            let mut buf = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&indent);
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
            json.serialize(&mut ser)
                .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
            String::from_utf8(buf).unwrap_or_default()
        }
    };
    Ok(Value::from_safe_string(text))
}

/// Compact JSON with Python's default separators (`", "` and `": "`).
fn python_compact(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(python_compact).collect();
            format!("[{}]", parts.join(", "))
        }
        serde_json::Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        serde_json::Value::from(k.as_str()),
                        python_compact(v)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

fn to_json(value: &Value) -> serde_json::Value {
    use minijinja::value::ValueKind;
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => serde_json::Value::Null,
        ValueKind::Bool => serde_json::Value::Bool(value.is_true()),
        ValueKind::Number => {
            if let Ok(i) = i64::try_from(value.clone()) {
                serde_json::Value::from(i)
            } else {
                f64::try_from(value.clone())
                    .map_or(serde_json::Value::Null, serde_json::Value::from)
            }
        }
        ValueKind::String => {
            serde_json::Value::String(value.as_str().unwrap_or_default().to_owned())
        }
        ValueKind::Seq | ValueKind::Iterable => serde_json::Value::Array(
            value
                .try_iter()
                .map(|it| it.map(|v| to_json(&v)).collect())
                .unwrap_or_default(),
        ),
        ValueKind::Map => {
            let mut map = serde_json::Map::new();
            if let Ok(keys) = value.try_iter() {
                for key in keys {
                    let item = value.get_item(&key).unwrap_or_default();
                    map.insert(key.to_string(), to_json(&item));
                }
            }
            serde_json::Value::Object(map)
        }
        _ => serde_json::Value::String(value.to_string()),
    }
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
    fn a_template_that_does_not_compile_is_an_error() {
        assert!(ChatTemplate::new("{% for %}", BTreeMap::new()).is_err());
    }
}
