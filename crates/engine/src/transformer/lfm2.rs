//! LFM2 (LiquidAI LFM2 350M to 2.6B), computed as transformers' `modeling_lfm2.py` computes it,
//! and how it differs from the common decoder:
//!
//! - most layers are gated short convolutions instead of attention: `B, C, x = in_proj(h)`,
//!   then `out_proj(C * conv(B * x))`, the convolution depthwise and causal, `conv_L_cache`
//!   positions wide (3); the gated input `B * x` of every position is kept in the cache beside
//!   the keys and values (`kv_cache::conv`), so the convolution reads the previous positions'
//!   from there as attention reads their keys;
//! - the attention layers norm q and k per head (RMSNorm, as Qwen3) and project out with
//!   `out_proj`; only they have keys and values (the cache's layers are the attention layers);
//! - names: `operator_norm` before the mixer, `ffn_norm` and a SwiGLU `feed_forward` (`w1`
//!   gate, `w3` up, `w2` down), the final norm `embedding_norm`; the head is tied by default.

use std::path::Path;

use q4nx::{Lfm2Params, ModelConfig, Tensor, Weights};

use super::{
    add_in_place, get, output, rmsnorm_rows, rmsnorm_rows_in_place, Logits, RunState,
    TransformerWeights,
};
use crate::cpu::attention::{self, AttentionShape};
use crate::cpu::exp::silu_mul;
use crate::cpu::CpuContext;
use crate::kv_cache::KvCache;
use crate::linear::Linear;
use crate::Error;

/// The layers of an LFM2 model (its embedding, final norm and head are the common ones).
#[derive(Debug)]
pub(crate) struct Lfm2Weights<'w> {
    layers: Vec<Layer<'w>>,
    conv_width: usize,
}

#[derive(Debug)]
struct Layer<'w> {
    operator_norm: Vec<f32>, // (hidden)
    mixer: Mixer<'w>,
    ffn_norm: Vec<f32>, // (hidden)
    w1: Linear<'w>,     // (intermediate, hidden) gate
    w3: Linear<'w>,     // (intermediate, hidden) up
    w2: Linear<'w>,     // (hidden, intermediate) down
}

/// What mixes positions in a layer; `index` counts the layers of its kind (its place in the
/// cache).
#[derive(Debug)]
enum Mixer<'w> {
    Conv {
        index: usize,
        in_proj: Linear<'w>,  // (3 * hidden, hidden): B, C, x
        kernel: Vec<f32>,     // (hidden, width)
        out_proj: Linear<'w>, // (hidden, hidden)
        bias: Option<ConvBias>,
    },
    Attention {
        index: usize,
        wq: Linear<'w>,   // (n_heads * head_dim, hidden)
        wk: Linear<'w>,   // (n_kv_heads * head_dim, hidden)
        wv: Linear<'w>,   // (n_kv_heads * head_dim, hidden)
        wo: Linear<'w>,   // (hidden, n_heads * head_dim), out_proj
        q_norm: Vec<f32>, // (head_dim)
        k_norm: Vec<f32>, // (head_dim)
    },
}

/// The biases of a convolution layer (`conv_bias`; LFM2's released models have none).
#[derive(Debug)]
struct ConvBias {
    in_proj: Vec<f32>,  // (3 * hidden)
    conv: Vec<f32>,     // (hidden)
    out_proj: Vec<f32>, // (hidden)
}

impl Lfm2Weights<'_> {
    /// Parameters of the layers.
    pub(super) fn parameter_count(&self) -> usize {
        let size = |l: &Linear<'_>| l.rows() * l.cols();
        self.layers
            .iter()
            .map(|l| {
                let mixer = match &l.mixer {
                    Mixer::Conv {
                        in_proj,
                        kernel,
                        out_proj,
                        bias,
                        ..
                    } => {
                        size(in_proj)
                            + kernel.len()
                            + size(out_proj)
                            + bias
                                .as_ref()
                                .map_or(0, |b| b.in_proj.len() + b.conv.len() + b.out_proj.len())
                    }
                    Mixer::Attention {
                        wq,
                        wk,
                        wv,
                        wo,
                        q_norm,
                        k_norm,
                        ..
                    } => {
                        [wq, wk, wv, wo].into_iter().map(size).sum::<usize>()
                            + q_norm.len()
                            + k_norm.len()
                    }
                };
                l.operator_norm.len()
                    + l.ffn_norm.len()
                    + mixer
                    + [&l.w1, &l.w3, &l.w2].into_iter().map(size).sum::<usize>()
            })
            .sum()
    }
}

/// Resolves every tensor of an LFM2 model, checking shapes; errors name the tensor.
pub(super) fn load<'w>(
    weights: &'w Weights,
    c: &ModelConfig,
    p: &Lfm2Params,
    dir: &Path,
) -> Result<TransformerWeights<'w>, Error> {
    let (hidden, hd) = (c.hidden_size, c.head_dim);
    let (q_dim, kv_dim, inter) = (c.q_dim(), c.kv_dim(), c.intermediate_size);
    let linear = |name: &str, rows: usize, cols: usize| -> Result<Linear<'w>, Error> {
        Linear::new(get(weights, dir, name)?, rows, cols).map_err(|e| {
            Error::invalid_model(
                dir,
                format!("tensor {name} does not fit the config: {}", e.0),
            )
        })
    };
    let dense = |name: &str, shape: &[usize]| -> Result<Vec<f32>, Error> {
        match get(weights, dir, name)? {
            Tensor::Dense(t) if t.shape == shape && t.dtype.is_float() => {
                let len = shape.iter().product::<usize>();
                if t.bytes.len() != len * t.dtype.size() {
                    return Err(Error::invalid_model(
                        dir,
                        format!("tensor {name} is truncated"),
                    ));
                }
                let mut out = vec![0.0; len];
                q4nx::dtype::decode_f32(t.dtype, t.bytes, &mut out);
                Ok(out)
            }
            _ => Err(Error::invalid_model(
                dir,
                format!("tensor {name} should be dense floats of shape {shape:?}"),
            )),
        }
    };
    let (mut convs, mut attentions) = (0, 0);
    let mut layers = Vec::with_capacity(c.num_hidden_layers);
    for (i, &is_conv) in p.conv_layers.iter().enumerate() {
        let l = format!("model.layers.{i}");
        let mixer = if is_conv {
            let bias = p
                .conv_bias
                .then(|| -> Result<_, Error> {
                    Ok(ConvBias {
                        in_proj: dense(&format!("{l}.conv.in_proj.bias"), &[3 * hidden])?,
                        conv: dense(&format!("{l}.conv.conv.bias"), &[hidden])?,
                        out_proj: dense(&format!("{l}.conv.out_proj.bias"), &[hidden])?,
                    })
                })
                .transpose()?;
            convs += 1;
            Mixer::Conv {
                index: convs - 1,
                in_proj: linear(&format!("{l}.conv.in_proj.weight"), 3 * hidden, hidden)?,
                kernel: dense(&format!("{l}.conv.conv.weight"), &[hidden, 1, p.conv_width])?,
                out_proj: linear(&format!("{l}.conv.out_proj.weight"), hidden, hidden)?,
                bias,
            }
        } else {
            attentions += 1;
            let a = format!("{l}.self_attn");
            Mixer::Attention {
                index: attentions - 1,
                wq: linear(&format!("{a}.q_proj.weight"), q_dim, hidden)?,
                wk: linear(&format!("{a}.k_proj.weight"), kv_dim, hidden)?,
                wv: linear(&format!("{a}.v_proj.weight"), kv_dim, hidden)?,
                wo: linear(&format!("{a}.out_proj.weight"), hidden, q_dim)?,
                q_norm: dense(&format!("{a}.q_layernorm.weight"), &[hd])?,
                k_norm: dense(&format!("{a}.k_layernorm.weight"), &[hd])?,
            }
        };
        layers.push(Layer {
            operator_norm: dense(&format!("{l}.operator_norm.weight"), &[hidden])?,
            mixer,
            ffn_norm: dense(&format!("{l}.ffn_norm.weight"), &[hidden])?,
            w1: linear(&format!("{l}.feed_forward.w1.weight"), inter, hidden)?,
            w3: linear(&format!("{l}.feed_forward.w3.weight"), inter, hidden)?,
            w2: linear(&format!("{l}.feed_forward.w2.weight"), hidden, inter)?,
        });
    }
    // A tied model may still ship lm_head.weight (Q4NX files quantize it): prefer it if present.
    let has_head = weights.names().contains(&"lm_head.weight");
    let head_name = if has_head || !c.tie_word_embeddings {
        "lm_head.weight"
    } else {
        "model.embed_tokens.weight"
    };
    Ok(TransformerWeights {
        embed: linear("model.embed_tokens.weight", c.vocab_size, hidden)?,
        layers: Vec::new(),
        norm: dense("model.embedding_norm.weight", &[hidden])?,
        lm_head: linear(head_name, c.vocab_size, hidden)?,
        lfm2: Some(Lfm2Weights {
            layers,
            conv_width: p.conv_width,
        }),
    })
}

/// [`super::forward`] for LFM2: the same contract (tokens at `start..`, their keys, values and
/// convolution state into `cache`, the requested logits into `state.logits`).
#[allow(clippy::too_many_arguments)] // as super::forward
pub(super) fn forward(
    c: &ModelConfig,
    w: &TransformerWeights<'_>,
    lw: &Lfm2Weights<'_>,
    s: &mut RunState,
    cache: &mut KvCache,
    cpu: &CpuContext,
    tokens: &[u32],
    start: usize,
    logits: Logits,
) {
    let n = tokens.len();
    let (dim, hd, eps) = (c.hidden_size, c.head_dim, c.rms_norm_eps);
    let (n_heads, n_kv) = (c.num_attention_heads, c.num_key_value_heads);
    let (q_dim, kv_dim, inter) = (n_heads * hd, n_kv * hd, c.intermediate_size);
    let (x, xb, xb2) = (
        &mut s.x[..n * dim],
        &mut s.xb[..n * dim],
        &mut s.xb2[..n * dim],
    );
    let (q, k, v) = (
        &mut s.q[..n * q_dim],
        &mut s.k[..n * kv_dim],
        &mut s.v[..n * kv_dim],
    );
    let attn = &mut s.attn[..n * q_dim];
    let (gate, up) = (&mut s.gate[..n * inter], &mut s.up[..n * inter]);
    let bcx = &mut s.bcx[..n * 3 * dim];
    let mut past = vec![0.0; dim]; // one stored position's B * x

    // x = embed[token]                                              (n, dim)
    for (t, &token) in tokens.iter().enumerate() {
        w.embed
            .row_f32(token as usize, &mut x[t * dim..(t + 1) * dim]);
    }

    for (l, layer) in lw.layers.iter().enumerate() {
        let _span = tracing::trace_span!("layer", l).entered();
        rmsnorm_rows(xb, x, &layer.operator_norm, eps);
        match &layer.mixer {
            Mixer::Conv {
                index,
                in_proj,
                kernel,
                out_proj,
                bias,
            } => {
                // B, C, x = h in_proj^T                            (n, 3 dim)
                in_proj.matmul(cpu, xb, n, bcx);
                if let Some(b) = bias {
                    for row in bcx.chunks_exact_mut(3 * dim) {
                        add_in_place(row, &b.in_proj);
                    }
                }
                // B * x of each token, kept at its position.
                for (t, row) in bcx.chunks_exact_mut(3 * dim).enumerate() {
                    let (b, rest) = row.split_at_mut(dim);
                    let xs = &rest[dim..];
                    for (bi, xi) in b.iter_mut().zip(xs) {
                        *bi *= xi;
                    }
                    cache.store_conv(*index, start + t, b);
                }
                // y = C * (conv(B * x) + bias), the convolution reading the `width` positions
                // ending at the token's own (before position 0: zeros) from the cache.
                let width = lw.conv_width;
                for (t, (row, y)) in bcx
                    .chunks_exact(3 * dim)
                    .zip(xb.chunks_exact_mut(dim))
                    .enumerate()
                {
                    let pos = start + t;
                    match bias {
                        Some(b) => y.copy_from_slice(&b.conv),
                        None => y.fill(0.0),
                    }
                    for j in 0..width {
                        let Some(at) = (pos + j + 1).checked_sub(width) else {
                            continue;
                        };
                        cache.read_conv(*index, at, &mut past);
                        for (ch, (yc, pc)) in y.iter_mut().zip(&past).enumerate() {
                            *yc += kernel[ch * width + j] * pc;
                        }
                    }
                    for (yc, cc) in y.iter_mut().zip(&row[dim..2 * dim]) {
                        *yc *= cc;
                    }
                }
                // out = y out_proj^T                                (n, dim)
                out_proj.matmul(cpu, xb, n, xb2);
                if let Some(b) = bias {
                    for row in xb2.chunks_exact_mut(dim) {
                        add_in_place(row, &b.out_proj);
                    }
                }
            }
            Mixer::Attention {
                index,
                wq,
                wk,
                wv,
                wo,
                q_norm,
                k_norm,
            } => {
                Linear::matmul_shared_input(
                    cpu,
                    &mut [(wq, &mut *q), (wk, &mut *k), (wv, &mut *v)],
                    xb,
                    n,
                );
                // Per-head RMSNorm of q and k, then RoPE; k and v stored at their positions.
                rmsnorm_rows_in_place(q, q_norm, eps);
                rmsnorm_rows_in_place(k, k_norm, eps);
                for t in 0..n {
                    let pos = start + t;
                    for head in q[t * q_dim..(t + 1) * q_dim].chunks_exact_mut(hd) {
                        s.rope.rotate(head, pos);
                    }
                    for head in k[t * kv_dim..(t + 1) * kv_dim].chunks_exact_mut(hd) {
                        s.rope.rotate(head, pos);
                    }
                    cache.store(
                        *index,
                        pos,
                        &k[t * kv_dim..(t + 1) * kv_dim],
                        &v[t * kv_dim..(t + 1) * kv_dim],
                    );
                }
                let shape = AttentionShape {
                    heads: n_heads,
                    kv_heads: n_kv,
                    head_dim: hd,
                    scale: 1.0 / (hd as f32).sqrt(),
                    window: None,
                };
                attention::causal_attention(cpu, shape, q, n, start, cache, *index, attn);
                wo.matmul(cpu, attn, n, xb2);
            }
        }
        add_in_place(x, xb2);

        // x = x + (silu(h W1^T) * (h W3^T)) W2^T, h = rmsnorm(x)   (n, inter) -> (n, dim)
        rmsnorm_rows(xb, x, &layer.ffn_norm, eps);
        Linear::matmul_shared_input(
            cpu,
            &mut [(&layer.w1, &mut *gate), (&layer.w3, &mut *up)],
            xb,
            n,
        );
        const PIECE: usize = 1024;
        cpu.pool().for_each_piece_mut(gate, PIECE, &|i, gate| {
            silu_mul(cpu.level(), gate, &up[i * PIECE..][..gate.len()]);
        });
        layer.w2.matmul(cpu, gate, n, xb2);
        add_in_place(x, xb2);
    }

    // logits = rmsnorm(x, embedding_norm) lm_head^T
    output(c, w, s, cpu, n, logits);
}
