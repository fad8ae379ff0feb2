//! The catalog (model_list.json): where FastFlowLM finds it, its tags, and the model folders
//! it names; and `dump4`, JSON as FastFlowLM prints it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::setup::Release;

/// Where the FHS layout keeps the catalog, from the program's folder (`src/CMakeLists.txt`
/// installs it to `share/flm`, "the app's relocatable <exe_dir>/../share/flm lookup").
const SHARE_LIST: &str = "../share/flm/model_list.json";

/// A JSON value printed as nlohmann's `dump(4)` prints it: keys sorted, four-space indent.
pub fn dump4(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let by_key: BTreeMap<&String, &Value> = m.iter().collect();
                let mut out = Map::new();
                for (k, v) in by_key {
                    out.insert(k.clone(), sorted(v));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    serde::Serialize::serialize(&sorted(value), &mut ser).expect("JSON values serialize");
    String::from_utf8(buf).expect("JSON is UTF-8")
}

pub struct Catalog {
    json: Value,
    /// `<models dir>/<model_path>`, joined as a filesystem path (an absolute `model_path` wins).
    model_root: PathBuf,
}

impl Catalog {
    /// Finds model_list.json as the imitated release does: `FLM_CONFIG_PATH` (when it exists),
    /// then next to the program, then (1.0.x) `<program's folder>/../share/flm`, where the
    /// FHS install (the .deb) keeps it beside the kernels.
    pub fn find_and_read(release: &Release) -> Result<Catalog, String> {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.canonicalize().ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let from_env = std::env::var("FLM_CONFIG_PATH")
            .ok()
            .filter(|p| !p.is_empty() && Path::new(p).exists());
        let path = match from_env {
            Some(p) => {
                eprintln!("[FLM]  Using custom model list path: {p}");
                PathBuf::from(p)
            }
            None if exe_dir.join("model_list.json").exists() => exe_dir.join("model_list.json"),
            None if release.is_1_0() && exe_dir.join(SHARE_LIST).exists() => exe_dir.join(SHARE_LIST),
            None => {
                return Err("model_list.json not found. Please set FLM_CONFIG_PATH or place it next to the executable.".into())
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|_| format!("Failed to open config file: {}", path.display()))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| {
            format!("terminate called after throwing an instance of 'nlohmann::json_abi::detail::parse_error': {e}")
        })?;
        let models_dir = match std::env::var("FLM_MODEL_PATH") {
            Ok(p) if !p.is_empty() => PathBuf::from(p),
            _ => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".config/flm"),
        };
        let _ = std::fs::create_dir_all(&models_dir);
        let model_root = models_dir.join(json["model_path"].as_str().unwrap_or("models"));
        Ok(Catalog { json, model_root })
    }

    /// Every `(family, size, entry)`, in key order.
    pub fn entries(&self) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        if let Some(families) = self.json["models"].as_object() {
            let families: BTreeMap<_, _> = families.iter().collect();
            for (family, sizes) in families {
                if let Some(sizes) = sizes.as_object() {
                    let sizes: BTreeMap<_, _> = sizes.iter().collect();
                    for (size, entry) in sizes {
                        out.push((family.clone(), size.clone(), entry.clone()));
                    }
                }
            }
        }
        out
    }

    /// Whether the CLI accepts `tag` (a family or `family:size` key, compared exactly).
    pub fn is_tag(&self, tag: &str) -> bool {
        self.entries()
            .iter()
            .any(|(f, s, _)| tag == f || tag == format!("{f}:{s}"))
    }

    /// FastFlowLM's `rectify_model_tag`: drop a `prefix/`, and give a bare family its first
    /// size in key order.
    pub fn rectify(&self, tag: &str) -> String {
        let tag = tag.split_once('/').map_or(tag, |(_, t)| t);
        if tag.contains(':') {
            return tag.to_string();
        }
        self.entries()
            .into_iter()
            .find(|(f, _, _)| f == tag)
            .map_or(tag.to_string(), |(f, s, _)| format!("{f}:{s}"))
    }

    pub fn entry(&self, tag: &str) -> Option<Value> {
        self.entries()
            .into_iter()
            .find(|(f, s, _)| format!("{f}:{s}") == tag)
            .map(|(_, _, e)| e)
    }

    pub fn folder(&self, entry: &Value) -> PathBuf {
        self.model_root
            .join(entry["name"].as_str().unwrap_or_default())
    }

    pub fn installed(&self, entry: &Value) -> bool {
        let folder = self.folder(entry);
        entry["files"].as_array().is_some_and(|files| {
            files
                .iter()
                .all(|f| folder.join(f.as_str().unwrap_or("")).is_file())
        })
    }
}
