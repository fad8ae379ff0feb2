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
    /// A sliding-window layer's window (Gemma 3's local layers): the token at position `t`
    /// attends to `t + 1 - window..=t` only. `None`: to every position up to its own.
    pub window: Option<usize>,
}

impl AttentionShape {
    /// The first position the token at `position` attends to.
    fn first_seen(&self, position: usize) -> usize {
        self.window.map_or(0, |w| (position + 1).saturating_sub(w))
    }

    /// The first run of [`POSITIONS`] a tile whose first token is at `first` reads: the runs
    /// before it hold only positions outside every window of the tile.
    fn first_run(&self, first: usize) -> usize {
        self.first_seen(first) / POSITIONS * POSITIONS
    }
}

/// Softmax over the scores of one head for the token at `position` (`scores` holds positions
/// `0..=position`), the positions outside its window weighted 0 (exactly: they then add
/// nothing to the weighted sum of values).
#[inline(always)]
fn windowed_softmax(
    shape: AttentionShape,
    position: usize,
    scores: &mut [f32],
    softmax: impl Fn(&mut [f32]),
) {
    let from = shape.first_seen(position);
    scores[..from].fill(0.0);
    softmax(&mut scores[from..]);
}

/// [`windowed_softmax`] with an attention sink (gpt-oss): the head's learned logit `sink`
/// joins the softmax's denominator as one more score, after the positions, whose weight is
/// dropped. `scores` holds positions `0..=position` and one more element, which it overwrites.
#[inline(always)]
fn windowed_softmax_with_sink(
    shape: AttentionShape,
    position: usize,
    scores: &mut [f32],
    sink: f32,
    softmax: impl Fn(&mut [f32]),
) {
    let from = shape.first_seen(position);
    scores[..from].fill(0.0);
    scores[position + 1] = sink;
    softmax(&mut scores[from..=position + 1]);
}

/// For each of `tokens` query tokens at positions `start..start + tokens`, attends over
/// positions `0..=position` of `layer` in `cache` (the last `shape.window` of them in a
/// sliding-window layer):
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
    causal_attention_with_sinks(cpu, shape, None, q, tokens, start, cache, layer, out);
}

/// [`causal_attention`] where each query head `h` may have a learned sink logit `sinks[h]`
/// (gpt-oss): one more score in its softmax's denominator, attached to no value, so the
/// weights of the positions sum to less than 1. The f32 kernels run it (not the BF16 ones).
#[allow(clippy::too_many_arguments)] // the shapes are grouped; the rest are the data
pub fn causal_attention_with_sinks(
    cpu: &CpuContext,
    shape: AttentionShape,
    sinks: Option<&[f32]>,
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
    assert!(
        sinks.is_none_or(|s| s.len() == heads),
        "attention: one sink per query head"
    );
    let group_dim = heads / kv_heads * head_dim;
    let out_ptr = SharedMut(out.as_mut_ptr());
    let level = cpu.level();
    let bf16 = cpu.bf16_attention();
    let in_register = broadcast_in_register(cpu);
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
                in_register,
                layer,
                kv_head,
                sinks,
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

/// Whether the AVX-512 kernels run faster here broadcasting each query or weight value into
/// a register than from memory: timed once per process, in about a millisecond
/// (`wide::broadcast_in_register_pays`); false without AVX-512F.
pub fn broadcast_in_register_pays() -> bool {
    #[cfg(target_arch = "x86_64")]
    if wide::Avx512::detect().is_some() {
        return wide::broadcast_in_register_pays();
    }
    false
}

/// Whether attention on `cpu` broadcasts each query or weight value into a register (the
/// AVX-512 f32 kernels' choice, the same sums either way): as a benchmark set it
/// ([`CpuContext::set_broadcast_in_register`]), else whichever [`broadcast_in_register_pays`]
/// found faster here (measured once per process, at the first attention that asks).
pub fn broadcast_in_register(cpu: &CpuContext) -> bool {
    cpu.broadcast_override()
        .unwrap_or_else(broadcast_in_register_pays)
}

/// Whether attention at `level` runs the AVX-512 f32 kernels, the ones
/// [`broadcast_in_register`] chooses for (when its products are f32).
pub fn runs_avx512_kernels(level: KernelLevel) -> bool {
    #[cfg(target_arch = "x86_64")]
    return Width::for_level(level) == Width::Avx512;
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = level;
        false
    }
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
    /// `[token][head_dim][head]`: the queries of a pass of f32 products, as
    /// [`Kernels::scores`] reads them.
    queries: Vec<f32>,
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
    /// Whether the AVX-512 f32 kernels broadcast into a register
    /// ([`CpuContext::broadcast_in_register`]).
    in_register: bool,
    layer: usize,
    kv_head: usize,
    /// Every query head's sink logit, if the model has them ([`causal_attention_with_sinks`]).
    sinks: Option<&'c [f32]>,
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
    if kv.bf16 && kv.sinks.is_none() && bf16::applies(shape, kv.cache) {
        if let Some(kernels) = wide::Avx512Bf16::detect() {
            return bf16::attend_group(kernels, shape, tile, kv, scratch);
        }
    }
    match Width::for_level(kv.level) {
        #[cfg(target_arch = "x86_64")]
        Width::Avx512 => {
            if let Some(avx512) = wide::Avx512::detect() {
                let avx512 = avx512.with_broadcast_in_register(kv.in_register);
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
    // Token `i` of the tile attends over `tile.first + i + 1` positions (and a sink, whose
    // score sits after them).
    let longest = tile.first + tile.q.len();
    let stride = (longest + usize::from(kv.sinks.is_some())).next_multiple_of(KEY_BLOCK);
    let group = shape.heads / shape.kv_heads;
    let Scratch {
        scores, queries, ..
    } = scratch;
    let pass = G * hd;
    let group_dim = tile.q.first().map_or(0, |q| q.len());
    for heads in (0..group_dim).step_by(pass) {
        queries.clear();
        for q in tile.q {
            let q = &q[heads..heads + pass];
            queries.extend((0..pass).map(|i| q[i % G * hd + i / G]));
        }
        // Not cleared: every score read below (softmax's and the weights') is written first.
        scores.resize(tile.q.len() * G * stride, 0.0);
        let first_run = shape.first_run(tile.first);
        for block in (first_run..longest).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(longest);
            let rows: &[E] = kv.cache.key_run(kv.layer, kv.kv_head, block..end);
            for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
                let positions = end.min(tile.first + i + 1).saturating_sub(block);
                let q = &queries[i * pass..][..pass];
                let keys = &rows[..positions.div_ceil(KEY_BLOCK) * KEY_BLOCK * hd];
                if !keys.is_empty() {
                    kernels.scores::<G, E>(q, keys, shape.scale, scores, stride, block);
                }
            }
        }
        for (i, scores) in scores.chunks_exact_mut(G * stride).enumerate() {
            let position = tile.first + i;
            for (g, head_scores) in scores.chunks_exact_mut(stride).enumerate() {
                match kv.sinks {
                    None => windowed_softmax(shape, position, &mut head_scores[..=position], |x| {
                        kernels.softmax(x)
                    }),
                    Some(sinks) => {
                        let head = kv.kv_head * group + heads / hd + g;
                        windowed_softmax_with_sink(shape, position, head_scores, sinks[head], |x| {
                            kernels.softmax(x)
                        })
                    }
                }
            }
        }
        for out in tile.out.iter_mut() {
            out[heads..heads + pass].fill(0.0);
        }
        for block in (first_run..longest).step_by(POSITIONS) {
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
    /// `scores[g * stride + first + j] = (Σ_d q[d][g] · keys[d][j]) · scale` for the positions
    /// `j` of one or more key blocks (`keys` is blocks of `[head_dim][KEY_BLOCK]`, `q` is
    /// `[head_dim][G]`, so the `G` values a key vector meets lie side by side), each summed
    /// over `d` in order.
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
            for g in 0..G {
                for j in 0..KEY_BLOCK {
                    let mut acc = 0.0;
                    for d in 0..hd {
                        acc = q[d * G + g].mul_add(keys[d * KEY_BLOCK + j].to_f32(), acc);
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

mod bf16;

#[cfg(target_arch = "x86_64")]
mod wide;

#[cfg(test)]
mod tests;
