//! FastFlowLM's own layouts of the families whose Hugging Face layout Hearth runs differently,
//! read from the same `model.q4nx` (as FastFlowLM's converter writes it from a GGUF):
//!
//! - **phi4** (Phi-3 architecture): q, k and v and gate and up stored split
//!   (`self_attn.{q,k,v}_proj`, `mlp.{gate,up}_proj`), where Hearth runs Phi-3's fused
//!   `qkv_proj` and `gate_up_proj`. Tiles are row-block major, so the fused matrix is the split
//!   ones' tiles back to back (each part's rows are whole 32-row blocks); `rope.short.weight` and
//!   `rope.long.weight` repeat the LongRoPE lists config.json holds.
//! - **lfm2**: llama.cpp's names turned into Llama-like ones (`model.token_embd.weight`,
//!   `shortconv.*`, `self_attn.o_proj`, `self_attn.{q,k}_norm`, `mlp.*`, `input_layernorm`,
//!   `post_attention_layernorm`, `model.norm`), the convolution kernels squeezed to
//!   `[hidden, width]`, and Q4_0 weights as signed codes in Q4_1-shaped tiles with every min 0.
//!   A signed code `s` times `d` is the unsigned code `s + 8` (the nibble with its top bit
//!   flipped) times `d` plus the min `-8 d`, exactly (a BF16 times 8 is a BF16), so those tiles
//!   become ordinary Q4_1 tiles at open.
//! - **qwen2**: Hugging Face's names, and Q4_0 tiles as lfm2's. Only a tensor whose every min
//!   is 0 is read as Q4_0: `hearth convert`'s Q4_1 takes each group's own minimum, which real
//!   weights never make 0 in every group of a matrix.
//! - **gemma3** (`models/gemma3.py`): Hugging Face's names and Hearth's tiles (32 x 256, Q4_1,
//!   row-block major; the head is the embedding's own Q4_1 tiles, written even though the
//!   model ties them), but two tensors hold other values. Every norm is llama.cpp's `1 + w`
//!   (its Gemma converter adds the 1), in BF16; the engine adds the 1 itself, so each becomes
//!   `w` again in a small f32 copy, exactly (`v - 1` of a BF16 `v` is exact in f32). The
//!   embedding is stored already multiplied by √hidden (in f32, then rounded to BF16); the
//!   engine multiplies by the config's `embed_scale`, so it becomes `v / embed_scale` in an F16
//!   copy (F32 where a value would overflow F16), within 2^-11 of `v` relative once the
//!   engine multiplies it back (a quarter of `v`'s own BF16 step; values under 2^-14 times
//!   the scale, F16's subnormals, within 2^-25 times the scale absolute): a copy of the
//!   embedding's size (Gemma-3-1B: 604 MB) beside the file. Such a file carries no metadata;
//!   one `hearth convert` or `hearth import` wrote names itself as `producer`, and is left as
//!   it is. The sliding-window layers and RoPE bases are config.json's, which FastFlowLM ships
//!   as Google's; the vision tower of the 4B model lies in another file, which the CPU engine
//!   does not read.
//! - **gpt-oss**: tiles of 32 x 128 regrouped for the NPU, the experts in MXFP4 tiles, one
//!   tensor a layer, the router blocked: see [`gpt_oss`], and [`tiles`] for the tiles.
//!
//! The renamed tensors stay borrowed from the map; the fused, re-signed, re-scaled and re-tiled
//! ones are copies owned by [`Weights`].

mod gpt_oss;
mod tiles;

use crate::tile::{GROUPS_PER_TILE, Q4_1_MINS_AT, Q4_1_TILE_BYTES, SCALES_AT, TILE_ROWS};
use crate::{Dtype, Error, Family};

use super::{Entry, Weights};

/// Rewrites the tensor table of a Q4NX file in FastFlowLM's layout of `weights`' family into
/// Hearth's names and matrices; a file in Hearth's layout is left as it is.
pub(super) fn adapt(weights: &mut Weights) -> Result<(), Error> {
    let Some(family) = weights.config.as_ref().map(|c| c.family) else {
        return Ok(());
    };
    match family {
        Family::Phi3 => fuse_phi4(weights),
        Family::Lfm2 if weights.tensors.contains_key(LFM2_EMBEDDING) => {
            rename_lfm2(weights);
            resign_q4_0(weights);
            Ok(())
        }
        Family::Qwen2 => {
            resign_q4_0(weights);
            Ok(())
        }
        Family::Gemma3 if !made_by_hearth(weights) => unshift_gemma3(weights),
        Family::GptOss if gpt_oss::is_flm(weights) => gpt_oss::adapt(weights),
        _ => Ok(()),
    }
}

impl Weights {
    /// Whether the tensor `name` was computed when the file was opened (a FastFlowLM layout
    /// adapted here, a Gemma norm of a GGUF) rather than read as the file stores it.
    pub(crate) fn computed_at_open(&self, name: &str) -> bool {
        self.lookup(name).is_some_and(|(_, e)| e.owned.is_some())
    }
}

/// Whether `hearth convert` or `hearth import` wrote the file (its `producer` metadata).
fn made_by_hearth(weights: &Weights) -> bool {
    weights.files.first().is_some_and(|f| {
        f.metadata
            .get("producer")
            .is_some_and(|p| p.starts_with("hearth"))
    })
}

/// FastFlowLM's Gemma 3 norms (`1 + w`) and embedding (times √hidden) as the engine reads a
/// Hugging Face checkpoint's: `w`, and the embedding divided by the config's `embed_scale`.
fn unshift_gemma3(weights: &mut Weights) -> Result<(), Error> {
    let Some(scale) = weights
        .config
        .as_ref()
        .and_then(|c| c.gemma3.as_ref())
        .map(|g| g.embed_scale)
    else {
        return Ok(());
    };
    let mut owned = Vec::new();
    for (name, entry) in &weights.tensors {
        let norm = name.ends_with("norm.weight");
        if !norm && name != GEMMA3_EMBEDDING {
            continue;
        }
        if !entry.dtype.is_float() || entry.owned.is_some() || entry.gguf.is_some() {
            return Err(Error::WrongTensor {
                path: weights.path.clone(),
                tensor: name.clone(),
                expected: "BF16, F16 or F32 values (FastFlowLM's Gemma 3 layout)".into(),
                found: format!("{} of shape {:?}", entry.dtype.name(), entry.shape),
            });
        }
        let bytes = &weights.files[entry.file].map[entry.range.clone()];
        let copy = if norm {
            (
                Dtype::F32,
                rescaled(entry.dtype, bytes, |v| v - 1.0, Dtype::F32),
            )
        } else {
            let mut all_fit = true;
            for_each_value(entry.dtype, bytes, |v| {
                all_fit &= (v / scale).abs() <= f32::from(half::f16::MAX);
            });
            let dtype = if all_fit { Dtype::F16 } else { Dtype::F32 };
            (dtype, rescaled(entry.dtype, bytes, |v| v / scale, dtype))
        };
        owned.push((name.clone(), copy));
    }
    for (name, (dtype, bytes)) in owned {
        let entry = weights.tensors.get_mut(&name).expect("listed above");
        entry.dtype = dtype;
        entry.range = 0..0;
        entry.owned = Some(bytes.into_boxed_slice());
    }
    weights.tensors.remove("rope_freqs.weight");
    Ok(())
}

/// The name of the embedding FastFlowLM stores multiplied by √hidden.
const GEMMA3_EMBEDDING: &str = "model.embed_tokens.weight";

/// Calls `f` with every value of `bytes` (little-endian `dtype`, a float type), decoding a
/// few thousand at a time, so an embedding is never held as f32 whole.
fn for_each_value(dtype: Dtype, bytes: &[u8], mut f: impl FnMut(f32)) {
    const CHUNK: usize = 4096;
    let mut values = [0f32; CHUNK];
    for chunk in bytes.chunks(CHUNK * dtype.size()) {
        let values = &mut values[..chunk.len() / dtype.size()];
        crate::dtype::decode_f32(dtype, chunk, values);
        values.iter().for_each(|&v| f(v));
    }
}

/// `f` of every value of `bytes` (little-endian `from`), written as little-endian `to` (F16 or
/// F32).
fn rescaled(from: Dtype, bytes: &[u8], f: impl Fn(f32) -> f32, to: Dtype) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() / from.size() * to.size());
    for_each_value(from, bytes, |v| match to {
        Dtype::F16 => out.extend_from_slice(&half::f16::from_f32(f(v)).to_le_bytes()),
        _ => out.extend_from_slice(&f(v).to_le_bytes()),
    });
    out
}

/// FastFlowLM's name of LFM2's embedding (llama.cpp's `token_embd` under `model.`).
const LFM2_EMBEDDING: &str = "model.token_embd.weight";

/// Hugging Face's name of each LFM2 tensor FastFlowLM names otherwise.
fn lfm2_name(flm: &str) -> Option<String> {
    match flm {
        LFM2_EMBEDDING => return Some("model.embed_tokens.weight".into()),
        "model.norm.weight" => return Some("model.embedding_norm.weight".into()),
        _ => {}
    }
    let rest = flm.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    let hf = match suffix {
        "input_layernorm.weight" => "operator_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "self_attn.o_proj.weight" => "self_attn.out_proj.weight",
        "self_attn.q_norm.weight" => "self_attn.q_layernorm.weight",
        "self_attn.k_norm.weight" => "self_attn.k_layernorm.weight",
        "mlp.gate_proj.weight" => "feed_forward.w1.weight",
        "mlp.up_proj.weight" => "feed_forward.w3.weight",
        "mlp.down_proj.weight" => "feed_forward.w2.weight",
        "shortconv.in_proj.weight" => "conv.in_proj.weight",
        "shortconv.out_proj.weight" => "conv.out_proj.weight",
        "shortconv.conv.weight" => "conv.conv.weight",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}"))
}

fn rename_lfm2(weights: &mut Weights) {
    let names: Vec<String> = weights.tensors.keys().cloned().collect();
    for flm in names {
        let Some(hf) = lfm2_name(&flm) else { continue };
        let mut entry = weights.tensors.remove(&flm).expect("listed above");
        // [hidden, width] as the model's [hidden, 1, width]: the same values in the same order.
        if let (&[h, w], true) = (&entry.shape[..], hf.ends_with("conv.conv.weight")) {
            entry.shape = vec![h, 1, w];
        }
        weights.tensors.insert(hf, entry);
    }
}

/// Q4_1-shaped tiles whose mins are all exactly 0: FastFlowLM's Q4_0 (signed codes).
fn resign_q4_0(weights: &mut Weights) {
    let mut owned = Vec::new();
    for (name, entry) in &weights.tensors {
        let tile_bytes = entry.shape.last().copied().unwrap_or(0);
        if entry.dtype != Dtype::I8 || tile_bytes != Q4_1_TILE_BYTES || entry.owned.is_some() {
            continue;
        }
        let bytes = &weights.files[entry.file].map[entry.range.clone()];
        let mins_zero = bytes.chunks_exact(Q4_1_TILE_BYTES).all(|tile| {
            tile[Q4_1_MINS_AT..Q4_1_MINS_AT + 2 * GROUPS_PER_TILE * TILE_ROWS]
                .iter()
                .all(|&b| b == 0)
        });
        if !mins_zero {
            continue;
        }
        let mut copy = bytes.to_vec();
        for tile in copy.chunks_exact_mut(Q4_1_TILE_BYTES) {
            for j in 0..GROUPS_PER_TILE * TILE_ROWS {
                let at = SCALES_AT + 2 * j;
                let d = half::bf16::from_le_bytes([tile[at], tile[at + 1]]);
                let m = half::bf16::from_f32(-8.0 * d.to_f32());
                let at = Q4_1_MINS_AT + 2 * j;
                tile[at..at + 2].copy_from_slice(&m.to_le_bytes());
            }
            for b in &mut tile[Q4_1_MINS_AT + 2 * GROUPS_PER_TILE * TILE_ROWS..] {
                *b ^= 0x88;
            }
        }
        owned.push((name.clone(), copy));
    }
    for (name, copy) in owned {
        let entry = weights.tensors.get_mut(&name).expect("listed above");
        entry.range = 0..0;
        entry.owned = Some(copy.into_boxed_slice());
    }
}

/// Phi-4's split matrices fused as Hearth runs them; the LongRoPE tensors dropped (config.json
/// holds the same lists).
fn fuse_phi4(weights: &mut Weights) -> Result<(), Error> {
    let layers = weights.config.as_ref().map_or(0, |c| c.num_hidden_layers);
    for layer in 0..layers {
        let p = format!("model.layers.{layer}.");
        for (fused, parts) in [
            (
                "self_attn.qkv_proj.weight",
                &[
                    "self_attn.q_proj.weight",
                    "self_attn.k_proj.weight",
                    "self_attn.v_proj.weight",
                ][..],
            ),
            (
                "mlp.gate_up_proj.weight",
                &["mlp.gate_proj.weight", "mlp.up_proj.weight"][..],
            ),
        ] {
            let names: Vec<String> = parts.iter().map(|s| format!("{p}{s}")).collect();
            if weights.tensors.contains_key(&format!("{p}{fused}"))
                || !names.iter().all(|n| weights.tensors.contains_key(n))
            {
                continue;
            }
            let mut bytes = Vec::new();
            let mut tile_shape: Option<(Dtype, usize, usize)> = None;
            for n in &names {
                let e = &weights.tensors[n];
                let (Dtype::I8, &[tiles, tile]) = (e.dtype, &e.shape[..]) else {
                    return Err(wrong(weights, n, "2-D tiles", e));
                };
                if tile_shape.is_some_and(|(_, _, t)| t != tile) {
                    return Err(wrong(
                        weights,
                        n,
                        "tiles of the same kind as its siblings",
                        e,
                    ));
                }
                let total = tile_shape.map_or(0, |(_, n, _)| n) + tiles;
                tile_shape = Some((e.dtype, total, tile));
                bytes.extend_from_slice(&weights.files[e.file].map[e.range.clone()]);
            }
            let (dtype, tiles, tile) = tile_shape.expect("at least one part");
            for n in &names {
                weights.tensors.remove(n);
            }
            weights.tensors.insert(
                format!("{p}{fused}"),
                Entry {
                    file: 0,
                    dtype,
                    shape: vec![tiles, tile],
                    range: 0..0,
                    last_groups: GROUPS_PER_TILE,
                    gguf: None,
                    grouped: false,
                    owned: Some(bytes.into_boxed_slice()),
                },
            );
        }
    }
    for rope in ["rope.short.weight", "rope.long.weight"] {
        weights.tensors.remove(rope);
    }
    Ok(())
}

fn wrong(weights: &Weights, name: &str, expected: &str, e: &Entry) -> Error {
    Error::WrongTensor {
        path: weights.path.clone(),
        tensor: name.to_string(),
        expected: format!("{expected} (FastFlowLM's split Phi-4 matrices)"),
        found: format!("{} of shape {:?}", e.dtype.name(), e.shape),
    }
}
