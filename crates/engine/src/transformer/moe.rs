//! Qwen3-MoE's mixture-of-experts feed-forward block, computed as transformers computes it:
//!
//! ```text
//! p = softmax(h Wr^T)                      over the experts, in f32   (the router, `mlp.gate`)
//! chosen = the k largest of p              (num_experts_per_tok; ties to the lower index)
//! norm_topk_prob: w = p[chosen] / sum(p[chosen]), else w = p[chosen]
//! out = sum over chosen e, in expert order, of w_e * (silu(h Wg_e^T) * (h Wu_e^T)) Wd_e^T
//! ```
//!
//! Only the chosen experts' matrices are read: a decode step runs each of its token's `k`
//! experts on that one token, so it reads `k` experts' rows of the layer's many. A prefill
//! groups its tokens by expert: each expert that any token chose runs once, as one matmul over
//! the rows of the tokens routed to it (gathered into a block), and its outputs are added back
//! to those tokens' rows with their weights. Experts are visited in index order and each
//! token's sum is taken in that order, as transformers' `index_add_` takes it.
//!
//! The router stays dense (BF16 in a Q4NX file, as converted), so its logits carry no
//! activation rounding and a quantized model picks the experts its weights imply.
//!
//! gpt-oss's experts ([`Kind::GptOss`]) differ in three marked steps, as transformers'
//! `GptOssMLP` computes them:
//!
//! ```text
//! logits = h Wr^T + br                     (the router, `mlp.router`, has a bias)
//! chosen = the k largest logits; w = softmax over those k logits alone
//! g = h Wg_e^T + bg_e, u = h Wu_e^T + bu_e (every expert projection has a bias)
//! g = min(g, limit), u = clamp(u, -limit, limit)
//! out_e = ((u + 1) * g * sigmoid(alpha g)) Wd_e^T + bd_e      (the clamped SwiGLU)
//! ```

use crate::cpu::exp::silu_mul;
use crate::cpu::CpuContext;
use crate::linear::{Linear, MAX_JOBS};
use crate::Error;

use super::MAX_CHUNK;

/// One expert: a gated MLP of the expert width.
#[derive(Debug)]
struct Expert<'w> {
    gate: Linear<'w>,              // (width, hidden)
    up: Linear<'w>,                // (width, hidden)
    down: Linear<'w>,              // (hidden, width)
    biases: Option<[Vec<f32>; 3]>, // gpt-oss: (width), (width), (hidden)
}

/// Which family's experts: how the router weighs its choices and the experts' activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    /// Qwen3-MoE: softmax over every expert, the k most probable (renormalized or not), SiLU.
    Qwen3Moe {
        /// Whether the chosen experts' probabilities are renormalized to sum to 1.
        norm_topk_prob: bool,
    },
    /// gpt-oss: the k largest logits, a softmax over them alone, the clamped SwiGLU.
    GptOss {
        /// The sigmoid's gain.
        alpha: f32,
        /// The clamp of the gate (above) and of the up projection (both sides).
        limit: f32,
    },
}

/// The experts of one sparse layer and their router.
#[derive(Debug)]
pub(crate) struct Experts<'w> {
    router: Linear<'w>,            // (experts, hidden), dense
    router_bias: Option<Vec<f32>>, // (experts), gpt-oss only
    experts: Vec<Expert<'w>>,
    /// Experts each token uses.
    top_k: usize,
    kind: Kind,
}

/// Reads the named dense vector of the given length, or says which tensor is missing or wrong.
pub(crate) type VectorOf<'f> = dyn Fn(&str, usize) -> Result<Vec<f32>, Error> + 'f;

/// The scratch buffers of the experts' block, for up to [`MAX_CHUNK`] tokens, allocated once.
#[derive(Debug)]
pub(crate) struct MoeState {
    logits: Vec<f32>,          // (chunk, experts) the router's, then its probabilities
    chosen: Vec<(usize, f32)>, // (chunk, top_k) each token's experts and weights
    routed: Vec<(usize, f32)>, // (tokens routed to one expert): token, weight
    input: Vec<f32>,           // (chunk, hidden) those tokens' rows, gathered
    gate: Vec<f32>,            // (chunk, width)
    up: Vec<f32>,              // (chunk, width)
    out: Vec<f32>,             // (chunk, hidden) one expert's outputs
}

impl MoeState {
    /// Buffers for a model of `hidden` width whose sparse layers have `p`'s experts.
    pub(crate) fn new(hidden: usize, p: &q4nx::MoeParams) -> Self {
        MoeState {
            logits: vec![0.0; MAX_CHUNK * p.experts],
            chosen: Vec::with_capacity(MAX_CHUNK * p.experts_per_token),
            routed: Vec::with_capacity(MAX_CHUNK),
            input: vec![0.0; MAX_CHUNK * hidden],
            gate: vec![0.0; MAX_CHUNK * p.expert_intermediate_size],
            up: vec![0.0; MAX_CHUNK * p.expert_intermediate_size],
            out: vec![0.0; MAX_CHUNK * hidden],
        }
    }
}

impl<'w> Experts<'w> {
    /// Resolves layer `prefix`'s router and experts of `kind` with `linear` and `vector` (which
    /// name a tensor that is missing or of another shape), for a model of `hidden` width.
    /// gpt-oss's router is `mlp.router` and it and every expert projection carry biases.
    pub(crate) fn load(
        prefix: &str,
        hidden: usize,
        p: &q4nx::MoeParams,
        kind: Kind,
        linear: &dyn Fn(&str, usize, usize) -> Result<Linear<'w>, Error>,
        vector: &VectorOf<'_>,
    ) -> Result<Self, Error> {
        let width = p.expert_intermediate_size;
        let gpt_oss = matches!(kind, Kind::GptOss { .. });
        let experts = (0..p.experts)
            .map(|e| {
                let name = |m: &str, part: &str| format!("{prefix}.mlp.experts.{e}.{m}.{part}");
                let biases = gpt_oss
                    .then(|| -> Result<_, Error> {
                        Ok([
                            vector(&name("gate_proj", "bias"), width)?,
                            vector(&name("up_proj", "bias"), width)?,
                            vector(&name("down_proj", "bias"), hidden)?,
                        ])
                    })
                    .transpose()?;
                Ok(Expert {
                    gate: linear(&name("gate_proj", "weight"), width, hidden)?,
                    up: linear(&name("up_proj", "weight"), width, hidden)?,
                    down: linear(&name("down_proj", "weight"), hidden, width)?,
                    biases,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let router = if gpt_oss { "router" } else { "gate" };
        Ok(Experts {
            router: linear(&format!("{prefix}.mlp.{router}.weight"), p.experts, hidden)?,
            router_bias: gpt_oss
                .then(|| vector(&format!("{prefix}.mlp.router.bias"), p.experts))
                .transpose()?,
            experts,
            top_k: p.experts_per_token,
            kind,
        })
    }

    /// Weights, as model cards count them (every expert's, and the router's).
    pub(crate) fn parameters(&self) -> usize {
        let size = |l: &Linear<'_>| l.rows() * l.cols();
        size(&self.router)
            + self
                .experts
                .iter()
                .map(|e| {
                    let biases = e
                        .biases
                        .as_ref()
                        .map_or(0, |b| b.iter().map(Vec::len).sum());
                    size(&e.gate) + size(&e.up) + size(&e.down) + biases
                })
                .sum::<usize>()
            + self.router_bias.as_ref().map_or(0, Vec::len)
    }

    /// `out` = the block's output for the `tokens` normed rows of `h` (`[tokens, hidden]`
    /// each), with `s`'s buffers and `cpu`'s threads.
    pub(crate) fn forward(
        &self,
        cpu: &CpuContext,
        h: &[f32],
        tokens: usize,
        out: &mut [f32],
        s: &mut MoeState,
    ) {
        let count = self.experts.len();
        let hidden = h.len() / tokens;
        // p = softmax(h Wr^T); each token's k experts and their weights.
        let logits = &mut s.logits[..tokens * count];
        self.router.matmul(cpu, h, tokens, logits);
        s.chosen.clear();
        for row in logits.chunks_exact_mut(count) {
            match self.kind {
                Kind::Qwen3Moe { norm_topk_prob } => {
                    route(row, self.top_k, norm_topk_prob, &mut s.chosen)
                }
                Kind::GptOss { .. } => {
                    let bias = self
                        .router_bias
                        .as_ref()
                        .expect("gpt-oss's router has a bias");
                    row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                    route_top_logits(row, self.top_k, &mut s.chosen);
                }
            }
        }
        if tokens == 1 {
            return self.forward_token(cpu, h, out, s);
        }
        out.fill(0.0);
        for (e, expert) in self.experts.iter().enumerate() {
            // The tokens routed to expert e, in order, with their weights.
            s.routed.clear();
            for (t, chosen) in s.chosen.chunks_exact(self.top_k).enumerate() {
                if let Some(&(_, w)) = chosen.iter().find(|(c, _)| *c == e) {
                    s.routed.push((t, w));
                }
            }
            let m = s.routed.len();
            if m == 0 {
                continue;
            }
            // When every token chose this expert, their rows are read in place; else gathered.
            let input = if m == tokens {
                h
            } else {
                for (i, &(t, _)) in s.routed.iter().enumerate() {
                    s.input[i * hidden..(i + 1) * hidden]
                        .copy_from_slice(&h[t * hidden..(t + 1) * hidden]);
                }
                &s.input[..m * hidden]
            };
            let width = expert.down.cols();
            let (gate, up) = (&mut s.gate[..m * width], &mut s.up[..m * width]);
            let mut pairs = [(&expert.gate, &mut *gate), (&expert.up, &mut *up)];
            Linear::matmul_shared_input(cpu, &mut pairs, input, m);
            self.activate(cpu, expert, gate, up);
            let expert_out = &mut s.out[..m * hidden];
            expert.down.matmul(cpu, gate, m, expert_out);
            for (&(t, w), row) in s.routed.iter().zip(expert_out.chunks_exact_mut(hidden)) {
                add_weighted(&mut out[t * hidden..(t + 1) * hidden], row, w, expert);
            }
        }
    }

    /// A decode step's block: its token's `k` experts in two runs of the pool (every chosen
    /// expert's gate and up rows at once, then every down row), instead of two per expert.
    /// Their outputs are summed in expert order, as the prefill's are.
    fn forward_token(&self, cpu: &CpuContext, h: &[f32], out: &mut [f32], s: &mut MoeState) {
        let hidden = h.len();
        s.chosen.sort_unstable_by_key(|&(e, _)| e);
        out.fill(0.0);
        for group in s.chosen.chunks(MAX_JOBS / 2) {
            let n = group.len();
            let width = self.experts[group[0].0].down.cols();
            let (gate, up) = (&mut s.gate[..n * width], &mut s.up[..n * width]);
            let mut products: Vec<_> = gate
                .chunks_exact_mut(width)
                .zip(up.chunks_exact_mut(width))
                .zip(group)
                .flat_map(|((g, u), &(e, _))| {
                    let expert = &self.experts[e];
                    [(&expert.gate, 0, g), (&expert.up, 0, u)]
                })
                .collect();
            Linear::matmul_each(cpu, h, 1, &mut products);
            let rows = gate.chunks_exact_mut(width).zip(up.chunks_exact_mut(width));
            for ((g, u), &(e, _)) in rows.zip(group) {
                self.activate(cpu, &self.experts[e], g, u);
            }
            let expert_out = &mut s.out[..n * hidden];
            let mut products: Vec<_> = expert_out
                .chunks_exact_mut(hidden)
                .zip(group)
                .enumerate()
                .map(|(i, (o, &(e, _)))| (&self.experts[e].down, i, o))
                .collect();
            Linear::matmul_each(cpu, gate, n, &mut products);
            for (row, &(e, w)) in expert_out.chunks_exact_mut(hidden).zip(group) {
                add_weighted(out, row, w, &self.experts[e]);
            }
        }
    }

    /// The expert's activation of its gate and up outputs (`[m, width]` each), in place in
    /// `gate`: gpt-oss's biases and clamped SwiGLU, else `silu(gate) * up`.
    fn activate(&self, cpu: &CpuContext, expert: &Expert<'_>, gate: &mut [f32], up: &mut [f32]) {
        match (self.kind, &expert.biases) {
            (Kind::GptOss { alpha, limit }, Some([bg, bu, _])) => {
                add_rows(gate, bg);
                add_rows(up, bu);
                clamped_swiglu(gate, up, alpha, limit);
            }
            _ => silu_mul(cpu.level(), gate, up),
        }
    }
}

/// `out += w * (row + the expert's down bias, if it has one)`: one expert's output row added
/// to its token's sum with the expert's weight.
fn add_weighted(out: &mut [f32], row: &mut [f32], w: f32, expert: &Expert<'_>) {
    if let Some([_, _, bd]) = &expert.biases {
        add_rows(row, bd);
    }
    for (o, v) in out.iter_mut().zip(row.iter()) {
        *o += v * w;
    }
}

/// Turns one token's router logits into its `k` experts and their weights, appended to
/// `chosen` in descending order of probability: softmax in f32 (in place), the `k` largest
/// (ties to the lower index, as the index order breaks them), and with `normalize` those `k`
/// divided by their sum.
fn route(logits: &mut [f32], k: usize, normalize: bool, chosen: &mut Vec<(usize, f32)>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in logits.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in logits.iter_mut() {
        *v /= sum;
    }
    let start = chosen.len();
    push_top_k(logits, k, chosen);
    if normalize {
        let total: f32 = chosen[start..].iter().map(|(_, w)| w).sum();
        for (_, w) in &mut chosen[start..] {
            *w /= total;
        }
    }
}

/// Appends to `chosen` the `k` largest of `values` with their values, in descending order
/// (ties to the lower index): the experts both routers pick.
fn push_top_k(values: &[f32], k: usize, chosen: &mut Vec<(usize, f32)>) {
    let start = chosen.len();
    for _ in 0..k {
        let taken = &chosen[start..];
        let best = (0..values.len())
            .filter(|e| !taken.iter().any(|(c, _)| c == e))
            .fold(None, |best: Option<usize>, e| match best {
                Some(b) if values[b] >= values[e] => Some(b),
                _ => Some(e),
            })
            .expect("k is at most the number of experts");
        chosen.push((best, values[best]));
    }
}

/// Adds `bias` to each row of `x` (rows of `bias.len()`).
fn add_rows(x: &mut [f32], bias: &[f32]) {
    for row in x.chunks_exact_mut(bias.len()) {
        row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
    }
}

/// gpt-oss's activation, in place in `gate`: `g = min(g, limit)`, `u = clamp(u, -limit,
/// limit)`, `g = (u + 1) * g * sigmoid(alpha g)`, in f32 as transformers computes it.
fn clamped_swiglu(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, u) in gate.iter_mut().zip(up) {
        let x = g.min(limit);
        let u = u.clamp(-limit, limit);
        let glu = x * (1.0 / (1.0 + (-(x * alpha)).exp()));
        *g = (u + 1.0) * glu;
    }
}

/// gpt-oss's routing of one token: its `k` largest `logits` (ties to the lower index), appended
/// to `chosen` in descending order with a softmax over those `k` logits alone as weights.
fn route_top_logits(logits: &[f32], k: usize, chosen: &mut Vec<(usize, f32)>) {
    let start = chosen.len();
    push_top_k(logits, k, chosen);
    let top = &mut chosen[start..];
    let max = top[0].1;
    let mut sum = 0.0f32;
    for (_, w) in top.iter_mut() {
        *w = (*w - max).exp();
        sum += *w;
    }
    for (_, w) in top.iter_mut() {
        *w /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_takes_the_k_most_probable_and_renormalizes() {
        let mut chosen = vec![(9, 9.0)];
        let mut logits = [0.0f32, 2.0, 1.0, 2.0_f32.ln() + 1.0];
        route(&mut logits, 2, false, &mut chosen);
        let total = 1.0 + 2.0_f32.exp() + 1.0_f32.exp() + 2.0 * 1.0_f32.exp();
        assert_eq!(chosen[0], (9, 9.0), "earlier tokens' choices are kept");
        assert_eq!((chosen[1].0, chosen[2].0), (1, 3));
        assert!((chosen[1].1 - 2.0_f32.exp() / total).abs() < 1e-6);
        assert!((chosen[2].1 - 2.0 * 1.0_f32.exp() / total).abs() < 1e-6);
        let mut logits = [0.0f32, 2.0, 1.0, 2.0_f32.ln() + 1.0];
        let mut chosen = Vec::new();
        route(&mut logits, 2, true, &mut chosen);
        let e = 2.0_f32.exp();
        let twice_e = 2.0 * 1.0_f32.exp();
        assert!((chosen[0].1 - e / (e + twice_e)).abs() < 1e-6);
        assert!((chosen[0].1 + chosen[1].1 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn gpt_oss_routes_by_logits_and_softmaxes_the_chosen_alone() {
        let mut chosen = Vec::new();
        route_top_logits(&[0.5, 3.0, -1.0, 2.0], 2, &mut chosen);
        let e = 1.0f32.exp();
        assert_eq!((chosen[0].0, chosen[1].0), (1, 3));
        assert!((chosen[0].1 - e / (e + 1.0)).abs() < 1e-6);
        assert!((chosen[1].1 - 1.0 / (e + 1.0)).abs() < 1e-6);
    }

    #[test]
    fn clamped_swiglu_clamps_the_gate_above_and_the_up_both_ways() {
        let mut gate = [10.0f32, -10.0, 0.5];
        clamped_swiglu(&mut gate, &[20.0, -20.0, 1.0], 1.702, 7.0);
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        assert!(
            (gate[0] - 8.0 * 7.0 * sigmoid(7.0 * 1.702)).abs() < 1e-5,
            "{gate:?}"
        );
        assert!(
            (gate[1] - -6.0 * -10.0 * sigmoid(-17.02)).abs() < 1e-6,
            "{gate:?}"
        );
        assert!(
            (gate[2] - 2.0 * 0.5 * sigmoid(0.851)).abs() < 1e-6,
            "{gate:?}"
        );
    }

    #[test]
    fn route_breaks_ties_to_the_lower_index_and_may_take_every_expert() {
        let mut chosen = Vec::new();
        route(&mut [1.0, 3.0, 3.0, 3.0], 2, true, &mut chosen);
        assert_eq!(chosen, [(1, 0.5), (2, 0.5)]);
        let mut chosen = Vec::new();
        route(&mut [0.5, -1.0, 2.0], 3, true, &mut chosen);
        assert_eq!(chosen.iter().map(|c| c.0).collect::<Vec<_>>(), [2, 0, 1]);
        let total: f32 = chosen.iter().map(|c| c.1).sum();
        assert!((total - 1.0).abs() < 1e-6);
    }
}
