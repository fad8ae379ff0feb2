//! Causal grouped-query attention over the KV cache, split over the thread pool.
//!
//! One job is one (token, KV head): the query heads that share that KV head read each cached
//! key and value once for all of them (8 query heads per KV head in MiniCPM5), so the cache is
//! streamed once per token instead of once per query head. Scores and softmax are in f32, as
//! the reference computes them.

use std::cell::RefCell;

use super::pool::ThreadPool;

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
/// positions `0..=position`: `out[t, h] = Σ_p softmax_p(q[t, h] · k[p, h / group] * scale) v[p, ..]`.
///
/// `q` and `out` are `[tokens, heads * head_dim]`; `key(p)` and `value(p)` return position `p`'s
/// `kv_heads * head_dim` floats (every position up to the last token's must already be stored).
#[allow(clippy::too_many_arguments)] // the shapes are grouped; the rest are the data
pub fn causal_attention<'c, K, V>(
    pool: &ThreadPool,
    shape: AttentionShape,
    q: &[f32],
    tokens: usize,
    start: usize,
    key: K,
    value: V,
    out: &mut [f32],
) where
    K: Fn(usize) -> &'c [f32] + Sync,
    V: Fn(usize) -> &'c [f32] + Sync,
{
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
    let out_ptr = OutPtr(out.as_mut_ptr());
    pool.run(tokens * kv_heads, &|job| {
        let (t, kv_head) = (job / kv_heads, job % kv_heads);
        let row = &q[t * q_dim..(t + 1) * q_dim];
        // SAFETY: job (t, kv_head) alone writes the heads of KV head `kv_head` of token t,
        // a range inside `out`, which outlives `run`.
        let out_row = unsafe { std::slice::from_raw_parts_mut(out_ptr.at(t * q_dim), q_dim) };
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            attend_group(
                shape,
                row,
                out_row,
                kv_head,
                start + t,
                &key,
                &value,
                scratch,
            );
        });
    });
}

struct OutPtr(*mut f32);
// SAFETY: jobs write disjoint ranges (see `causal_attention`).
unsafe impl Sync for OutPtr {}
impl OutPtr {
    fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

thread_local! {
    /// Per-thread scores, reused across calls (no allocation once warm).
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// All query heads of KV head `kv_head` for one token at `position`.
#[allow(clippy::too_many_arguments)]
fn attend_group<'c>(
    shape: AttentionShape,
    q_row: &[f32],
    out_row: &mut [f32],
    kv_head: usize,
    position: usize,
    key: &(dyn Fn(usize) -> &'c [f32] + Sync),
    value: &(dyn Fn(usize) -> &'c [f32] + Sync),
    scratch: &mut Vec<f32>,
) {
    let hd = shape.head_dim;
    let group = shape.heads / shape.kv_heads;
    let len = position + 1;
    for first in (0..group).step_by(MAX_GROUP) {
        let count = (group - first).min(MAX_GROUP);
        let heads = kv_head * group + first..kv_head * group + first + count;
        scratch.clear();
        scratch.resize(count * len, 0.0);
        // scores[g][p] = q_g · k_p * scale, each key read once for the whole group
        for p in 0..len {
            let k = &key(p)[kv_head * hd..(kv_head + 1) * hd];
            for (g, h) in heads.clone().enumerate() {
                scratch[g * len + p] = dot(&q_row[h * hd..(h + 1) * hd], k) * shape.scale;
            }
        }
        for scores in scratch.chunks_exact_mut(len) {
            softmax(scores);
        }
        for h in heads.clone() {
            out_row[h * hd..(h + 1) * hd].fill(0.0);
        }
        for p in 0..len {
            let v = &value(p)[kv_head * hd..(kv_head + 1) * hd];
            for (g, h) in heads.clone().enumerate() {
                axpy(scratch[g * len + p], v, &mut out_row[h * hd..(h + 1) * hd]);
            }
        }
    }
}

/// Sixteen independent partial sums, so the compiler vectorizes it.
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// Softmax in place, in f32, shifted by the maximum.
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
    fn grouped_heads_match_per_head_reference() {
        let shape = AttentionShape {
            heads: 8,
            kv_heads: 2,
            head_dim: 24,
            scale: 1.0 / 24f32.sqrt(),
        };
        let (tokens, start) = (5, 3);
        let kv_dim = shape.kv_heads * shape.head_dim;
        let positions = start + tokens;
        let wave = |i: usize, f: f32| (i as f32 * f).sin();
        let k: Vec<f32> = (0..positions * kv_dim).map(|i| wave(i, 0.37)).collect();
        let v: Vec<f32> = (0..positions * kv_dim).map(|i| wave(i, 0.11)).collect();
        let q: Vec<f32> = (0..tokens * 8 * 24).map(|i| wave(i, 0.23) * 2.0).collect();
        let expected = reference(shape, &q, tokens, start, &k, &v);
        for threads in [1, 3] {
            let pool = ThreadPool::new(threads);
            let mut out = vec![f32::NAN; q.len()];
            causal_attention(
                &pool,
                shape,
                &q,
                tokens,
                start,
                |p| &k[p * kv_dim..(p + 1) * kv_dim],
                |p| &v[p * kv_dim..(p + 1) * kv_dim],
                &mut out,
            );
            for (a, b) in out.iter().zip(&expected) {
                assert!((a - b).abs() < 1e-5, "{threads} threads: {a} vs {b}");
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
