//! Typed reads of one field of a config.json object, with the words a refusal gives: a null is
//! absent, a present value of the wrong type is an error naming the key and the value. The
//! family modules (`lfm2`, `moe`) read their fields with these, and `config`'s `Fields` wraps
//! them with the file's path.

use serde_json::{Map, Value};

/// The value of `key`, None when absent or null.
pub(crate) fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// `key` as a count (a non-negative integer), None when absent.
pub(crate) fn count(obj: &Map<String, Value>, key: &str) -> Result<Option<usize>, String> {
    get(obj, key)
        .map(|v| {
            v.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("{key} is not a non-negative integer: {v}"))
        })
        .transpose()
}

/// `key` as true or false, None when absent.
pub(crate) fn flag(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    get(obj, key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| format!("{key} is not true or false: {v}"))
        })
        .transpose()
}
