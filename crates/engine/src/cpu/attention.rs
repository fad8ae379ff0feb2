//! Causal grouped-query attention over the KV cache, split over the thread pool.
//!
//! One job is one (token, KV head): the query heads that share that KV head read each cached
//! key and value once for all of them (8 query heads per KV head in MiniCPM5), so the cache is
//! streamed once per token instead of once per query head. Scores and softmax are in f32, as
//! the reference computes them.

use std::cell::RefCell;

use super::pool::{SharedMut, ThreadPool};
use crate::kv_cache::KvCache;

/// Query heads that can share one KV head in a job (more are split into several passes).
const MAX_GROUP: usize = 16;

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
/// already be stored in the cache.
#[allow(clippy::too_many_arguments)] // the shapes are grouped; the rest are the data
pub fn causal_attention(
    pool: &ThreadPool,
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
    let out_ptr = SharedMut(out.as_mut_ptr());
    pool.run(tokens * kv_heads, &|job| {
        let (t, kv_head) = (job / kv_heads, job % kv_heads);
        let row = &q[t * q_dim..(t + 1) * q_dim];
        // SAFETY: job (t, kv_head) alone writes the heads of KV head `kv_head` of token t,
        // a range inside `out`, which outlives `run`.
        let out_row = unsafe { std::slice::from_raw_parts_mut(out_ptr.at(t * q_dim), q_dim) };
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            let head = KvHead {
                cache,
                layer,
                kv_head,
            };
            attend_group(shape, row, out_row, head, start + t, scratch);
        });
    });
}

/// Positions of keys or values read from the cache at a time, as f32.
const POSITIONS: usize = 64;

/// Per-thread buffers, reused across calls (no allocation once warm).
#[derive(Default)]
struct Scratch {
    /// `[group][position]` scores, then weights.
    scores: Vec<f32>,
    /// `POSITIONS` keys or values converted to f32.
    rows: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// One KV head of one layer of the cache.
struct KvHead<'c> {
    cache: &'c KvCache,
    layer: usize,
    kv_head: usize,
}

/// All query heads of one KV head for one token at `position`.
///
/// Runs a copy compiled for AVX-512 or AVX2 when the CPU has them: the same operations in the
/// same order (so the same results), with dot products in explicit SIMD and the rest on 16 or
/// 8 lanes instead of the baseline's 4. At long contexts this is a visible share of a decode
/// step.
fn attend_group(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv: KvHead<'_>,
    position: usize,
    scratch: &mut Scratch,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            return unsafe { attend_group_avx512(shape, q_row, out_row, kv, position, scratch) };
        }
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            return unsafe { attend_group_avx2(shape, q_row, out_row, kv, position, scratch) };
        }
    }
    attend_group_portable(shape, q_row, out_row, kv, position, scratch)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn attend_group_avx512(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv: KvHead<'_>,
    position: usize,
    scratch: &mut Scratch,
) {
    // SAFETY: this function runs only where AVX-512F is present.
    let dot = |a: &[f32], b: &[f32]| unsafe { wide::dot_avx512(a, b) };
    attend_group_with(shape, q_row, out_row, kv, position, scratch, dot)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn attend_group_avx2(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv: KvHead<'_>,
    position: usize,
    scratch: &mut Scratch,
) {
    // SAFETY: this function runs only where AVX2 is present.
    let dot = |a: &[f32], b: &[f32]| unsafe { wide::dot_avx2(a, b) };
    attend_group_with(shape, q_row, out_row, kv, position, scratch, dot)
}

fn attend_group_portable(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv: KvHead<'_>,
    position: usize,
    scratch: &mut Scratch,
) {
    attend_group_with(shape, q_row, out_row, kv, position, scratch, dot)
}

/// The body of every copy; `dot` is [`dot`] or its SIMD twin (which sums in the same order).
#[inline(always)]
fn attend_group_with(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv: KvHead<'_>,
    position: usize,
    scratch: &mut Scratch,
    dot: impl Fn(&[f32], &[f32]) -> f32,
) {
    let hd = shape.head_dim;
    let group = shape.heads / shape.kv_heads;
    let len = position + 1;
    let Scratch { scores, rows } = scratch;
    rows.resize(POSITIONS * hd, 0.0);
    for first in (0..group).step_by(MAX_GROUP) {
        let count = (group - first).min(MAX_GROUP);
        let heads = kv.kv_head * group + first..kv.kv_head * group + first + count;
        scores.clear();
        scores.resize(count * len, 0.0);
        // scores[g][p] = q_g · k_p * scale, each key read once for the whole group
        for block in (0..len).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(len);
            kv.cache.read_keys(kv.layer, kv.kv_head, block..end, rows);
            for (p, k) in (block..end).zip(rows.chunks_exact(hd)) {
                for (g, h) in heads.clone().enumerate() {
                    scores[g * len + p] = dot(&q_row[h * hd..(h + 1) * hd], k) * shape.scale;
                }
            }
        }
        for head_scores in scores.chunks_exact_mut(len) {
            softmax(head_scores);
        }
        for h in heads.clone() {
            out_row[h * hd..(h + 1) * hd].fill(0.0);
        }
        for block in (0..len).step_by(POSITIONS) {
            let end = (block + POSITIONS).min(len);
            kv.cache.read_values(kv.layer, kv.kv_head, block..end, rows);
            for (p, v) in (block..end).zip(rows.chunks_exact(hd)) {
                for (g, h) in heads.clone().enumerate() {
                    axpy(scores[g * len + p], v, &mut out_row[h * hd..(h + 1) * hd]);
                }
            }
        }
    }
}

/// `Σ a[i] b[i]` in 16 lanes (lane `i` sums the products at `i mod 16`, in order), the lanes
/// then added pairwise (`i + 8`, `i + 4`, `i + 2`, `i + 1`), then the tail: the order the SIMD
/// twins in [`wide`] follow exactly.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail = tail_dot(ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    for width in [8, 4, 2, 1] {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
    }
    acc[0] + tail
}

#[inline(always)]
fn tail_dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The SIMD twins of [`dot`]: multiplies and adds kept separate (no fused multiply-add), as
/// the portable code computes them.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::tail_dot;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn dot_avx512(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len()) / 16 * 16;
        let mut acc = _mm512_setzero_ps();
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= both lengths.
            let (x, y) = (
                _mm512_loadu_ps(a.as_ptr().add(i)),
                _mm512_loadu_ps(b.as_ptr().add(i)),
            );
            acc = _mm512_add_ps(acc, _mm512_mul_ps(x, y));
        }
        let half = _mm256_add_ps(
            _mm512_castps512_ps256(acc),
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc))),
        );
        reduce8(half) + tail_dot(&a[n..], &b[n..])
    }

    #[target_feature(enable = "avx2")]
    pub unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len()) / 16 * 16;
        let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for i in (0..n).step_by(16) {
            // SAFETY: i + 16 <= n <= both lengths.
            let (x0, y0) = (
                _mm256_loadu_ps(a.as_ptr().add(i)),
                _mm256_loadu_ps(b.as_ptr().add(i)),
            );
            let (x1, y1) = (
                _mm256_loadu_ps(a.as_ptr().add(i + 8)),
                _mm256_loadu_ps(b.as_ptr().add(i + 8)),
            );
            lo = _mm256_add_ps(lo, _mm256_mul_ps(x0, y0));
            hi = _mm256_add_ps(hi, _mm256_mul_ps(x1, y1));
        }
        reduce8(_mm256_add_ps(lo, hi)) + tail_dot(&a[n..], &b[n..])
    }

    /// Lanes 0..8 of an accumulator already folded as `i + 8`: then `i + 4`, `i + 2`, `i + 1`.
    #[target_feature(enable = "avx")]
    unsafe fn reduce8(v: __m256) -> f32 {
        let four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        let one = _mm_add_ss(two, _mm_movehdup_ps(two));
        _mm_cvtss_f32(one)
    }
}

#[inline(always)]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// Softmax in place, in f32, shifted by the maximum.
#[inline(always)]
fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inverse = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inverse;
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
    fn wide_copies_compute_exactly_what_the_portable_one_does() {
        let shape = AttentionShape {
            heads: 4,
            kv_heads: 1,
            head_dim: 40, // two chunks of 16 and a tail of 8
            scale: 0.3,
        };
        let positions = 70;
        let mut cache = KvCache::new(1, positions, 1, 40, KvPrecision::F32);
        for p in 0..positions {
            let row: Vec<f32> = (0..40)
                .map(|i| ((p * 40 + i) as f32 * 0.37).sin())
                .collect();
            cache.store(0, p, &row, &row.iter().map(|x| x * 0.5).collect::<Vec<_>>());
        }
        let q: Vec<f32> = (0..4 * 40).map(|i| (i as f32 * 0.23).cos()).collect();
        let run = |attend: &dyn Fn(&mut [f32], &mut Scratch)| {
            let mut out = vec![f32::NAN; q.len()];
            attend(&mut out, &mut Scratch::default());
            out
        };
        let head = || KvHead {
            cache: &cache,
            layer: 0,
            kv_head: 0,
        };
        let portable = run(&|out, scratch| {
            attend_group_portable(shape, &q, out, head(), positions - 1, scratch)
        });
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                // SAFETY: AVX-512F was detected just above.
                let wide = run(&|out, scratch| unsafe {
                    attend_group_avx512(shape, &q, out, head(), positions - 1, scratch)
                });
                assert_eq!(wide, portable, "AVX-512 copy");
            }
            if is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 was detected just above.
                let wide = run(&|out, scratch| unsafe {
                    attend_group_avx2(shape, &q, out, head(), positions - 1, scratch)
                });
                assert_eq!(wide, portable, "AVX2 copy");
            }
        }
        assert!(portable.iter().all(|x| x.is_finite()));
    }

    #[test]
    fn grouped_heads_match_per_head_reference() {
        let shape = AttentionShape {
            heads: 8,
            kv_heads: 2,
            head_dim: 24,
            scale: 1.0 / 24f32.sqrt(),
        };
        // 70 positions: more than one block of cache reads.
        let (tokens, start) = (5, 65);
        let kv_dim = shape.kv_heads * shape.head_dim;
        let positions = start + tokens;
        let wave = |i: usize, f: f32| (i as f32 * f).sin();
        let q: Vec<f32> = (0..tokens * 8 * 24).map(|i| wave(i, 0.23) * 2.0).collect();
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
            let mut cache = KvCache::new(2, positions + 3, shape.kv_heads, 24, precision);
            for p in 0..positions {
                let row = p * kv_dim..(p + 1) * kv_dim;
                cache.store(1, p, &k[row.clone()], &v[row]);
            }
            let expected = reference(shape, &q, tokens, start, &k, &v);
            for threads in [1, 3] {
                let pool = ThreadPool::new(threads);
                let mut out = vec![f32::NAN; q.len()];
                causal_attention(&pool, shape, &q, tokens, start, &cache, 1, &mut out);
                for (a, b) in out.iter().zip(&expected) {
                    assert!(
                        (a - b).abs() < 1e-5,
                        "{precision:?}, {threads} threads: {a} vs {b}"
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_values() {
        let mut x = [1000.0, 1000.0, f32::NEG_INFINITY];
        softmax(&mut x);
        assert_eq!(x, [0.5, 0.5, 0.0]);
    }
}
