//! A pushdown automaton over bytes that accepts exactly the JSON texts a [`Grammar`] allows:
//! one value, with little whitespace between tokens ([`MAX_INDENT`]) and none after it.
//!
//! Every prefix it accepts can still be completed, so a generation that only ever writes
//! accepted bytes never paints itself into a corner. It reads bytes, not characters, so a
//! token that ends inside a multi-byte UTF-8 character is fine: the character's remaining
//! bytes are what must come next.
//!
//! `anyOf` makes it nondeterministic: the state is a set of [`Thread`]s, each a stack of
//! [`Frame`]s, and a byte advances every thread that can take it. Alternatives are only forked
//! when a value starts and its first byte fits more than one of them, so most states hold a
//! single thread.
//!
//! A schema whose alternatives begin alike and nest can still make the readings multiply with
//! every byte, and an answer nested deeply makes every reading costly to copy. So a step is
//! bounded: a state holds at most [`MAX_THREADS`] readings, and every step is charged to a
//! budget of work the caller gives (each reading stepped or made costs one, and one more per
//! [`FRAMES_PER_WORK`] frames it copies). Past either bound the step fails with an [`Overrun`]
//! instead of going on.

use crate::json_schema::{Grammar, Node, NodeId};

/// Most spaces or tabs after a newline between tokens. Whitespace between tokens (and before
/// the value) is one space, or one newline and up to this many spaces or tabs of indentation
/// (as llama.cpp's JSON grammar allows): enough for JSON pretty-printed ten levels deep, and no
/// room for a model to loop on spaces or blank lines.
pub(crate) const MAX_INDENT: u8 = 20;

/// Most digits in each part of a number (integer part, fraction, exponent): room for every
/// 64-bit integer and the shortest spelling of every double (up to 17 digits after 5 zeros),
/// and an exponent of two digits, so every number parses as a double (`1e999` would not).
/// A model that keeps writing digits is stopped there.
const MAX_DIGITS: [u8; 3] = [20, 24, 2];

/// Most readings a state may hold at once. A schema that needs more (alternatives that begin
/// alike, nested) is stopped with [`Overrun::Threads`].
pub(crate) const MAX_THREADS: usize = 256;

/// How many frames of a reading cost as much to copy as stepping it does: a unit of work is
/// about one reading stepped, however deep.
const FRAMES_PER_WORK: usize = 16;

/// Why a step was not taken: it needed more than the automaton allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overrun {
    /// More than [`MAX_THREADS`] readings at once.
    Threads,
    /// The work the caller allowed ran out.
    Work,
}

/// Where the automaton is in a text: every way the bytes so far can be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JsonState {
    threads: Vec<Thread>,
}

/// One reading of the bytes so far.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Thread {
    /// The values being written, outermost first.
    stack: Vec<Frame>,
    /// The whitespace just written between tokens: 0 none, 1 a space, 2 + n a newline and n
    /// spaces or tabs.
    whitespace: u8,
}

/// One value being written, and where in it the text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Frame {
    /// The whole answer: before its value, or after it (`done`: only the end may follow).
    Root { done: bool },
    /// One of the texts of a `Node::Literals`: those at `lo..hi` (sorted) start with the
    /// `pos` bytes written.
    Literal {
        node: NodeId,
        lo: u32,
        hi: u32,
        pos: u32,
    },
    /// A number, in `part`, with `digits` digits written in that part.
    Number {
        integer: bool,
        part: NumberPart,
        digits: u8,
    },
    /// A string value's contents, `chars` characters written.
    String {
        node: NodeId,
        chars: u32,
        lexer: Lexer,
    },
    /// An array after `items` items were started.
    Array {
        node: NodeId,
        items: u32,
        at: ArrayAt,
    },
    /// An object, `seen` the set of its listed properties already written.
    Object {
        node: NodeId,
        seen: u64,
        at: ObjectAt,
    },
    /// A key of the object below it: the `pos` bytes written so far are how the listed keys
    /// at `lo..hi` (sorted) begin.
    Key {
        lo: u32,
        hi: u32,
        pos: u32,
        lexer: Lexer,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum NumberPart {
    /// After `-`.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer digits.
    Integer,
    /// After `.`.
    Point,
    /// In the fraction digits.
    Fraction,
    /// After `e` or `E`.
    E,
    /// After the exponent's sign.
    ExponentSign,
    /// In the exponent digits.
    Exponent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ArrayAt {
    /// After `[`.
    Open,
    /// After an item.
    Item,
    /// After `,`.
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ObjectAt {
    /// After `{`.
    Open,
    /// After a key: the listed property it names, or None for another key.
    Key { property: Option<u8> },
    /// After the `:` that follows such a key.
    Colon { property: Option<u8> },
    /// After a value.
    Value,
    /// After `,`.
    Comma,
}

/// Where the text is inside a string's quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lexer {
    /// Between characters.
    Plain,
    /// After a backslash.
    Escape,
    /// In a `\u` escape after `read` hex digits; `d` when the first was `d`/`D` (a surrogate
    /// follows when the second is 8 to F, and is refused: a lone one does not parse).
    Hex { read: u8, d: bool },
    /// In a multi-byte UTF-8 character, `left` bytes to go, the next in `lo..=hi`.
    Utf8 { left: u8, lo: u8, hi: u8 },
}

/// What one byte did inside a string.
enum Lexed {
    /// Began a character (it may need more bytes).
    Started(Lexer),
    /// Continued the current character.
    Continued(Lexer),
    /// The closing quote.
    Closed,
}

impl Lexer {
    fn feed(self, b: u8) -> Option<Lexed> {
        let utf8 = |left, lo, hi| Some(Lexed::Started(Lexer::Utf8 { left, lo, hi }));
        match self {
            Lexer::Plain => match b {
                b'"' => Some(Lexed::Closed),
                b'\\' => Some(Lexed::Started(Lexer::Escape)),
                0x00..=0x1F => None,
                0x20..=0x7F => Some(Lexed::Started(Lexer::Plain)),
                0xC2..=0xDF => utf8(1, 0x80, 0xBF),
                0xE0 => utf8(2, 0xA0, 0xBF),
                0xE1..=0xEC | 0xEE..=0xEF => utf8(2, 0x80, 0xBF),
                0xED => utf8(2, 0x80, 0x9F),
                0xF0 => utf8(3, 0x90, 0xBF),
                0xF1..=0xF3 => utf8(3, 0x80, 0xBF),
                0xF4 => utf8(3, 0x80, 0x8F),
                _ => None,
            },
            Lexer::Escape => match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                    Some(Lexed::Continued(Lexer::Plain))
                }
                b'u' => Some(Lexed::Continued(Lexer::Hex { read: 0, d: false })),
                _ => None,
            },
            Lexer::Hex { read, d } => {
                // `\uD800` to `\uDFFF` are surrogates: refused, since a lone one does not
                // parse (a character outside the basic plane is written as UTF-8 instead).
                if !b.is_ascii_hexdigit() || read == 1 && d && !matches!(b, b'0'..=b'7') {
                    return None;
                }
                let d = match read {
                    0 => b.eq_ignore_ascii_case(&b'd'),
                    _ => d,
                };
                Some(Lexed::Continued(match read {
                    3 => Lexer::Plain,
                    _ => Lexer::Hex { read: read + 1, d },
                }))
            }
            Lexer::Utf8 { left, lo, hi } => {
                if !(lo..=hi).contains(&b) {
                    return None;
                }
                Some(Lexed::Continued(match left {
                    1 => Lexer::Plain,
                    _ => Lexer::Utf8 {
                        left: left - 1,
                        lo: 0x80,
                        hi: 0xBF,
                    },
                }))
            }
        }
    }
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl JsonState {
    /// Before the first byte of an answer.
    pub(crate) fn new() -> Self {
        JsonState {
            threads: vec![Thread {
                stack: vec![Frame::Root { done: false }],
                whitespace: 0,
            }],
        }
    }

    /// Whether no reading is left (the bytes fed are not a prefix of any allowed text).
    pub(crate) fn is_dead(&self) -> bool {
        self.threads.is_empty()
    }

    /// The state after `bytes`; dead if they leave the allowed texts. Each step is charged to
    /// `work` (see [`JsonState::step`]).
    pub(crate) fn advanced(
        &self,
        grammar: &Grammar,
        bytes: &[u8],
        work: &mut u64,
    ) -> Result<JsonState, Overrun> {
        let mut state = self.clone();
        for &b in bytes {
            if state.is_dead() {
                break;
            }
            state = state.step(grammar, b, work)?;
        }
        Ok(state)
    }

    /// The state after one byte, its cost taken from `work` (see [`cost`]) for each reading
    /// stepped and each made. Fails when `work` runs out or the state would hold more than
    /// [`MAX_THREADS`] readings.
    pub(crate) fn step(
        &self,
        grammar: &Grammar,
        b: u8,
        work: &mut u64,
    ) -> Result<JsonState, Overrun> {
        let mut out = Vec::new();
        for thread in &self.threads {
            let made = out.len();
            step(grammar, thread.clone(), b, &mut out);
            let cost = out[made..]
                .iter()
                .fold(cost(thread), |sum, made| sum + cost(made));
            *work = work.checked_sub(cost).ok_or(Overrun::Work)?;
        }
        out.sort_unstable();
        out.dedup();
        if out.len() > MAX_THREADS {
            return Err(Overrun::Threads);
        }
        Ok(JsonState { threads: out })
    }

    /// Whether the bytes so far are a whole allowed text (the answer may end here).
    pub(crate) fn is_complete(&self, grammar: &Grammar) -> bool {
        self.threads.iter().any(|t| {
            let mut depth = t.stack.len();
            while depth > 1 && ends_here(grammar, &t.stack[depth - 1]) {
                depth -= 1;
            }
            depth == 1 && t.stack[0] == Frame::Root { done: true }
        })
    }
}

/// The work of copying `thread` and stepping it: one, and one more for every
/// [`FRAMES_PER_WORK`] frames it holds.
fn cost(thread: &Thread) -> u64 {
    1 + (thread.stack.len() / FRAMES_PER_WORK) as u64
}

/// Whether a number or literal may end where it is (the next byte, if it cannot continue the
/// value, belongs to what encloses it).
fn ends_here(grammar: &Grammar, frame: &Frame) -> bool {
    match *frame {
        Frame::Literal { node, lo, pos, .. } => {
            literal(grammar, node)[lo as usize].len() == pos as usize
        }
        Frame::Number { part, .. } => matches!(
            part,
            NumberPart::Zero | NumberPart::Integer | NumberPart::Fraction | NumberPart::Exponent
        ),
        _ => false,
    }
}

fn literal(grammar: &Grammar, node: NodeId) -> &[Vec<u8>] {
    match grammar.node(node) {
        Node::Literals(texts) => texts,
        other => unreachable!("a literal frame on {other:?}"),
    }
}

/// The items of `items[lo..hi]` whose text (`text` of each) has byte `b` at `pos`: a
/// sub-range, since the texts are sorted and share their first `pos` bytes. For literals and
/// for object keys.
fn narrow<T>(
    items: &[T],
    text: impl Fn(&T) -> &[u8],
    lo: u32,
    hi: u32,
    pos: u32,
    b: u8,
) -> (u32, u32) {
    let range = &items[lo as usize..hi as usize];
    let at = |item: &T| text(item).get(pos as usize).copied();
    let start = range.partition_point(|item| at(item).is_none_or(|c| c < b));
    let end = range.partition_point(|item| at(item).is_none_or(|c| c <= b));
    (lo + start as u32, lo + end as u32)
}

/// Pushes every thread `thread` becomes after byte `b` to `out`.
fn step(grammar: &Grammar, mut thread: Thread, b: u8, out: &mut Vec<Thread>) {
    let top = *thread.stack.last().expect("a thread always holds its root");
    let ws = is_whitespace(b);
    match top {
        Frame::Root { done: true } => {}
        Frame::Root { done: false } => {
            if ws {
                return whitespace(thread, b, out);
            }
            set_top(&mut thread, Frame::Root { done: true });
            start(grammar, grammar.root, thread, b, out);
        }
        Frame::Literal { node, lo, hi, pos } => {
            let texts = literal(grammar, node);
            let (lo2, hi2) = narrow(texts, Vec::as_slice, lo, hi, pos, b);
            if lo2 < hi2 {
                let mut next = thread.clone();
                set_top(
                    &mut next,
                    Frame::Literal {
                        node,
                        lo: lo2,
                        hi: hi2,
                        pos: pos + 1,
                    },
                );
                // A text that no other continues is finished: its value ends here.
                if hi2 == lo2 + 1 && texts[lo2 as usize].len() == pos as usize + 1 {
                    next.stack.pop();
                }
                emit(next, out);
            }
            end_and_refeed(grammar, thread, &top, b, out);
        }
        Frame::Number {
            integer,
            part,
            digits,
        } => {
            if let Some((part, digits)) = number(integer, part, digits, b) {
                let mut next = thread.clone();
                set_top(
                    &mut next,
                    Frame::Number {
                        integer,
                        part,
                        digits,
                    },
                );
                emit(next, out);
            }
            end_and_refeed(grammar, thread, &top, b, out);
        }
        Frame::String { node, chars, lexer } => {
            let Node::String { min, max } = *grammar.node(node) else {
                unreachable!("a string frame on another node")
            };
            match lexer.feed(b) {
                None => {}
                Some(Lexed::Closed) if chars >= min => {
                    thread.stack.pop();
                    emit(thread, out);
                }
                Some(Lexed::Closed) => {}
                Some(Lexed::Started(_)) if max.is_some_and(|max| chars >= max) => {}
                Some(Lexed::Started(lexer)) => {
                    set_top(
                        &mut thread,
                        Frame::String {
                            node,
                            chars: chars + 1,
                            lexer,
                        },
                    );
                    emit(thread, out);
                }
                Some(Lexed::Continued(lexer)) => {
                    set_top(&mut thread, Frame::String { node, chars, lexer });
                    emit(thread, out);
                }
            }
        }
        Frame::Array { node, items, at } => {
            let Node::Array {
                items: item,
                min,
                max,
            } = *grammar.node(node)
            else {
                unreachable!("an array frame on another node")
            };
            if ws {
                return whitespace(thread, b, out);
            }
            let room = max.is_none_or(|max| items < max);
            match (at, b) {
                (ArrayAt::Open | ArrayAt::Item, b']') if items >= min => {
                    thread.stack.pop();
                    emit(thread, out);
                }
                (ArrayAt::Item, b',') if room => {
                    set_top(
                        &mut thread,
                        Frame::Array {
                            node,
                            items,
                            at: ArrayAt::Comma,
                        },
                    );
                    emit(thread, out);
                }
                (ArrayAt::Open | ArrayAt::Comma, _) if room => {
                    set_top(
                        &mut thread,
                        Frame::Array {
                            node,
                            items: items + 1,
                            at: ArrayAt::Item,
                        },
                    );
                    start(grammar, item, thread, b, out);
                }
                _ => {}
            }
        }
        Frame::Object { node, seen, at } => {
            let Node::Object {
                properties,
                required,
                additional,
            } = grammar.node(node)
            else {
                unreachable!("an object frame on another node")
            };
            if ws {
                return whitespace(thread, b, out);
            }
            let all = properties.len() as u32;
            let unseen = (0..all).any(|i| seen & (1 << i) == 0);
            let more = additional.is_some() || unseen;
            let closable = required & !seen == 0;
            let object = |at| Frame::Object { node, seen, at };
            match (at, b) {
                (ObjectAt::Open | ObjectAt::Comma, b'"') if more => {
                    thread.stack.push(Frame::Key {
                        lo: 0,
                        hi: all,
                        pos: 0,
                        lexer: Lexer::Plain,
                    });
                    emit(thread, out);
                }
                (ObjectAt::Open | ObjectAt::Value, b'}') if closable => {
                    thread.stack.pop();
                    emit(thread, out);
                }
                (ObjectAt::Value, b',') if more => {
                    set_top(&mut thread, object(ObjectAt::Comma));
                    emit(thread, out);
                }
                (ObjectAt::Key { property }, b':') => {
                    set_top(&mut thread, object(ObjectAt::Colon { property }));
                    emit(thread, out);
                }
                (ObjectAt::Colon { property }, _) => {
                    let value = match property {
                        Some(i) => properties[i as usize].value,
                        None => additional.expect("another key only where others are allowed"),
                    };
                    set_top(&mut thread, object(ObjectAt::Value));
                    start(grammar, value, thread, b, out);
                }
                _ => {}
            }
        }
        Frame::Key { lo, hi, pos, lexer } => key(grammar, thread, lo, hi, pos, lexer, b, out),
    }
}

/// A byte of a key: it must keep the key a listed one not yet written, unless the object
/// allows other keys.
#[allow(clippy::too_many_arguments)]
fn key(
    grammar: &Grammar,
    mut thread: Thread,
    lo: u32,
    hi: u32,
    pos: u32,
    lexer: Lexer,
    b: u8,
    out: &mut Vec<Thread>,
) {
    let depth = thread.stack.len();
    let Frame::Object { node, seen, .. } = thread.stack[depth - 2] else {
        unreachable!("a key frame above a non-object")
    };
    let Node::Object {
        properties,
        additional,
        ..
    } = grammar.node(node)
    else {
        unreachable!("an object frame on another node")
    };
    let unseen = |i: u32| seen & (1 << i) == 0;
    let Some(lexed) = lexer.feed(b) else { return };
    if let Lexed::Closed = lexed {
        // Keys are sorted and distinct: only the first of the range can equal the key.
        let exact = (lo < hi && properties[lo as usize].key.len() == pos as usize).then_some(lo);
        let (property, seen) = match exact {
            Some(i) if unseen(i) => (Some(i as u8), seen | 1 << i),
            Some(_) => return, // written already
            None if additional.is_some() => (None, seen),
            None => return,
        };
        thread.stack.pop();
        set_top(
            &mut thread,
            Frame::Object {
                node,
                seen,
                at: ObjectAt::Key { property },
            },
        );
        return emit(thread, out);
    }
    let lexer = match lexed {
        Lexed::Started(l) | Lexed::Continued(l) => l,
        Lexed::Closed => unreachable!(),
    };
    let (lo, hi) = narrow(properties, |p| &p.key, lo, hi, pos, b);
    if additional.is_none() && !(lo..hi).any(unseen) {
        return;
    }
    set_top(
        &mut thread,
        Frame::Key {
            lo,
            hi,
            pos: pos + 1,
            lexer,
        },
    );
    emit(thread, out);
}

/// The next part and digit count of a number after byte `b`, if `b` continues it.
fn number(integer: bool, part: NumberPart, digits: u8, b: u8) -> Option<(NumberPart, u8)> {
    use NumberPart::*;
    let digit = b.is_ascii_digit();
    let room = |i: usize| digits < MAX_DIGITS[i];
    Some(match (part, b) {
        (Minus, b'0') => (Zero, 1),
        (Minus, _) if digit => (Integer, 1),
        (Integer, _) if digit && room(0) => (Integer, digits + 1),
        (Zero | Integer, b'.') if !integer => (Point, 0),
        (Zero | Integer | Fraction, b'e' | b'E') if !integer => (E, 0),
        (Point, _) if digit => (Fraction, 1),
        (Fraction, _) if digit && room(1) => (Fraction, digits + 1),
        (E, b'+' | b'-') => (ExponentSign, 0),
        (E | ExponentSign, _) if digit => (Exponent, 1),
        (Exponent, _) if digit && room(2) => (Exponent, digits + 1),
        _ => return None,
    })
}

/// When `frame` (the top of `thread`) may end here, ends it and feeds `b` to what encloses it.
fn end_and_refeed(
    grammar: &Grammar,
    mut thread: Thread,
    frame: &Frame,
    b: u8,
    out: &mut Vec<Thread>,
) {
    if ends_here(grammar, frame) {
        thread.stack.pop();
        step(grammar, thread, b, out);
    }
}

/// Starts a value of `node` whose first byte is `b` on `thread` (its enclosing frame already
/// moved past the value): one thread for each alternative that `b` can begin.
fn start(grammar: &Grammar, node: NodeId, thread: Thread, b: u8, out: &mut Vec<Thread>) {
    match grammar.node(node) {
        Node::AnyOf(alternatives) => {
            for &alternative in alternatives {
                start_one(grammar, alternative, thread.clone(), b, out);
            }
        }
        _ => start_one(grammar, node, thread, b, out),
    }
}

/// [`start`] for a node that is not an `AnyOf`. The grammar lists none inside another, so
/// starting a value never recurses; one found anyway starts nothing.
fn start_one(grammar: &Grammar, node: NodeId, mut thread: Thread, b: u8, out: &mut Vec<Thread>) {
    let frame = match grammar.node(node) {
        Node::AnyOf(_) => {
            debug_assert!(false, "an AnyOf inside an AnyOf: the grammar is flattened");
            return;
        }
        Node::Literals(texts) => {
            let (lo, hi) = narrow(texts, Vec::as_slice, 0, texts.len() as u32, 0, b);
            if lo == hi {
                return;
            }
            if hi == lo + 1 && texts[lo as usize].len() == 1 {
                return emit(thread, out); // a one-byte literal (`enum: [1]`) is written
            }
            Frame::Literal {
                node,
                lo,
                hi,
                pos: 1,
            }
        }
        Node::Number { integer } => {
            let integer = *integer;
            let (part, digits) = match b {
                b'-' => (NumberPart::Minus, 0),
                b'0' => (NumberPart::Zero, 1),
                b'1'..=b'9' => (NumberPart::Integer, 1),
                _ => return,
            };
            Frame::Number {
                integer,
                part,
                digits,
            }
        }
        Node::String { .. } if b == b'"' => Frame::String {
            node,
            chars: 0,
            lexer: Lexer::Plain,
        },
        Node::Array { .. } if b == b'[' => Frame::Array {
            node,
            items: 0,
            at: ArrayAt::Open,
        },
        Node::Object { .. } if b == b'{' => Frame::Object {
            node,
            seen: 0,
            at: ObjectAt::Open,
        },
        _ => return,
    };
    thread.stack.push(frame);
    emit(thread, out);
}

fn set_top(thread: &mut Thread, frame: Frame) {
    *thread
        .stack
        .last_mut()
        .expect("a thread always holds its root") = frame;
}

/// A thread that took a byte other than whitespace between tokens.
fn emit(mut thread: Thread, out: &mut Vec<Thread>) {
    thread.whitespace = 0;
    out.push(thread);
}

/// A thread that took whitespace byte `b` between tokens, where the run may go on so.
fn whitespace(mut thread: Thread, b: u8, out: &mut Vec<Thread>) {
    thread.whitespace = match (thread.whitespace, b) {
        (0, b' ') => 1,
        (0, b'\n') => 2,
        (run @ 2.., b' ' | b'\t') if run < 2 + MAX_INDENT => run + 1,
        _ => return,
    };
    out.push(thread);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn grammar(schema: Value) -> Grammar {
        Grammar::from_schema(&schema).expect("schema compiles")
    }

    /// The state after byte `b`, with no bound on the work (for tests not about the bounds).
    fn next(state: &JsonState, grammar: &Grammar, b: u8) -> JsonState {
        let mut work = u64::MAX;
        state
            .step(grammar, b, &mut work)
            .expect("within the bounds")
    }

    /// The state after `bytes` from the start, with no bound on the work.
    fn after(grammar: &Grammar, bytes: &[u8]) -> JsonState {
        let mut work = u64::MAX;
        JsonState::new()
            .advanced(grammar, bytes, &mut work)
            .expect("within the bounds")
    }

    /// Whether `text` is a whole answer of `grammar`.
    fn accepts(grammar: &Grammar, text: &str) -> bool {
        after(grammar, text.as_bytes()).is_complete(grammar)
    }

    /// Whether `text` can begin an answer of `grammar`.
    fn begins(grammar: &Grammar, text: &str) -> bool {
        !after(grammar, text.as_bytes()).is_dead()
    }

    #[test]
    fn any_object_takes_objects_only() {
        let g = Grammar::any_object().unwrap();
        for ok in [
            "{}",
            r#"{"a":1}"#,
            "{\n  \"a\" : [1, 2.5e3, -0, 0.1E+2, true, null, \"x\\n\\u00e9é🙂\"],\"\":{}\n}",
            r#"{"a":{"b":{"c":[[],[{}]]}}}"#,
        ] {
            assert!(accepts(&g, ok), "{ok}");
        }
        for bad in [
            "[1]",
            "1",
            r#""a""#,
            r#"{"a":}"#,
            "{,}",
            r#"{"a":1,}"#,
            r#"{"a":1}x"#,
            r#"{"a":1} "#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":1e}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":tru}"#,
            r#"{a:1}"#,
            r#"{"a" 1}"#,
        ] {
            assert!(!accepts(&g, bad), "{bad}");
        }
        assert!(begins(&g, r#"{"a":[1,"#), "a prefix");
        assert!(!accepts(&g, r#"{"a":[1,"#), "a prefix is not whole");
    }

    #[test]
    fn invalid_utf8_is_refused_and_split_characters_are_fine() {
        let g = grammar(json!({"type": "string"}));
        let emoji = "🙂".as_bytes();
        let mut state = next(&JsonState::new(), &g, b'"');
        for &b in emoji {
            state = next(&state, &g, b);
            assert!(!state.is_dead(), "each byte of a character continues it");
            assert!(!state.is_complete(&g));
        }
        assert!(next(&state, &g, b'"').is_complete(&g));
        for bad in [
            &[b'"', 0xC0, 0x80][..],       // overlong
            &[b'"', 0xED, 0xA0, 0x80][..], // a surrogate
            &[b'"', 0xF5][..],             // past U+10FFFF
            &[b'"', 0x80][..],             // a continuation without a start
            &[b'"', 0xE2, b'x'][..],       // a start without its continuation
        ] {
            assert!(after(&g, bad).is_dead(), "{bad:x?}");
        }
        assert!(!begins(&g, "\u{7f}") && begins(&g, "\"\u{7f}"));
    }

    #[test]
    fn whitespace_is_a_space_or_a_newline_and_indentation() {
        let g = Grammar::any_object().unwrap();
        let indented = |n: usize| format!("{{\n{}}}", " ".repeat(n));
        assert!(accepts(&g, &indented(MAX_INDENT as usize)));
        assert!(accepts(&g, "\n{ \"a\" : 1,\n\t\t\"b\":\n [ 2 ]\n}"));
        assert!(!begins(&g, &indented(MAX_INDENT as usize + 1)));
        for bad in ["{  }", "{\n\n}", "\n\n{}", "{ \n}", "{\r\n}", "{\t}"] {
            assert!(!begins(&g, bad), "{bad:?}");
        }
        // Spaces inside a string are text, not whitespace between tokens.
        assert!(accepts(&g, &format!("{{\"a\":\"{}\"}}", " ".repeat(100))));
    }

    #[test]
    fn numbers_end_where_the_next_token_starts() {
        let g = grammar(json!({"type": "number"}));
        for ok in ["0", "-0", "12", "1.5", "1e9", "-2.5E-3", "1E+2"] {
            assert!(accepts(&g, ok), "{ok}");
        }
        for bad in ["00", "+1", "1.", "-", ".1", "1e", "1e+", "0x1", "1 "] {
            assert!(!accepts(&g, bad), "{bad}");
        }
        let g = grammar(json!({"type": "integer"}));
        assert!(accepts(&g, "-42") && !begins(&g, "4.2") && !begins(&g, "4e2"));
        let digits = "9".repeat(21);
        assert!(!begins(&g, &digits), "a number's digits are bounded");
        let g = grammar(json!({"type": "number"}));
        assert!(accepts(&g, "1e99") && !begins(&g, "1e100"), "exponents too");
    }

    #[test]
    fn properties_follow_the_schema_in_any_order() {
        let g = grammar(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 3},
                "age": {"type": "integer"},
                "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "minItems": 1, "maxItems": 2}
            },
            "required": ["name", "age"],
            "additionalProperties": false
        }));
        for ok in [
            r#"{"name":"Ann","age":3}"#,
            r#"{"age":3,"name":"é"}"#,
            r#"{"tags":["bc"],"name":"x","age":-1}"#,
            r#"{"name":"x","age":0,"tags":["a","a"]}"#,
        ] {
            assert!(accepts(&g, ok), "{ok}");
        }
        for bad in [
            r#"{"name":"Ann"}"#,                            // age missing
            r#"{"name":"","age":1}"#,                       // too short
            r#"{"name":"Anna","age":1}"#,                   // too long
            r#"{"name":"x","age":1,"name":"y"}"#,           // twice
            r#"{"name":"x","age":1,"x":1}"#,                // not listed
            r#"{"name":"x","age":1.5}"#,                    // not an integer
            r#"{"name":"x","age":1,"tags":[]}"#,            // too few
            r#"{"name":"x","age":1,"tags":["a","a","a"]}"#, // too many
            r#"{"name":"x","age":1,"tags":["b"]}"#,         // not in the enum
        ] {
            assert!(!accepts(&g, bad), "{bad}");
        }
        // Refused as early as it shows: no key starts with "x", no third tag fits.
        assert!(!begins(&g, r#"{"x"#));
        assert!(!begins(&g, r#"{"name":"x","age":1,"tags":["a","a","#));
        assert!(!begins(&g, r#"{"name":"x","name"#));
        assert!(!begins(&g, r#"{"name":"abcd"#));
    }

    #[test]
    fn other_keys_take_the_additional_schema() {
        let g = grammar(json!({
            "properties": {"a": {"type": "boolean"}},
            "additionalProperties": {"type": "integer"}
        }));
        assert!(accepts(&g, r#"{"a":true,"ab":1,"b":2}"#));
        assert!(!accepts(&g, r#"{"a":1}"#));
        assert!(!accepts(&g, r#"{"b":true}"#));
        assert!(!accepts(&g, r#"{"a":true,"a":false}"#));
    }

    #[test]
    fn literals_any_of_and_type_lists() {
        let g = grammar(json!({"enum": [1, 12, "x", null, {"k": [true]}]}));
        for ok in ["1", "12", r#""x""#, "null", r#"{"k":[true]}"#] {
            assert!(accepts(&g, ok), "{ok}");
        }
        for bad in ["2", "123", r#""y""#, r#"{"k": [true]}"#] {
            assert!(!accepts(&g, bad), "{bad}");
        }
        let g = grammar(json!({"const": "only"}));
        assert!(accepts(&g, r#""only""#) && !accepts(&g, r#""onl""#));
        let g = grammar(json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "null"}}, "required": ["b"], "additionalProperties": false}
        ]}));
        assert!(accepts(&g, r#"{"a":1}"#));
        assert!(accepts(&g, r#"{"a":"s","b":null}"#));
        assert!(!accepts(&g, r#"{"a":1,"b":null}"#));
        assert!(!accepts(&g, r#"{"a":"s"}"#));
        let g = grammar(json!({"type": ["string", "null"]}));
        assert!(accepts(&g, "null") && accepts(&g, r#""""#) && !accepts(&g, "1"));
    }

    #[test]
    fn references_follow_defs_and_may_recurse() {
        // As Pydantic writes nested models, plus a tree that refers to itself.
        let g = grammar(json!({
            "$defs": {
                "Pet": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false, "title": "Pet"},
                "Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}, "additionalProperties": false}
            },
            "type": "object",
            "properties": {
                "pet": {"$ref": "#/$defs/Pet"},
                "other": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}], "default": null},
                "tree": {"$ref": "#/$defs/Tree"}
            },
            "required": ["pet"],
            "additionalProperties": false
        }));
        assert!(accepts(&g, r#"{"pet":{"name":"Rex"},"other":null}"#));
        assert!(accepts(
            &g,
            r#"{"pet":{"name":"a"},"tree":{"kids":[{"kids":[{}]},{}]}}"#
        ));
        assert!(!accepts(&g, r#"{"pet":{}}"#));
        assert!(!accepts(&g, r#"{"pet":{"name":"a"},"tree":{"kids":[1]}}"#));
    }

    #[test]
    fn a_complete_value_allows_nothing_more() {
        let g = Grammar::any_object().unwrap();
        let state = after(&g, b"{}");
        assert!(state.is_complete(&g));
        for b in 0..=255u8 {
            assert!(next(&state, &g, b).is_dead(), "byte {b} after the value");
        }
    }

    /// The review's P13 schema: `anyOf` of `alternatives`, each an array of the same `anyOf`
    /// (all copies of one array, or each with its own `maxItems`).
    fn arrays_of_arrays(alternatives: usize, distinct: bool) -> Grammar {
        let array = |i: usize| match distinct {
            true => json!({"type": "array", "items": {"$ref": "#/$defs/s"}, "maxItems": i + 1}),
            false => json!({"type": "array", "items": {"$ref": "#/$defs/s"}}),
        };
        let alternatives: Vec<Value> = (0..alternatives).map(array).collect();
        grammar(json!({"$defs": {"s": {"anyOf": alternatives}}, "$ref": "#/$defs/s"}))
    }

    #[test]
    fn p13_any_of_of_arrays_is_bounded() {
        // 1,000 copies of one alternative are one: "[[[…" keeps a single reading.
        let g = arrays_of_arrays(1_000, false);
        let state = after(&g, "[".repeat(1_000).as_bytes());
        assert_eq!(state.threads.len(), 1);
        assert!(accepts(&g, "[[],[[]]]"));
        // 64 different ones multiply by 64 at each "[": the second is refused at once.
        let g = arrays_of_arrays(64, true);
        let one = after(&g, b"[");
        assert_eq!(one.threads.len(), 64);
        let started = std::time::Instant::now();
        let mut work = u64::MAX;
        assert_eq!(one.step(&g, b'[', &mut work), Err(Overrun::Threads));
        assert!(
            started.elapsed().as_millis() < 500,
            "{:?}",
            started.elapsed()
        );
        assert!(
            accepts(&g, "[]"),
            "an answer within the bounds still passes"
        );
    }

    #[test]
    fn p13_a_step_stops_when_its_work_runs_out() {
        let g = Grammar::any_object().unwrap();
        let deep = after(&g, &[&b"{\"a\":"[..], &[b'['; 2_000]].concat());
        // The reading is 2,003 frames deep: stepping it and the one made cost 126 each.
        let mut work = 200;
        assert_eq!(deep.step(&g, b'[', &mut work), Err(Overrun::Work));
        let mut work = 1_000;
        assert!(deep.step(&g, b'[', &mut work).is_ok());
        assert_eq!(work, 1_000 - 126 - 126);
    }

    #[test]
    fn a_loop_of_references_starts_values_without_recursing() {
        // `a` is any of `a` itself or null: starting a value looks through the loop once.
        let g = grammar(json!({
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}, {"$ref": "#/$defs/b"}]},
                      "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "array", "items": {"$ref": "#/$defs/b"}}]}},
            "$ref": "#/$defs/a"
        }));
        assert!(accepts(&g, "null") && accepts(&g, "[[null],[]]"));
        assert!(!accepts(&g, "1"));
    }

    /// A JSON value of any kind, nested at most 4 deep.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            // Exponents of two digits at most (see MAX_DIGITS).
            any::<f64>()
                .prop_filter("two exponent digits", |f| *f == 0.0
                    || (1e-90..1e90).contains(&f.abs()))
                .prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A schema made of every supported keyword, nested at most 3 deep, with repeated
    /// alternatives and references to a tree that refers to itself (`#/$defs/tree`).
    fn json_schema() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!({"type": "null"})),
            Just(json!({"type": "boolean"})),
            Just(json!({"type": "integer"})),
            Just(json!({"type": ["number", "null"]})),
            (0u32..3, 0u32..4).prop_map(
                |(min, more)| json!({"type": "string", "minLength": min, "maxLength": min + more})
            ),
            Just(json!({"enum": ["a", "ab", 1, null, [true]]})),
            Just(json!({"const": {"k": [1]}})),
            Just(json!({"$ref": "#/$defs/tree"})),
            Just(json!({})),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                (inner.clone(), 0u32..2, prop::option::of(0u32..3)).prop_map(
                    |(items, min, more)| {
                        let mut array = json!({"type": "array", "items": items, "minItems": min});
                        if let Some(more) = more {
                            array["maxItems"] = json!(min + more);
                        }
                        array
                    }
                ),
                (
                    prop::collection::btree_map(
                        prop::sample::select(vec!["a", "ab", "b"]),
                        inner.clone(),
                        0..3
                    ),
                    any::<u8>(),
                    prop_oneof![Just(json!(false)), Just(json!(true)), inner.clone()],
                )
                    .prop_map(|(properties, bits, additional)| {
                        let required: Vec<&str> = properties
                            .keys()
                            .enumerate()
                            .filter(|(i, _)| bits & (1 << i) != 0)
                            .map(|(_, k)| *k)
                            .collect();
                        json!({"type": "object", "properties": properties, "required": required,
                               "additionalProperties": additional})
                    }),
                prop::collection::vec(inner.clone(), 1..4).prop_map(|a| json!({"anyOf": a})),
                inner.prop_map(|s| json!({"anyOf": [s.clone(), s], "title": "twice"})),
            ]
        })
        .prop_map(|mut schema| {
            schema["$defs"] = json!({"tree": {"anyOf": [
                {"type": "null"},
                {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 2}
            ]}});
            schema
        })
    }

    /// Whether `value` matches `schema` (inside `root`, which `$ref`s point into): an
    /// independent reading of the keywords, to check what the automaton lets through.
    fn matches(root: &Value, schema: &Value, value: &Value) -> bool {
        let Some(s) = schema.as_object() else {
            return schema == &json!(true);
        };
        if let Some(reference) = s.get("$ref").and_then(Value::as_str) {
            return matches(root, root.pointer(&reference[1..]).unwrap(), value);
        }
        if let Some(c) = s.get("const") {
            return c == value;
        }
        if let Some(Value::Array(values)) = s.get("enum") {
            return values.contains(value);
        }
        if let Some(Value::Array(alternatives)) = s.get("anyOf") {
            return alternatives.iter().any(|a| matches(root, a, value));
        }
        let types: Vec<&str> = match s.get("type") {
            Some(Value::String(t)) => vec![t],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            None => vec!["null", "boolean", "number", "string", "array", "object"],
            Some(other) => panic!("type {other}"),
        };
        let count = |key: &str| s.get(key).and_then(Value::as_u64).map(|n| n as usize);
        types.iter().any(|t| match (*t, value) {
            ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("number", Value::Number(_)) => {
                true
            }
            ("integer", Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            ("string", Value::String(text)) => {
                let chars = text.chars().count();
                count("minLength").is_none_or(|m| chars >= m)
                    && count("maxLength").is_none_or(|m| chars <= m)
            }
            ("array", Value::Array(items)) => {
                count("minItems").is_none_or(|m| items.len() >= m)
                    && count("maxItems").is_none_or(|m| items.len() <= m)
                    && items
                        .iter()
                        .all(|item| s.get("items").is_none_or(|i| matches(root, i, item)))
            }
            ("object", Value::Object(fields)) => {
                let listed = s.get("properties").and_then(Value::as_object);
                let required = s.get("required").and_then(Value::as_array);
                let additional = s.get("additionalProperties").unwrap_or(&Value::Bool(true));
                required.is_none_or(|r| r.iter().all(|k| fields.contains_key(k.as_str().unwrap())))
                    && fields
                        .iter()
                        .all(|(k, v)| match listed.and_then(|l| l.get(k)) {
                            Some(property) => matches(root, property, v),
                            None => matches(root, additional, v),
                        })
            }
            _ => false,
        })
    }

    /// A walk of up to `steps` bytes chosen at random among those `g` allows, ending about one
    /// time in four once it may; the text, and whether it is a whole value. Fails when a state
    /// allows no byte and is not complete (a dead end), or a step goes past the bounds.
    fn walk(g: &Grammar, seed: u64, steps: usize) -> Result<(Vec<u8>, bool), TestCaseError> {
        let mut rng = crate::sampler::Rng::new(seed);
        let mut state = JsonState::new();
        let mut text = Vec::new();
        for _ in 0..steps {
            let choices: Vec<u8> = (0..=255u8)
                .filter(|&b| !next(&state, g, b).is_dead())
                .collect();
            let complete = state.is_complete(g);
            prop_assert!(
                complete || !choices.is_empty(),
                "stuck after {:?}",
                String::from_utf8_lossy(&text)
            );
            if choices.is_empty() || complete && rng.next_u64().is_multiple_of(4) {
                break;
            }
            let b = choices[(rng.next_u64() % choices.len() as u64) as usize];
            state = next(&state, g, b);
            text.push(b);
        }
        Ok((text, state.is_complete(g)))
    }

    proptest! {
        #[test]
        fn every_json_value_is_accepted_compact_and_pretty(value in json_value()) {
            let any = grammar(json!({}));
            let compact = value.to_string();
            let pretty = serde_json::to_string_pretty(&value).unwrap();
            prop_assert!(accepts(&any, &compact), "{}", compact);
            prop_assert!(accepts(&any, &pretty), "{}", pretty);
            let object = Value::from_iter([("v".to_string(), value)]).to_string();
            prop_assert!(accepts(&Grammar::any_object().unwrap(), &object), "{}", object);
        }

        /// Bytes chosen at random among those the automaton allows never lead to a dead end:
        /// from every state some byte continues, or the value is complete, and a complete
        /// value parses.
        #[test]
        fn random_walks_never_get_stuck(seed in any::<u64>()) {
            let g = grammar(json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string", "maxLength": 4},
                    "kind": {"enum": ["a", "ab", 3]},
                    "items": {"type": "array", "items": {"type": ["number", "null"]}, "maxItems": 3}
                },
                "required": ["id", "kind"],
                "additionalProperties": false
            }));
            let (text, complete) = walk(&g, seed, 300)?;
            if complete {
                let parsed: Result<Value, _> = serde_json::from_slice(&text);
                prop_assert!(parsed.is_ok(), "{:?}", String::from_utf8_lossy(&text));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random schemas compile; a random walk under one never gets stuck, and every text
        /// it completes parses and matches the schema (read independently, so sharing
        /// identical nodes and flattening anyOfs change nothing a schema means).
        #[test]
        fn random_schemas_are_followed_exactly(schema in json_schema(), seed in any::<u64>()) {
            let g = Grammar::from_schema(&schema).expect("every generated schema can be followed");
            let (text, complete) = walk(&g, seed, 200)?;
            if complete {
                let value: Value = serde_json::from_slice(&text).expect("a whole value parses");
                prop_assert!(matches(&schema, &schema, &value), "{} does not match {}", value, schema);
            }
        }

        /// A schema repeated in an anyOf is the same grammar: identical alternatives are one.
        #[test]
        fn a_repeated_alternative_costs_nothing(schema in json_schema(), copies in 2usize..50) {
            let defs = schema["$defs"].clone();
            let repeated = json!({"$defs": defs, "anyOf": vec![schema.clone(); copies]});
            let once = json!({"$defs": schema["$defs"].clone(), "anyOf": [schema]});
            prop_assert_eq!(grammar(repeated), grammar(once));
        }
    }
}
