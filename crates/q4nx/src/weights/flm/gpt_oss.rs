//! FastFlowLM's gpt-oss layout (`q4nx/models/gpt_oss.py` with `configs/gpt-oss.json`) as
//! Hearth's canonical names and tiles ([`crate::layout`]):
//!
//! - Every linear is in tiles of 32 rows x 128 columns (K padded to 128), kept as a grid and
//!   regrouped for the NPU: tile (row block `rb`, column tile `c`) of a matrix of `C` column
//!   tiles lies at `((rb / g) * C + c) * g + rb % g`, with `g` = 4 for attention and the
//!   experts and 2 for the head; attention's row blocks are padded with zero tiles to a
//!   multiple of 16, the experts' to a multiple of 4. Q4_1 tiles become Hearth's 32 x 256 ones
//!   byte for byte, MXFP4 tiles Q8 ones, exactly ([`super::tiles`]).
//! - The experts of a layer are one tensor, `ffn_gate_up_down_exps.weight`
//!   `[experts, 2 R + R', C, 4, 2560]`: per expert, groups of 4 row blocks of the gate and of
//!   the up projection alternating (`R` each), then the down projection's (`R'`), all MXFP4.
//!   They become one Q8 matrix per expert and projection, `mlp.experts.{e}.{gate,up,down}_proj
//!   .weight`: copies owned by [`Weights`], twice the bytes of the MXFP4 (gpt-oss-20b: about
//!   21 GB where the file holds 12). The converter needs `C` equal for both (gpt-oss-20b:
//!   hidden and expert width 2,880).
//! - Their biases, `mlp.experts.{gate,up,down}_proj_bias` `[experts, N]` (BF16): each expert's
//!   row is its `mlp.experts.{e}.{proj}.bias`, borrowed from the map. (FastFlowLM also copies
//!   them into each row block's first expert tile, where they are skipped.)
//! - The router: `mlp.router.weight` is a blocked copy for the NPU's decode, dropped;
//!   `mlp.router.weight_prefill` holds it row-major with K padded to 128, and its first
//!   `hidden` columns are the router. `self_attn.sinks.weight` is `self_attn.sinks`;
//!   `rope_freqs.weight`, if present, is dropped (config.json's YaRN is what the engine runs).
//! - Norms, attention biases and the embedding keep Hugging Face's names and BF16 values.

use super::tiles::{self, HALF_COLS, HALF_TILE_BYTES};
use crate::tile::{GROUPS_PER_TILE, Q4_1_TILE_BYTES, Q8_TILE_BYTES, TILE_COLS, TILE_ROWS};
use crate::weights::{Entry, Weights};
use crate::{Dtype, Error};

/// The suffix of a layer's experts in FastFlowLM's layout.
const EXPERTS: &str = "ffn_gate_up_down_exps.weight";

/// Whether `weights` hold FastFlowLM's gpt-oss layout.
pub(super) fn is_flm(weights: &Weights) -> bool {
    weights
        .tensors
        .contains_key(&format!("model.layers.0.{EXPERTS}"))
}

/// Rewrites FastFlowLM's gpt-oss tensors as Hearth's (see the module's documentation).
pub(super) fn adapt(weights: &mut Weights) -> Result<(), Error> {
    let Some(c) = weights.config.clone() else {
        return Ok(());
    };
    let Some(moe) = c.moe.clone() else {
        return Ok(());
    };
    let (hidden, width, experts) = (c.hidden_size, moe.expert_intermediate_size, moe.experts);
    let mut out: Vec<(String, Entry)> = Vec::new();
    out.push((
        "lm_head.weight".into(),
        grouped(weights, "lm_head.weight", c.vocab_size, hidden, 2)?,
    ));
    for layer in 0..c.num_hidden_layers {
        let p = format!("model.layers.{layer}.");
        for (name, rows, cols) in [
            ("self_attn.q_proj.weight", c.q_dim(), hidden),
            ("self_attn.k_proj.weight", c.kv_dim(), hidden),
            ("self_attn.v_proj.weight", c.kv_dim(), hidden),
            ("self_attn.o_proj.weight", hidden, c.q_dim()),
        ] {
            let name = format!("{p}{name}");
            out.push((name.clone(), grouped(weights, &name, rows, cols, 4)?));
        }
        out.extend(split_experts(weights, &p, experts, hidden, width)?);
        for (proj, rows) in [("gate", width), ("up", width), ("down", hidden)] {
            let name = format!("{p}mlp.experts.{proj}_proj_bias");
            let e = weights
                .tensors
                .get(&name)
                .ok_or_else(|| missing(weights, &name))?;
            if !e.dtype.is_float() || e.owned.is_some() || e.shape != [experts, rows] {
                let expected = format!("BF16 biases [{experts}, {rows}]");
                return Err(wrong(weights, &name, &expected, e));
            }
            let len = rows * e.dtype.size();
            for expert in 0..experts {
                let start = e.range.start + expert * len;
                out.push((
                    format!("{p}mlp.experts.{expert}.{proj}_proj.bias"),
                    Entry {
                        file: e.file,
                        dtype: e.dtype,
                        shape: vec![rows],
                        range: start..start + len,
                        last_groups: GROUPS_PER_TILE,
                        gguf: None,
                        grouped: false,
                        owned: None,
                    },
                ));
            }
            weights.tensors.remove(&name);
        }
        out.push((
            format!("{p}mlp.router.weight"),
            router(weights, &p, experts, hidden)?,
        ));
        let sinks = format!("{p}self_attn.sinks.weight");
        let entry = weights
            .tensors
            .remove(&sinks)
            .ok_or_else(|| missing(weights, &sinks))?;
        out.push((format!("{p}self_attn.sinks"), entry));
        for gone in [
            EXPERTS,
            "mlp.router.weight",
            "mlp.router.weight_prefill",
            "self_attn.sinks.weight",
        ] {
            weights.tensors.remove(&format!("{p}{gone}"));
        }
    }
    weights.tensors.remove("rope_freqs.weight");
    for (name, entry) in out {
        weights.tensors.insert(name, entry);
    }
    Ok(())
}

/// The Q4_1 matrix `name` (`rows` x `cols`), stored as `[G, C, group, 2560]` tiles in groups
/// of `group` row blocks, as Hearth's tiles.
fn grouped(
    weights: &Weights,
    name: &str,
    rows: usize,
    cols: usize,
    group: usize,
) -> Result<Entry, Error> {
    let e = weights
        .tensors
        .get(name)
        .ok_or_else(|| missing(weights, name))?;
    let halves = cols.div_ceil(HALF_COLS);
    let fits = matches!(
        e.shape[..],
        [groups, c, g, HALF_TILE_BYTES] if c == halves && g == group && groups * g * TILE_ROWS >= rows
    );
    if e.dtype != Dtype::I8 || e.owned.is_some() || !fits || !rows.is_multiple_of(TILE_ROWS) {
        let expected = format!(
            "I8 tiles [row groups, {halves}, {group}, {HALF_TILE_BYTES}] of a [{rows} x {cols}] matrix"
        );
        return Err(wrong(weights, name, &expected, e));
    }
    let bytes = &weights.files[e.file].map[e.range.clone()];
    let at = |rb: usize, c: usize| ((rb / group) * halves + c) * group + rb % group;
    let tiles = whole_tiles(bytes, rows, cols, false, at).map_err(|d| damaged(weights, name, d))?;
    Ok(owned(tiles, rows, cols, Q4_1_TILE_BYTES))
}

/// A layer's experts (prefix `p`), `ffn_gate_up_down_exps.weight`, as one Q8 matrix per
/// expert and projection.
fn split_experts(
    weights: &Weights,
    p: &str,
    experts: usize,
    hidden: usize,
    width: usize,
) -> Result<Vec<(String, Entry)>, Error> {
    let name = format!("{p}{EXPERTS}");
    let e = weights
        .tensors
        .get(&name)
        .ok_or_else(|| missing(weights, &name))?;
    // Row groups of 4 blocks: R for gate and up each, R' for down.
    let groups = |rows: usize| rows.div_ceil(TILE_ROWS).div_ceil(4);
    let (r, r_down) = (groups(width), groups(hidden));
    let halves = hidden.div_ceil(HALF_COLS);
    let expected_shape = [experts, 2 * r + r_down, halves, 4, HALF_TILE_BYTES];
    if e.dtype != Dtype::I8
        || e.owned.is_some()
        || e.shape != expected_shape
        || width.div_ceil(HALF_COLS) != halves
        || !hidden.is_multiple_of(TILE_ROWS)
        || !width.is_multiple_of(TILE_ROWS)
    {
        let expected = format!(
            "I8 MXFP4 tiles {expected_shape:?} for {experts} experts of width {width} on \
             {hidden} hidden"
        );
        return Err(wrong(weights, &name, &expected, e));
    }
    let bytes = &weights.files[e.file].map[e.range.clone()];
    let per_expert = (2 * r + r_down) * halves * 4;
    let mut out = Vec::with_capacity(3 * experts);
    for expert in 0..experts {
        let base = expert * per_expert;
        for (proj, rows, cols, first_group, stride) in [
            ("gate", width, hidden, 0, 2),
            ("up", width, hidden, 1, 2),
            ("down", hidden, width, 2 * r, 1),
        ] {
            let at = |rb: usize, c: usize| {
                base + ((first_group + stride * (rb / 4)) * halves + c) * 4 + rb % 4
            };
            let tiles = whole_tiles(bytes, rows, cols, true, at)
                .map_err(|d| damaged(weights, &name, format!("expert {expert}'s {proj}: {d}")))?;
            out.push((
                format!("{p}mlp.experts.{expert}.{proj}_proj.weight"),
                owned(tiles, rows, cols, Q8_TILE_BYTES),
            ));
        }
    }
    Ok(out)
}

/// The router of a layer (prefix `p`): the first `hidden` columns of its row-major copy.
fn router(weights: &Weights, p: &str, experts: usize, hidden: usize) -> Result<Entry, Error> {
    let name = format!("{p}mlp.router.weight_prefill");
    let e = weights
        .tensors
        .get(&name)
        .ok_or_else(|| missing(weights, &name))?;
    let padded = match e.shape[..] {
        [n, k] if n == experts && k >= hidden && e.dtype.is_float() && e.owned.is_none() => k,
        _ => {
            let expected = format!("a float router [{experts}, at least {hidden}]");
            return Err(wrong(weights, &name, &expected, e));
        }
    };
    let size = e.dtype.size();
    let bytes = &weights.files[e.file].map[e.range.clone()];
    let copy: Vec<u8> = bytes
        .chunks_exact(padded * size)
        .flat_map(|row| &row[..hidden * size])
        .copied()
        .collect();
    Ok(Entry {
        file: 0,
        dtype: e.dtype,
        shape: vec![experts, hidden],
        range: 0..0,
        last_groups: GROUPS_PER_TILE,
        gguf: None,
        grouped: false,
        owned: Some(copy.into_boxed_slice()),
    })
}

/// Hearth's tiles (Q8 if `mxfp4`, else Q4_1; row-block major) of a `rows` x `cols` matrix
/// whose FastFlowLM tile (row block, column tile) is tile `at(rb, c)` of `bytes`.
fn whole_tiles(
    bytes: &[u8],
    rows: usize,
    cols: usize,
    mxfp4: bool,
    at: impl Fn(usize, usize) -> usize,
) -> Result<Vec<u8>, String> {
    let (row_blocks, halves) = (rows / TILE_ROWS, cols.div_ceil(HALF_COLS));
    let col_tiles = cols.div_ceil(TILE_COLS);
    let size = if mxfp4 {
        Q8_TILE_BYTES
    } else {
        Q4_1_TILE_BYTES
    };
    let mut out = vec![0u8; row_blocks * col_tiles * size];
    for rb in 0..row_blocks {
        for c in 0..halves {
            let from = &bytes[at(rb, c) * HALF_TILE_BYTES..][..HALF_TILE_BYTES];
            let to = &mut out[(rb * col_tiles + c / 2) * size..][..size];
            if mxfp4 {
                tiles::mxfp4_into_q8(from, to, c % 2, c == 0)
                    .map_err(|d| format!("row block {rb}, column tile {c}: {d}"))?;
            } else {
                tiles::q4_1_into(from, to, c % 2);
            }
        }
    }
    Ok(out)
}

/// An entry of tiles computed at open.
fn owned(tiles: Vec<u8>, rows: usize, cols: usize, size: usize) -> Entry {
    Entry {
        file: 0,
        dtype: Dtype::I8,
        shape: vec![rows / TILE_ROWS, cols.div_ceil(TILE_COLS), size],
        range: 0..0,
        last_groups: GROUPS_PER_TILE,
        gguf: None,
        grouped: false,
        owned: Some(tiles.into_boxed_slice()),
    }
}

fn missing(weights: &Weights, name: &str) -> Error {
    Error::WrongTensor {
        path: weights.path.clone(),
        tensor: name.to_string(),
        expected: "a tensor FastFlowLM's gpt-oss layout always holds".into(),
        found: "nothing: the file lacks it".into(),
    }
}

fn wrong(weights: &Weights, name: &str, expected: &str, e: &Entry) -> Error {
    Error::WrongTensor {
        path: weights.path.clone(),
        tensor: name.to_string(),
        expected: format!("{expected} (FastFlowLM's gpt-oss layout)"),
        found: format!("{} of shape {:?}", e.dtype.name(), e.shape),
    }
}

fn damaged(weights: &Weights, name: &str, detail: String) -> Error {
    Error::WrongTensor {
        path: weights.path.clone(),
        tensor: name.to_string(),
        expected: "tiles as FastFlowLM's gpt-oss converter writes them".into(),
        found: detail,
    }
}
