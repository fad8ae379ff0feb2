//! gpt-oss's experts as transformers stores them, split at conversion into Hearth's canonical
//! per-expert tensors (`model.layers.{i}.mlp.experts.{e}.{gate_proj,up_proj,down_proj}.{weight,
//! bias}`, rows = outputs, as every linear; see [`crate::layout`]).
//!
//! transformers keeps one layer's experts in four tensors (`mlp.experts.` then):
//! - `gate_up_proj` `[experts, hidden, 2 * width]`, stored transposed (inputs first), gate and
//!   up interleaved: gate output `r` is column `2r`, up output `r` column `2r + 1`;
//! - `gate_up_proj_bias` `[experts, 2 * width]`, interleaved the same way;
//! - `down_proj` `[experts, width, hidden]`, transposed too; `down_proj_bias` `[experts, hidden]`.
//!
//! The released checkpoints (gpt-oss-20b) store the two matrices as MXFP4 instead:
//! `gate_up_proj_blocks` `[experts, 2 * width, hidden / 32, 16]` (u8) with `gate_up_proj_scales`
//! `[experts, 2 * width, hidden / 32]` (u8), and `down_proj_blocks`/`_scales` likewise
//! `[experts, hidden, width / 32, ...]`. There rows are outputs (not transposed), still
//! interleaved for gate and up. A row's 32-value group `g` is 16 bytes: value `2j` is the low
//! nibble of byte `j`, `2j + 1` the high one, each an E2M1 code ([`E2M1`]), all times
//! `2^(scale - 127)` (the group's E8M0 scale byte). They are dequantized here, then quantized as
//! the other linears are.

use crate::layout::{expected_tensors, Role};
use crate::{Dtype, Error, Family, ModelConfig, Weights};

/// The 16 values of an E2M1 (FP4) code: 0, 0.5, 1, 1.5, 2, 3, 4, 6, then their negatives.
pub(crate) const E2M1: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// Reads `len` bytes of a stored tensor's data from `offset`: `read(name, offset, len)`.
pub(crate) type ReadBytes<'r> = dyn FnMut(&str, usize, usize) -> Result<Vec<u8>, Error> + 'r;

/// Values in one MXFP4 group (one scale byte, 16 bytes of codes).
const GROUP: usize = 32;

/// Which projection of an expert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Gate,
    Up,
    Down,
}

/// One canonical expert tensor, and the shapes of its layer's stored tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpertTensor {
    layer: usize,
    expert: usize,
    part: Part,
    bias: bool,
    hidden: usize,
    width: usize,
}

impl ExpertTensor {
    /// The canonical tensor `name` of a gpt-oss model of config `c`, if it is an expert's.
    pub(crate) fn parse(c: &ModelConfig, name: &str) -> Option<Self> {
        let moe = c.moe.as_ref().filter(|_| c.family == Family::GptOss)?;
        let rest = name.strip_prefix("model.layers.")?;
        let (layer, rest) = rest.split_once('.')?;
        let rest = rest.strip_prefix("mlp.experts.")?;
        let (expert, rest) = rest.split_once('.')?;
        let (part, leaf) = rest.split_once('.')?;
        let part = match part {
            "gate_proj" => Part::Gate,
            "up_proj" => Part::Up,
            "down_proj" => Part::Down,
            _ => return None,
        };
        Some(ExpertTensor {
            layer: layer.parse().ok()?,
            expert: expert.parse().ok()?,
            part,
            bias: match leaf {
                "weight" => false,
                "bias" => true,
                _ => return None,
            },
            hidden: c.hidden_size,
            width: moe.expert_intermediate_size,
        })
    }

    fn stored(&self, leaf: &str) -> String {
        let proj = if self.part == Part::Down {
            "down_proj"
        } else {
            "gate_up_proj"
        };
        format!("model.layers.{}.mlp.experts.{proj}{leaf}", self.layer)
    }

    /// Reads this tensor from `weights` (transformers' layout) as f32: a matrix `[rows, cols]`
    /// row-major, or a bias, with `read`.
    pub(crate) fn read(
        &self,
        weights: &Weights,
        read: &mut ReadBytes<'_>,
    ) -> Result<Vec<f32>, Error> {
        let (h, w, e) = (self.hidden, self.width, self.expert);
        // Stored gate_up rows (or columns) 2r + offset give gate (0) or up (1) output r.
        let pick = match self.part {
            Part::Gate => Some(0),
            Part::Up => Some(1),
            Part::Down => None,
        };
        let (outputs, inputs) = if self.part == Part::Down {
            (h, w)
        } else {
            (w, h)
        };
        let stored_out = if self.part == Part::Down { h } else { 2 * w };
        if self.bias {
            let name = self.stored("_bias");
            let all = floats(weights, &name, e * stored_out, stored_out, read)?;
            return Ok(match pick {
                Some(p) => (0..w).map(|r| all[2 * r + p]).collect(),
                None => all,
            });
        }
        let blocks = self.stored("_blocks");
        if weights.contains(&blocks) {
            let row_bytes = inputs / GROUP * 16;
            let codes = read(&blocks, e * stored_out * row_bytes, stored_out * row_bytes)?;
            let scales = self.stored("_scales");
            let groups = inputs / GROUP;
            let exps = read(&scales, e * stored_out * groups, stored_out * groups)?;
            let mut all = vec![0.0; stored_out * inputs];
            mxfp4_dequantize(&codes, &exps, &mut all);
            check_finite(&all, &blocks)?;
            return Ok(match pick {
                Some(p) => (0..w)
                    .flat_map(|r| all[(2 * r + p) * h..][..h].to_vec())
                    .collect(),
                None => all,
            });
        }
        // [inputs, stored_out] per expert, transposed to [outputs, inputs].
        let name = self.stored("");
        let slab = floats(
            weights,
            &name,
            e * inputs * stored_out,
            inputs * stored_out,
            read,
        )?;
        let column = |r: usize| pick.map_or(r, |p| 2 * r + p);
        Ok((0..outputs)
            .flat_map(|r| (0..inputs).map(move |c| (r, c)))
            .map(|(r, c)| slab[c * stored_out + column(r)])
            .collect())
    }
}

/// `len` floats of the stored float tensor `name` from element `start`, as f32, all finite.
fn floats(
    weights: &Weights,
    name: &str,
    start: usize,
    len: usize,
    read: &mut ReadBytes<'_>,
) -> Result<Vec<f32>, Error> {
    let (dtype, _) = described(weights, name)?;
    let bytes = read(name, start * dtype.size(), len * dtype.size())?;
    let mut out = Vec::with_capacity(len);
    if !crate::dtype::extend_f32(dtype, &bytes, &mut out) {
        return Err(Error::Convert {
            detail: format!("tensor {name} is {dtype}; expert weights must be BF16, F16 or F32"),
        });
    }
    check_finite(&out, name)?;
    Ok(out)
}

fn check_finite(values: &[f32], name: &str) -> Result<(), Error> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::Convert {
            detail: format!(
                "tensor {name} holds a non-finite value ({}) in an expert's element {i}; the \
                 source model is damaged",
                values[i]
            ),
        }),
    }
}

/// Dequantizes MXFP4 rows: `codes` holds 16 bytes per group of 32 values and `scales` one E8M0
/// byte per group; `out` gets `32 * scales.len()` values (see the module doc).
pub(crate) fn mxfp4_dequantize(codes: &[u8], scales: &[u8], out: &mut [f32]) {
    assert!(codes.len() == scales.len() * 16 && out.len() == scales.len() * GROUP);
    for ((group, bytes), &scale) in out
        .chunks_exact_mut(GROUP)
        .zip(codes.chunks_exact(16))
        .zip(scales)
    {
        // 2^(scale - 127), exactly: an E8M0 byte 255 is NaN in the format; none is released.
        let factor = (f64::from(scale) - 127.0).exp2() as f32;
        for (pair, byte) in group.chunks_exact_mut(2).zip(bytes) {
            pair[0] = E2M1[usize::from(byte & 0x0f)] * factor;
            pair[1] = E2M1[usize::from(byte >> 4)] * factor;
        }
    }
}

/// Whether `weights` holds gpt-oss's experts in transformers' layout (3-D, or MXFP4).
pub(crate) fn in_transformers_layout(weights: &Weights, c: &ModelConfig) -> bool {
    c.family == Family::GptOss
        && ["gate_up_proj", "gate_up_proj_blocks"]
            .iter()
            .any(|t| weights.contains(&format!("model.layers.0.mlp.experts.{t}")))
}

/// The names transformers' layout may give a gpt-oss model's expert tensors.
pub(crate) fn stored_names(c: &ModelConfig) -> Vec<String> {
    let leaves = [
        "gate_up_proj",
        "gate_up_proj_bias",
        "gate_up_proj_blocks",
        "gate_up_proj_scales",
        "down_proj",
        "down_proj_bias",
        "down_proj_blocks",
        "down_proj_scales",
    ];
    (0..c.num_hidden_layers)
        .flat_map(|l| leaves.map(|t| format!("model.layers.{l}.mlp.experts.{t}")))
        .collect()
}

/// Checks a source in transformers' layout against `c`: every tensor but the experts' as
/// [`crate::validate`] would (present, floats, the expected shape), and each layer's stored
/// expert tensors (either form) of the shapes `c` implies; errors name the tensor.
pub(crate) fn check(weights: &Weights, c: &ModelConfig) -> Result<(), Error> {
    let wrong = |tensor: &str, expected: String, found: String| Error::WrongTensor {
        path: weights.path().to_path_buf(),
        tensor: tensor.to_string(),
        expected,
        found,
    };
    for t in expected_tensors(c) {
        if ExpertTensor::parse(c, &t.name).is_some()
            || (t.name == "lm_head.weight" && c.tie_word_embeddings)
        {
            continue;
        }
        let (dtype, shape) = described(weights, &t.name)?;
        if !dtype.is_float() || shape != t.shape {
            let kind = if t.role == Role::Linear {
                "a matrix"
            } else {
                "a vector"
            };
            return Err(wrong(
                &t.name,
                format!("{kind} of BF16/F16/F32 {:?}", t.shape),
                format!("{dtype} {shape:?}"),
            ));
        }
    }
    let moe = c.moe.as_ref().expect("gpt-oss has experts");
    let (e, h, w) = (moe.experts, c.hidden_size, moe.expert_intermediate_size);
    for l in 0..c.num_hidden_layers {
        let name = |t: &str| format!("model.layers.{l}.mlp.experts.{t}");
        for (proj, rows, cols) in [("gate_up_proj", 2 * w, h), ("down_proj", h, w)] {
            let mut expect = vec![(format!("{proj}_bias"), vec![e, rows], None)];
            if weights.contains(&name(&format!("{proj}_blocks"))) {
                if cols % GROUP != 0 {
                    return Err(wrong(
                        &name(&format!("{proj}_blocks")),
                        format!("MXFP4 rows of a multiple of {GROUP} values"),
                        format!("rows of {cols}"),
                    ));
                }
                let g = cols / GROUP;
                expect.push((
                    format!("{proj}_blocks"),
                    vec![e, rows, g, 16],
                    Some(Dtype::U8),
                ));
                expect.push((format!("{proj}_scales"), vec![e, rows, g], Some(Dtype::U8)));
            } else {
                // Stored transposed: inputs first.
                expect.push((proj.to_string(), vec![e, cols, rows], None));
            }
            for (leaf, shape, dtype) in expect {
                let (found, found_shape) = described(weights, &name(&leaf))?;
                let ok = match dtype {
                    Some(d) => found == d,
                    None => found.is_float(),
                };
                if !ok || found_shape != shape {
                    let want = dtype.map_or("BF16/F16/F32".into(), |d| d.to_string());
                    return Err(wrong(
                        &name(&leaf),
                        format!("{want} {shape:?}"),
                        format!("{found} {found_shape:?}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The dtype and shape of the source tensor `name`.
fn described<'w>(weights: &'w Weights, name: &str) -> Result<(Dtype, &'w [usize]), Error> {
    weights
        .locate(name)
        .map(|(_, _, dtype, shape)| (dtype, shape))
        .ok_or_else(|| Error::MissingTensor {
            path: weights.path().to_path_buf(),
            tensor: name.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mxfp4_dequantizes_hand_made_bytes() {
        // Group 0, scale 127 (x1): byte 0x21 = low code 1 (0.5), high code 2 (1.0); byte 0xf7 =
        // low 7 (6.0), high 15 (-6.0); the rest 0x80 = low 0, high 8 (-0.0).
        // Group 1, scale 129 (x4): byte 0x9a = low 10 (-1.0 x 4), high 9 (-0.5 x 4); scale 125
        // would be x 1/4.
        let mut codes = vec![0x80u8; 32];
        codes[0] = 0x21;
        codes[1] = 0xf7;
        codes[16] = 0x9a;
        codes[31] = 0x3c;
        let mut out = vec![f32::NAN; 64];
        mxfp4_dequantize(&codes, &[127, 129], &mut out);
        assert_eq!(&out[..4], [0.5, 1.0, 6.0, -6.0]);
        assert!(out[4..32].iter().all(|v| *v == 0.0));
        assert_eq!(&out[32..34], [-4.0, -2.0]);
        // Byte 0x3c: low 12 (-2.0), high 3 (1.5), times 4.
        assert_eq!(&out[62..], [-8.0, 6.0]);
        let mut small = vec![0.0; 32];
        mxfp4_dequantize(&[0x77; 16], &[125], &mut small);
        assert!(small.iter().all(|v| *v == 1.5), "6 x 2^-2");
    }

    #[test]
    fn canonical_names_are_parsed_and_others_are_not() {
        let c = ModelConfig::from_json(
            r#"{"model_type": "gpt_oss", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                "intermediate_size": 32, "vocab_size": 100, "num_local_experts": 4,
                "num_experts_per_tok": 2}"#,
        )
        .unwrap();
        let t = ExpertTensor::parse(&c, "model.layers.1.mlp.experts.3.up_proj.bias").unwrap();
        assert_eq!((t.layer, t.expert, t.part, t.bias), (1, 3, Part::Up, true));
        assert_eq!(
            t.stored("_bias"),
            "model.layers.1.mlp.experts.gate_up_proj_bias"
        );
        for other in [
            "model.layers.1.mlp.router.weight",
            "model.layers.1.mlp.experts.gate_up_proj",
            "model.layers.1.mlp.experts.3.up_proj.scales",
            "model.layers.x.mlp.experts.3.up_proj.weight",
        ] {
            assert_eq!(ExpertTensor::parse(&c, other), None, "{other}");
        }
    }
}
