//! A GGUF file added to Hearth by reference: a small model folder that names the file instead
//! of holding a copy of its weights.
//!
//! [`link_gguf`] writes the folder: `config.json` (what the GGUF's header says, as
//! [`super::import_gguf`] derives it, plus `rope_interleaved` for a `llama` file, whose Q and
//! K rows llama.cpp stores interleaved for its RoPE), `tokenizer.json`,
//! `tokenizer_config.json` (with the chat template), `generation_config.json`, and
//! [`LINK_FILE`], which records the GGUF's absolute path, size, modification time and a
//! SHA-256 of its header (magic, metadata and tensor table, not the weights): see
//! [`GgufLink`]. No weight byte is copied; the folder is a few MB at most (the vocabulary).
//!
//! [`crate::Weights::open`] on such a folder checks the file against the link before it maps
//! it, so a file that was moved, deleted, replaced or rewritten since it was added is refused
//! with [`Error::LinkedFileMissing`] or [`Error::LinkedFileChanged`] in plain words, never
//! read as something else. A damaged `gguf-link.json` is [`Error::BadLink`].
//!
//! Errors of [`link_gguf`]: [`Error::Io`] (the file cannot be read, the folder cannot be
//! written), [`Error::Gguf`] (not a GGUF, malformed, or a model Hearth does not run: the
//! message says which and what to do), [`Error::Convert`] (the destination exists and is not
//! empty), and those of opening and validating the written folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::convert::{check_destination, partial_dir, PARTIAL_MARKER};
use crate::gguf::link_file::{GgufLink, LINK_FILE};
use crate::gguf::model::{
    gguf_err, json_with_ids, read_header_model, source_tensors, with_rope_freqs,
};
use crate::gguf::{tokenizer, GgufFile, Value};
use crate::layout::Role;
use crate::{ConvertProgress, Error, Family, ModelConfig, Weights};

/// What [`link_gguf`] wrote.
#[derive(Debug, Clone)]
pub struct GgufLinkReport {
    /// The model folder.
    pub dir: PathBuf,
    /// What the folder's [`LINK_FILE`] records.
    pub link: GgufLink,
    /// The model's config.
    pub config: ModelConfig,
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if the file has one.
    pub model_name: Option<String>,
    /// Tensors the model reads from the file.
    pub tensors: usize,
    /// Weights in the model (lm_head counted even when tied).
    pub parameters: u64,
    /// How many weight matrices (linear layers, the embedding and the head) of each GGUF
    /// type the model reads, e.g. `"Q4_K": 12`.
    pub matrix_types: BTreeMap<String, usize>,
    /// Bytes of the folder written (config, tokenizer, link): what the store grows by.
    pub folder_bytes: u64,
}

/// Writes into `dst` (which must not exist, or be empty) a model folder that reads the GGUF
/// file `gguf` where it lies. The folder is written into a hidden partial folder beside `dst`,
/// opened and validated like any model folder, then renamed to `dst`. `progress` hears of each
/// file written (`tensor` names it; the byte counts are files).
pub fn link_gguf(
    gguf: &Path,
    dst: &Path,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<GgufLinkReport, Error> {
    let link = GgufLink::measure(gguf)?;
    let file = GgufFile::open(&link.path)?;
    let src = file.path();
    let h = file.header();
    let model = read_header_model(h, src)?;
    let sources = source_tensors(h, &model.config, model.family).map_err(|d| gguf_err(src, d))?;
    let tok = tokenizer::build(h, &model.vocabulary, model.config.max_position_embeddings)
        .map_err(|d| gguf_err(src, format!("cannot import its tokenizer: {d}")))?;
    let mut config_text = with_rope_freqs(&file, &model.config_text)?;
    if model.family == Family::Llama {
        let mut v: serde_json::Value =
            serde_json::from_str(&config_text).expect("we wrote this JSON");
        v["rope_interleaved"] = serde_json::json!(true);
        config_text = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    }
    let config_text = json_with_ids(&config_text, tok.bos_id, &tok.eos_ids);
    let link_text = link.to_json();
    let files = [
        ("config.json", config_text.as_str()),
        ("tokenizer.json", tok.tokenizer.as_str()),
        ("tokenizer_config.json", tok.tokenizer_config.as_str()),
        ("generation_config.json", tok.generation_config.as_str()),
        (LINK_FILE, link_text.as_str()),
    ];
    let folder_bytes: u64 = files.iter().map(|(_, t)| t.len() as u64).sum();

    check_destination(dst)?;
    let partial = partial_dir(dst)?;
    std::fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, e))?;
    std::fs::write(partial.join(PARTIAL_MARKER), b"").map_err(|e| Error::io(&partial, e))?;
    let result = (|| {
        let mut written = 0;
        for (i, (name, text)) in files.iter().enumerate() {
            std::fs::write(partial.join(name), text)
                .map_err(|e| Error::io(partial.join(name), e))?;
            written += text.len() as u64;
            progress(ConvertProgress {
                tensor: (*name).to_string(),
                tensors_done: i + 1,
                tensors_total: files.len(),
                bytes_done: written,
                bytes_total: folder_bytes,
            });
        }
        // The written folder must read back as the model it claims to be.
        let weights = Weights::open(&partial)?;
        let config = ModelConfig::from_path(&partial.join("config.json"))?;
        crate::validate(&weights, &config)?;
        drop(weights);
        std::fs::remove_file(partial.join(PARTIAL_MARKER)).map_err(|e| Error::io(&partial, e))?;
        if dst.is_dir() {
            std::fs::remove_dir(dst).map_err(|e| Error::io(dst, e))?;
        }
        std::fs::rename(&partial, dst).map_err(|e| Error::io(dst, e))?;
        Ok(config)
    })();
    let config = match result {
        Ok(c) => c,
        Err(e) => {
            if let Err(cleanup) = std::fs::remove_dir_all(&partial) {
                tracing::warn!(dir = %partial.display(), %cleanup, "could not remove partial output");
            }
            return Err(e);
        }
    };
    let mut matrix_types = BTreeMap::new();
    for (expected, t) in &sources {
        if matches!(expected.role, Role::Linear | Role::Embedding) {
            *matrix_types.entry(t.kind.name().to_string()).or_insert(0) += 1;
        }
    }
    Ok(GgufLinkReport {
        dir: dst.to_path_buf(),
        architecture: model.arch,
        model_name: h
            .get("general.name")
            .and_then(Value::as_str)
            .map(str::to_string),
        tensors: sources
            .iter()
            .filter(|(e, _)| !(e.name == "lm_head.weight" && config.tie_word_embeddings))
            .count(),
        parameters: sources
            .iter()
            .map(|(e, _)| e.shape.iter().product::<usize>() as u64)
            .sum(),
        config,
        link,
        matrix_types,
        folder_bytes,
    })
}
