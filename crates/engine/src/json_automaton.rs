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
mod tests;
