//! Attention with BF16 products, for a quantized model (its cache is f16): the scores
//! `q · k` and the weighted sum of values multiply BF16 numbers and add in f32, 32 products per
//! `vdpbf16ps` instead of 16 per f32 multiply-add, which is what a long prompt's prefill spends
//! its attention time on. A dense model's cache is f32 and its attention stays exact.
//!
//! The queries, keys, values and softmax weights are rounded to BF16 (to nearest even, as
//! `vcvtne2ps2bf16` does: 8 significant bits, a relative error of at most 2^-9 each) and paired
//! along the sum: `(q[d], q[d + 1])` with `(k[d][p], k[d + 1][p])` for a score, `(w[p],
//! w[p + 1])` with `(v[p][c], v[p + 1][c])` for an output. Each pair is added as
//! `vdpbf16ps` does (Intel's definition, checked on the hardware): the odd product, then the
//! even one, each a fused multiply-add rounded to nearest even, with subnormal inputs read as
//! zero and subnormal results flushed to zero ([`dot2`]). Scores and softmax stay f32.
//!
//! [`Portable`] is the twin of the AVX-512 BF16 kernels, bit for bit (tested). Each token's
//! sums run over its own positions in the same order as alone, as in the f32 path, so a
//! prefill still gives what one token at a time would. The error against the f32 path is
//! bounded in the tests and measured on models in bench/README.md.

use half::f16;

use super::{AttentionShape, KvCache, KvHead, KvPrecision, Scratch, Tile, KEY_BLOCK, POSITIONS};

/// Whether BF16 products apply: an f16 cache (a quantized model), heads of an even size
/// (the products go in pairs along it).
pub(super) fn applies(shape: AttentionShape, cache: &KvCache) -> bool {
    cache.precision() == KvPrecision::F16 && shape.head_dim.is_multiple_of(2)
}

/// `x` rounded to BF16 as `vcvtne2ps2bf16` rounds it: to nearest even, a subnormal to
/// zero of its sign, a NaN to a quiet NaN.
pub(super) fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    if x.is_subnormal() {
        return ((bits >> 16) & 0x8000) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// Two values as one pair: the first in the low half, as `vdpbf16ps` reads element `2i`.
pub(super) fn pair(low: f32, high: f32) -> u32 {
    u32::from(to_bf16(low)) | u32::from(to_bf16(high)) << 16
}

/// An f32 as `vdpbf16ps` reads it: a subnormal is zero of its sign.
fn daz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// One lane of `vdpbf16ps`: `acc + a.1 · b.1`, then `+ a.0 · b.0`, each a fused
/// multiply-add with subnormal inputs read as zero and a subnormal result flushed to zero.
#[inline(always)]
pub(super) fn dot2(acc: f32, a: u32, b: u32) -> f32 {
    let half = |pair: u32, shift: u32| daz(f32::from_bits((pair >> shift) << 16));
    let step = |acc: f32, shift| daz(half(a, shift).mul_add(half(b, shift), daz(acc)));
    step(step(acc, 16), 0)
}

/// The BF16 pairs of one pass, rebuilt for each pass (no allocation once warm).
#[derive(Default)]
pub(super) struct Pairs {
    /// `[token][head][head_dim / 2]`: `(q[d], q[d + 1])`.
    q: Vec<u32>,
    /// One run of keys, `[block][head_dim / 2][KEY_BLOCK]`: `(k[d][p], k[d + 1][p])`.
    keys: Vec<u32>,
    /// One run of values, `[positions / 2][head_dim]`: `(v[p][c], v[p + 1][c])`, the last
    /// pair of an odd run completed with zero.
    values: Vec<u32>,
    /// `[token][head][stride / 2]`: `(w[p], w[p + 1])`, zero past the token's positions.
    weights: Vec<u32>,
}

/// The BF16 steps of a pass at one width. Every implementation gives the same bits.
pub(super) trait Kernels: Copy {
    /// `keys` (`[block][head_dim][KEY_BLOCK]`) as pairs along `d` into `out`.
    fn key_pairs(self, keys: &[f16], head_dim: usize, out: &mut Vec<u32>);

    /// `values` (`[positions][head_dim]`) as pairs of positions into `out`.
    fn value_pairs(self, values: &[f16], head_dim: usize, out: &mut Vec<u32>);

    /// `scores[g * stride + first + j] = (Σ over pairs of d of dot2) · scale` for the
    /// positions `j` of the key blocks of `keys` (pairs, as [`Pairs::keys`]); `q` is
    /// `[G][head_dim / 2]`.
    fn scores<const G: usize>(
        self,
        q: &[u32],
        keys: &[u32],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    );

    /// `out[g][c] = dot2(out[g][c], values[p2][c], weights[g * half_stride + first + p2])`
    /// for each pair of positions `p2` of `values` (as [`Pairs::values`]) in order.
    fn weighted_values<const G: usize>(
        self,
        weights: &[u32],
        half_stride: usize,
        first: usize,
        values: &[u32],
        out: &mut [f32],
    );

    /// [`softmax`], compiled for this width.
    fn softmax(self, x: &mut [f32]);
}

/// Plain Rust, the twin of the AVX-512 BF16 kernels that the tests check them against (no
/// level runs it: a level without BF16 dot products keeps attention in f32).
#[cfg(test)]
#[derive(Clone, Copy)]
pub(super) struct Portable;

#[cfg(test)]
impl Kernels for Portable {
    fn key_pairs(self, keys: &[f16], hd: usize, out: &mut Vec<u32>) {
        out.clear();
        for block in keys.chunks_exact(hd * KEY_BLOCK) {
            for d in (0..hd).step_by(2) {
                out.extend((0..KEY_BLOCK).map(|j| {
                    let at = |d: usize| block[d * KEY_BLOCK + j].to_f32();
                    pair(at(d), at(d + 1))
                }));
            }
        }
    }

    fn value_pairs(self, values: &[f16], hd: usize, out: &mut Vec<u32>) {
        out.clear();
        out.resize((values.len() / hd).div_ceil(2) * hd, 0);
        value_pairs_from(values, hd, 0, out);
    }

    fn scores<const G: usize>(
        self,
        q: &[u32],
        keys: &[u32],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        let half = q.len() / G;
        for (b, keys) in keys.chunks_exact(half * KEY_BLOCK).enumerate() {
            for (g, q) in q.chunks_exact(half).enumerate() {
                for j in 0..KEY_BLOCK {
                    let mut acc = 0.0;
                    for (d2, &q) in q.iter().enumerate() {
                        acc = dot2(acc, keys[d2 * KEY_BLOCK + j], q);
                    }
                    scores[g * stride + first + b * KEY_BLOCK + j] = acc * scale;
                }
            }
        }
    }

    fn weighted_values<const G: usize>(
        self,
        weights: &[u32],
        half_stride: usize,
        first: usize,
        values: &[u32],
        out: &mut [f32],
    ) {
        weighted_columns(G, weights, half_stride, first, values, out, 0);
    }

    fn softmax(self, x: &mut [f32]) {
        super::softmax(x)
    }
}

/// [`Kernels::value_pairs`] for the columns `from..head_dim` of each pair, into `out`
/// (sized `head_dim` per pair): the twin, and the wide kernel's last columns.
pub(super) fn value_pairs_from(values: &[f16], hd: usize, from: usize, out: &mut [u32]) {
    for (p2, out) in out.chunks_exact_mut(hd).enumerate() {
        let row = |p: usize, c: usize| values.get(p * hd + c).map_or(0.0, |v| v.to_f32());
        for (c, out) in out.iter_mut().enumerate().skip(from) {
            *out = pair(row(2 * p2, c), row(2 * p2 + 1, c));
        }
    }
}

/// [`Kernels::weighted_values`] for the columns `from..head_dim`, one at a time.
pub(super) fn weighted_columns(
    heads: usize,
    weights: &[u32],
    half_stride: usize,
    first: usize,
    values: &[u32],
    out: &mut [f32],
    from: usize,
) {
    let hd = out.len() / heads;
    let pairs = values.len() / hd;
    for (g, out) in out.chunks_exact_mut(hd).enumerate() {
        let w = &weights[g * half_stride + first..][..pairs];
        for (c, out) in out.iter_mut().enumerate().skip(from) {
            for (&w, row) in w.iter().zip(values.chunks_exact(hd)) {
                *out = dot2(*out, row[c], w);
            }
        }
    }
}

/// The group's query heads in passes of `G` (as the f32 path), with BF16 products.
pub(super) fn attend_group(
    kernels: impl Kernels,
    shape: AttentionShape,
    tile: Tile<'_, '_>,
    kv: KvHead<'_>,
    scratch: &mut Scratch,
) {
    let args = (shape, &kv, scratch);
    match shape.heads / shape.kv_heads {
        g if g % 8 == 0 => attend_heads::<8>(kernels, tile, args),
        g if g % 4 == 0 => attend_heads::<4>(kernels, tile, args),
        g if g % 3 == 0 => attend_heads::<3>(kernels, tile, args),
        g if g % 2 == 0 => attend_heads::<2>(kernels, tile, args),
        _ => attend_heads::<1>(kernels, tile, args),
    }
}

/// [`super::attend_heads`] with BF16 products: each run of keys and values is paired once
/// for all the tile's tokens, then each token's sums run over its own positions.
fn attend_heads<const G: usize>(
    kernels: impl Kernels,
    tile: Tile<'_, '_>,
    (shape, kv, scratch): (AttentionShape, &KvHead<'_>, &mut Scratch),
) {
    let hd = shape.head_dim;
    let longest = tile.first + tile.q.len();
    // Even (a whole number of key blocks), so pairs of positions never straddle rows.
    let stride = longest.next_multiple_of(KEY_BLOCK);
    let Scratch { scores, pairs, .. } = scratch;
    let pass = G * hd;
    let group_dim = tile.q.first().map_or(0, |q| q.len());
    for heads in (0..group_dim).step_by(pass) {
        pairs.q.clear();
        for q in tile.q {
            let q = &q[heads..heads + pass];
            pairs.q.extend(q.chunks_exact(2).map(|d| pair(d[0], d[1])));
        }
        scores.clear();
        scores.resize(tile.q.len() * G * stride, 0.0);
        let first_run = shape.first_run(tile.first);
        for block in (first_run..longest).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(longest);
            let rows: &[f16] = kv.cache.key_run(kv.layer, kv.kv_head, block..end);
            kernels.key_pairs(rows, hd, &mut pairs.keys);
            for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
                let positions = end.min(tile.first + i + 1).saturating_sub(block);
                let q = &pairs.q[i * pass / 2..][..pass / 2];
                let keys = &pairs.keys[..positions.div_ceil(KEY_BLOCK) * KEY_BLOCK * hd / 2];
                if !keys.is_empty() {
                    kernels.scores::<G>(q, keys, shape.scale, scores, stride, block);
                }
            }
        }
        pairs.weights.clear();
        for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
            let position = tile.first + i;
            for head_scores in scores.chunks_exact_mut(stride) {
                let weights = &mut head_scores[..=position];
                super::windowed_softmax(shape, position, weights, |x| kernels.softmax(x));
                let w = |p: usize| weights.get(p).copied().unwrap_or(0.0);
                pairs
                    .weights
                    .extend((0..stride / 2).map(|p2| pair(w(2 * p2), w(2 * p2 + 1))));
            }
        }
        for out in tile.out.iter_mut() {
            out[heads..heads + pass].fill(0.0);
        }
        for block in (first_run..longest).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(longest);
            let rows: &[f16] = kv.cache.value_run(kv.layer, kv.kv_head, block..end);
            kernels.value_pairs(rows, hd, &mut pairs.values);
            for i in 0..tile.q.len() {
                let positions = end.min(tile.first + i + 1).saturating_sub(block);
                if positions > 0 {
                    let out = &mut tile.out[i][heads..heads + pass];
                    let values = &pairs.values[..positions.div_ceil(2) * hd];
                    let weights = &pairs.weights[i * G * stride / 2..][..G * stride / 2];
                    kernels.weighted_values::<G>(weights, stride / 2, block / 2, values, out);
                }
            }
        }
    }
}
