//! Causal grouped-query attention over the KV cache, split over the thread pool.
//!
//! One job is one (token, KV head): the query heads that share that KV head read each cached
//! key and value once for all of them (8 query heads per KV head in MiniCPM5), so the cache is
//! streamed once per token instead of once per query head. Scores and softmax are in f32, as
//! the reference computes them.
//!
//! Both products are small matrix products, register-blocked over the heads of a pass:
//! - scores: the cache keeps keys of 16 positions side by side (`[head_dim][16]` blocks, see
//!   `kv_cache`), so `scores[g][p..p + 16] += q[g][d] · keys[d][p..p + 16]` over `d` fills 16
//!   scores per vector, with no horizontal sums;
//! - output: `out[g][d..d + D] += weight[g][p] · values[p][d..d + D]` over `p`.
//!
//! Both stream the cache once per pass, and the wide kernels ask for the bytes 16 KiB ahead of
//! their loads as they go, into L2 (`wide::AHEAD`): the hardware prefetcher alone leaves a long
//! decode step waiting on memory.
//!
//! Every sum runs in the same order (over `d`, then over `p`, from the first), whatever the
//! vector width, and adds each product with one fused multiply-add (rounded once; the portable
//! kernels use `f32::mul_add`), so the AVX-512, AVX2 and portable kernels give identical
//! results. Which of them runs follows the model's [`KernelLevel`]. Fused multiply-adds halve
//! the instructions of both products, which is what a long prompt's prefill spends its
//! attention time on (its work grows with the square of the length).

use std::cell::RefCell;

use super::context::CpuContext;
use super::exp::exp;
use super::level::KernelLevel;
use super::pool::SharedMut;
use crate::kv_cache::{CacheValue, KvCache, KvPrecision, KEY_BLOCK};
use half::f16;

/// Shapes of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (`heads` is a multiple of it).
    pub kv_heads: usize,
    /// Floats per head.
    pub head_dim: usize,
    /// Score scale, usually `1 / sqrt(head_dim)`.
    pub scale: f32,
}

/// For each of `tokens` query tokens at positions `start..start + tokens`, attends over
/// positions `0..=position` of `layer` in `cache`:
/// `out[t, h] = Σ_p softmax_p(q[t, h] · k[p, h / group] * scale) v[p, h / group]`.
///
/// `q` and `out` are `[tokens, heads * head_dim]`; every position up to the last token's must
/// already be stored in the cache. Runs on `cpu`'s pool with the kernels of its level.
#[allow(clippy::too_many_arguments)] // the shapes are grouped; the rest are the data
pub fn causal_attention(
    cpu: &CpuContext,
    shape: AttentionShape,
    q: &[f32],
    tokens: usize,
    start: usize,
    cache: &KvCache,
    layer: usize,
    out: &mut [f32],
) {
    let AttentionShape {
        heads,
        kv_heads,
        head_dim,
        ..
    } = shape;
    let q_dim = heads * head_dim;
    assert!(
        kv_heads > 0 && heads % kv_heads == 0,
        "heads must be a multiple of kv_heads"
    );
    assert_eq!(
        q.len(),
        tokens * q_dim,
        "attention: q is not [tokens, heads * head_dim]"
    );
    assert_eq!(
        out.len(),
        tokens * q_dim,
        "attention: out is not [tokens, heads * head_dim]"
    );
    assert!(
        start + tokens <= cache.capacity(),
        "attention past the end of the cache"
    );
    let group_dim = heads / kv_heads * head_dim;
    let out_ptr = SharedMut(out.as_mut_ptr());
    let level = cpu.level();
    let bf16 = cpu.bf16_attention();
    let tiles = tokens.div_ceil(TILE);
    cpu.pool().run(tiles * kv_heads, &|job| {
        // The last tiles first: they attend over the most positions, and the short ones that
        // come after even out the end of the job.
        let (tile, kv_head) = (tiles - 1 - job / kv_heads, job % kv_heads);
        let tile_tokens = tile * TILE..tokens.min((tile + 1) * TILE);
        let heads_at = |t: usize| t * q_dim + kv_head * group_dim;
        let q: [&[f32]; TILE] = std::array::from_fn(|i| {
            let t = tile_tokens.start + i;
            if t < tile_tokens.end {
                &q[heads_at(t)..][..group_dim]
            } else {
                &[]
            }
        });
        let mut out: [&mut [f32]; TILE] = std::array::from_fn(|i| {
            let t = tile_tokens.start + i;
            if t < tile_tokens.end {
                // SAFETY: job (tile, kv_head) alone writes the heads of KV head `kv_head` of
                // the tile's tokens: disjoint ranges inside `out`, which outlives `run`.
                unsafe { std::slice::from_raw_parts_mut(out_ptr.at(heads_at(t)), group_dim) }
            } else {
                &mut []
            }
        });
        let n = tile_tokens.len();
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            let head = KvHead {
                cache,
                level,
                bf16,
                layer,
                kv_head,
            };
            let tile = Tile {
                q: &q[..n],
                out: &mut out[..n],
                first: start + tile_tokens.start,
            };
            attend_group(shape, tile, head, scratch);
        });
    });
}

/// Query tokens of a prefill attended in one job: each block of keys and values is read once
/// for all of them instead of once per token. The sums of each token are
/// the same as alone, so a prefill gives what one token at a time would.
const TILE: usize = 8;

/// Consecutive query tokens of one job, at positions `first..first + q.len()`: for each, the
/// query heads of one KV head (`q`) and where their outputs go (`out`).
struct Tile<'a, 'o> {
    q: &'a [&'a [f32]],
    out: &'a mut [&'o mut [f32]],
    first: usize,
}

/// Positions of keys or values read from the cache at a time (a whole number of key blocks;
/// 64 KiB of f16 at 128 values per head, so they stay in L2 while a tile's tokens use them).
/// Longer runs mean fewer kernel calls per pass: measured on MiniCPM5-2B's shape at 4096
/// positions, a decode step takes about 7 ms less than with runs of 32 positions
/// (bench/README.md).
const POSITIONS: usize = 16 * KEY_BLOCK;

/// Per-thread buffers, reused across calls (no allocation once warm).
#[derive(Default)]
struct Scratch {
    /// `[token][head][position]` scores, then weights; rows padded to whole key blocks.
    scores: Vec<f32>,
    /// The BF16 pairs of a pass with BF16 products ([`bf16`]).
    pairs: bf16::Pairs,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// One KV head of one layer of the cache, read with the kernels `level` allows (BF16
/// products if `bf16` and the cache is f16: [`bf16`]).
struct KvHead<'c> {
    cache: &'c KvCache,
    level: KernelLevel,
    bf16: bool,
    layer: usize,
    kv_head: usize,
}

/// The attention kernels of one width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Width {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Width {
    /// The widest attention kernels `level` allows (AVX-512F at both AVX-512 levels).
    fn for_level(level: KernelLevel) -> Width {
        match level {
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni if wide::Avx512::detect().is_some() => {
                Width::Avx512
            }
            #[cfg(target_arch = "x86_64")]
            KernelLevel::Avx2 | KernelLevel::Avx512Bw | KernelLevel::Avx512Vnni
                if wide::Avx2::detect().is_some() =>
            {
                Width::Avx2
            }
            _ => Width::Portable,
        }
    }
}

/// All query heads of one KV head for the tile's tokens, with the widest kernels the cache
/// reader's level allows.
fn attend_group(shape: AttentionShape, tile: Tile<'_, '_>, kv: KvHead<'_>, scratch: &mut Scratch) {
    #[cfg(target_arch = "x86_64")]
    if kv.bf16 && bf16::applies(shape, kv.cache) {
        if let Some(kernels) = wide::Avx512Bf16::detect() {
            return bf16::attend_group(kernels, shape, tile, kv, scratch);
        }
    }
    match Width::for_level(kv.level) {
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => {
            if let Some(avx512) = wide::Avx512::detect() {
                return attend_group_with(avx512, shape, tile, kv, scratch);
            }
        }
        #[cfg(target_arch = "x86_64")]
        Width::Avx2 => {
            if let Some(avx2) = wide::Avx2::detect() {
                return attend_group_with(avx2, shape, tile, kv, scratch);
            }
        }
        Width::Portable => {}
    }
    attend_group_with(Portable, shape, tile, kv, scratch)
}

/// The group's query heads in passes of 8, 4, 3, 2 or 1 heads (the first that divides the
/// group), each pass a compile-time size so the wide kernels keep its sums in registers. Each
/// pass reads the group's keys and values again, so a group of 3 (SmolLM2: 9 heads over 3)
/// runs as one pass, not three.
fn attend_group_with(
    kernels: impl Kernels,
    shape: AttentionShape,
    tile: Tile<'_, '_>,
    kv: KvHead<'_>,
    scratch: &mut Scratch,
) {
    match kv.cache.precision() {
        KvPrecision::F32 => attend_group_as::<f32>(kernels, shape, tile, kv, scratch),
        KvPrecision::F16 => attend_group_as::<f16>(kernels, shape, tile, kv, scratch),
    }
}

/// [`attend_group_with`] for a cache that stores `E`.
fn attend_group_as<E: Value>(
    kernels: impl Kernels,
    shape: AttentionShape,
    tile: Tile<'_, '_>,
    kv: KvHead<'_>,
    scratch: &mut Scratch,
) {
    let args = (shape, &kv, scratch);
    match shape.heads / shape.kv_heads {
        g if g % 8 == 0 => attend_heads::<8, E>(kernels, tile, args),
        g if g % 4 == 0 => attend_heads::<4, E>(kernels, tile, args),
        g if g % 3 == 0 => attend_heads::<3, E>(kernels, tile, args),
        g if g % 2 == 0 => attend_heads::<2, E>(kernels, tile, args),
        _ => attend_heads::<1, E>(kernels, tile, args),
    }
}

/// Attends `G` of the group's heads at a time, for every token of the tile. Token `i` attends
/// over positions `0..=first + i`: its scores, softmax and weighted sum run over them in the
/// same order as for a tile of that token alone.
fn attend_heads<const G: usize, E: Value>(
    kernels: impl Kernels,
    tile: Tile<'_, '_>,
    (shape, kv, scratch): (AttentionShape, &KvHead<'_>, &mut Scratch),
) {
    let hd = shape.head_dim;
    // Token `i` of the tile attends over `tile.first + i + 1` positions.
    let longest = tile.first + tile.q.len();
    let stride = longest.next_multiple_of(KEY_BLOCK);
    let Scratch { scores, .. } = scratch;
    let pass = G * hd;
    let group_dim = tile.q.first().map_or(0, |q| q.len());
    for heads in (0..group_dim).step_by(pass) {
        scores.clear();
        scores.resize(tile.q.len() * G * stride, 0.0);
        for block in (0..longest).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(longest);
            let rows: &[E] = kv.cache.key_run(kv.layer, kv.kv_head, block..end);
            for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
                let positions = end.min(tile.first + i + 1).saturating_sub(block);
                let q = &tile.q[i][heads..heads + pass];
                let keys = &rows[..positions.div_ceil(KEY_BLOCK) * KEY_BLOCK * hd];
                if !keys.is_empty() {
                    kernels.scores::<G, E>(q, keys, shape.scale, scores, stride, block);
                }
            }
        }
        for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
            for head_scores in scores.chunks_exact_mut(stride) {
                kernels.softmax(&mut head_scores[..tile.first + i + 1]);
            }
        }
        for out in tile.out.iter_mut() {
            out[heads..heads + pass].fill(0.0);
        }
        for block in (0..longest).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(longest);
            let rows: &[E] = kv.cache.value_run(kv.layer, kv.kv_head, block..end);
            for (i, weights) in scores.chunks_exact(G * stride).enumerate() {
                let positions = end.min(tile.first + i + 1).saturating_sub(block);
                if positions > 0 {
                    let out = &mut tile.out[i][heads..heads + pass];
                    let values = &rows[..positions * hd];
                    kernels.weighted_values::<G, E>(weights, stride, block, values, out);
                }
            }
        }
    }
}

/// The inner loops of a pass of `G` query heads, at one vector width. Every implementation
/// sums in the same order, so all give the same results.
trait Kernels: Copy {
    /// `scores[g * stride + first + j] = (Σ_d q[g][d] · keys[d][j]) · scale` for the positions
    /// `j` of one or more key blocks (`keys` is blocks of `[head_dim][KEY_BLOCK]`, `q` is
    /// `[G][head_dim]`), each summed over `d` in order.
    fn scores<const G: usize, E: Value>(
        self,
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    );

    /// `out[g][c] += weights[g * stride + first + p] · values[p][c]` for each position `p` of
    /// `values` (`[positions][head_dim]`) in order; `out` is `[G][head_dim]`.
    fn weighted_values<const G: usize, E: Value>(
        self,
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
    );

    /// [`softmax`], compiled for this width.
    fn softmax(self, x: &mut [f32]);
}

/// A value type of the cache ([`CacheValue`]: f32, or f16 widened exactly) as the wide
/// kernels load it: straight from the cache, so no f32 copy of the keys and values is made.
trait Value: CacheValue {
    /// 16 values at `p` as f32. Safety: 16 readable values; the caller has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512;
    /// 8 values at `p` as f32. Safety: 8 readable values; the caller has AVX and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl Value for f32 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> std::arch::x86_64::__m512 {
        std::arch::x86_64::_mm512_loadu_ps(p)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        std::arch::x86_64::_mm256_loadu_ps(p)
    }
}

impl Value for f16 {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        _mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
    }
}

/// Plain Rust, the twin the wide kernels are tested against.
#[derive(Clone, Copy)]
struct Portable;

impl Kernels for Portable {
    fn scores<const G: usize, E: Value>(
        self,
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        let hd = q.len() / G;
        for (b, keys) in keys.chunks_exact(hd * KEY_BLOCK).enumerate() {
            for (g, q) in q.chunks_exact(hd).enumerate() {
                for j in 0..KEY_BLOCK {
                    let mut acc = 0.0;
                    for (d, q) in q.iter().enumerate() {
                        acc = q.mul_add(keys[d * KEY_BLOCK + j].to_f32(), acc);
                    }
                    scores[g * stride + first + b * KEY_BLOCK + j] = acc * scale;
                }
            }
        }
    }

    fn weighted_values<const G: usize, E: Value>(
        self,
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
    ) {
        weighted_columns(G, weights, stride, first, values, out, 0);
    }

    fn softmax(self, x: &mut [f32]) {
        softmax(x)
    }
}

/// [`Kernels::weighted_values`] for the columns `from..head_dim`, one at a time (the portable
/// kernel, and the wide kernels' last columns).
fn weighted_columns<E: Value>(
    heads: usize,
    weights: &[f32],
    stride: usize,
    first: usize,
    values: &[E],
    out: &mut [f32],
    from: usize,
) {
    let hd = out.len() / heads;
    let positions = values.len() / hd;
    for (g, out) in out.chunks_exact_mut(hd).enumerate() {
        let w = &weights[g * stride + first..][..positions];
        for (c, out) in out.iter_mut().enumerate().skip(from) {
            for (w, row) in w.iter().zip(values.chunks_exact(hd)) {
                *out = w.mul_add(row[c].to_f32(), *out);
            }
        }
    }
}

/// Softmax in place, in f32, shifted by the maximum.
#[inline(always)]
fn softmax(x: &mut [f32]) {
    // A plain comparison, not `f32::max`, whose NaN rule stops the vectorizer (scores are
    // never NaN).
    let max = fold16(x, f32::NEG_INFINITY, |a, b| if b > a { b } else { a });
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    let inverse = 1.0 / fold16(x, 0.0, |a, b| a + b);
    for v in x.iter_mut() {
        *v *= inverse;
    }
}

/// `op` over `x` in 16 lanes (lane `i` takes the values at `i mod 16`, in order), the lanes
/// then combined pairwise (`i + 8`, `i + 4`, `i + 2`, `i + 1`), then the tail in order: a fixed
/// order that vectorizes.
#[inline(always)]
fn fold16(x: &[f32], init: f32, op: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder();
    for chunk in chunks {
        for i in 0..16 {
            acc[i] = op(acc[i], chunk[i]);
        }
    }
    for width in [8, 4, 2, 1] {
        for i in 0..width {
            acc[i] = op(acc[i], acc[i + width]);
        }
    }
    tail.iter().fold(acc[0], |a, &b| op(a, b))
}

/// Attention with BF16 products, for a quantized model (its cache is f16): the scores
/// `q · k` and the weighted sum of values multiply BF16 numbers and add in f32, 32 products per
/// `vdpbf16ps` instead of 16 per f32 multiply-add, which is what a long prompt's prefill spends
/// its attention time on. A dense model's cache is f32 and its attention stays exact.
///
/// The queries, keys, values and softmax weights are rounded to BF16 (to nearest even, as
/// `vcvtne2ps2bf16` does: 8 significant bits, a relative error of at most 2^-9 each) and paired
/// along the sum: `(q[d], q[d + 1])` with `(k[d][p], k[d + 1][p])` for a score, `(w[p],
/// w[p + 1])` with `(v[p][c], v[p + 1][c])` for an output. Each pair is added as
/// `vdpbf16ps` does (Intel's definition, checked on the hardware): the odd product, then the
/// even one, each a fused multiply-add rounded to nearest even, with subnormal inputs read as
/// zero and subnormal results flushed to zero ([`dot2`]). Scores and softmax stay f32.
///
/// [`Portable`] is the twin of the AVX-512 BF16 kernels, bit for bit (tested). Each token's
/// sums run over its own positions in the same order as alone, as in the f32 path, so a
/// prefill still gives what one token at a time would. The error against the f32 path is
/// bounded in the tests and measured on models in bench/README.md.
mod bf16 {
    use half::f16;

    use super::{
        AttentionShape, KvCache, KvHead, KvPrecision, Scratch, Tile, KEY_BLOCK, POSITIONS,
    };

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
        let Scratch { scores, pairs } = scratch;
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
            for block in (0..longest).step_by(POSITIONS) {
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
                let positions = tile.first + i + 1;
                for head_scores in scores.chunks_exact_mut(stride) {
                    let weights = &mut head_scores[..positions];
                    kernels.softmax(weights);
                    let w = |p: usize| weights.get(p).copied().unwrap_or(0.0);
                    pairs
                        .weights
                        .extend((0..stride / 2).map(|p2| pair(w(2 * p2), w(2 * p2 + 1))));
                }
            }
            for out in tile.out.iter_mut() {
                out[heads..heads + pass].fill(0.0);
            }
            for block in (0..longest).step_by(POSITIONS) {
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
}

/// The AVX-512 and AVX2 (with FMA) kernels, fusing each multiply-add as the portable code
/// does.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use half::f16;

    use super::{bf16, softmax, weighted_columns, Kernels, Value, KEY_BLOCK};

    /// How far ahead of its loads a kernel asks for the cache's bytes. A decode step reads each
    /// KV head's keys, then its values, in one stream. Measured on MiniCPM5-2B's shape at 4096
    /// positions (2 threads, all 42 layers, the cache in DRAM): see bench/README.md; asking
    /// 16 KiB ahead into L2 brings attention near its time with the cache in L3, where the
    /// hardware prefetcher alone, or asking 8 KiB ahead into L1, leaves it waiting on memory.
    /// Into L1, each request probably holds one of the core's few L1 miss buffers until its
    /// line arrives, which caps one core's stream.
    const AHEAD: usize = 16 * 1024;

    /// Asks for the cache line [`AHEAD`] bytes past `p`, into L2. A hint only: that address
    /// may lie past the end of the cache and is never read.
    #[inline(always)]
    fn prefetch_ahead<E>(p: *const E) {
        // SAFETY: prefetching reads nothing and cannot fault, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p.cast::<i8>().wrapping_add(AHEAD)) }
    }

    /// `acc + x · splat(*s)`, as `_mm512_fmadd_ps` computes it (rounded once), in one
    /// `vfmadd231ps` that broadcasts `*s` as it loads it. Written out because LLVM hoists a
    /// broadcast that two multiply-adds share into a `vbroadcastss` of its own: on Zen 4 that
    /// extra instruction per pair of products made attention's arithmetic about 15% slower
    /// (bench/README.md). Safety: `s` is readable.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn fmadd_splat(acc: __m512, x: __m512, s: *const f32) -> __m512 {
        let mut acc = acc;
        // SAFETY: reads the one f32 at `s` (the caller's promise); touches no memory else.
        unsafe {
            std::arch::asm!(
                "vfmadd231ps {acc}, {x}, dword ptr [{s}]{{1to16}}",
                acc = inout(zmm_reg) acc,
                x = in(zmm_reg) x,
                s = in(reg) s,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        acc
    }

    /// Whether the value `offset` values of `E` into a run starts a 64-byte cache line (runs
    /// start on one): the kernels prefetch once per line, at the loads that start one.
    #[inline(always)]
    fn starts_line<E>(offset: usize) -> bool {
        (offset * size_of::<E>()).is_multiple_of(64)
    }

    /// Proof that the CPU has AVX-512F: only [`Avx512::detect`] makes one.
    #[derive(Clone, Copy)]
    pub struct Avx512(());

    impl Avx512 {
        pub fn detect() -> Option<Self> {
            is_x86_feature_detected!("avx512f").then_some(Avx512(()))
        }
    }

    impl Kernels for Avx512 {
        fn scores<const G: usize, E: Value>(
            self,
            q: &[f32],
            keys: &[E],
            scale: f32,
            scores: &mut [f32],
            stride: usize,
            first: usize,
        ) {
            check_scores::<G, E>(q, keys, scores, stride, first);
            // SAFETY: AVX-512F is present (self exists); the bounds were checked just above.
            unsafe { scores_avx512::<G, E>(q, keys, scale, scores, stride, first) }
        }

        fn weighted_values<const G: usize, E: Value>(
            self,
            weights: &[f32],
            stride: usize,
            first: usize,
            values: &[E],
            out: &mut [f32],
        ) {
            let whole = check_values::<G, E>(weights, stride, first, values, out, 32);
            // SAFETY: AVX-512F is present (self exists); the bounds were checked just above.
            unsafe { values_avx512::<G, E>(weights, stride, first, values, out, whole) };
            weighted_columns(G, weights, stride, first, values, out, whole);
        }

        fn softmax(self, x: &mut [f32]) {
            // SAFETY: AVX-512F is present (self exists).
            unsafe { softmax_avx512(x) }
        }
    }

    /// Proof that the CPU has AVX2, FMA and F16C: only [`Avx2::detect`] makes one.
    #[derive(Clone, Copy)]
    pub struct Avx2(());

    impl Avx2 {
        pub fn detect() -> Option<Self> {
            (is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c"))
            .then_some(Avx2(()))
        }
    }

    impl Kernels for Avx2 {
        fn scores<const G: usize, E: Value>(
            self,
            q: &[f32],
            keys: &[E],
            scale: f32,
            scores: &mut [f32],
            stride: usize,
            first: usize,
        ) {
            check_scores::<G, E>(q, keys, scores, stride, first);
            let block = q.len() / G * KEY_BLOCK;
            for (b, keys) in keys.chunks_exact(block).enumerate() {
                let first = first + b * KEY_BLOCK;
                // SAFETY: AVX2, FMA and F16C are present (self exists); the bounds were checked above.
                unsafe { scores_avx2::<G, E>(q, keys, scale, scores, stride, first) }
            }
        }

        fn weighted_values<const G: usize, E: Value>(
            self,
            weights: &[f32],
            stride: usize,
            first: usize,
            values: &[E],
            out: &mut [f32],
        ) {
            let whole = check_values::<G, E>(weights, stride, first, values, out, 8);
            // SAFETY: AVX2 and FMA are present (self exists); the bounds were checked above.
            unsafe { values_avx2::<G, E>(weights, stride, first, values, out, whole) };
            weighted_columns(G, weights, stride, first, values, out, whole);
        }

        fn softmax(self, x: &mut [f32]) {
            // SAFETY: AVX2 is present (self exists).
            unsafe { softmax_avx2(x) }
        }
    }

    /// Checks what the unchecked loads and stores of a scores kernel rely on.
    fn check_scores<const G: usize, E>(
        q: &[impl Copy],
        keys: &[E],
        scores: &[f32],
        stride: usize,
        first: usize,
    ) {
        let hd = q.len() / G;
        let blocks = keys.len() / (hd * KEY_BLOCK).max(1);
        assert!(q.len() == G * hd && hd > 0 && blocks > 0 && keys.len() == blocks * hd * KEY_BLOCK);
        assert!(first + blocks * KEY_BLOCK <= stride && scores.len() >= G * stride);
    }

    /// Checks what the unchecked loads and stores of a weighted-values kernel rely on; returns
    /// the columns it covers (whole multiples of `width`).
    fn check_values<const G: usize, E>(
        weights: &[impl Copy],
        stride: usize,
        first: usize,
        values: &[E],
        out: &[f32],
        width: usize,
    ) -> usize {
        let hd = out.len() / G;
        assert!(hd > 0 && out.len() == G * hd && values.len().is_multiple_of(hd));
        assert!(first + values.len() / hd <= stride && weights.len() >= G * stride);
        hd / width * width
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn scores_avx512<const G: usize, E: Value>(
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        let hd = q.len() / G;
        let block = hd * KEY_BLOCK;
        let blocks = keys.len() / block;
        let (q, keys, scores) = (q.as_ptr(), keys.as_ptr(), scores.as_mut_ptr());
        let scale = _mm512_set1_ps(scale);
        // Two blocks at a time share each broadcast of q: 2 G sums in flight, one load of q per
        // two multiply-adds. Each position's sum is the same as one block at a time.
        let mut b = 0;
        while b + 2 <= blocks {
            let (k0, k1) = (keys.add(b * block), keys.add((b + 1) * block));
            let mut acc0 = [_mm512_setzero_ps(); G];
            let mut acc1 = [_mm512_setzero_ps(); G];
            for d in 0..hd {
                if starts_line::<E>(d * KEY_BLOCK) {
                    prefetch_ahead(k0.wrapping_add(d * KEY_BLOCK));
                    prefetch_ahead(k1.wrapping_add(d * KEY_BLOCK));
                }
                // SAFETY (all loads and stores): the bounds checked by `check_scores`.
                let (x0, x1) = (
                    E::load16(k0.add(d * KEY_BLOCK)),
                    E::load16(k1.add(d * KEY_BLOCK)),
                );
                for g in 0..G {
                    let qd = q.add(g * hd + d);
                    acc0[g] = fmadd_splat(acc0[g], x0, qd);
                    acc1[g] = fmadd_splat(acc1[g], x1, qd);
                }
            }
            for g in 0..G {
                let at = scores.add(g * stride + first + b * KEY_BLOCK);
                _mm512_storeu_ps(at, _mm512_mul_ps(acc0[g], scale));
                _mm512_storeu_ps(at.add(KEY_BLOCK), _mm512_mul_ps(acc1[g], scale));
            }
            b += 2;
        }
        if b < blocks {
            let k0 = keys.add(b * block);
            let mut acc = [_mm512_setzero_ps(); G];
            for d in 0..hd {
                if starts_line::<E>(d * KEY_BLOCK) {
                    prefetch_ahead(k0.wrapping_add(d * KEY_BLOCK));
                }
                let x0 = E::load16(k0.add(d * KEY_BLOCK));
                for (g, acc) in acc.iter_mut().enumerate() {
                    *acc = fmadd_splat(*acc, x0, q.add(g * hd + d));
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                let at = scores.add(g * stride + first + b * KEY_BLOCK);
                _mm512_storeu_ps(at, _mm512_mul_ps(*acc, scale));
            }
        }
    }

    /// Columns `0..whole` in pieces of 32: two vectors per head stay in registers across all
    /// positions.
    #[target_feature(enable = "avx512f")]
    unsafe fn values_avx512<const G: usize, E: Value>(
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
        whole: usize,
    ) {
        let hd = out.len() / G;
        let positions = values.len() / hd;
        let (w, v, o) = (weights.as_ptr(), values.as_ptr(), out.as_mut_ptr());
        for column in (0..whole).step_by(32) {
            // SAFETY (all loads and stores): the bounds checked by `check_values`.
            let mut lo: [__m512; G] =
                std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column)));
            let mut hi: [__m512; G] =
                std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column + 16)));
            for p in 0..positions {
                for half in [column, column + 16] {
                    if starts_line::<E>(half) {
                        prefetch_ahead(v.wrapping_add(p * hd + half));
                    }
                }
                let v0 = E::load16(v.add(p * hd + column));
                let v1 = E::load16(v.add(p * hd + column + 16));
                for g in 0..G {
                    let wg = w.add(g * stride + first + p);
                    lo[g] = fmadd_splat(lo[g], v0, wg);
                    hi[g] = fmadd_splat(hi[g], v1, wg);
                }
            }
            for g in 0..G {
                _mm512_storeu_ps(o.add(g * hd + column), lo[g]);
                _mm512_storeu_ps(o.add(g * hd + column + 16), hi[g]);
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn softmax_avx512(x: &mut [f32]) {
        softmax(x)
    }

    /// The key block in two halves of 8 positions.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scores_avx2<const G: usize, E: Value>(
        q: &[f32],
        keys: &[E],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        let hd = q.len() / G;
        let (q, keys) = (q.as_ptr(), keys.as_ptr());
        for lane in [0, 8] {
            let mut acc = [_mm256_setzero_ps(); G];
            for d in 0..hd {
                if lane == 0 && starts_line::<E>(d * KEY_BLOCK) {
                    prefetch_ahead(keys.wrapping_add(d * KEY_BLOCK));
                }
                // SAFETY (all loads and stores): the bounds checked by `check_scores`.
                let k = E::load8(keys.add(d * KEY_BLOCK + lane));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let qd = _mm256_set1_ps(*q.add(g * hd + d));
                    *acc = _mm256_fmadd_ps(qd, k, *acc);
                }
            }
            let scale = _mm256_set1_ps(scale);
            for (g, acc) in acc.iter().enumerate() {
                let at = scores.as_mut_ptr().add(g * stride + first + lane);
                _mm256_storeu_ps(at, _mm256_mul_ps(*acc, scale));
            }
        }
    }

    /// Columns `0..whole` in pieces of 8: one vector per head in registers across positions.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn values_avx2<const G: usize, E: Value>(
        weights: &[f32],
        stride: usize,
        first: usize,
        values: &[E],
        out: &mut [f32],
        whole: usize,
    ) {
        let hd = out.len() / G;
        let positions = values.len() / hd;
        let (w, v, o) = (weights.as_ptr(), values.as_ptr(), out.as_mut_ptr());
        for column in (0..whole).step_by(8) {
            // SAFETY (all loads and stores): the bounds checked by `check_values`.
            let mut acc: [__m256; G] =
                std::array::from_fn(|g| _mm256_loadu_ps(o.add(g * hd + column)));
            for p in 0..positions {
                if starts_line::<E>(column) {
                    prefetch_ahead(v.wrapping_add(p * hd + column));
                }
                let vp = E::load8(v.add(p * hd + column));
                for (g, acc) in acc.iter_mut().enumerate() {
                    let wg = _mm256_set1_ps(*w.add(g * stride + first + p));
                    *acc = _mm256_fmadd_ps(wg, vp, *acc);
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(o.add(g * hd + column), *acc);
            }
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn softmax_avx2(x: &mut [f32]) {
        softmax(x)
    }

    /// `acc + pairs(x) · pairs(splat(*s))`, one `vdpbf16ps` that broadcasts the pair at `s` as
    /// it loads it (as [`fmadd_splat`] does for f32). Safety: `s` is readable.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn dot_splat(acc: __m512, x: __m512i, s: *const u32) -> __m512 {
        let mut acc = acc;
        // SAFETY: reads the one u32 at `s` (the caller's promise); touches no memory else.
        unsafe {
            std::arch::asm!(
                "vdpbf16ps {acc}, {x}, dword ptr [{s}]{{1to16}}",
                acc = inout(zmm_reg) acc,
                x = in(zmm_reg) x,
                s = in(reg) s,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        acc
    }

    /// Proof that the CPU has AVX-512F, BW and BF16: only [`Avx512Bf16::detect`] makes one.
    #[derive(Clone, Copy)]
    pub struct Avx512Bf16(());

    impl Avx512Bf16 {
        pub fn detect() -> Option<Self> {
            (is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512bf16"))
            .then_some(Avx512Bf16(()))
        }
    }

    impl bf16::Kernels for Avx512Bf16 {
        fn key_pairs(self, keys: &[f16], hd: usize, out: &mut Vec<u32>) {
            assert!(hd.is_multiple_of(2) && keys.len().is_multiple_of(hd * KEY_BLOCK));
            out.clear();
            out.resize(keys.len() / 2, 0);
            // SAFETY: the CPU has the features (self exists); `out` holds half as many u32 as
            // `keys` has values, a whole number of 32-value rows pairs.
            unsafe { key_pairs_avx512(keys, out) }
        }

        fn value_pairs(self, values: &[f16], hd: usize, out: &mut Vec<u32>) {
            assert!(hd > 0 && values.len().is_multiple_of(hd));
            out.clear();
            out.resize((values.len() / hd).div_ceil(2) * hd, 0);
            let whole = hd / 16 * 16;
            // SAFETY: the CPU has the features (self exists); the lengths were set just above.
            unsafe { value_pairs_avx512(values, hd, whole, out) };
            bf16::value_pairs_from(values, hd, whole, out);
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
            check_scores::<G, u32>(q, keys, scores, stride, first);
            // SAFETY: the CPU has the features (self exists); the bounds were checked just
            // above (the same shapes as f32 scores, with `head_dim / 2` pairs).
            unsafe { scores_bf16::<G>(q, keys, scale, scores, stride, first) }
        }

        fn weighted_values<const G: usize>(
            self,
            weights: &[u32],
            half_stride: usize,
            first: usize,
            values: &[u32],
            out: &mut [f32],
        ) {
            let whole = check_values::<G, u32>(weights, half_stride, first, values, out, 32);
            // SAFETY: the CPU has the features (self exists); the bounds were checked just above.
            unsafe { values_bf16::<G>(weights, half_stride, first, values, out, whole) };
            bf16::weighted_columns(G, weights, half_stride, first, values, out, whole);
        }

        fn softmax(self, x: &mut [f32]) {
            // SAFETY: AVX-512F is present (self exists).
            unsafe { softmax_avx512(x) }
        }
    }

    /// Element `2p` of a pair vector is `p` of the first row, `2p + 1` is `p` of the second.
    const INTERLEAVE: [u16; 32] = {
        let mut index = [0u16; 32];
        let mut p = 0;
        while p < 16 {
            index[2 * p] = p as u16;
            index[2 * p + 1] = 16 + p as u16;
            p += 1;
        }
        index
    };

    /// 16 values of each of two rows as 16 pairs: widened exactly, rounded to BF16 by
    /// `vcvtne2ps2bf16`, interleaved.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn pairs16(first: __m512, second: __m512) -> __m512i {
        let index = _mm512_loadu_si512(INTERLEAVE.as_ptr().cast());
        // The second row's values go to the upper half, the first row's to the lower.
        let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(second, first));
        _mm512_permutexvar_epi16(index, both)
    }

    /// Each two rows of 16 keys (`d` and `d + 1` of a block) into 16 pairs.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn key_pairs_avx512(keys: &[f16], out: &mut [u32]) {
        let (k, o) = (keys.as_ptr(), out.as_mut_ptr());
        for row in 0..keys.len() / 32 {
            let at = k.add(row * 32);
            prefetch_ahead(at);
            // SAFETY (loads and stores): `keys` holds `32 · rows` values, `out` half as many.
            let first = _mm512_cvtph_ps(_mm256_loadu_si256(at.cast()));
            let second = _mm512_cvtph_ps(_mm256_loadu_si256(at.add(16).cast()));
            _mm512_storeu_si512(o.add(row * 16).cast(), pairs16(first, second));
        }
    }

    /// Columns `0..whole` (pieces of 16) of each pair of value rows; the second row of an odd
    /// last pair is zero.
    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn value_pairs_avx512(values: &[f16], hd: usize, whole: usize, out: &mut [u32]) {
        let positions = values.len() / hd;
        let (v, o) = (values.as_ptr(), out.as_mut_ptr());
        for p2 in 0..positions.div_ceil(2) {
            let row = v.add(2 * p2 * hd);
            let second = 2 * p2 + 1 < positions;
            for column in (0..whole).step_by(16) {
                if starts_line::<f16>(column) {
                    prefetch_ahead(row.wrapping_add(column));
                    prefetch_ahead(row.wrapping_add(hd + column));
                }
                // SAFETY (loads and stores): rows `2 p2` (and `2 p2 + 1` if `second`) are in
                // `values`; `out` holds `hd` pairs per pair of rows.
                let a = _mm512_cvtph_ps(_mm256_loadu_si256(row.add(column).cast()));
                let b = if second {
                    _mm512_cvtph_ps(_mm256_loadu_si256(row.add(hd + column).cast()))
                } else {
                    _mm512_setzero_ps()
                };
                _mm512_storeu_si512(o.add(p2 * hd + column).cast(), pairs16(a, b));
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn scores_bf16<const G: usize>(
        q: &[u32],
        keys: &[u32],
        scale: f32,
        scores: &mut [f32],
        stride: usize,
        first: usize,
    ) {
        let half = q.len() / G;
        let block = half * KEY_BLOCK;
        let blocks = keys.len() / block;
        let (q, keys, scores) = (q.as_ptr(), keys.as_ptr(), scores.as_mut_ptr());
        let scale = _mm512_set1_ps(scale);
        // Two blocks at a time share each broadcast of q, as in the f32 kernel.
        let mut b = 0;
        while b + 2 <= blocks {
            let (k0, k1) = (keys.add(b * block), keys.add((b + 1) * block));
            let mut acc0 = [_mm512_setzero_ps(); G];
            let mut acc1 = [_mm512_setzero_ps(); G];
            for d2 in 0..half {
                // SAFETY (all loads and stores): the bounds checked by `check_scores`.
                let x0 = _mm512_loadu_si512(k0.add(d2 * KEY_BLOCK).cast());
                let x1 = _mm512_loadu_si512(k1.add(d2 * KEY_BLOCK).cast());
                for g in 0..G {
                    let qd = q.add(g * half + d2);
                    acc0[g] = dot_splat(acc0[g], x0, qd);
                    acc1[g] = dot_splat(acc1[g], x1, qd);
                }
            }
            for g in 0..G {
                let at = scores.add(g * stride + first + b * KEY_BLOCK);
                _mm512_storeu_ps(at, _mm512_mul_ps(acc0[g], scale));
                _mm512_storeu_ps(at.add(KEY_BLOCK), _mm512_mul_ps(acc1[g], scale));
            }
            b += 2;
        }
        if b < blocks {
            let k0 = keys.add(b * block);
            let mut acc = [_mm512_setzero_ps(); G];
            for d2 in 0..half {
                let x0 = _mm512_loadu_si512(k0.add(d2 * KEY_BLOCK).cast());
                for (g, acc) in acc.iter_mut().enumerate() {
                    *acc = dot_splat(*acc, x0, q.add(g * half + d2));
                }
            }
            for (g, acc) in acc.iter().enumerate() {
                let at = scores.add(g * stride + first + b * KEY_BLOCK);
                _mm512_storeu_ps(at, _mm512_mul_ps(*acc, scale));
            }
        }
    }

    /// Columns `0..whole` in pieces of 32: two vectors per head stay in registers across all
    /// pairs of positions.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn values_bf16<const G: usize>(
        weights: &[u32],
        half_stride: usize,
        first: usize,
        values: &[u32],
        out: &mut [f32],
        whole: usize,
    ) {
        let hd = out.len() / G;
        let pairs = values.len() / hd;
        let (w, v, o) = (weights.as_ptr(), values.as_ptr(), out.as_mut_ptr());
        for column in (0..whole).step_by(32) {
            // SAFETY (all loads and stores): the bounds checked by `check_values`.
            let mut lo: [__m512; G] =
                std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column)));
            let mut hi: [__m512; G] =
                std::array::from_fn(|g| _mm512_loadu_ps(o.add(g * hd + column + 16)));
            for p2 in 0..pairs {
                let v0 = _mm512_loadu_si512(v.add(p2 * hd + column).cast());
                let v1 = _mm512_loadu_si512(v.add(p2 * hd + column + 16).cast());
                for g in 0..G {
                    let wg = w.add(g * half_stride + first + p2);
                    lo[g] = dot_splat(lo[g], v0, wg);
                    hi[g] = dot_splat(hi[g], v1, wg);
                }
            }
            for g in 0..G {
                _mm512_storeu_ps(o.add(g * hd + column), lo[g]);
                _mm512_storeu_ps(o.add(g * hd + column + 16), hi[g]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::KvPrecision;

    /// Per query head, straight from the definition.
    fn reference(
        shape: AttentionShape,
        q: &[f32],
        tokens: usize,
        start: usize,
        k: &[f32],
        v: &[f32],
    ) -> Vec<f32> {
        let (hd, heads) = (shape.head_dim, shape.heads);
        let kv_dim = shape.kv_heads * hd;
        let group = heads / shape.kv_heads;
        let mut out = vec![0.0; tokens * heads * hd];
        for t in 0..tokens {
            for h in 0..heads {
                let kvh = h / group;
                let qh = &q[(t * heads + h) * hd..(t * heads + h + 1) * hd];
                let mut s: Vec<f32> = (0..=start + t)
                    .map(|p| {
                        let kp = &k[p * kv_dim + kvh * hd..p * kv_dim + (kvh + 1) * hd];
                        qh.iter().zip(kp).map(|(a, b)| a * b).sum::<f32>() * shape.scale
                    })
                    .collect();
                softmax(&mut s);
                for (p, w) in s.iter().enumerate() {
                    for i in 0..hd {
                        out[(t * heads + h) * hd + i] += w * v[p * kv_dim + kvh * hd + i];
                    }
                }
            }
        }
        out
    }

    #[test]
    fn wide_kernels_compute_exactly_what_the_portable_ones_do() {
        // head_dim 40: one piece of 32 columns (AVX-512) or five of 8 (AVX2), then a tail of 8.
        for (heads, kv_heads, positions) in [(8, 1, 70), (4, 1, 16), (6, 2, 33), (3, 1, 1)] {
            let shape = AttentionShape {
                heads,
                kv_heads,
                head_dim: 40,
                scale: 0.3,
            };
            let mut cache = KvCache::new(1, positions, kv_heads, 40, KvPrecision::F32).unwrap();
            for p in 0..positions {
                let row: Vec<f32> = (0..kv_heads * 40)
                    .map(|i| ((p * 40 + i) as f32 * 0.37).sin())
                    .collect();
                let half: Vec<f32> = row.iter().map(|x| x * 0.5).collect();
                cache.store(0, p, &row, &half);
            }
            let q: Vec<f32> = (0..heads * 40).map(|i| (i as f32 * 0.23).cos()).collect();
            let group_dim = heads / kv_heads * 40;
            let run = |kernels: &dyn Fn(Tile<'_, '_>, KvHead<'_>, &mut Scratch)| {
                let mut out = vec![f32::NAN; q.len()];
                for (kv_head, out) in out.chunks_exact_mut(group_dim).enumerate() {
                    let head = KvHead {
                        cache: &cache,
                        level: KernelLevel::Scalar,
                        bf16: false,
                        layer: 0,
                        kv_head,
                    };
                    let tile = Tile {
                        q: &[&q[kv_head * group_dim..][..group_dim]],
                        out: &mut [out],
                        first: positions - 1,
                    };
                    kernels(tile, head, &mut Scratch::default());
                }
                out
            };
            let portable =
                run(&|tile, head, scratch| attend_group_with(Portable, shape, tile, head, scratch));
            assert!(portable.iter().all(|x| x.is_finite()));
            #[cfg(target_arch = "x86_64")]
            {
                if let Some(avx512) = wide::Avx512::detect() {
                    let wide = run(&|tile, head, scratch| {
                        attend_group_with(avx512, shape, tile, head, scratch)
                    });
                    assert_eq!(wide, portable, "AVX-512, {shape:?}, {positions} positions");
                }
                if let Some(avx2) = wide::Avx2::detect() {
                    let wide = run(&|tile, head, scratch| {
                        attend_group_with(avx2, shape, tile, head, scratch)
                    });
                    assert_eq!(wide, portable, "AVX2, {shape:?}, {positions} positions");
                }
            }
        }
    }

    #[test]
    fn grouped_heads_match_per_head_reference() {
        // Groups of 8, 4, 3, 2 and 1 query heads per KV head, and 12 and 9 (passes of 4 and 3).
        for (heads, kv_heads) in [
            (16, 2),
            (8, 2),
            (4, 2),
            (9, 3),
            (2, 2),
            (1, 1),
            (12, 1),
            (18, 2),
        ] {
            let shape = AttentionShape {
                heads,
                kv_heads,
                head_dim: 24,
                scale: 1.0 / 24f32.sqrt(),
            };
            grouped_heads_match_per_head_reference_for(shape);
        }
    }

    fn grouped_heads_match_per_head_reference_for(shape: AttentionShape) {
        // Two runs of the cache read at a time, the second partial in its last key block.
        let (tokens, start) = (5, POSITIONS + 65);
        let kv_dim = shape.kv_heads * shape.head_dim;
        let q_dim = shape.heads * shape.head_dim;
        let positions = start + tokens;
        let wave = |i: usize, f: f32| (i as f32 * f).sin();
        let q: Vec<f32> = (0..tokens * q_dim).map(|i| wave(i, 0.23) * 2.0).collect();
        for precision in [KvPrecision::F32, KvPrecision::F16] {
            // What the cache holds: the values as stored at its precision.
            let stored = |f: f32| -> Vec<f32> {
                (0..positions * kv_dim)
                    .map(|i| match precision {
                        KvPrecision::F32 => wave(i, f),
                        KvPrecision::F16 => half::f16::from_f32(wave(i, f)).to_f32(),
                    })
                    .collect()
            };
            let (k, v) = (stored(0.37), stored(0.11));
            let mut cache = KvCache::new(2, positions + 3, shape.kv_heads, 24, precision).unwrap();
            for p in 0..positions {
                let row = p * kv_dim..(p + 1) * kv_dim;
                cache.store(1, p, &k[row.clone()], &v[row]);
            }
            let expected = reference(shape, &q, tokens, start, &k, &v);
            for threads in [1, 3] {
                let mut cpu = CpuContext::best(threads);
                cpu.set_bf16_attention(false);
                let mut out = vec![f32::NAN; q.len()];
                causal_attention(&cpu, shape, &q, tokens, start, &cache, 1, &mut out);
                for (a, b) in out.iter().zip(&expected) {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "{shape:?} {precision:?}, {threads} threads: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_scalar_level_runs_the_portable_kernels() {
        assert_eq!(Width::for_level(KernelLevel::Scalar), Width::Portable);
        #[cfg(target_arch = "x86_64")]
        if KernelLevel::Avx2.is_supported() {
            assert_eq!(Width::for_level(KernelLevel::Avx2), Width::Avx2);
        }
    }

    /// The level a context is made with reaches the kernels (and the f16 widening of the cache),
    /// and every level gives the portable kernels' result bit for bit (f32 products; BF16
    /// products against their twin: `bf16_kernels_compute_exactly_what_their_twin_does`).
    #[test]
    fn every_level_gives_the_scalar_levels_result_exactly() {
        // Passes of 4 heads, and of 3 (SmolLM2's 9 heads over 3).
        for (heads, kv_heads) in [(8, 2), (9, 3)] {
            let shape = AttentionShape {
                heads,
                kv_heads,
                head_dim: 40,
                scale: 0.3,
            };
            every_level_gives_the_scalar_levels_result_exactly_for(shape);
        }
    }

    fn every_level_gives_the_scalar_levels_result_exactly_for(shape: AttentionShape) {
        // Past the first run of the cache read at a time.
        let (tokens, start) = (3, POSITIONS + 30);
        let positions = start + tokens;
        let kv_dim = shape.kv_heads * shape.head_dim;
        let q: Vec<f32> = (0..tokens * shape.heads * 40)
            .map(|i| (i as f32 * 0.23).cos())
            .collect();
        for precision in [KvPrecision::F32, KvPrecision::F16] {
            let mut cache = KvCache::new(1, positions, shape.kv_heads, 40, precision).unwrap();
            for p in 0..positions {
                let row: Vec<f32> = (0..kv_dim)
                    .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
                    .collect();
                cache.store(0, p, &row, &row);
            }
            let run = |level| {
                let mut out = vec![f32::NAN; q.len()];
                let mut cpu = CpuContext::new(2, level);
                cpu.set_bf16_attention(false);
                causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
                out
            };
            let scalar = run(KernelLevel::Scalar);
            assert!(scalar.iter().all(|x| x.is_finite()));
            for level in KernelLevel::supported() {
                assert_eq!(run(level), scalar, "{level}, {precision:?}, {shape:?}");
            }
        }
    }

    /// A prefill attends its tokens in tiles; each token's output must be what attending it
    /// alone gives, bit for bit (speculative decoding and the KV cache's prefix reuse rely on
    /// it), at every level, for tiles that are full, partial, cross key blocks, and cross the
    /// runs of the cache read at a time.
    #[test]
    fn tiles_of_tokens_give_each_tokens_result_alone_exactly() {
        let shape = AttentionShape {
            heads: 8,
            kv_heads: 2,
            head_dim: 40,
            scale: 0.3,
        };
        let q_dim = shape.heads * shape.head_dim;
        let kv_dim = shape.kv_heads * shape.head_dim;
        for (tokens, start) in [
            (2 * TILE + 3, 0),
            (TILE, 29),
            (5, 60),
            (TILE, POSITIONS - 3),
            (5, POSITIONS + 60),
        ] {
            let positions = start + tokens;
            let mut cache =
                KvCache::new(1, positions, shape.kv_heads, 40, KvPrecision::F16).unwrap();
            for p in 0..positions {
                let row: Vec<f32> = (0..kv_dim)
                    .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
                    .collect();
                let values: Vec<f32> = row.iter().map(|x| x * 0.7 - 0.1).collect();
                cache.store(0, p, &row, &values);
            }
            let q: Vec<f32> = (0..tokens * q_dim)
                .map(|i| (i as f32 * 0.23).cos())
                .collect();
            for (level, bf16) in KernelLevel::supported()
                .into_iter()
                .flat_map(|level| [(level, false), (level, true)])
            {
                let mut cpu = CpuContext::new(2, level);
                cpu.set_bf16_attention(bf16);
                let mut tiled = vec![f32::NAN; q.len()];
                causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut tiled);
                let mut alone = vec![f32::NAN; q.len()];
                for (t, (q, out)) in q
                    .chunks_exact(q_dim)
                    .zip(alone.chunks_exact_mut(q_dim))
                    .enumerate()
                {
                    causal_attention(&cpu, shape, q, 1, start + t, &cache, 0, out);
                }
                assert!(alone.iter().all(|x| x.is_finite()));
                let products = if cpu.bf16_attention() { "bf16" } else { "f32" };
                assert_eq!(
                    tiled, alone,
                    "{level} {products}, {tokens} tokens from {start}"
                );
            }
        }
    }

    /// The wide kernels load f16 keys and values straight from the cache: every f16 bit
    /// pattern must come out as the f32 the portable kernels use (NaNs as some NaN).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn cached_halves_load_as_their_exact_f32() {
        use std::arch::x86_64::*;
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        let same = |got: &[f32], src: &[f16], what: &str| {
            for (a, h) in got.iter().zip(src) {
                let b = h.to_f32();
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{what}, {h:?}: {a} vs {b}"
                );
            }
        };
        if wide::Avx512::detect().is_some() {
            for chunk in all.chunks_exact(16) {
                let mut got = [0.0f32; 16];
                // SAFETY: AVX-512F was detected; 16 values are readable and writable.
                unsafe { _mm512_storeu_ps(got.as_mut_ptr(), f16::load16(chunk.as_ptr())) };
                same(&got, chunk, "load16");
            }
        }
        if wide::Avx2::detect().is_some() {
            for chunk in all.chunks_exact(8) {
                let mut got = [0.0f32; 8];
                // SAFETY: AVX2 and F16C were detected; 8 values are readable and writable.
                unsafe { load8_f16c(chunk, &mut got) };
                same(&got, chunk, "load8");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx,f16c")]
    unsafe fn load8_f16c(src: &[f16], out: &mut [f32; 8]) {
        std::arch::x86_64::_mm256_storeu_ps(out.as_mut_ptr(), f16::load8(src.as_ptr()));
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_values() {
        let mut x = [1000.0, 1000.0, f32::NEG_INFINITY];
        softmax(&mut x);
        assert_eq!(x, [0.5, 0.5, 0.0]);
        // Longer than one 16-lane chunk, with a tail.
        let mut x: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin() * 30.0).collect();
        let want: Vec<f64> = {
            let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let e: Vec<f64> = x.iter().map(|&v| (v as f64 - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            e.iter().map(|v| v / sum).collect()
        };
        softmax(&mut x);
        for (got, want) in x.iter().zip(want) {
            assert!(
                (*got as f64 - want).abs() <= want * 1e-6 + 1e-12,
                "{got} vs {want}"
            );
        }
    }

    /// `bf16::attend_group` with `kernels` for the tokens `start..start + tokens` (one tile),
    /// KV head by KV head.
    fn bf16_group(
        kernels: impl bf16::Kernels,
        shape: AttentionShape,
        cache: &KvCache,
        q: &[f32],
        start: usize,
    ) -> Vec<f32> {
        let q_dim = shape.heads * shape.head_dim;
        let group_dim = q_dim / shape.kv_heads;
        let tokens = q.len() / q_dim;
        assert!(tokens <= TILE);
        let mut out = vec![f32::NAN; q.len()];
        for kv_head in 0..shape.kv_heads {
            let at = |t: usize| t * q_dim + kv_head * group_dim;
            let qs: Vec<&[f32]> = (0..tokens).map(|t| &q[at(t)..][..group_dim]).collect();
            let mut outs: Vec<Vec<f32>> = vec![vec![f32::NAN; group_dim]; tokens];
            let mut out_refs: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
            let head = KvHead {
                cache,
                level: KernelLevel::Scalar,
                bf16: true,
                layer: 0,
                kv_head,
            };
            let tile = Tile {
                q: &qs,
                out: &mut out_refs,
                first: start,
            };
            bf16::attend_group(kernels, shape, tile, head, &mut Scratch::default());
            for (t, o) in outs.iter().enumerate() {
                out[at(t)..][..group_dim].copy_from_slice(o);
            }
        }
        out
    }

    /// An f16 cache of `positions` rows of keys and values from `wave`.
    fn f16_cache(shape: AttentionShape, positions: usize, scale: f32) -> KvCache {
        let kv_dim = shape.kv_heads * shape.head_dim;
        let mut cache = KvCache::new(
            1,
            positions,
            shape.kv_heads,
            shape.head_dim,
            KvPrecision::F16,
        )
        .unwrap();
        for p in 0..positions {
            let row: Vec<f32> = (0..kv_dim)
                .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin() * scale)
                .collect();
            let values: Vec<f32> = row.iter().map(|x| x * 0.7 - 0.1).collect();
            cache.store(0, p, &row, &values);
        }
        cache
    }

    /// The AVX-512 BF16 kernels give their twin's bits: heads of 40 (a piece of 32 columns and
    /// 8 left to the twin's code), 64 and 128, groups of 8, 4, 3, 2 and 1, tiles from the first
    /// position and past the first run of the cache read at a time, odd and even lengths.
    #[test]
    fn bf16_kernels_compute_exactly_what_their_twin_does() {
        #[cfg(target_arch = "x86_64")]
        let Some(avx512) = wide::Avx512Bf16::detect() else {
            return; // no BF16 dot products on this CPU
        };
        #[cfg(not(target_arch = "x86_64"))]
        return;
        #[cfg(target_arch = "x86_64")]
        for (heads, kv_heads, head_dim) in [
            (16, 2, 128),
            (9, 3, 64),
            (8, 2, 40),
            (4, 2, 64),
            (2, 1, 40),
            (3, 3, 64),
        ] {
            let shape = AttentionShape {
                heads,
                kv_heads,
                head_dim,
                scale: 1.0 / (head_dim as f32).sqrt(),
            };
            for (tokens, start) in [(TILE, 0), (1, 0), (3, 30), (5, POSITIONS + 37), (TILE, 95)] {
                let cache = f16_cache(shape, start + tokens, 1.0);
                let q: Vec<f32> = (0..tokens * heads * head_dim)
                    .map(|i| (i as f32 * 0.23).cos() * 2.0)
                    .collect();
                let twin = bf16_group(bf16::Portable, shape, &cache, &q, start);
                assert!(twin.iter().all(|x| x.is_finite()));
                let wide = bf16_group(avx512, shape, &cache, &q, start);
                assert_eq!(wide, twin, "{shape:?}, {tokens} tokens from {start}");
            }
        }
    }

    /// `dot2` is one lane of `vdpbf16ps` on this CPU, bit for bit, across the exponent range:
    /// subnormal inputs and results, infinities and NaNs (as some NaN) included.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn dot2_is_what_vdpbf16ps_computes() {
        use std::arch::x86_64::*;
        if wide::Avx512Bf16::detect().is_none() {
            return;
        }
        #[target_feature(enable = "avx512f,avx512bf16")]
        unsafe fn hardware(acc: &[f32; 16], a: &[u32; 16], b: &[u32; 16]) -> [f32; 16] {
            let (acc, a, b) = (
                _mm512_loadu_ps(acc.as_ptr()),
                _mm512_loadu_si512(a.as_ptr().cast()),
                _mm512_loadu_si512(b.as_ptr().cast()),
            );
            let a: __m512bh = std::mem::transmute(a);
            let b: __m512bh = std::mem::transmute(b);
            let sum = _mm512_dpbf16_ps(acc, a, b);
            let mut out = [0.0; 16];
            _mm512_storeu_ps(out.as_mut_ptr(), sum);
            out
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // A value of a random sign, significand and exponent near `scale`'s.
        let mut value = |scale: i32| -> f32 {
            let r = next();
            let exponent = (scale + (r % 24) as i32 - 12).clamp(0, 255) as u32;
            f32::from_bits((r >> 32) as u32 & 0x807f_ffff | exponent << 23)
        };
        for scale in [127, 20, 5, 1, 240, 250] {
            for _ in 0..2000 {
                let acc: [f32; 16] = std::array::from_fn(|_| value(scale));
                let mut half = || -> u32 { value(scale / 2 + 63).to_bits() >> 16 };
                let a: [u32; 16] = std::array::from_fn(|_| half() | half() << 16);
                let b: [u32; 16] = std::array::from_fn(|_| half() | half() << 16);
                // SAFETY: the features were detected.
                let got = unsafe { hardware(&acc, &a, &b) };
                for i in 0..16 {
                    let want = super::bf16::dot2(acc[i], a[i], b[i]);
                    assert!(
                        got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan()),
                        "{} + {a:08x?}·{b:08x?}: {} vs {want}",
                        acc[i],
                        got[i]
                    );
                }
            }
        }
    }

    /// `to_bf16` rounds as `vcvtne2ps2bf16` does, on every f16 widened (what the cache holds)
    /// and on f32 bit patterns across the range (what queries and weights are).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn to_bf16_rounds_as_the_hardware_does() {
        use std::arch::x86_64::*;
        if wide::Avx512Bf16::detect().is_none() {
            return;
        }
        #[target_feature(enable = "avx512f,avx512bf16")]
        unsafe fn hardware(x: &[f32; 16]) -> [u16; 16] {
            let both = _mm512_cvtne2ps_pbh(_mm512_setzero_ps(), _mm512_loadu_ps(x.as_ptr()));
            let mut out = [0u16; 32];
            let both: __m512i = std::mem::transmute(both);
            _mm512_storeu_si512(out.as_mut_ptr().cast(), both);
            std::array::from_fn(|i| out[i])
        }
        let halves = (0..=u16::MAX).map(|h| f16::from_bits(h).to_f32());
        let patterns = (0..1u64 << 20).map(|i| f32::from_bits((i * 4093 + i / 7) as u32));
        let all: Vec<f32> = halves.chain(patterns).collect();
        for chunk in all.chunks_exact(16) {
            let x: [f32; 16] = chunk.try_into().unwrap();
            // SAFETY: the features were detected.
            let got = unsafe { hardware(&x) };
            for (x, got) in x.iter().zip(got) {
                let want = super::bf16::to_bf16(*x);
                let nan = |h: u16| f32::from_bits(u32::from(h) << 16).is_nan();
                assert!(
                    got == want || (nan(got) && nan(want)),
                    "{x:e}: {got:04x} vs {want:04x}"
                );
            }
        }
    }

    /// With BF16 products each output moves from the f32 one by at most the rounding of the
    /// products' inputs (2^-9 each) carried through: the scores by `scale · Σ_d |q_d k_d|` times
    /// 2^-7 (q and k rounded, with margin), which moves the softmax weights by at most twice
    /// that relatively, and the weighted sum by `Σ_p w_p |v_p|` times that plus 2^-7 (w and v
    /// rounded). Asserted per output on MiniCPM5-2B's and SmolLM2's head shapes, tokens past
    /// 300 positions, and the largest share of the bound printed.
    #[test]
    fn bf16_products_stay_within_their_bound_of_f32() {
        if !KernelLevel::detect().has_bf16_dot() {
            return;
        }
        for (heads, kv_heads, hd) in [(16, 2, 128), (9, 3, 64)] {
            let shape = AttentionShape {
                heads,
                kv_heads,
                head_dim: hd,
                scale: 1.0 / (hd as f32).sqrt(),
            };
            let (tokens, start) = (TILE, 300);
            let positions = start + tokens;
            let cache = f16_cache(shape, positions, 1.5);
            let q: Vec<f32> = (0..tokens * heads * hd)
                .map(|i| (i as f32 * 0.23).cos() * 2.0)
                .collect();
            let run = |bf16: bool| {
                let mut cpu = CpuContext::best(2);
                cpu.set_bf16_attention(bf16);
                let mut out = vec![f32::NAN; q.len()];
                causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
                out
            };
            let (exact, bf16) = (run(false), run(true));
            assert_ne!(exact, bf16, "BF16 products ran");
            // The stored keys and values as f32, and the exact weights.
            let kv_dim = kv_heads * hd;
            let rows = |of: fn(f32) -> f32| -> Vec<f32> {
                (0..positions * kv_dim)
                    .map(|i| f16::from_f32(of((i as f32 * 0.37).sin() * 1.5)).to_f32())
                    .collect()
            };
            let (k, v) = (rows(|x| x), rows(|x| x * 0.7 - 0.1));
            let eps = 2f32.powi(-7);
            let mut worst = 0.0f32;
            for t in 0..tokens {
                for h in 0..heads {
                    let kvh = h / (heads / kv_heads);
                    let qh = &q[(t * heads + h) * hd..][..hd];
                    let key = |p: usize| &k[p * kv_dim + kvh * hd..][..hd];
                    let score_error = (0..=start + t)
                        .map(|p| {
                            qh.iter()
                                .zip(key(p))
                                .map(|(a, b)| (a * b).abs())
                                .sum::<f32>()
                        })
                        .fold(0.0, f32::max)
                        * shape.scale
                        * eps;
                    let mut w: Vec<f32> = (0..=start + t)
                        .map(|p| qh.iter().zip(key(p)).map(|(a, b)| a * b).sum::<f32>())
                        .map(|s| s * shape.scale)
                        .collect();
                    softmax(&mut w);
                    for c in 0..hd {
                        let magnitude: f32 = w
                            .iter()
                            .enumerate()
                            .map(|(p, w)| w * v[p * kv_dim + kvh * hd + c].abs())
                            .sum();
                        let bound = magnitude * (2.0 * score_error + eps) + 1e-6;
                        let at = (t * heads + h) * hd + c;
                        let error = (bf16[at] - exact[at]).abs();
                        assert!(
                            error <= bound,
                            "token {t} head {h} column {c}: {error} > {bound}"
                        );
                        worst = worst.max(error / bound);
                    }
                }
            }
            println!("{shape:?}: the largest error is {worst:.3} of its bound");
        }
    }

    /// A dense model's f32 cache is attended exactly whether BF16 products are allowed or not.
    #[test]
    fn an_f32_cache_stays_exact_with_bf16_allowed() {
        let shape = AttentionShape {
            heads: 8,
            kv_heads: 2,
            head_dim: 64,
            scale: 0.125,
        };
        let (tokens, start) = (5, 40);
        let kv_dim = shape.kv_heads * shape.head_dim;
        let mut cache = KvCache::new(1, start + tokens, 2, 64, KvPrecision::F32).unwrap();
        for p in 0..start + tokens {
            let row: Vec<f32> = (0..kv_dim)
                .map(|i| ((p * kv_dim + i) as f32 * 0.37).sin())
                .collect();
            cache.store(0, p, &row, &row);
        }
        let q: Vec<f32> = (0..tokens * 8 * 64)
            .map(|i| (i as f32 * 0.23).cos())
            .collect();
        let run = |bf16: bool| {
            let mut cpu = CpuContext::best(2);
            cpu.set_bf16_attention(bf16);
            let mut out = vec![f32::NAN; q.len()];
            causal_attention(&cpu, shape, &q, tokens, start, &cache, 0, &mut out);
            out
        };
        assert_eq!(run(true), run(false));
    }

    /// Not a check: times attention on MiniCPM5-2B's shape (16 query heads over 2 KV heads of
    /// 128, an f16 cache) for bench/README.md. `HEARTH_ATTENTION="P L N T"` (default
    /// `4096 42 1 2`): N tokens (1, a decode step; 64, a prefill chunk) at the end of P cached
    /// positions, in each of L layers (42 hold 180 MB: memory; 1 stays in L3), on T threads.
    /// Prints the median of 20 runs through the layers for f32 products and, alternating with
    /// them, for BF16 products where this CPU has them.
    #[test]
    #[ignore = "a timing probe, run by hand: bench/README.md"]
    fn time_attention_on_minicpm5_shape() {
        let setting = std::env::var("HEARTH_ATTENTION").unwrap_or("4096 42 1 2".into());
        let numbers: Vec<usize> = setting.split_whitespace().flat_map(str::parse).collect();
        let &[positions, layers, tokens, threads] = numbers.as_slice() else {
            panic!("HEARTH_ATTENTION is \"positions layers tokens threads\", not {setting:?}");
        };
        let (heads, kv_heads, hd) = (16, 2, 128);
        let shape = AttentionShape {
            heads,
            kv_heads,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        let mut cache = KvCache::new(layers, positions, kv_heads, hd, KvPrecision::F16).unwrap();
        for p in 0..positions {
            let row: Vec<f32> = (0..kv_heads * hd)
                .map(|i| ((p * 7 + i) as f32 * 0.37).sin())
                .collect();
            for layer in 0..layers {
                cache.store(layer, p, &row, &row);
            }
        }
        let mut cpu = CpuContext::best(threads);
        let q: Vec<f32> = (0..tokens * heads * hd)
            .map(|i| (i as f32 * 0.23).cos())
            .collect();
        let mut out = vec![0.0; q.len()];
        let start = positions - tokens;
        // f32 and BF16 products (where this CPU has them) alternate run by run.
        let sides = if cpu.level().has_bf16_dot() { 2 } else { 1 };
        let mut secs = vec![Vec::new(); sides];
        for run in 0..20 * sides {
            cpu.set_bf16_attention(run % sides == 1);
            let clock = std::time::Instant::now();
            for layer in 0..layers {
                causal_attention(&cpu, shape, &q, tokens, start, &cache, layer, &mut out);
            }
            secs[run % sides].push(clock.elapsed().as_secs_f64());
        }
        for (side, secs) in secs.iter_mut().enumerate() {
            secs.sort_by(f64::total_cmp);
            let median = secs[secs.len() / 2];
            let pairs = (tokens * start + tokens * (tokens + 1) / 2) * layers;
            let fmas = (pairs * heads * hd * 2) as f64;
            println!(
                "{positions} positions, {tokens} tokens, {layers} layers, {threads} threads, \
                 {} products: {:.3} ms, {:.1} G multiply-adds/s",
                ["f32", "bf16"][side],
                median * 1e3,
                fmas / median / 1e9
            );
        }
    }
}
