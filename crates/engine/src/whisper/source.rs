//! The tensors of a Whisper folder in one naming, whichever form the folder holds.
//!
//! The naming is CTranslate2's (`encoder/layer_0/self_attention/linear_0/weight`), with its
//! fused matrices: self-attention's q, k and v in one `[3d, d]` matrix (`linear_0`), and
//! cross-attention's k and v in one `[2d, d]` (`linear_1`). transformers' safetensors are read
//! through q4nx's reader and put in that shape on request (q, k, v concatenated; k has no bias
//! in Whisper, so its part of the fused bias is zero). Every tensor comes out as f32 after its
//! shape is checked against what the model needs; int8 CTranslate2 weights are multiplied back
//! by their per-row `weight_scale` (`value / scale`, as CTranslate2 dequantizes).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use q4nx::{Tensor, Weights};

use super::ct2::{Ct2Dtype, ModelBin};
use crate::Error;

/// CTranslate2's weights file in a folder.
pub(crate) const MODEL_BIN: &str = "model.bin";
/// transformers' weights file in a folder.
pub(crate) const SAFETENSORS: &str = "model.safetensors";

/// The folder's weights: a parsed `model.bin` or a safetensors file.
pub(crate) enum TensorSource {
    Ct2 {
        path: PathBuf,
        map: Mmap,
        /// name (aliases resolved) -> dims, dtype, byte range in `map`.
        index: BTreeMap<String, (Vec<usize>, Ct2Dtype, Range<usize>)>,
    },
    Safetensors {
        weights: Box<Weights>,
        /// "model." when the names carry it (WhisperForConditionalGeneration), "" otherwise.
        prefix: &'static str,
    },
}

/// Which form a folder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Ct2,
    Safetensors,
}

impl TensorSource {
    pub(crate) fn open(dir: &Path) -> Result<TensorSource, Error> {
        let bin = dir.join(MODEL_BIN);
        let safetensors = dir.join(SAFETENSORS);
        if bin.is_file() {
            Self::open_bin(dir, &bin)
        } else if safetensors.is_file() {
            let weights = Weights::open_file(&safetensors, None).map_err(|source| Error::Load {
                dir: dir.to_path_buf(),
                source,
            })?;
            let prefix = if weights.contains("model.encoder.conv1.weight") {
                "model."
            } else {
                ""
            };
            Ok(TensorSource::Safetensors {
                weights: Box::new(weights),
                prefix,
            })
        } else {
            Err(Error::invalid_model(
                dir,
                "it holds neither model.bin (CTranslate2, faster-whisper's conversion) nor \
                 model.safetensors (transformers); put a Whisper model's files in the folder",
            ))
        }
    }

    fn open_bin(dir: &Path, path: &Path) -> Result<TensorSource, Error> {
        let bad = |reason: String| Error::invalid_model(dir, format!("model.bin: {reason}"));
        let file = std::fs::File::open(path).map_err(|e| bad(format!("cannot be opened ({e})")))?;
        // SAFETY: the map is read-only and private; every range handed out was checked
        // against its length by the parser.
        let map =
            unsafe { Mmap::map(&file) }.map_err(|e| bad(format!("cannot be mapped ({e})")))?;
        let index = {
            let parsed = ModelBin::parse(&map).map_err(bad)?;
            if parsed.spec != "WhisperSpec" {
                return Err(bad(format!(
                    "it is a CTranslate2 {} model (revision {}, binary version {}), not \
                     Whisper (WhisperSpec)",
                    parsed.spec, parsed.revision, parsed.version
                )));
            }
            let base = map.as_ptr() as usize;
            let mut index = BTreeMap::new();
            for name in parsed.names() {
                let v = parsed.get(&name).expect("a listed name is present");
                let start = v.bytes.as_ptr() as usize - base;
                index.insert(
                    name,
                    (v.dims.clone(), v.dtype, start..start + v.bytes.len()),
                );
            }
            index
        };
        Ok(TensorSource::Ct2 {
            path: path.to_path_buf(),
            map,
            index,
        })
    }

    pub(crate) fn format(&self) -> Format {
        match self {
            TensorSource::Ct2 { .. } => Format::Ct2,
            TensorSource::Safetensors { .. } => Format::Safetensors,
        }
    }

    /// The shape of a tensor (CTranslate2 naming), if the folder has it.
    pub(crate) fn shape(&self, name: &str) -> Option<Vec<usize>> {
        match self {
            TensorSource::Ct2 { index, .. } => index.get(name).map(|(dims, _, _)| dims.clone()),
            TensorSource::Safetensors { weights, prefix } => {
                let parts = hf_parts(name, prefix)?;
                let mut shape: Option<Vec<usize>> = None;
                for part in parts {
                    let (Part::Named(n) | Part::ZeroLike(n)) = part;
                    let s = weights.get(&n).ok()?.shape();
                    shape = Some(match shape {
                        None => s,
                        Some(mut acc) => {
                            acc[0] += s.first().copied().unwrap_or(0);
                            acc
                        }
                    });
                }
                shape
            }
        }
    }

    /// A scalar integer variable of a `model.bin` (`encoder/num_heads`); `None` elsewhere.
    pub(crate) fn scalar(&self, name: &str) -> Option<i64> {
        match self {
            TensorSource::Ct2 { map, index, .. } => {
                let (dims, dtype, range) = index.get(name)?;
                super::ct2::Variable {
                    dims: dims.clone(),
                    dtype: *dtype,
                    bytes: &map[range.clone()],
                }
                .scalar_int()
            }
            TensorSource::Safetensors { .. } => None,
        }
    }

    /// A tensor (CTranslate2 naming) as f32, refused unless its shape is `shape`.
    pub(crate) fn tensor(
        &self,
        dir: &Path,
        name: &str,
        shape: &[usize],
    ) -> Result<Vec<f32>, Error> {
        let found = self.shape(name).ok_or_else(|| {
            Error::invalid_model(
                dir,
                format!(
                    "the weights have no {} (needed for a Whisper model)",
                    self.describe_name(name)
                ),
            )
        })?;
        if found != shape {
            return Err(Error::invalid_model(
                dir,
                format!(
                    "{} has shape {found:?}; this model needs {shape:?}",
                    self.describe_name(name)
                ),
            ));
        }
        match self {
            TensorSource::Ct2 { map, index, path } => {
                let (dims, dtype, range) = &index[name];
                let var = super::ct2::Variable {
                    dims: dims.clone(),
                    dtype: *dtype,
                    bytes: &map[range.clone()],
                };
                let mut values = var.to_f32();
                match dtype {
                    Ct2Dtype::F32 | Ct2Dtype::F16 | Ct2Dtype::Bf16 => {}
                    Ct2Dtype::I8 | Ct2Dtype::I16 => {
                        let scale_name = format!("{name}_scale");
                        let rows = dims.first().copied().unwrap_or(1);
                        let scales = match index.get(&scale_name) {
                            Some((sdims, sdtype, srange))
                                if sdims.iter().product::<usize>() == rows =>
                            {
                                super::ct2::Variable {
                                    dims: sdims.clone(),
                                    dtype: *sdtype,
                                    bytes: &map[srange.clone()],
                                }
                                .to_f32()
                            }
                            _ => {
                                return Err(Error::invalid_model(
                                    dir,
                                    format!(
                                        "{} in {} is {} without a {rows}-value {scale_name}",
                                        name,
                                        path.display(),
                                        dtype.name()
                                    ),
                                ))
                            }
                        };
                        let cols = values.len() / rows.max(1);
                        for (row, scale) in values.chunks_exact_mut(cols.max(1)).zip(&scales) {
                            for v in row {
                                *v /= scale;
                            }
                        }
                    }
                    Ct2Dtype::I32 => {
                        return Err(Error::invalid_model(
                            dir,
                            format!("{name} is int32, not a weight type"),
                        ))
                    }
                }
                check_finite(dir, name, &values)?;
                Ok(values)
            }
            TensorSource::Safetensors { weights, prefix } => {
                let parts = hf_parts(name, prefix).expect("shape() found it");
                let mut values = Vec::with_capacity(shape.iter().product());
                for part in parts {
                    let (n, zero) = match part {
                        Part::Named(n) => (n, false),
                        Part::ZeroLike(n) => (n, true),
                    };
                    let t = weights.get(&n).map_err(|source| Error::Load {
                        dir: dir.to_path_buf(),
                        source,
                    })?;
                    let Tensor::Dense(d) = t else {
                        return Err(Error::invalid_model(
                            dir,
                            format!("{n} is {}; Whisper needs a float tensor", t.describe()),
                        ));
                    };
                    if !d.dtype.is_float() {
                        return Err(Error::invalid_model(
                            dir,
                            format!("{n} is {}; Whisper needs a float tensor", d.dtype),
                        ));
                    }
                    if zero {
                        values.resize(values.len() + d.len(), 0.0);
                    } else {
                        values.extend(d.to_f32());
                    }
                }
                check_finite(dir, name, &values)?;
                Ok(values)
            }
        }
    }

    /// How a tensor is called in the folder's own naming, for messages.
    fn describe_name(&self, name: &str) -> String {
        match self {
            TensorSource::Ct2 { .. } => format!("model.bin's {name}"),
            TensorSource::Safetensors { prefix, .. } => match hf_parts(name, prefix) {
                Some(parts) => parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Named(n) => Some(n.clone()),
                        Part::ZeroLike(_) => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" + "),
                None => name.to_string(),
            },
        }
    }
}

fn check_finite(dir: &Path, name: &str, values: &[f32]) -> Result<(), Error> {
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid_model(
            dir,
            format!(
                "{name} holds {} at element {i}; the weights are damaged",
                values[i]
            ),
        ));
    }
    Ok(())
}

/// One piece of a tensor put together from transformers' tensors.
enum Part {
    Named(String),
    /// Zeros the size of the named tensor (the k projection's missing bias).
    ZeroLike(String),
}

/// transformers' tensors that make up a CTranslate2-named tensor, concatenated along dim 0.
fn hf_parts(name: &str, prefix: &str) -> Option<Vec<Part>> {
    let one = |n: String| Some(vec![Part::Named(format!("{prefix}{n}"))]);
    let (param, hf_param) = match name.rsplit_once('/')? {
        (scope, "gamma") => (scope, "weight"),
        (scope, "beta") => (scope, "bias"),
        (scope, "weight") => (scope, "weight"),
        (scope, "bias") => (scope, "bias"),
        (scope, "encodings") => (scope, "weight"),
        _ => return None,
    };
    let mut it = param.split('/');
    let stack = it.next()?; // encoder | decoder
    if stack != "encoder" && stack != "decoder" {
        return None;
    }
    let rest: Vec<&str> = it.collect();
    match rest.as_slice() {
        ["conv1"] | ["conv2"] if stack == "encoder" => {
            one(format!("encoder.{}.{hf_param}", rest[0]))
        }
        ["position_encodings"] => one(format!("{stack}.embed_positions.weight")),
        ["embeddings"] if stack == "decoder" => one("decoder.embed_tokens.weight".into()),
        ["projection"] if stack == "decoder" => one("decoder.embed_tokens.weight".into()),
        ["layer_norm"] => one(format!("{stack}.layer_norm.{hf_param}")),
        [layer, block, leaf @ ..] => {
            let i: usize = layer.strip_prefix("layer_")?.parse().ok()?;
            let p = format!("{stack}.layers.{i}");
            let attn = |module: &str, leaf: &[&str]| -> Option<Vec<Part>> {
                let proj = |x: &str| format!("{prefix}{p}.{module}.{x}_proj.{hf_param}");
                match leaf {
                    ["layer_norm"] => one(format!("{p}.{module}_layer_norm.{hf_param}")),
                    ["linear_0"] if module == "self_attn" => Some(vec![
                        Part::Named(proj("q")),
                        if hf_param == "bias" {
                            Part::ZeroLike(format!("{prefix}{p}.{module}.q_proj.bias"))
                        } else {
                            Part::Named(proj("k"))
                        },
                        Part::Named(proj("v")),
                    ]),
                    ["linear_1"] if module == "self_attn" => Some(vec![Part::Named(proj("out"))]),
                    ["linear_0"] => Some(vec![Part::Named(proj("q"))]),
                    ["linear_1"] => Some(vec![
                        if hf_param == "bias" {
                            Part::ZeroLike(format!("{prefix}{p}.{module}.v_proj.bias"))
                        } else {
                            Part::Named(proj("k"))
                        },
                        Part::Named(proj("v")),
                    ]),
                    ["linear_2"] => Some(vec![Part::Named(proj("out"))]),
                    _ => None,
                }
            };
            match (*block, leaf) {
                ("self_attention", leaf) => attn("self_attn", leaf),
                ("attention", leaf) if stack == "decoder" => {
                    let parts = attn("encoder_attn", leaf)?;
                    // "encoder_attn_layer_norm" is the cross-attention's norm.
                    Some(parts)
                }
                ("ffn", ["layer_norm"]) => one(format!("{p}.final_layer_norm.{hf_param}")),
                ("ffn", ["linear_0"]) => one(format!("{p}.fc1.{hf_param}")),
                ("ffn", ["linear_1"]) => one(format!("{p}.fc2.{hf_param}")),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(name: &str) -> Vec<String> {
        hf_parts(name, "model.")
            .unwrap()
            .into_iter()
            .map(|p| match p {
                Part::Named(n) => n,
                Part::ZeroLike(n) => format!("zeros like {n}"),
            })
            .collect()
    }

    #[test]
    fn ct2_names_map_to_transformers_tensors() {
        assert_eq!(
            names("encoder/layer_1/self_attention/linear_0/bias"),
            [
                "model.encoder.layers.1.self_attn.q_proj.bias",
                "zeros like model.encoder.layers.1.self_attn.q_proj.bias",
                "model.encoder.layers.1.self_attn.v_proj.bias"
            ]
        );
        assert_eq!(
            names("decoder/layer_0/attention/linear_1/weight"),
            [
                "model.decoder.layers.0.encoder_attn.k_proj.weight",
                "model.decoder.layers.0.encoder_attn.v_proj.weight"
            ]
        );
        assert_eq!(
            names("decoder/layer_0/attention/layer_norm/gamma"),
            ["model.decoder.layers.0.encoder_attn_layer_norm.weight"]
        );
        assert_eq!(
            names("encoder/layer_3/ffn/layer_norm/beta"),
            ["model.encoder.layers.3.final_layer_norm.bias"]
        );
        assert_eq!(
            names("encoder/position_encodings/encodings"),
            ["model.encoder.embed_positions.weight"]
        );
        assert!(hf_parts("decoder/layer_x/ffn/linear_0/weight", "").is_none());
    }
}
