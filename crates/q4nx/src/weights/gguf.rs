//! The weights of a linked GGUF model folder (see [`crate::gguf::link_gguf`]): the file the
//! folder's `gguf-link.json` names, checked against the link, mapped once, its tensors served
//! under the Hugging Face names the engine asks for.
//!
//! - Linear weights and the embedding in blocks (Q4_0 … Q6_K) are [`Tensor::Gguf`] views of
//!   the map; in F32/F16/BF16 they are dense views. Nothing is copied.
//! - Norms are dense views, except a Gemma 3 norm, which llama.cpp's converter stores as
//!   `1 + w`: it is `w` again in a small f32 copy made here (a norm in blocks, which no
//!   converter writes, would be decoded the same way).
//! - The Q and K rows of a `llama` file stay interleaved as llama.cpp stores them; the folder's
//!   config says `rope_interleaved`, and the engine rotates adjacent pairs instead.
//! - A tied head is the embedding: no `lm_head.weight` entry.

use std::path::Path;

use super::{Entry, MappedFile, WeightFormat, Weights};
use crate::gguf::model::{gguf_err, norm_plus_one, source_tensors};
use crate::gguf::{dequantize, GgmlType, GgufLink};
use crate::layout::Role;
use crate::{Dtype, Error, ModelConfig};

/// The error for a GGUF whose header differs between its map and the copy read for huge pages.
pub(super) fn changed_while_loading(path: &Path) -> Error {
    Error::LinkedFileChanged {
        path: path.to_path_buf(),
        detail: "it changed while the model was loading".into(),
    }
}

/// Opens the GGUF file `dir`'s link names as the weights of the model `config` describes.
pub(super) fn open_linked(dir: &Path, config: Option<ModelConfig>) -> Result<Weights, Error> {
    let config = config.ok_or_else(|| Error::Config {
        path: dir.join("config.json"),
        detail: "config.json is missing; a linked GGUF model folder needs it beside \
                 gguf-link.json: remove the model and add the file again"
            .into(),
    })?;
    let link = GgufLink::read(dir)?;
    let (map, header) = link.open()?;
    let path = link.path.clone();
    let sources =
        source_tensors(&header, &config, config.family).map_err(|d| gguf_err(&path, d))?;
    let mut tensors = std::collections::BTreeMap::new();
    for (expected, info) in sources {
        if expected.name == "lm_head.weight" && config.tie_word_embeddings {
            continue;
        }
        let float = match info.kind {
            GgmlType::F32 => Some(Dtype::F32),
            GgmlType::F16 => Some(Dtype::F16),
            GgmlType::BF16 => Some(Dtype::Bf16),
            _ => None,
        };
        let shift_norm = norm_plus_one(expected.role, config.family);
        let entry = if expected.role == Role::Norm && (shift_norm || float.is_none()) {
            let mut values = vec![0f32; info.elements() as usize];
            dequantize(info.kind, &map[info.range.clone()], &mut values);
            let shift = if shift_norm { 1.0 } else { 0.0 };
            let bytes: Vec<u8> = values
                .iter()
                .flat_map(|v| (v - shift).to_le_bytes())
                .collect();
            Entry {
                file: 0,
                dtype: Dtype::F32,
                shape: expected.shape,
                range: 0..0,
                last_groups: crate::tile::GROUPS_PER_TILE,
                gguf: None,
                grouped: false,
                owned: Some(bytes.into_boxed_slice()),
            }
        } else {
            let matrix = expected.shape.len() == 2 && float.is_none();
            if float.is_none() && !matrix {
                return Err(gguf_err(
                    &path,
                    format!(
                        "tensor {} is a vector in {} blocks; Hearth reads vectors as floats",
                        info.name, info.kind
                    ),
                ));
            }
            Entry {
                file: 0,
                dtype: float.unwrap_or(Dtype::U8),
                shape: expected.shape,
                range: info.range.clone(),
                last_groups: crate::tile::GROUPS_PER_TILE,
                gguf: matrix.then_some(info.kind),
                grouped: false,
                owned: None,
            }
        };
        tensors.insert(expected.name, entry);
    }
    tracing::debug!(path = %path.display(), tensors = tensors.len(), "opened a linked GGUF");
    Ok(Weights {
        path: path.clone(),
        format: WeightFormat::Gguf,
        files: vec![MappedFile {
            path,
            map,
            metadata: Default::default(),
            tensors: Vec::new(),
            gguf_header: Some(header.data_start),
        }],
        tensors,
        config: Some(config),
        skipped_vision: false,
    })
}
