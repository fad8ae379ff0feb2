//! The checks every value of a chat template passes through, one [`RenderGuard`] per render:
//! each value the template stores (see `template_program`) or prints is walked first and
//! refused past [`limits::VALUE_DEPTH`] levels of nesting, and the walk is paid for in fuel;
//! all output (printed values and raw text alike) counts against one output limit; Hearth's own
//! `tojson` writes into a buffer that stops at that limit; `str.format` widths and `tojson`
//! indents are checked before anything is allocated; and a render may make only so many
//! namespaces. When one of these stops a render, the guard remembers which, so the render ends
//! with the same [`Error::ChatTemplateLimit`](crate::Error::ChatTemplateLimit) as minijinja's
//! own fuel and recursion limits.
//!
//! The [`limits`] themselves live here, beside the guard that enforces most of them; the chat
//! template applies the others (fuel, nesting, source size, tag tokens, the render's stack).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minijinja::value::{ValueKind, ValueOrKwargs};
use minijinja::{Environment, Error, ErrorKind, Output, State, Value};

use crate::template_program::{NAMESPACE_CHECK, NAMESPACE_REMEMBER, STORE_CHECK};

/// The bounds every render runs within. Each is far above what a real template needs for the
/// conversation at hand (the Qwen3 template, with the largest conversation a context holds, uses
/// a small fraction: see chat_template's tests), and far below what would hang Hearth or exhaust memory.
pub mod limits {
    /// Work any render may do, in minijinja's fuel: one per instruction, plus one per 64 bytes
    /// of text or list slots a template makes. Bounds time (about a second on a laptop) and the
    /// memory a template can fill (64 bytes per fuel).
    pub const BASE_FUEL: u64 = 2_000_000;
    /// More work per message of the conversation.
    pub const FUEL_PER_MESSAGE: u64 = 1_000;
    /// More work per byte of message text (so that 64 bytes of data may be made per byte given).
    pub const FUEL_PER_TEXT_BYTE: u64 = 1;
    /// Output any render may write, in bytes.
    pub const BASE_OUTPUT_BYTES: usize = 1 << 20;
    /// More output per byte of message text.
    pub const OUTPUT_PER_TEXT_BYTE: usize = 4;
    /// More output per message (role markers, turn separators).
    pub const OUTPUT_PER_MESSAGE: usize = 1024;
    /// How deep loops, macros and blocks may nest (minijinja's default is 500).
    pub const NESTING: usize = 64;
    /// How deep a value a template stores or prints may nest: lists in lists, maps in maps.
    /// Real templates nest a tool's JSON schema a dozen levels at most.
    pub const VALUE_DEPTH: usize = 128;
    /// Namespaces one render may make (real templates make one or two).
    pub const NAMESPACES: usize = 64;
    /// The widest `indent` Hearth's `tojson` takes.
    pub const TOJSON_INDENT: usize = 16;
    /// The largest width or precision a `str.format` field may ask for.
    pub const FORMAT_WIDTH: u64 = 4096;
    /// The longest template source, in bytes (real ones are a few KiB; the longest known,
    /// with tool-use sections, about 20 KiB).
    pub const SOURCE_BYTES: usize = 256 << 10;
    /// The most tokens one `{{ … }}` or `{% … %}` tag may hold (a string literal is one).
    /// minijinja's compiler folds constant expressions in time that grows with about the cube
    /// of their length: a chain of 1,000 `~` compiles in under a millisecond, one of 125,000
    /// runs for minutes. Real tags hold a few dozen tokens.
    pub const TAG_TOKENS: usize = 4096;
    /// The stack of the thread each compile and render runs on. The limits above bound how
    /// deep minijinja recurses (through values, expressions and nested blocks) to well within
    /// it, whatever thread calls the render (a server's worker stack may be 2 MiB).
    pub const STACK_BYTES: usize = 64 << 20;
}

/// Items of a value the walk visits per unit of fuel it charges. One, as an instruction costs:
/// a walk through a lazy list (`a + b`, nested) takes as long as running an instruction.
const ITEMS_PER_FUEL: u64 = 1;
/// Bytes of `tojson` output per unit of fuel it charges.
const JSON_BYTES_PER_FUEL: usize = 16;

/// What one render may still do, shared by the checks it calls.
pub(crate) struct RenderGuard {
    /// Output the render may still write, in bytes.
    output_left: AtomicUsize,
    /// Its whole output limit, for messages.
    output_limit: usize,
    /// Namespaces made so far.
    namespaces: AtomicUsize,
    /// The namespace being assigned to (between `SetAttr`'s two checks).
    assigned: Mutex<Option<Value>>,
    /// Which limit stopped the render, in plain words, when one of these checks did.
    stopped: Mutex<Option<String>>,
}

impl RenderGuard {
    /// A guard for a render that may write `output_limit` bytes.
    pub(crate) fn new(output_limit: usize) -> Arc<Self> {
        Arc::new(RenderGuard {
            output_left: AtomicUsize::new(output_limit),
            output_limit,
            namespaces: AtomicUsize::new(0),
            assigned: Mutex::new(None),
            stopped: Mutex::new(None),
        })
    }

    /// The limit that stopped the render, if one of these checks did.
    pub(crate) fn stopped(&self) -> Option<String> {
        lock(&self.stopped).clone()
    }

    /// Records `limit` as what stopped the render and returns the error that stops it.
    fn stop(&self, limit: String) -> Error {
        let error = Error::new(ErrorKind::InvalidOperation, limit.clone());
        lock(&self.stopped).get_or_insert(limit);
        error
    }

    /// Installs the checks in `env`: the functions `template_program` calls, the formatter,
    /// `namespace`, `tojson` and the Python string methods.
    pub(crate) fn install(self: &Arc<Self>, env: &mut Environment<'_>) {
        let guard = self.clone();
        env.add_function(STORE_CHECK, move |state: &State, value: Value| {
            guard.walk(state, &value)?;
            Ok(value)
        });
        let guard = self.clone();
        env.add_function(NAMESPACE_REMEMBER, move |namespace: Value| {
            *lock(&guard.assigned) = Some(namespace.clone());
            Ok(namespace)
        });
        let guard = self.clone();
        env.add_function(NAMESPACE_CHECK, move |state: &State, name: &str| {
            if let Some(namespace) = lock(&guard.assigned).take() {
                guard.walk(state, &namespace.get_attr(name)?)?;
            }
            Ok(Value::UNDEFINED)
        });
        let guard = self.clone();
        env.add_function(
            "namespace",
            move |defaults: Option<ValueOrKwargs>| -> Result<Value, Error> {
                if guard.namespaces.fetch_add(1, Ordering::Relaxed) >= limits::NAMESPACES {
                    return Err(guard.stop(format!(
                        "it made more than {} namespaces",
                        limits::NAMESPACES
                    )));
                }
                minijinja::functions::namespace(defaults)
            },
        );
        let guard = self.clone();
        env.set_formatter(move |out, state, value| guard.print(out, state, value));
        let guard = self.clone();
        env.add_filter(
            "tojson",
            move |state: &State, value: &Value, indent: Option<usize>| {
                guard.tojson(state, value, indent)
            },
        );
        let guard = self.clone();
        env.set_unknown_method_callback(move |state, value, method, args| {
            if method == "format" {
                if let Some(text) = value.as_str() {
                    guard.check_format_widths(text)?;
                }
            }
            minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
        });
    }

    /// Walks `value`, refusing it past [`limits::VALUE_DEPTH`] levels, and charges the items
    /// it visits (stopping when the fuel would run out). Returns the bytes of text it holds.
    fn walk(&self, state: &State, value: &Value) -> Result<usize, Error> {
        let fuel_left = state.fuel_levels().map_or(u64::MAX, |(_, left)| left);
        let mut walk = Walk {
            items: 0,
            item_limit: fuel_left.saturating_mul(ITEMS_PER_FUEL),
            text_bytes: 0,
        };
        let result = walk.visit(value, 0);
        state.consume_fuel(walk.items / ITEMS_PER_FUEL)?;
        match result {
            Ok(()) => Ok(walk.text_bytes),
            Err(Stop::TooDeep) => Err(self.stop(format!(
                "it builds values nested more than {} levels deep",
                limits::VALUE_DEPTH
            ))),
            // More items than the fuel left pays for: charge what would run it out.
            Err(Stop::TooBig) => Err(state
                .consume_fuel(fuel_left.saturating_add(1))
                .err()
                .unwrap_or_else(|| Error::from(ErrorKind::OutOfFuel))),
        }
    }

    /// Takes `bytes` of output from what is left, or stops the render.
    fn take_output(&self, bytes: usize) -> Result<(), Error> {
        let taken = self
            .output_left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(bytes)
            });
        taken.map(drop).map_err(|_| {
            self.stop(format!(
                "it wrote more than {} bytes for this conversation",
                self.output_limit
            ))
        })
    }

    /// The formatter: every printed value and all raw text goes through here.
    fn print(&self, out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
        if let Some(text) = value.as_str() {
            self.take_output(text.len())?;
            return out
                .write_str(text)
                .map_err(|_| Error::from(ErrorKind::WriteFailure));
        }
        // A container prints at least its text and a byte per item: refuse early what cannot
        // fit, then print into a buffer and count what it really takes.
        let text_bytes = self.walk(state, value)?;
        let left = self.output_left.load(Ordering::Relaxed);
        if text_bytes > left {
            self.take_output(text_bytes)?;
        }
        let mut text = String::new();
        minijinja::escape_formatter(
            &mut minijinja::machinery::make_string_output(&mut text),
            state,
            value,
        )?;
        self.take_output(text.len())?;
        out.write_str(&text)
            .map_err(|_| Error::from(ErrorKind::WriteFailure))
    }

    /// Python's `json.dumps(value, ensure_ascii=False)` (with `indent=` when given), as
    /// transformers' template environment defines `tojson` (minijinja's own escapes HTML
    /// characters), bounded in depth, indent and size.
    fn tojson(&self, state: &State, value: &Value, indent: Option<usize>) -> Result<Value, Error> {
        if let Some(n) = indent.filter(|&n| n > limits::TOJSON_INDENT) {
            return Err(self.stop(format!(
                "it asked tojson for an indent of {n} spaces (at most {})",
                limits::TOJSON_INDENT
            )));
        }
        let fuel_left = state.fuel_levels().map_or(u64::MAX, |(_, left)| left);
        let by_fuel = usize::try_from(fuel_left)
            .unwrap_or(usize::MAX)
            .saturating_mul(JSON_BYTES_PER_FUEL);
        let mut json = Json {
            text: String::new(),
            indent,
            limit: self.output_limit.min(by_fuel),
        };
        let result = json.value(value, 0);
        state.consume_fuel((json.text.len() / JSON_BYTES_PER_FUEL) as u64)?;
        match result {
            Ok(()) => Ok(Value::from_safe_string(json.text)),
            Err(Stop::TooDeep) => Err(self.stop(format!(
                "it builds values nested more than {} levels deep",
                limits::VALUE_DEPTH
            ))),
            Err(Stop::TooBig) if json.limit < self.output_limit => Err(state
                .consume_fuel(fuel_left.saturating_add(1))
                .err()
                .unwrap_or_else(|| Error::from(ErrorKind::OutOfFuel))),
            Err(Stop::TooBig) => Err(self.stop(format!(
                "its tojson wrote more than {} bytes for this conversation",
                self.output_limit
            ))),
        }
    }

    /// Refuses a `str.format` string asking for a width or precision past
    /// [`limits::FORMAT_WIDTH`]: minijinja would allocate it before charging any fuel.
    fn check_format_widths(&self, format: &str) -> Result<(), Error> {
        match largest_format_number(format) {
            Some(n) if n > limits::FORMAT_WIDTH => Err(self.stop(format!(
                "it asked str.format for a width of {n} (at most {})",
                limits::FORMAT_WIDTH
            ))),
            _ => Ok(()),
        }
    }
}

/// The lock's data, also after a panic elsewhere (the data are plain values).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a walk stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Nested past [`limits::VALUE_DEPTH`].
    TooDeep,
    /// More than the walk may visit or write.
    TooBig,
}

/// A walk over a value's items, counting them and its text.
struct Walk {
    items: u64,
    item_limit: u64,
    text_bytes: usize,
}

impl Walk {
    fn visit(&mut self, value: &Value, depth: usize) -> Result<(), Stop> {
        self.items += 1;
        if self.items > self.item_limit {
            return Err(Stop::TooBig);
        }
        if let Some(text) = value.as_str() {
            self.text_bytes = self.text_bytes.saturating_add(text.len());
            return Ok(());
        }
        // A list longer than what is left is refused before it is read.
        let len = value.as_object().and_then(|_| value.len()).unwrap_or(0);
        if self.items.saturating_add(len as u64) > self.item_limit {
            return Err(Stop::TooBig);
        }
        match children(value) {
            Children::None => Ok(()),
            _ if depth >= limits::VALUE_DEPTH => Err(Stop::TooDeep),
            Children::Items(mut items) => items.try_for_each(|v| self.visit(&v, depth + 1)),
            Children::Pairs(mut pairs) => pairs.try_for_each(|(k, v)| {
                self.visit(&k, depth + 1)?;
                self.visit(&v, depth + 1)
            }),
        }
    }
}

/// What a value holds, as the walks see it: its items or entries, read one at a time so that
/// a walk can stop early in a huge (lazy) list.
enum Children {
    None,
    Items(minijinja::value::ValueIter),
    Pairs(Box<dyn Iterator<Item = (Value, Value)> + Send + Sync>),
}

/// The items of a list or the entries of a map. An iterable of unknown length may be
/// a one-shot iterator, which a walk would use up, so it counts as holding nothing (its items
/// are walked when they are stored or printed).
fn children(value: &Value) -> Children {
    let Some(object) = value.as_object() else {
        return Children::None;
    };
    let items = || value.try_iter().map_or(Children::None, Children::Items);
    match value.kind() {
        ValueKind::Map => object
            .try_iter_pairs()
            .map_or(Children::None, Children::Pairs),
        ValueKind::Seq => items(),
        ValueKind::Iterable if value.len().is_some() => items(),
        _ => Children::None,
    }
}

/// Python-style JSON text being written, refusing to grow past `limit` bytes.
struct Json {
    text: String,
    indent: Option<usize>,
    limit: usize,
}

impl Json {
    fn push(&mut self, s: &str) -> Result<(), Stop> {
        if self.text.len().saturating_add(s.len()) > self.limit {
            return Err(Stop::TooBig);
        }
        self.text.push_str(s);
        Ok(())
    }

    /// The separator before item `index` of a container at `depth` (Python's `", "` inline,
    /// `","` plus a new line when indenting).
    fn before_item(&mut self, index: usize, depth: usize) -> Result<(), Stop> {
        match self.indent {
            None if index > 0 => self.push(", "),
            None => Ok(()),
            Some(n) => {
                self.push(if index > 0 { ",\n" } else { "\n" })?;
                self.push(&" ".repeat(n.saturating_mul(depth + 1)))
            }
        }
    }

    /// The end of a non-empty container at `depth`.
    fn close(&mut self, bracket: &str, depth: usize) -> Result<(), Stop> {
        if let Some(n) = self.indent {
            self.push("\n")?;
            self.push(&" ".repeat(n.saturating_mul(depth)))?;
        }
        self.push(bracket)
    }

    fn string(&mut self, s: &str) -> Result<(), Stop> {
        if s.len() > self.limit {
            return Err(Stop::TooBig);
        }
        let quoted = serde_json::Value::from(s).to_string();
        self.push(&quoted)
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<(), Stop> {
        match value.kind() {
            ValueKind::Undefined | ValueKind::None => self.push("null"),
            ValueKind::Bool => self.push(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => {
                let number = match i64::try_from(value.clone()) {
                    Ok(i) => serde_json::Value::from(i),
                    Err(_) => f64::try_from(value.clone())
                        .map_or(serde_json::Value::Null, serde_json::Value::from),
                };
                self.push(&number.to_string())
            }
            ValueKind::String => self.string(value.as_str().unwrap_or_default()),
            _ => match children(value) {
                _ if depth >= limits::VALUE_DEPTH => Err(Stop::TooDeep),
                Children::Items(items) => {
                    self.push("[")?;
                    let mut count = 0;
                    for (i, item) in items.enumerate() {
                        self.before_item(i, depth)?;
                        self.value(&item, depth + 1)?;
                        count += 1;
                    }
                    match count {
                        0 => self.push("]"),
                        _ => self.close("]", depth),
                    }
                }
                Children::Pairs(pairs) => {
                    self.push("{")?;
                    let mut count = 0;
                    for (i, (key, item)) in pairs.enumerate() {
                        self.before_item(i, depth)?;
                        match key.as_str() {
                            Some(k) => self.string(k)?,
                            None => self.string(&key.to_string())?,
                        }
                        self.push(": ")?;
                        self.value(&item, depth + 1)?;
                        count += 1;
                    }
                    match count {
                        0 => self.push("}"),
                        _ => self.close("}", depth),
                    }
                }
                Children::None if matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable) => {
                    self.push("[]")
                }
                Children::None => {
                    let mut text = String::new();
                    let _ = write!(text, "{value}");
                    self.string(&text)
                }
            },
        }
    }
}

/// The largest number written in the format spec (after `:`) of any replacement field of a
/// `str.format` string: widths and precisions. `{{` and `}}` are literal braces.
fn largest_format_number(format: &str) -> Option<u64> {
    let mut largest: Option<u64> = None;
    let mut rest = format;
    while let Some(open) = rest.find('{') {
        rest = &rest[open + 1..];
        if let Some(after) = rest.strip_prefix('{') {
            rest = after;
            continue;
        }
        let field_end = rest.find('}').unwrap_or(rest.len());
        let field = &rest[..field_end];
        if let Some((_, spec)) = field.split_once(':') {
            for digits in spec.split(|c: char| !c.is_ascii_digit()) {
                if !digits.is_empty() {
                    let n = digits.parse::<u64>().unwrap_or(u64::MAX);
                    largest = Some(largest.map_or(n, |l| l.max(n)));
                }
            }
        }
        rest = &rest[field_end..];
    }
    largest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_numbers_are_read_from_the_spec_of_each_field() {
        assert_eq!(largest_format_number("{:>2000000000}"), Some(2_000_000_000));
        assert_eq!(largest_format_number("{0:.3f} and {1:08d}"), Some(8));
        assert_eq!(
            largest_format_number("{{:99999}} {}"),
            None,
            "escaped braces"
        );
        assert_eq!(largest_format_number("{name}"), None);
        assert_eq!(
            largest_format_number("{:999999999999999999999999}"),
            Some(u64::MAX),
            "too long to parse counts as huge"
        );
    }
}
