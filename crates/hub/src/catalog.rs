//! The models Hearth knows by name (`catalog.json`, committed beside this crate).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model_dir::WeightFormat;

/// Where a model can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum Backend {
    /// Hearth's own CPU engine.
    Cpu,
    /// The XDNA 2 NPU (through FastFlowLM today).
    Npu,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Cpu => "cpu",
            Backend::Npu => "npu",
        })
    }
}

/// What a model is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum ModelKind {
    /// An assistant: chat and completion.
    #[default]
    Chat,
    /// Sentence embeddings for searching the user's files (the documents library's
    /// `--embedding-model`); it does not chat.
    Embedding,
    /// Speech: turns spoken words into text or text into speech; it does not chat.
    Speech,
    /// Reranking: orders found passages by how well they answer a question; it does not chat.
    Reranking,
}

/// One model of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct CatalogEntry {
    /// Short id users type: `hearth pull minicpm5-2b`.
    pub id: String,
    /// Folder name once installed (and FastFlowLM's `name`).
    pub name: String,
    /// FastFlowLM tag `family:size`, the two keys of its registry.
    pub tag: String,
    /// Hugging Face repository `owner/name`.
    pub repo: String,
    /// Branch, tag or commit to download.
    pub revision: String,
    /// Weight format the repository holds.
    pub format: WeightFormat,
    /// What it is for. By default, chat.
    #[serde(default)]
    pub kind: ModelKind,
    /// Approximate download size in bytes (the exact size is read from the Hub).
    pub download_bytes: u64,
    /// Approximate memory needed to run it, in bytes.
    pub memory_bytes: u64,
    /// Parameter count as written by its authors ("2.5B").
    pub parameters: String,
    /// License of the weights.
    pub license: String,
    /// Where it runs.
    pub backends: Vec<Backend>,
    /// Context length FastFlowLM uses by default.
    pub context_length: u64,
    /// Whether the model can reason (`<think>`).
    pub think: bool,
    /// Whether FastFlowLM reads pictures with it (its catalog's `vlm`, a vision model): a pull
    /// writes the mark into the registry, where the NPU backend looks for it before sending a
    /// picture. Hearth's CPU engine reads text only. By default, no.
    #[serde(default)]
    pub vlm: bool,
    /// FastFlowLM's `details.family` (picks its engine).
    pub flm_family: String,
    /// Quantization as FastFlowLM names it.
    pub quantization: String,
    /// One sentence for the Models view.
    pub description: String,
    /// Caveats worth reading before downloading (may be empty).
    pub note: String,
    /// The languages a speech model understands, as ISO 639 codes (empty for other kinds).
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub languages: Vec<String>,
    /// The files of the pinned revision with their sizes and sha256, where the catalog lists
    /// them (speech models): what the offer to download says, and what `pull` fetches there.
    /// The web UI reads neither this nor `languages` from the catalog (the voice offer has them).
    #[serde(default)]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub files: Vec<PinnedFile>,
}

/// One file of a catalog entry's pinned revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PinnedFile {
    /// File name in the repository.
    pub name: String,
    /// Bytes.
    #[cfg_attr(feature = "ts", ts(type = "number"))]
    pub size: u64,
    /// sha256 of the bytes, lowercase hex.
    pub sha256: String,
}

impl CatalogEntry {
    /// Whether it is a speech model (installed under `models/speech/`, never registered for
    /// FastFlowLM).
    pub fn is_speech(&self) -> bool {
        self.kind == ModelKind::Speech
    }
}

/// The speech model Hearth offers when none is installed.
pub const DEFAULT_SPEECH_MODEL: &str = "whisper-base";

/// The speech models of the catalog, the default first.
pub fn speech_entries() -> Result<Vec<&'static CatalogEntry>> {
    let mut out: Vec<&'static CatalogEntry> = entries()?.iter().filter(|e| e.is_speech()).collect();
    out.sort_by_key(|e| e.id != DEFAULT_SPEECH_MODEL);
    Ok(out)
}

#[derive(Deserialize)]
struct CatalogFile {
    models: Vec<CatalogEntry>,
}

/// Parses a catalog file's text.
pub fn parse(text: &str) -> Result<Vec<CatalogEntry>> {
    let file: CatalogFile =
        serde_json::from_str(text).map_err(|e| Error::Catalog(e.to_string()))?;
    for entry in &file.models {
        crate::names::check_name(&entry.name)
            .map_err(|e| Error::Catalog(format!("entry {}: {e}", entry.id)))?;
        crate::names::split_tag(&entry.tag).ok_or_else(|| {
            Error::Catalog(format!(
                "entry {}: tag {:?} is not family:size",
                entry.id, entry.tag
            ))
        })?;
        if entry.is_speech() {
            check_speech_entry(entry)
                .map_err(|reason| Error::Catalog(format!("entry {}: {reason}", entry.id)))?;
        }
        if !crate::hub_api::is_repo_id(&entry.repo) {
            return Err(Error::Catalog(format!(
                "entry {}: repo {:?} is not owner/name",
                entry.id, entry.repo
            )));
        }
    }
    Ok(file.models)
}

/// The committed catalog.
pub fn entries() -> Result<&'static [CatalogEntry]> {
    static CATALOG: OnceLock<std::result::Result<Vec<CatalogEntry>, String>> = OnceLock::new();
    CATALOG
        .get_or_init(|| parse(include_str!("../catalog.json")).map_err(|e| e.to_string()))
        .as_deref()
        .map_err(|e| Error::Catalog(e.clone()))
}

/// The catalog entry whose id, name, tag or repository is `query` (case-insensitive).
pub fn find(query: &str) -> Result<Option<&'static CatalogEntry>> {
    let query = query.trim();
    Ok(entries()?.iter().find(|e| {
        [&e.id, &e.name, &e.tag, &e.repo]
            .iter()
            .any(|field| field.eq_ignore_ascii_case(query))
    }))
}

/// The catalog's own rules for a speech entry: a name that can be a folder, languages, and
/// pinned files (with a `model.bin`) whose sizes add up to the download size.
fn check_speech_entry(entry: &CatalogEntry) -> std::result::Result<(), String> {
    if entry.languages.is_empty() {
        return Err("a speech model lists the languages it understands".into());
    }
    if !entry.files.iter().any(|f| f.name == "model.bin") {
        return Err("a speech model lists its pinned files, model.bin among them".into());
    }
    let sum: u64 = entry.files.iter().map(|f| f.size).sum();
    if sum != entry.download_bytes {
        return Err(format!(
            "download_bytes {} is not the sum of its files, {sum}",
            entry.download_bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_catalog_parses_and_holds_the_four_models_of_the_brief_and_an_embedding_model() {
        let ids: Vec<&str> = entries().unwrap().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "minicpm5-2b",
                "minicpm5-2b-npu2",
                "qwen3-1.7b-npu2",
                "llama-3.2-1b-npu2",
                "llama-3.2-1b",
                "llama-3.2-3b",
                "llama-3.2-3b-npu2",
                "qwen2.5-0.5b",
                "qwen2.5-1.5b",
                "qwen2.5-3b",
                "qwen2.5-3b-npu2",
                "qwen2.5-7b",
                "qwen2.5-coder-1.5b",
                "qwen2.5-coder-7b",
                "gemma-3-1b",
                "gemma3-1b-npu2",
                "gemma-3-4b",
                "gemma3-4b-npu2",
                "lfm2-1.2b-npu2",
                "phi4-mini-npu2",
                "gpt-oss-20b-npu2",
                "qwen3-embedding-0.6b",
                "whisper-tiny",
                "whisper-base",
                "whisper-small"
            ]
        );
    }

    #[test]
    fn the_multilingual_embedding_model_is_listed_as_one() {
        let entry = find("Qwen3-Embedding-0.6B").unwrap().unwrap();
        assert_eq!(entry.kind, ModelKind::Embedding);
        assert_eq!(entry.repo, "Qwen/Qwen3-Embedding-0.6B");
        assert_eq!(entry.license, "Apache-2.0");
        assert_eq!(
            entry.backends,
            [Backend::Cpu],
            "the engine runs it, not the NPU"
        );
        let chat: Vec<&str> = entries()
            .unwrap()
            .iter()
            .filter(|e| e.kind == ModelKind::Chat)
            .map(|e| e.id.as_str())
            .collect();
        assert_eq!(chat.len(), 21, "the others chat: {chat:?}");
    }

    #[test]
    fn find_matches_id_name_tag_and_repo_ignoring_case() {
        for query in [
            "qwen3-1.7b-npu2",
            "Qwen3-1.7B-NPU2",
            "qwen3:1.7b",
            "fastflowlm/qwen3-1.7b-npu2",
        ] {
            assert_eq!(
                find(query).unwrap().unwrap().id,
                "qwen3-1.7b-npu2",
                "query {query}"
            );
        }
        assert!(find("nonesuch").unwrap().is_none());
    }

    #[test]
    fn tags_and_names_are_unique() {
        let all = entries().unwrap();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.tag, b.tag);
                assert_ne!(a.name, b.name);
            }
        }
    }

    /// FastFlowLM's catalog marks Gemma3-4B-NPU2 `vlm` (its packing has `vision_weight.q4nx`);
    /// Google's release of the same model for the CPU engine and every other entry read text
    /// only.
    #[test]
    fn only_fastflowlms_vision_packing_sees_pictures() {
        let seeing: Vec<&str> = entries()
            .unwrap()
            .iter()
            .filter(|e| e.vlm)
            .map(|e| e.id.as_str())
            .collect();
        assert_eq!(seeing, ["gemma3-4b-npu2"]);
        let entry = find("gemma3:4b").unwrap().unwrap();
        assert_eq!(entry.backends, [Backend::Npu], "it sees on the NPU only");
        assert!(!find("gemma-3-4b").unwrap().unwrap().vlm);
        // An entry without the key reads text only; a key that is not true or false is refused.
        let one = |vlm: &str| {
            let text = include_str!("../catalog.json");
            let file: serde_json::Value = serde_json::from_str(text).unwrap();
            let mut entry = file["models"][0].clone();
            match vlm {
                "absent" => {
                    entry.as_object_mut().unwrap().remove("vlm");
                }
                value => entry["vlm"] = serde_json::from_str(value).unwrap(),
            }
            parse(&serde_json::json!({ "models": [entry] }).to_string())
        };
        assert!(!one("absent").unwrap()[0].vlm);
        assert!(one("true").unwrap()[0].vlm);
        let err = one("\"yes\"").unwrap_err().to_string();
        assert!(err.contains("expected a boolean"), "{err}");
    }

    /// FastFlowLM's packings of the families the CPU engine runs from the same file list the
    /// processor as their fallback; its Gemma3-4B reads pictures, which the CPU engine cannot,
    /// so it stays on the NPU (Gemma-3-4B-IT is the processor's Gemma 3 4B).
    #[test]
    fn fastflowlm_models_the_processor_runs_list_it_as_their_fallback() {
        let npu: Vec<(&str, bool)> = entries()
            .unwrap()
            .iter()
            .filter(|e| e.backends.contains(&Backend::Npu))
            .map(|e| (e.tag.as_str(), e.backends.contains(&Backend::Cpu)))
            .collect();
        assert_eq!(
            npu,
            [
                ("minicpm5-npu2:2b", true),
                ("qwen3:1.7b", true),
                ("llama3.2:1b", true),
                ("llama3.2:3b", true),
                ("qwen2.5:3b", true),
                ("gemma3:1b", true),
                ("gemma3:4b", false),
                ("lfm2:1.2b", true),
                ("phi4-mini-it:4b", true),
                ("gpt-oss:20b", true),
            ]
        );
        for entry in entries()
            .unwrap()
            .iter()
            .filter(|e| e.backends == [Backend::Npu])
        {
            assert!(entry.vlm, "{} is NPU-only for its pictures", entry.id);
            assert!(
                entry.note.contains("pictures on the NPU only"),
                "{}",
                entry.note
            );
        }
        let gpt_oss = find("gpt-oss:20b").unwrap().unwrap();
        assert_eq!(
            (
                gpt_oss.name.as_str(),
                gpt_oss.flm_family.as_str(),
                gpt_oss.think
            ),
            ("GPT-OSS-20B-NPU2", "gpt-oss", true)
        );
    }

    #[test]
    fn malformed_catalog_is_an_error_not_a_panic() {
        assert!(parse("{").is_err());
        assert!(parse(r#"{"models":[{"id":"x"}]}"#).is_err());
    }
}
