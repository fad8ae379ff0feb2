//! The safetensors container (which `model.q4nx` is): parse and check the header and tensor
//! table, and encode a header for writing.
//!
//! Layout: u64 little-endian header length `n`, `n` bytes of JSON
//! (`{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {..}}`), then the
//! data area; offsets are relative to the start of the data area. The parser never panics and
//! checks every offset before anything slices the file.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::{Dtype, Error};

/// Largest JSON header we accept: real headers are about 100 KB (a few MB for the largest
/// single-file models). The spec allows 100 MB, but the header is decoded into JSON values of
/// up to 16 times its size, and a model folder found on disk may hold anything, so Hearth reads
/// at most 16 MiB.
pub const MAX_HEADER_BYTES: u64 = 16 * 1024 * 1024;

/// One entry of the tensor table, with offsets already checked against the file.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Tensor name as in the header.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Absolute byte range in the file (header length prefix and JSON included).
    pub range: std::ops::Range<usize>,
}

/// A checked header: tensors sorted by offset, and the free-form metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    /// The tensors, sorted by position in the file.
    pub tensors: Vec<TensorInfo>,
    /// `__metadata__` (string to string).
    pub metadata: BTreeMap<String, String>,
    /// Absolute offset of the data area.
    pub data_start: usize,
}

/// Reads the 8-byte length prefix and checks it against the file length.
pub fn header_len(first_bytes: &[u8], file_len: u64, path: &Path) -> Result<usize, Error> {
    if first_bytes.len() < 8 || file_len < 8 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            detail: format!(
                "the file is {file_len} bytes, a safetensors file starts with an 8-byte header length"
            ),
        });
    }
    let mut prefix = [0u8; 8];
    prefix.copy_from_slice(&first_bytes[..8]);
    let n = u64::from_le_bytes(prefix);
    if n > file_len - 8 {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            detail: format!(
                "the header length says {n} bytes of JSON, but only {} bytes follow",
                file_len - 8
            ),
        });
    }
    if n > MAX_HEADER_BYTES {
        return Err(Error::MalformedHeader {
            path: path.to_path_buf(),
            detail: format!("header of {n} bytes is larger than the {MAX_HEADER_BYTES}-byte limit"),
        });
    }
    // n <= MAX_HEADER_BYTES, so it fits in usize on every supported target.
    Ok(n as usize)
}

/// Parses a whole file held in memory (the memory map). This is the fuzzed entry point.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Header, Error> {
    let n = header_len(bytes, bytes.len() as u64, path)?;
    let json = &bytes[8..8 + n];
    parse_json(json, (bytes.len() - 8 - n) as u64, path)
}

/// Parses the JSON header; `data_len` is the size of the data area that follows it.
pub fn parse_json(json: &[u8], data_len: u64, path: &Path) -> Result<Header, Error> {
    let malformed = |detail: String| Error::MalformedHeader {
        path: path.to_path_buf(),
        detail,
    };
    let data_start = 8 + json.len();
    // Headers are padded with spaces (and sometimes NULs) to an 8-byte boundary.
    let trimmed = trim_padding(json);
    let entries: Entries = serde_json::from_slice(trimmed)
        .map_err(|e| malformed(format!("the header is not a valid JSON object: {e}")))?;
    let mut header = Header {
        data_start,
        ..Header::default()
    };
    let mut seen = HashSet::new();
    for (name, value) in entries.0 {
        if !seen.insert(name.clone()) {
            return Err(malformed(format!("tensor {name} is listed twice")));
        }
        if name == "__metadata__" {
            header.metadata = parse_metadata(&value).map_err(malformed)?;
            continue;
        }
        header
            .tensors
            .push(parse_entry(&name, &value, data_len, data_start, path)?);
    }
    check_layout(&mut header.tensors, data_len, data_start, path)?;
    Ok(header)
}

fn trim_padding(json: &[u8]) -> &[u8] {
    let end = json
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &json[..end]
}

fn parse_metadata(value: &Value) -> Result<BTreeMap<String, String>, String> {
    let obj = value
        .as_object()
        .ok_or_else(|| format!("__metadata__ is not an object: {}", short(value)))?;
    Ok(obj
        .iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect())
}

fn parse_entry(
    name: &str,
    value: &Value,
    data_len: u64,
    data_start: usize,
    path: &Path,
) -> Result<TensorInfo, Error> {
    let malformed = |detail: String| Error::MalformedHeader {
        path: path.to_path_buf(),
        detail: format!("tensor {name}: {detail}"),
    };
    let obj = value
        .as_object()
        .ok_or_else(|| malformed(format!("entry is not an object: {}", short(value))))?;
    let dtype_name = obj
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("dtype is missing or not a string".into()))?;
    let dtype = Dtype::from_name(dtype_name).ok_or_else(|| Error::UnknownDtype {
        path: path.to_path_buf(),
        tensor: name.to_string(),
        dtype: dtype_name.to_string(),
    })?;
    let shape = obj
        .get("shape")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("shape is missing or not a list".into()))?
        .iter()
        .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| malformed("shape holds something other than sizes".into()))?;
    let offsets = obj
        .get("data_offsets")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 2)
        .and_then(|a| Some([a[0].as_u64()?, a[1].as_u64()?]))
        .ok_or_else(|| malformed("data_offsets is not a pair of byte offsets".into()))?;
    let [begin, end] = offsets;
    let bad = |detail: String| Error::BadOffsets {
        path: path.to_path_buf(),
        tensor: name.to_string(),
        detail,
    };
    if begin > end {
        return Err(bad(format!(
            "data_offsets out of order: begin {begin} is after end {end}"
        )));
    }
    if end > data_len {
        return Err(Error::Truncated {
            path: path.to_path_buf(),
            detail: format!(
                "tensor {name} needs bytes {begin}..{end} of the data area, which has only \
                 {data_len} bytes"
            ),
        });
    }
    let expected = shape
        .iter()
        .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64));
    if expected != Some(end - begin) {
        let expected = expected.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string());
        return Err(bad(format!(
            "shape {shape:?} of {dtype} needs {expected} bytes, data_offsets hold {}",
            end - begin
        )));
    }
    // end <= data_len and the data area is in memory or in a file we mapped, so these fit.
    let start = data_start + begin as usize;
    Ok(TensorInfo {
        name: name.to_string(),
        dtype,
        shape,
        range: start..data_start + end as usize,
    })
}

/// Sorts by offset and refuses overlaps, holes and trailing bytes (the safetensors rule that
/// the data area is exactly the tensors, back to back).
fn check_layout(
    tensors: &mut [TensorInfo],
    data_len: u64,
    data_start: usize,
    path: &Path,
) -> Result<(), Error> {
    tensors.sort_by_key(|t| (t.range.start, t.range.end));
    let mut cursor = data_start;
    let mut previous: Option<&TensorInfo> = None;
    for t in tensors.iter() {
        let rel = |x: usize| x - data_start;
        if t.range.start < cursor {
            let other = previous.map_or("", |p| p.name.as_str());
            return Err(Error::BadOffsets {
                path: path.to_path_buf(),
                tensor: t.name.clone(),
                detail: format!(
                    "bytes {}..{} overlap tensor {other} (which ends at {})",
                    rel(t.range.start),
                    rel(t.range.end),
                    rel(cursor)
                ),
            });
        }
        if t.range.start > cursor {
            return Err(Error::BadOffsets {
                path: path.to_path_buf(),
                tensor: t.name.clone(),
                detail: format!(
                    "data starts at {} but the previous tensor ends at {}: bytes in between \
                     belong to no tensor",
                    rel(t.range.start),
                    rel(cursor)
                ),
            });
        }
        cursor = t.range.end;
        previous = Some(t);
    }
    let used = (cursor - data_start) as u64;
    if used != data_len {
        return Err(Error::MalformedHeader {
            path: path.to_path_buf(),
            detail: format!(
                "the tensors use {used} bytes of data but the file holds {data_len}: \
                 the header does not describe the whole file"
            ),
        });
    }
    Ok(())
}

fn short(value: &Value) -> String {
    let mut s = value.to_string();
    if s.len() > 80 {
        let mut cut = 77;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// The top-level object as an ordered list, so duplicate names are seen rather than merged.
struct Entries(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object of tensors")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// One tensor to be written: its header entry, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryToWrite {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions.
    pub shape: Vec<usize>,
}

impl EntryToWrite {
    /// Bytes of data this entry occupies.
    pub fn byte_len(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size()
    }
}

/// Encodes the length prefix and JSON header for tensors laid out back to back in the given
/// order. The JSON is padded with spaces to a multiple of 8 bytes, as the reference writer does.
pub fn encode_header(entries: &[EntryToWrite], metadata: &BTreeMap<String, String>) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    if !metadata.is_empty() {
        map.insert(
            "__metadata__".into(),
            Value::Object(
                metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    let mut offset = 0usize;
    for e in entries {
        let end = offset + e.byte_len();
        map.insert(
            e.name.clone(),
            serde_json::json!({
                "dtype": e.dtype.name(),
                "shape": e.shape,
                "data_offsets": [offset, end],
            }),
        );
        offset = end;
    }
    let mut json = Value::Object(map).to_string().into_bytes();
    while !json.len().is_multiple_of(8) {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str, data: usize) -> Vec<u8> {
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        out.resize(out.len() + data, 0);
        out
    }

    fn err(bytes: &[u8]) -> String {
        parse(bytes, Path::new("model.q4nx"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn round_trip_of_encoded_header() {
        let entries = vec![
            EntryToWrite {
                name: "b".into(),
                dtype: Dtype::Bf16,
                shape: vec![3, 2],
            },
            EntryToWrite {
                name: "a".into(),
                dtype: Dtype::I8,
                shape: vec![1, 5120],
            },
        ];
        let meta = BTreeMap::from([("format".to_string(), "q4nx".to_string())]);
        let mut bytes = encode_header(&entries, &meta);
        assert_eq!((bytes.len() - 8) % 8, 0, "header padded to 8 bytes");
        bytes.resize(bytes.len() + 12 + 5120, 7);
        let h = parse(&bytes, Path::new("x")).unwrap();
        assert_eq!(h.metadata, meta);
        assert_eq!(h.tensors[0].name, "b", "sorted by offset, not by name");
        assert_eq!(h.tensors[0].range.len(), 12);
        assert_eq!(h.tensors[1].range.end, bytes.len());
    }

    #[test]
    fn truncated_file() {
        assert!(err(&[1, 2, 3]).contains("truncated"));
        assert!(err(&[]).contains("truncated"));
    }

    #[test]
    fn header_length_past_end() {
        let mut b = file("{}", 0);
        b[0] = 200;
        let e = err(&b);
        assert!(e.contains("header length says 200"), "{e}");
    }

    #[test]
    fn malformed_json() {
        let e = err(&file("{\"a\": ", 0));
        assert!(e.contains("not a valid JSON object"), "{e}");
        assert!(err(&file("[1]", 0)).contains("malformed header"));
        let e = err(&file(r#"{"a": {"dtype": "F32", "shape": [1]}}"#, 4));
        assert!(e.contains("data_offsets"), "{e}");
    }

    #[test]
    fn unknown_dtype() {
        let e = err(&file(
            r#"{"w": {"dtype": "Q4_0", "shape": [2], "data_offsets": [0, 2]}}"#,
            2,
        ));
        assert!(e.contains("tensor w: unknown dtype \"Q4_0\""), "{e}");
    }

    #[test]
    fn offsets_out_of_order() {
        let e = err(&file(
            r#"{"w": {"dtype": "U8", "shape": [0], "data_offsets": [4, 2]}}"#,
            4,
        ));
        assert!(e.contains("begin 4 is after end 2"), "{e}");
    }

    #[test]
    fn offsets_past_the_end() {
        let e = err(&file(
            r#"{"w": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}"#,
            4,
        ));
        assert!(
            e.contains("tensor w needs bytes 0..8") && e.contains("only 4"),
            "{e}"
        );
    }

    #[test]
    fn overlapping_tensors() {
        let e = err(&file(
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}"#,
            6,
        ));
        assert!(
            e.contains("tensor b") && e.contains("overlap tensor a"),
            "{e}"
        );
    }

    #[test]
    fn size_mismatch_and_holes_and_trailing_bytes() {
        let e = err(&file(
            r#"{"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 4]}}"#,
            4,
        ));
        assert!(e.contains("needs 8 bytes, data_offsets hold 4"), "{e}");
        let e = err(&file(
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}"#,
            6,
        ));
        assert!(e.contains("belong to no tensor"), "{e}");
        let e = err(&file(
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}"#,
            9,
        ));
        assert!(e.contains("holds 9"), "{e}");
    }

    #[test]
    fn duplicate_names() {
        let e = err(&file(
            r#"{"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},
                "a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}}"#,
            0,
        ));
        assert!(e.contains("listed twice"), "{e}");
    }

    #[test]
    fn huge_shape_does_not_overflow() {
        let e = err(&file(
            r#"{"a": {"dtype": "F64", "shape": [18446744073709551615, 4], "data_offsets": [0, 0]}}"#,
            0,
        ));
        assert!(e.contains("more than 2^64"), "{e}");
    }
}
