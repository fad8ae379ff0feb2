//! NPU kernels listed by a model: `model_info.json`, the Hugging Face file listing FastFlowLM
//! keeps per model (its own `src/model_info.json` holds one per tag). Some FastFlowLM model
//! repositories carry their kernels (`*.xclbin`) and such a list; a pull then verifies every
//! listed kernel as it verifies the weights, and `hearth list` says "kernels verified" or "no
//! kernel list". The format, and where every kernel set Hearth can use comes from, are in the
//! repository's `kernels/README.md`.
//!
//! Accepted shapes: the listing itself (an array of entries), an object of listings by tag, or
//! `{"files": [...]}`. An entry is `{"path", "size", "lfs": {"oid": <sha256>, "size"}}` as the
//! Hub's tree API gives it, or `{"path", "size", "sha256"}`. Only `.xclbin` entries count.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::registry::FileRecord;

/// The kernel list's file name in a model repository and folder.
pub const KERNEL_LIST_FILE: &str = "model_info.json";

/// One kernel the list names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedKernel {
    /// Its file name ("attn.xclbin").
    pub file: String,
    /// Bytes.
    pub size: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

/// What is known of a model's kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelStatus {
    /// The model lists its kernels and every one was verified when it was installed.
    Verified {
        /// How many.
        count: usize,
    },
    /// The model has no kernel list (FastFlowLM's own kernels, or none).
    NoList,
    /// The list and the files disagree, or the list cannot be read.
    NotVerified {
        /// Why, in plain words.
        reason: String,
    },
}

impl KernelStatus {
    /// "kernels verified (4)", "no kernel list", "kernels NOT verified: ...".
    pub fn words(&self) -> String {
        match self {
            KernelStatus::Verified { count } => format!("kernels verified ({count})"),
            KernelStatus::NoList => "no kernel list".into(),
            KernelStatus::NotVerified { reason } => format!("kernels NOT verified: {reason}"),
        }
    }
}

/// The kernels `bytes` (a kernel list of `origin`) names.
pub fn parse_kernel_list(bytes: &[u8], origin: &str) -> Result<Vec<ListedKernel>> {
    let mismatch = |detail: String| Error::KernelMismatch {
        origin: origin.to_string(),
        detail,
    };
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| mismatch(format!("{KERNEL_LIST_FILE} is not JSON ({e})")))?;
    let entries: Vec<&Value> = match &value {
        Value::Array(list) => list.iter().collect(),
        Value::Object(map) => match map.get("files") {
            Some(Value::Array(list)) => list.iter().collect(),
            _ => map.values().filter_map(Value::as_array).flatten().collect(),
        },
        _ => {
            return Err(mismatch(format!(
                "{KERNEL_LIST_FILE} is not a file listing"
            )))
        }
    };
    let mut kernels: BTreeMap<String, ListedKernel> = BTreeMap::new();
    for entry in entries {
        let Some(path) = entry.get("path").and_then(Value::as_str) else {
            continue;
        };
        if !path.ends_with(".xclbin") {
            continue;
        }
        let lfs = entry.get("lfs");
        let sha256 = lfs
            .and_then(|l| l.get("oid"))
            .or_else(|| entry.get("sha256"))
            .and_then(Value::as_str)
            .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| mismatch(format!("it lists {path} without a sha256")))?;
        let size = lfs
            .and_then(|l| l.get("size"))
            .or_else(|| entry.get("size"))
            .and_then(Value::as_u64)
            .ok_or_else(|| mismatch(format!("it lists {path} without a size")))?;
        let listed = ListedKernel {
            file: path.to_string(),
            size,
            sha256: sha256.to_ascii_lowercase(),
        };
        // Listings by tag may name one kernel several times: they must agree.
        if let Some(seen) = kernels.get(path) {
            if *seen != listed {
                return Err(mismatch(format!("it lists {path} twice, differently")));
            }
        }
        kernels.insert(path.to_string(), listed);
    }
    Ok(kernels.into_values().collect())
}

/// Checks that every kernel in `listed` is among the verified files `records` with the listed
/// size and sha256.
pub fn verify_kernels(
    listed: &[ListedKernel],
    records: &BTreeMap<String, FileRecord>,
    origin: &str,
) -> Result<()> {
    for kernel in listed {
        let detail = match records.get(&kernel.file) {
            None => format!(
                "{} is listed but is not among the model's files",
                kernel.file
            ),
            Some(r) if r.size != kernel.size => format!(
                "{} has {} bytes, the list says {}",
                kernel.file, r.size, kernel.size
            ),
            Some(r) if !r.sha256.eq_ignore_ascii_case(&kernel.sha256) => format!(
                "{} has sha256 {}, the list says {}",
                kernel.file, r.sha256, kernel.sha256
            ),
            Some(_) => continue,
        };
        return Err(Error::KernelMismatch {
            origin: origin.to_string(),
            detail,
        });
    }
    Ok(())
}

/// What is known of the kernels of the installed model in `folder`, whose files were verified
/// as `records` when it was installed.
pub fn kernel_status(folder: &Path, records: &BTreeMap<String, FileRecord>) -> KernelStatus {
    let Ok(bytes) = std::fs::read(folder.join(KERNEL_LIST_FILE)) else {
        return KernelStatus::NoList;
    };
    let origin = folder.display().to_string();
    let checked = parse_kernel_list(&bytes, &origin).and_then(|listed| {
        verify_kernels(&listed, records, &origin)?;
        Ok(listed.len())
    });
    match checked {
        Ok(0) => KernelStatus::NoList,
        Ok(count) => KernelStatus::Verified { count },
        Err(Error::KernelMismatch { detail, .. }) => KernelStatus::NotVerified { reason: detail },
        Err(e) => KernelStatus::NotVerified {
            reason: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "cb8e7bef68c19797d9f57c163ba8943fa3bd474af6c9e82c0c4a7554852afd4a";

    fn record(size: u64, sha256: &str) -> FileRecord {
        FileRecord {
            size,
            sha256: sha256.into(),
        }
    }

    #[test]
    fn the_example_in_kernels_readme_parses() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels/model_info.example.json");
        let bytes = std::fs::read(&path).expect("kernels/model_info.example.json");
        let listed = parse_kernel_list(&bytes, "example").unwrap();
        let files: Vec<&str> = listed.iter().map(|k| k.file.as_str()).collect();
        assert_eq!(files, ["attn.xclbin", "mm.xclbin"], "only kernels count");
        assert!(listed.iter().all(|k| k.sha256.len() == 64));
    }

    #[test]
    fn every_shape_gives_the_same_kernels() {
        let entry = serde_json::json!({"type": "file", "path": "attn.xclbin", "size": 698331,
            "lfs": {"oid": SHA, "size": 698331}});
        let weights = serde_json::json!({"path": "model.q4nx", "size": 3});
        let shapes = [
            serde_json::json!([entry, weights]),
            serde_json::json!({"qwen3vl-it:4b": [entry, weights], "qwen3vl-flash:4b": [entry]}),
            serde_json::json!({"files": [{"path": "attn.xclbin", "size": 698331, "sha256": SHA}]}),
        ];
        for shape in shapes {
            let listed = parse_kernel_list(shape.to_string().as_bytes(), "x").unwrap();
            assert_eq!(
                listed,
                [ListedKernel {
                    file: "attn.xclbin".into(),
                    size: 698331,
                    sha256: SHA.into()
                }],
                "{shape}"
            );
        }
    }

    #[test]
    fn a_kernel_without_sha256_or_a_changed_one_is_refused() {
        let no_sha = serde_json::json!([{"path": "mm.xclbin", "size": 5}]);
        let e = parse_kernel_list(no_sha.to_string().as_bytes(), "o/r").unwrap_err();
        assert!(e.to_string().contains("mm.xclbin without a sha256"), "{e}");
        let listed = [ListedKernel {
            file: "attn.xclbin".into(),
            size: 10,
            sha256: SHA.into(),
        }];
        let mut records = BTreeMap::new();
        let e = verify_kernels(&listed, &records, "o/r").unwrap_err();
        assert!(e.to_string().contains("not among the model's files"), "{e}");
        records.insert("attn.xclbin".into(), record(10, &"0".repeat(64)));
        let e = verify_kernels(&listed, &records, "o/r").unwrap_err();
        assert!(e.to_string().contains("the list says cb8e7bef"), "{e}");
        records.insert("attn.xclbin".into(), record(10, SHA));
        verify_kernels(&listed, &records, "o/r").unwrap();
    }

    #[test]
    fn status_of_an_installed_folder() {
        let dir = tempfile::tempdir().unwrap();
        let mut records = BTreeMap::new();
        assert_eq!(kernel_status(dir.path(), &records), KernelStatus::NoList);
        let list = serde_json::json!([{"path": "attn.xclbin", "size": 10, "sha256": SHA}]);
        std::fs::write(dir.path().join(KERNEL_LIST_FILE), list.to_string()).unwrap();
        let status = kernel_status(dir.path(), &records);
        assert!(
            matches!(status, KernelStatus::NotVerified { .. }),
            "{status:?}"
        );
        records.insert("attn.xclbin".into(), record(10, SHA));
        let status = kernel_status(dir.path(), &records);
        assert_eq!(status, KernelStatus::Verified { count: 1 });
        assert_eq!(status.words(), "kernels verified (1)");
    }
}
