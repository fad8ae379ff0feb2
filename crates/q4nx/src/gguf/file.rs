//! The GGUF container (versions 2 and 3), as llama.cpp writes it: a header, typed metadata
//! key/values, a tensor table, then the tensor data, each tensor aligned to `general.alignment`.
//!
//! Layout (all little-endian): magic `GGUF`, `u32` version, `u64` tensor count, `u64` key/value
//! count; each key/value is a string key, a `u32` value type and the value (a string is a `u64`
//! length and UTF-8 bytes; an array is a `u32` element type, a `u64` count and the elements);
//! each tensor is a string name, a `u32` dimension count, that many `u64` dimensions (innermost
//! first), a `u32` ggml type and a `u64` offset from the start of the data area. The data area
//! starts at the first multiple of the alignment after the tensor table.
//!
//! Every count, length and offset is checked against the bytes that remain before anything is
//! allocated or sliced, so a damaged or hostile file gives an error, never a panic. A header read
//! costs about what the header is: only the keys Hearth reads are decoded ([`is_read_key`]),
//! arrays are typed vectors, and the decoded metadata, array lengths and the tensor count are
//! capped ([`MAX_METADATA_BYTES`], [`MAX_ARRAY_LEN`], [`MAX_TENSORS`]).

use std::collections::HashSet;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::gguf::GgmlType;
use crate::Error;

/// The four bytes every GGUF file starts with.
pub const MAGIC: &[u8; 4] = b"GGUF";

/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// ggml's limit on tensor dimensions.
const MAX_DIMS: u32 = 4;

/// Deepest nesting of arrays accepted (real files use 1; nested arrays are legal but rare).
const MAX_ARRAY_DEPTH: usize = 3;

/// Most elements in one array Hearth decodes. The largest vocabularies have about 260,000
/// tokens (and as many merges, scores and types), so four times that is never a real model.
pub const MAX_ARRAY_LEN: u64 = 1 << 20;

/// Most bytes the decoded metadata of one file may take in memory (strings, arrays and the
/// bookkeeping of each), so a header read costs about what the header is, and never more.
pub const MAX_METADATA_BYTES: u64 = 128 << 20;

/// Most tensors in one file. A model of 4096 layers with a dozen tensors each stays below it;
/// the table's names and shapes are held in memory, so a larger table is refused unread.
pub const MAX_TENSORS: u64 = 1 << 16;

/// The metadata keys Hearth reads: the general facts, split parts, the tokenizer and the
/// hyperparameters of the architectures it imports. Any other key is checked for length and
/// skipped without decoding, so unknown (or hostile) keys cost no memory.
const READ_PREFIXES: &[&str] = &[
    "general.",
    "split.",
    "tokenizer.",
    "llama.",
    "qwen3.",
    "qwen2.",
    "gemma3.",
    "phi3.",
    "lfm2.",
    "qwen3moe.",
    "gpt-oss.",
];

/// Whether the value of `key` is decoded (see [`READ_PREFIXES`]).
pub fn is_read_key(key: &str) -> bool {
    READ_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (one byte, 0 or 1).
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9: elements all of one type.
    Array(Array),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

/// An array value, held as one vector of its element type: a `u8` element costs one byte, as
/// in the file, never a boxed [`Value`].
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    /// Elements of type 0.
    U8(Vec<u8>),
    /// Elements of type 1.
    I8(Vec<i8>),
    /// Elements of type 2.
    U16(Vec<u16>),
    /// Elements of type 3.
    I16(Vec<i16>),
    /// Elements of type 4.
    U32(Vec<u32>),
    /// Elements of type 5.
    I32(Vec<i32>),
    /// Elements of type 6.
    F32(Vec<f32>),
    /// Elements of type 7.
    Bool(Vec<bool>),
    /// Elements of type 8.
    String(Vec<String>),
    /// Elements of type 9 (arrays of arrays).
    Array(Vec<Array>),
    /// Elements of type 10.
    U64(Vec<u64>),
    /// Elements of type 11.
    I64(Vec<i64>),
    /// Elements of type 12.
    F64(Vec<f64>),
}

impl Array {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The GGUF type id of the elements.
    pub fn element_type(&self) -> u32 {
        match self {
            Array::U8(_) => 0,
            Array::I8(_) => 1,
            Array::U16(_) => 2,
            Array::I16(_) => 3,
            Array::U32(_) => 4,
            Array::I32(_) => 5,
            Array::F32(_) => 6,
            Array::Bool(_) => 7,
            Array::String(_) => 8,
            Array::Array(_) => 9,
            Array::U64(_) => 10,
            Array::I64(_) => 11,
            Array::F64(_) => 12,
        }
    }

    /// The elements, if they are strings.
    pub fn as_strings(&self) -> Option<&[String]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// Every element as a signed integer, if the elements are integers (of any width) and
    /// each fits.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        fn all<T: Copy>(v: &[T], f: impl Fn(T) -> Option<i64>) -> Option<Vec<i64>> {
            v.iter().map(|&x| f(x)).collect()
        }
        match self {
            Array::U8(v) => all(v, |x| Some(x.into())),
            Array::I8(v) => all(v, |x| Some(x.into())),
            Array::U16(v) => all(v, |x| Some(x.into())),
            Array::I16(v) => all(v, |x| Some(x.into())),
            Array::U32(v) => all(v, |x| Some(x.into())),
            Array::I32(v) => all(v, |x| Some(x.into())),
            Array::U64(v) => all(v, |x| i64::try_from(x).ok()),
            Array::I64(v) => all(v, Some),
            _ => None,
        }
    }

    /// Element `i` as a [`Value`] (a copy), if there is one.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
        })
    }
}

impl Value {
    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, if it is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }

    /// The value as text, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a boolean, if it is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The array, if the value is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short description for error messages (`U32(7)`, `an array of 49152`).
    pub fn describe(&self) -> String {
        match self {
            Value::String(s) if s.len() > 40 => format!("a string of {} bytes", s.len()),
            Value::String(s) => format!("string {s:?}"),
            Value::Array(a) => format!("an array of {}", a.len()),
            other => format!("{other:?}"),
        }
    }
}

/// One entry of the tensor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions, innermost first: a weight `W[N, K]` is `[K, N]`.
    pub dims: Vec<u64>,
    /// Element encoding.
    pub kind: GgmlType,
    /// Where its bytes are, from the start of the file.
    pub range: Range<usize>,
}

impl TensorInfo {
    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Length of a row (the innermost dimension).
    pub fn row_len(&self) -> usize {
        self.dims[0] as usize
    }

    /// Number of rows (every dimension but the innermost).
    pub fn rows(&self) -> usize {
        self.dims[1..].iter().product::<u64>() as usize
    }
}

/// A parsed GGUF header: everything but the tensor data.
#[derive(Debug, Clone)]
pub struct Header {
    /// 2 or 3.
    pub version: u32,
    /// Key/values in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensors in file order.
    pub tensors: Vec<TensorInfo>,
    /// Alignment of the data area and of each tensor.
    pub alignment: u64,
    /// Offset of the data area in the file.
    pub data_start: usize,
}

impl Header {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor called `name`, if present.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// A GGUF file opened by memory map: its header and its bytes.
pub struct GgufFile {
    path: PathBuf,
    map: memmap2::Mmap,
    header: Header,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("tensors", &self.header.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Opens and parses `path`; the tensor data stays on disk until read.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only; Hearth never writes the file, and a change by another
        // process can at worst give wrong values, not unsafety in this crate's slices (every
        // range was checked against the length mapped here).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let header = parse(&map, path)?;
        Ok(GgufFile {
            path: path.to_path_buf(),
            map,
            header,
        })
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of a tensor (whole blocks of its type).
    pub fn data(&self, tensor: &TensorInfo) -> &[u8] {
        &self.map[tensor.range.clone()]
    }
}

fn malformed(path: &Path, detail: String) -> Error {
    Error::Gguf {
        path: path.to_path_buf(),
        detail,
    }
}

/// Reads little-endian values from a byte slice, failing (not panicking) past the end.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
    /// Bytes of decoded metadata still allowed (see [`MAX_METADATA_BYTES`]).
    budget: u64,
}

/// What a decoded string costs beyond its bytes (the `String` and its allocation).
const STRING_OVERHEAD: u64 = 32;

/// What a kept key/value or a tensor entry costs beyond its name (the entry and its vectors).
const ENTRY_OVERHEAD: u64 = 96;

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], Error> {
        if n > self.remaining() as u64 {
            return Err(Error::Truncated {
                path: self.path.to_path_buf(),
                detail: format!(
                    "{what} needs {n} bytes at offset {}, only {} remain",
                    self.pos,
                    self.remaining()
                ),
            });
        }
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A string, its bytes plus `overhead` charged to the budget before it is allocated.
    fn string(&mut self, what: &str, overhead: u64) -> Result<String, Error> {
        let len = self.u64(what)?;
        let bytes = self.take(len, what)?;
        self.charge(len + overhead, what)?;
        // Token texts of a few vocabularies are not valid UTF-8; keep what can be kept.
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Refuses a count whose elements (each at least `min_size` bytes) cannot fit in what
    /// remains, before anything is allocated for them.
    fn check_count(&self, count: u64, min_size: u64, what: &str) -> Result<usize, Error> {
        if count.saturating_mul(min_size) > self.remaining() as u64 {
            return Err(Error::Truncated {
                path: self.path.to_path_buf(),
                detail: format!(
                    "{what} claims {count} entries of at least {min_size} bytes at offset {}, \
                     only {} bytes remain",
                    self.pos,
                    self.remaining()
                ),
            });
        }
        Ok(count as usize)
    }

    /// Counts `bytes` of decoded metadata against the budget; refuses the file past it.
    fn charge(&mut self, bytes: u64, what: &str) -> Result<(), Error> {
        if bytes > self.budget {
            return Err(malformed(
                self.path,
                format!(
                    "{what}: the metadata would take more than {} MiB in memory; Hearth reads \
                     at most that (a real model's header takes a few MiB)",
                    MAX_METADATA_BYTES >> 20
                ),
            ));
        }
        self.budget -= bytes;
        Ok(())
    }

    fn value(&mut self, kind: u32, what: &str, depth: usize) -> Result<Value, Error> {
        Ok(match kind {
            0 => Value::U8(self.array::<1>(what)?[0]),
            1 => Value::I8(self.array::<1>(what)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(self.u32(what)?),
            5 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => Value::Bool(self.boolean(what)?),
            8 => Value::String(self.string(what, STRING_OVERHEAD)?),
            9 => Value::Array(self.read_array(what, depth)?),
            10 => Value::U64(self.u64(what)?),
            11 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            other => {
                return Err(malformed(
                    self.path,
                    format!("{what}: unknown value type {other}"),
                ))
            }
        })
    }

    fn boolean(&mut self, what: &str) -> Result<bool, Error> {
        match self.array::<1>(what)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(malformed(
                self.path,
                format!("{what}: boolean byte {b} is neither 0 nor 1"),
            )),
        }
    }

    /// The element type and count of an array whose header is next, both checked: the type
    /// known, the nesting, the count against the bytes that remain and [`MAX_ARRAY_LEN`].
    fn array_header(&mut self, what: &str, depth: usize) -> Result<(u32, usize), Error> {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(malformed(
                self.path,
                format!("{what}: arrays nested deeper than {MAX_ARRAY_DEPTH}"),
            ));
        }
        let element = self.u32(what)?;
        let count = self.u64(what)?;
        let min = min_value_size(element).ok_or_else(|| {
            malformed(
                self.path,
                format!("{what}: unknown array element type {element}"),
            )
        })?;
        let count = self.check_count(count, min, what)?;
        Ok((element, count))
    }

    /// `count` elements of `N` bytes each, decoded by `from` into one vector.
    fn fixed<T, const N: usize>(
        &mut self,
        count: usize,
        what: &str,
        from: fn([u8; N]) -> T,
    ) -> Result<Vec<T>, Error> {
        self.charge((count * std::mem::size_of::<T>()) as u64, what)?;
        let bytes = self.take((count * N) as u64, what)?;
        Ok(bytes
            .chunks_exact(N)
            .map(|c| from(c.try_into().expect("chunks of N bytes")))
            .collect())
    }

    fn read_array(&mut self, what: &str, depth: usize) -> Result<Array, Error> {
        let (element, count) = self.array_header(what, depth)?;
        if count as u64 > MAX_ARRAY_LEN {
            return Err(malformed(
                self.path,
                format!(
                    "{what} holds {count} entries; Hearth reads arrays of at most \
                     {MAX_ARRAY_LEN} (the largest vocabularies have about 260000 tokens)"
                ),
            ));
        }
        Ok(match element {
            0 => Array::U8(self.fixed(count, what, |[b]| b)?),
            1 => Array::I8(self.fixed(count, what, |[b]| b as i8)?),
            2 => Array::U16(self.fixed(count, what, u16::from_le_bytes)?),
            3 => Array::I16(self.fixed(count, what, i16::from_le_bytes)?),
            4 => Array::U32(self.fixed(count, what, u32::from_le_bytes)?),
            5 => Array::I32(self.fixed(count, what, i32::from_le_bytes)?),
            6 => Array::F32(self.fixed(count, what, f32::from_le_bytes)?),
            7 => {
                self.charge(count as u64, what)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.boolean(what)?);
                }
                Array::Bool(items)
            }
            8 => {
                self.charge(count as u64 * STRING_OVERHEAD, what)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.string(what, 0)?);
                }
                Array::String(items)
            }
            9 => {
                self.charge(count as u64 * std::mem::size_of::<Array>() as u64, what)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    items.push(self.read_array(what, depth + 1)?);
                }
                Array::Array(items)
            }
            10 => Array::U64(self.fixed(count, what, u64::from_le_bytes)?),
            11 => Array::I64(self.fixed(count, what, i64::from_le_bytes)?),
            _ => Array::F64(self.fixed(count, what, f64::from_le_bytes)?),
        })
    }

    /// Steps over a value of type `kind` without decoding it, checking only that its lengths
    /// fit in the file: the cost is the time to walk it, no memory.
    fn skip(&mut self, kind: u32, what: &str, depth: usize) -> Result<(), Error> {
        match kind {
            8 => {
                let len = self.u64(what)?;
                self.take(len, what)?;
            }
            9 => {
                let (element, count) = self.array_header(what, depth)?;
                if element == 8 || element == 9 {
                    for _ in 0..count {
                        self.skip(element, what, depth + 1)?;
                    }
                } else {
                    let size = min_value_size(element).expect("checked by array_header");
                    self.take(count as u64 * size, what)?;
                }
            }
            other => {
                let size = min_value_size(other).ok_or_else(|| {
                    malformed(self.path, format!("{what}: unknown value type {other}"))
                })?;
                self.take(size, what)?;
            }
        }
        Ok(())
    }
}

/// Smallest encoded size of a value of type `kind` (for count checks), or None if unknown.
fn min_value_size(kind: u32) -> Option<u64> {
    Some(match kind {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,
        9 => 12,
        10..=12 => 8,
        _ => return None,
    })
}

/// Parses the header of the GGUF file whose bytes are `bytes`; `path` names it in errors.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Header, Error> {
    let mut c = Cursor {
        bytes,
        pos: 0,
        path,
        budget: MAX_METADATA_BYTES,
    };
    let magic: [u8; 4] = c.array("the GGUF magic")?;
    if &magic != MAGIC {
        return Err(malformed(
            path,
            format!("not a GGUF file (it starts with {magic:02x?}, a GGUF file with \"GGUF\")"),
        ));
    }
    let version = c.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(malformed(
            path,
            format!(
                "GGUF version {version} is not supported (Hearth reads versions 2 and 3); \
                 convert it again with a current llama.cpp"
            ),
        ));
    }
    let tensor_count = c.u64("the tensor count")?;
    let kv_count = c.u64("the metadata count")?;
    // A key/value is at least a string length, a type and a one-byte value.
    let kv_count = c.check_count(kv_count, 13, "the metadata table")?;
    let mut metadata = Vec::new();
    let mut keys = HashSet::new();
    for _ in 0..kv_count {
        let len = c.u64("a metadata key")?;
        let key = String::from_utf8_lossy(c.take(len, "a metadata key")?);
        // Long keys are cut in messages: a hostile key must not make a huge error.
        let shown: String = key.chars().take(80).collect();
        let kind = c.u32(&format!("the type of {shown}"))?;
        if !is_read_key(&key) {
            c.skip(kind, &shown, 0)?;
            continue;
        }
        let key = key.into_owned();
        c.charge(key.len() as u64 + ENTRY_OVERHEAD, &shown)?;
        let value = c.value(kind, &shown, 0)?;
        if !keys.insert(key.clone()) {
            return Err(malformed(
                path,
                format!("metadata key {shown} appears twice"),
            ));
        }
        metadata.push((key, value));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) if *a > 0 && a.is_power_of_two() => u64::from(*a),
        Some((_, v)) => {
            return Err(malformed(
                path,
                format!(
                    "general.alignment is {}; it must be a u32 power of two",
                    v.describe()
                ),
            ))
        }
    };
    // A tensor entry is at least a name length, a dim count, one dim, a type and an offset.
    let tensor_count = c.check_count(tensor_count, 32, "the tensor table")?;
    if tensor_count as u64 > MAX_TENSORS {
        return Err(malformed(
            path,
            format!(
                "the tensor table lists {tensor_count} tensors; Hearth reads at most \
                 {MAX_TENSORS} (a model of thousands of layers has fewer)"
            ),
        ));
    }
    let mut raw = Vec::with_capacity(tensor_count);
    let mut names = HashSet::new();
    for i in 0..tensor_count {
        let name = c.string(&format!("the name of tensor {i}"), ENTRY_OVERHEAD)?;
        let n_dims = c.u32(&format!("the dimension count of {name}"))?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(malformed(
                path,
                format!("tensor {name} has {n_dims} dimensions; ggml allows 1 to {MAX_DIMS}"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(c.u64(&format!("the dimensions of {name}"))?);
        }
        let type_id = c.u32(&format!("the type of {name}"))?;
        let offset = c.u64(&format!("the offset of {name}"))?;
        if !names.insert(name.clone()) {
            return Err(malformed(path, format!("tensor {name} appears twice")));
        }
        raw.push((name, dims, type_id, offset));
    }
    let data_start = (c.pos as u64).div_ceil(alignment) * alignment;
    let file_len = bytes.len() as u64;
    if data_start > file_len {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            detail: format!(
                "the data area should start at offset {data_start}, the file has {file_len} bytes"
            ),
        });
    }
    let mut tensors = Vec::with_capacity(raw.len());
    for (name, dims, type_id, offset) in raw {
        let kind = GgmlType::from_id(type_id).ok_or_else(|| {
            malformed(
                path,
                format!(
                    "tensor {name} has ggml type {type_id}, which Hearth does not know; \
                     supported: {}",
                    GgmlType::supported_names()
                ),
            )
        })?;
        let size = tensor_bytes(&name, &dims, kind).map_err(|d| malformed(path, d))?;
        if offset % alignment != 0 {
            return Err(malformed(
                path,
                format!("tensor {name} starts at data offset {offset}, not a multiple of the alignment {alignment}"),
            ));
        }
        let start = data_start.checked_add(offset);
        let end = start.and_then(|s| s.checked_add(size));
        match (start, end) {
            (Some(start), Some(end)) if end <= file_len => tensors.push(TensorInfo {
                name,
                dims,
                kind,
                range: start as usize..end as usize,
            }),
            _ => {
                return Err(Error::Truncated {
                    path: path.to_path_buf(),
                    detail: format!(
                        "tensor {name} needs {size} bytes at data offset {offset} (file offset \
                         {}), the file has {file_len} bytes",
                        data_start.saturating_add(offset)
                    ),
                })
            }
        }
    }
    Ok(Header {
        version,
        metadata,
        tensors,
        alignment,
        data_start: data_start as usize,
    })
}

/// Bytes of a tensor of `dims` and `kind`, or why the shape is impossible.
fn tensor_bytes(name: &str, dims: &[u64], kind: GgmlType) -> Result<u64, String> {
    if dims.contains(&0) {
        return Err(format!("tensor {name} has a zero dimension {dims:?}"));
    }
    let block = kind.block_len() as u64;
    if !dims[0].is_multiple_of(block) {
        return Err(format!(
            "tensor {name}: its rows of {} elements are not whole {} blocks of {block}",
            dims[0],
            kind.name()
        ));
    }
    let elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= 1 << 40)
        .ok_or_else(|| format!("tensor {name} has absurd dimensions {dims:?}"))?;
    Ok(elements / block * kind.block_bytes() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::write::GgufWriter;

    fn sample() -> Vec<u8> {
        let mut w = GgufWriter::new(3);
        w.kv("general.architecture", Value::String("llama".into()));
        w.kv("general.alignment", Value::U32(64));
        w.kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(vec!["a".into(), "b".into()])),
        );
        w.kv("general.f", Value::F64(1.5));
        w.kv("other.bytes", Value::Array(Array::U8(vec![1, 2, 3])));
        w.tensor("t.weight", &[32, 2], GgmlType::Q8_0, &[7u8; 68]);
        w.tensor("n.weight", &[3], GgmlType::F32, &[0u8; 12]);
        w.finish()
    }

    #[test]
    fn reads_what_the_writer_wrote() {
        let bytes = sample();
        let h = parse(&bytes, Path::new("s.gguf")).unwrap();
        assert_eq!(h.version, 3);
        assert_eq!(h.alignment, 64);
        assert_eq!(h.data_start % 64, 0);
        assert_eq!(
            h.get("general.architecture").unwrap().as_str(),
            Some("llama")
        );
        assert_eq!(h.get("general.f").unwrap().as_f64(), Some(1.5));
        assert_eq!(
            h.get("other.bytes"),
            None,
            "a key Hearth does not read is skipped"
        );
        assert_eq!(
            h.get("tokenizer.ggml.tokens")
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let t = h.tensor("t.weight").unwrap();
        assert_eq!((t.row_len(), t.rows(), t.kind), (32, 2, GgmlType::Q8_0));
        assert_eq!(&bytes[t.range.clone()], &[7u8; 68]);
        let n = h.tensor("n.weight").unwrap();
        assert_eq!(n.range.start % 64, 0, "each tensor aligned");
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample();
        let full = parse(&bytes, Path::new("s.gguf")).unwrap();
        let end = full.tensors.iter().map(|t| t.range.end).max().unwrap();
        for len in 0..end {
            assert!(
                parse(&bytes[..len], Path::new("s.gguf")).is_err(),
                "length {len}"
            );
        }
    }

    #[test]
    fn refuses_a_wrong_magic_and_version() {
        let mut bytes = sample();
        bytes[4] = 1;
        let err = parse(&bytes, Path::new("s.gguf")).unwrap_err().to_string();
        assert!(err.contains("version 1"), "{err}");
        bytes[0] = b'X';
        let err = parse(&bytes, Path::new("s.gguf")).unwrap_err().to_string();
        assert!(err.contains("not a GGUF file"), "{err}");
    }

    #[test]
    fn refuses_a_huge_count_without_allocating() {
        let mut bytes = sample();
        bytes[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = parse(&bytes, Path::new("s.gguf")).unwrap_err().to_string();
        assert!(err.contains("claims"), "{err}");
    }

    #[test]
    fn refuses_an_unknown_tensor_type_by_number() {
        let mut w = GgufWriter::new(3);
        w.tensor_raw("t", &[32], 99, 0);
        let bytes = w.finish();
        let err = parse(&bytes, Path::new("s.gguf")).unwrap_err().to_string();
        assert!(err.contains("ggml type 99"), "{err}");
    }

    #[test]
    fn refuses_absurd_dimensions_and_offsets_past_the_end() {
        let mut w = GgufWriter::new(3);
        w.tensor_raw("t", &[u64::MAX, 2], 0, 0);
        let err = parse(&w.finish(), Path::new("s.gguf"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("absurd"), "{err}");
        let mut w = GgufWriter::new(2);
        w.tensor_raw("t", &[4], 0, 1 << 20);
        let err = parse(&w.finish(), Path::new("s.gguf"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("truncated"), "{err}");
    }
}
