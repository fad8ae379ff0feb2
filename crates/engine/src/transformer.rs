//! The decoder-only transformer of the Llama family (MiniCPM5, Llama 3), Qwen2, Qwen3 and Gemma 3,
//! computed as Hugging Face transformers computes it (see the forward pass in the models notes;
//! RoPE and its scalings in [`crate::rope`]).
//!
//! Gemma 3 differs from Llama in a few marked steps: the embedding is multiplied by √hidden,
//! every norm multiplies by `1 + w` (folded into the weights at load), q and k are normed per
//! head, the outputs of attention and of the MLP are normed before they join the residual
//! stream, the MLP's activation is GELU-tanh, attention is scaled by `query_pre_attn_scalar`,
//! its local layers attend to a sliding window with their own RoPE base, and the logits may be
//! soft-capped.
//!
//! Phi-3 differs from Llama in its stored weights (q, k and v fused, gate and up fused, each run
//! as one matmul: [`crate::fused`]), in RoPE turning only part of each head, with LongRoPE's
//! factors ([`crate::rope`]), and in a sliding window on every layer when its config sets one.
//!
//! LFM2's convolution layers, and how its attention layers differ, are in [`lfm2`].
//!
//! Qwen3-MoE is Qwen3 whose feed-forward blocks, on its sparse layers, are mixtures of experts
//! ([`moe`]): a router picks a few experts per token and only those run.
//!
//! gpt-oss is Llama with biases on q, k, v and o, a learned sink logit per head joining each
//! attention softmax's denominator ([`attention::causal_attention_with_sinks`]), sliding-window
//! layers between full ones, YaRN ([`crate::rope`]), and mixtures of experts on every layer
//! whose router and experts carry biases and whose activation is a clamped SwiGLU ([`moe`]).
//!
//! Three separate things: [`TransformerWeights`] (borrowed from the weight file), [`RunState`]
//! (every activation buffer, allocated once) and the [`KvCache`]; [`forward`] reads like the math.

use std::path::Path;

use q4nx::{Family, ModelConfig, RopeScaling, Tensor, Weights};

use crate::cpu::attention::{self, AttentionShape};
use crate::cpu::exp::{gelu_tanh_mul, silu_mul};
use crate::cpu::CpuContext;
use crate::fused::SharedInput;
use crate::kv_cache::KvCache;
use crate::linear::Linear;
use crate::pooling;
use crate::rope::RopeTable;
use crate::Error;

mod lfm2;
mod moe;

/// The largest number of tokens one [`forward`] call processes; longer prompts are prefilled in
/// chunks of this size (bounds the activation buffers).
pub(crate) const MAX_CHUNK: usize = 64;

/// One decoder layer's weights.
#[derive(Debug)]
pub(crate) struct LayerWeights<'w> {
    attn_norm: Vec<f32>,              // (hidden)
    qkv: SharedInput<'w, 3>,          // (q_dim | kv_dim | kv_dim, hidden), Phi-3: fused
    qkv_bias: Option<[Vec<f32>; 3]>,  // (q_dim), (kv_dim), (kv_dim), Qwen2 only
    q_norm: Option<Vec<f32>>,         // (head_dim), Qwen3 only
    k_norm: Option<Vec<f32>>,         // (head_dim), Qwen3 only
    wo: Linear<'w>,                   // (hidden, n_heads * head_dim)
    wo_bias: Option<Vec<f32>>,        // (hidden), gpt-oss only
    sinks: Option<Vec<f32>>,          // (n_heads), gpt-oss only: each head's sink logit
    post_attn_norm: Option<Vec<f32>>, // (hidden), Gemma 3 only: on attention's output
    ffn_norm: Vec<f32>,               // (hidden)
    post_ffn_norm: Option<Vec<f32>>,  // (hidden), Gemma 3 only: on the MLP's output
    ffn: FeedForward<'w>,
}

/// A layer's feed-forward block.
#[derive(Debug)]
enum FeedForward<'w> {
    /// A gated MLP.
    Dense {
        gate_up: SharedInput<'w, 2>, // (intermediate | intermediate, hidden), Phi-3: fused
        w_down: Linear<'w>,          // (hidden, intermediate)
    },
    /// Qwen3-MoE's sparse layers and gpt-oss's: experts and their router.
    Experts(moe::Experts<'w>),
}

impl FeedForward<'_> {
    /// Weights, as model cards count them.
    fn parameters(&self) -> usize {
        match self {
            FeedForward::Dense { gate_up, w_down } => {
                gate_up.parameters() + w_down.rows() * w_down.cols()
            }
            FeedForward::Experts(experts) => experts.parameters(),
        }
    }
}

/// Every weight of the model, borrowed from the memory-mapped file (norms are copied to f32:
/// they are tiny).
#[derive(Debug)]
pub(crate) struct TransformerWeights<'w> {
    embed: Linear<'w>, // (vocab, hidden), read one row per token
    layers: Vec<LayerWeights<'w>>,
    norm: Vec<f32>,                      // (hidden)
    lm_head: Linear<'w>,                 // (vocab, hidden); the embedding itself when tied
    lfm2: Option<lfm2::Lfm2Weights<'w>>, // LFM2's layers (then `layers` is empty)
}

impl<'w> TransformerWeights<'w> {
    /// Resolves every tensor the config implies, checking shapes; errors name the tensor.
    pub(crate) fn load(weights: &'w Weights, c: &ModelConfig, dir: &Path) -> Result<Self, Error> {
        if let Some(p) = &c.lfm2 {
            return lfm2::load(weights, c, p, dir);
        }
        let (hidden, hd) = (c.hidden_size, c.head_dim);
        let (q_dim, kv_dim) = (c.num_attention_heads * hd, c.num_key_value_heads * hd);
        let linear = |name: &str, rows: usize, cols: usize| -> Result<Linear<'w>, Error> {
            let tensor = get(weights, dir, name)?;
            Linear::new(tensor, rows, cols).map_err(|e| {
                Error::invalid_model(
                    dir,
                    format!("tensor {name} does not fit the config: {}", e.0),
                )
            })
        };
        let vector = |name: &str, len: usize| -> Result<Vec<f32>, Error> {
            match get(weights, dir, name)? {
                Tensor::Dense(t) if t.shape == [len] => {
                    let dtype = t.dtype;
                    if !dtype.is_float() {
                        return Err(Error::invalid_model(
                            dir,
                            format!("tensor {name} has dtype {dtype:?}"),
                        ));
                    }
                    if t.bytes.len() != len * dtype.size() {
                        return Err(Error::invalid_model(
                            dir,
                            format!("tensor {name} is truncated"),
                        ));
                    }
                    let mut out = vec![0.0; len];
                    q4nx::dtype::decode_f32(dtype, t.bytes, &mut out);
                    Ok(out)
                }
                _ => Err(Error::invalid_model(
                    dir,
                    format!("tensor {name} should be a dense vector of {len} values"),
                )),
            }
        };
        let gemma3 = c.family == Family::Gemma3;
        // Gemma's RMSNorm multiplies by 1 + w (in f32, as transformers computes it).
        let norm = |name: &str, len: usize| -> Result<Vec<f32>, Error> {
            let mut w = vector(name, len)?;
            if gemma3 {
                w.iter_mut().for_each(|w| *w += 1.0);
            }
            Ok(w)
        };
        let qk_norm = c.family.qk_norm();
        let phi3 = c.family == Family::Phi3;
        let gpt_oss = c.gpt_oss.as_ref();
        let experts_kind = match (gpt_oss, &c.moe) {
            (Some(g), _) => moe::Kind::GptOss {
                alpha: g.swiglu_alpha,
                limit: g.swiglu_limit,
            },
            (None, Some(m)) => moe::Kind::Qwen3Moe {
                norm_topk_prob: m.norm_topk_prob,
            },
            (None, None) => moe::Kind::Qwen3Moe {
                norm_topk_prob: false,
            },
        };
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let p = format!("model.layers.{i}");
            layers.push(LayerWeights {
                attn_norm: norm(&format!("{p}.input_layernorm.weight"), hidden)?,
                qkv: if phi3 {
                    SharedInput::Fused {
                        matrix: linear(
                            &format!("{p}.self_attn.qkv_proj.weight"),
                            q_dim + 2 * kv_dim,
                            hidden,
                        )?,
                        rows: [q_dim, kv_dim, kv_dim],
                    }
                } else {
                    SharedInput::Apart([
                        linear(&format!("{p}.self_attn.q_proj.weight"), q_dim, hidden)?,
                        linear(&format!("{p}.self_attn.k_proj.weight"), kv_dim, hidden)?,
                        linear(&format!("{p}.self_attn.v_proj.weight"), kv_dim, hidden)?,
                    ])
                },
                qkv_bias: c
                    .qkv_bias()
                    .then(|| -> Result<_, Error> {
                        Ok([
                            vector(&format!("{p}.self_attn.q_proj.bias"), q_dim)?,
                            vector(&format!("{p}.self_attn.k_proj.bias"), kv_dim)?,
                            vector(&format!("{p}.self_attn.v_proj.bias"), kv_dim)?,
                        ])
                    })
                    .transpose()?,
                q_norm: qk_norm
                    .then(|| norm(&format!("{p}.self_attn.q_norm.weight"), hd))
                    .transpose()?,
                k_norm: qk_norm
                    .then(|| norm(&format!("{p}.self_attn.k_norm.weight"), hd))
                    .transpose()?,
                wo: linear(&format!("{p}.self_attn.o_proj.weight"), hidden, q_dim)?,
                wo_bias: gpt_oss
                    .map(|_| vector(&format!("{p}.self_attn.o_proj.bias"), hidden))
                    .transpose()?,
                sinks: gpt_oss
                    .map(|_| vector(&format!("{p}.self_attn.sinks"), c.num_attention_heads))
                    .transpose()?,
                // Gemma's post_attention_layernorm norms attention's output; its MLP's input
                // norm is pre_feedforward_layernorm.
                post_attn_norm: gemma3
                    .then(|| norm(&format!("{p}.post_attention_layernorm.weight"), hidden))
                    .transpose()?,
                ffn_norm: if gemma3 {
                    norm(&format!("{p}.pre_feedforward_layernorm.weight"), hidden)?
                } else {
                    vector(&format!("{p}.post_attention_layernorm.weight"), hidden)?
                },
                post_ffn_norm: gemma3
                    .then(|| norm(&format!("{p}.post_feedforward_layernorm.weight"), hidden))
                    .transpose()?,
                ffn: match c.moe.as_ref().filter(|m| m.sparse_layers[i]) {
                    Some(m) => FeedForward::Experts(moe::Experts::load(
                        &p,
                        hidden,
                        m,
                        experts_kind,
                        &linear,
                        &vector,
                    )?),
                    None => FeedForward::Dense {
                        gate_up: if phi3 {
                            SharedInput::Fused {
                                matrix: linear(
                                    &format!("{p}.mlp.gate_up_proj.weight"),
                                    2 * c.intermediate_size,
                                    hidden,
                                )?,
                                rows: [c.intermediate_size; 2],
                            }
                        } else {
                            SharedInput::Apart([
                                linear(
                                    &format!("{p}.mlp.gate_proj.weight"),
                                    c.intermediate_size,
                                    hidden,
                                )?,
                                linear(
                                    &format!("{p}.mlp.up_proj.weight"),
                                    c.intermediate_size,
                                    hidden,
                                )?,
                            ])
                        },
                        w_down: linear(
                            &format!("{p}.mlp.down_proj.weight"),
                            hidden,
                            c.intermediate_size,
                        )?,
                    },
                },
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
            layers,
            norm: norm("model.norm.weight", hidden)?,
            lm_head: linear(head_name, c.vocab_size, hidden)?,
            lfm2: None,
        })
    }

    /// Parameters counted the way model cards count them (a tied head counted once).
    pub(crate) fn parameter_count(&self, tied: bool) -> usize {
        let size = |l: &Linear<'_>| l.rows() * l.cols();
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                l.attn_norm.len()
                    + l.ffn_norm.len()
                    + l.q_norm.as_ref().map_or(0, Vec::len)
                    + l.k_norm.as_ref().map_or(0, Vec::len)
                    + l.post_attn_norm.as_ref().map_or(0, Vec::len)
                    + l.post_ffn_norm.as_ref().map_or(0, Vec::len)
                    + l.qkv_bias
                        .as_ref()
                        .map_or(0, |b| b.iter().map(Vec::len).sum())
                    + l.qkv.parameters()
                    + l.ffn.parameters()
                    + size(&l.wo)
                    + l.wo_bias.as_ref().map_or(0, Vec::len)
                    + l.sinks.as_ref().map_or(0, Vec::len)
            })
            .sum();
        let head = if tied { 0 } else { size(&self.lm_head) };
        let lfm2 = self.lfm2.as_ref().map_or(0, |l| l.parameter_count());
        size(&self.embed) + layers + lfm2 + self.norm.len() + head
    }
}

fn get<'w>(weights: &'w Weights, dir: &Path, name: &str) -> Result<Tensor<'w>, Error> {
    weights.get(name).map_err(|source| Error::Load {
        dir: dir.to_path_buf(),
        source,
    })
}

/// Which rows of logits [`forward`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Logits {
    /// None (a prefill chunk that is not the last).
    None,
    /// Only the last token's (generation).
    Last,
    /// Every token's (verification).
    All,
    /// No logits: the last token's final normed hidden state, into `state.hidden` (a decoder
    /// embedding model's vector before normalization; see [`last_token_embedding`]).
    LastHidden,
}

/// Activation buffers for up to [`MAX_CHUNK`] tokens, allocated once, plus the RoPE table.
#[derive(Debug)]
pub(crate) struct RunState {
    x: Vec<f32>,                   // (chunk, hidden) residual stream
    xb: Vec<f32>,                  // (chunk, hidden) normed input of a block
    xb2: Vec<f32>,                 // (chunk, hidden) output of a block
    q: Vec<f32>,                   // (chunk, n_heads * head_dim)
    k: Vec<f32>,                   // (chunk, n_kv_heads * head_dim)
    v: Vec<f32>,                   // (chunk, n_kv_heads * head_dim)
    attn: Vec<f32>,                // (chunk, n_heads * head_dim) attention output
    gate: Vec<f32>,                // (chunk, intermediate)
    up: Vec<f32>,                  // (chunk, intermediate)
    rope: RopeTable,               // (context, head_dim / 2)
    rope_local: Option<RopeTable>, // Gemma 3's local layers' (plain RoPE, their own base)
    fused: Vec<f32>,               // (chunk, fused rows) Phi-3's fused matmuls; empty otherwise
    bcx: Vec<f32>,                 // (chunk, 3 * hidden) LFM2's B, C, x; empty otherwise
    moe: Option<moe::MoeState>,    // Qwen3-MoE's and gpt-oss's experts' buffers
    pub(crate) logits: Vec<f32>,   // (rows, vocab), rows = 1 or chunk
    hidden: Vec<f32>,              // (hidden) for Logits::LastHidden
}

impl RunState {
    /// Buffers for `config` with a context of `context` positions.
    pub(crate) fn new(c: &ModelConfig, context: usize) -> Self {
        let (q_dim, kv_dim) = (
            c.num_attention_heads * c.head_dim,
            c.num_key_value_heads * c.head_dim,
        );
        let rope = RopeTable::new(c.rope_theta, c.rotary_dim(), &c.rope_scaling, context)
            .interleaved(c.rope_interleaved);
        let rope_local = c.gemma3.as_ref().map(|g| {
            RopeTable::new(g.local_rope_theta, c.head_dim, &RopeScaling::None, context)
                .interleaved(c.rope_interleaved)
        });
        RunState {
            x: vec![0.0; MAX_CHUNK * c.hidden_size],
            xb: vec![0.0; MAX_CHUNK * c.hidden_size],
            xb2: vec![0.0; MAX_CHUNK * c.hidden_size],
            q: vec![0.0; MAX_CHUNK * q_dim],
            k: vec![0.0; MAX_CHUNK * kv_dim],
            v: vec![0.0; MAX_CHUNK * kv_dim],
            attn: vec![0.0; MAX_CHUNK * q_dim],
            gate: vec![0.0; MAX_CHUNK * c.intermediate_size],
            up: vec![0.0; MAX_CHUNK * c.intermediate_size],
            rope,
            rope_local,
            fused: match c.family {
                Family::Phi3 => {
                    vec![0.0; MAX_CHUNK * (q_dim + 2 * kv_dim).max(2 * c.intermediate_size)]
                }
                _ => Vec::new(),
            },
            bcx: match c.lfm2 {
                Some(_) => vec![0.0; MAX_CHUNK * 3 * c.hidden_size],
                None => Vec::new(),
            },
            moe: c.moe.as_ref().map(|p| moe::MoeState::new(c.hidden_size, p)),
            logits: Vec::new(),
            hidden: Vec::new(),
        }
    }
}

/// Runs `tokens` (at most [`MAX_CHUNK`]) at positions `start..start + tokens.len()`, writing their
/// keys and values into `cache` and the requested logits into `state.logits`, with `cpu`'s
/// threads and kernels. The caller checks that token ids are in range and the positions fit in
/// the cache.
#[allow(clippy::too_many_arguments)] // the model, its state and the CPU; then the tokens
pub(crate) fn forward(
    c: &ModelConfig,
    w: &TransformerWeights<'_>,
    s: &mut RunState,
    cache: &mut KvCache,
    cpu: &CpuContext,
    tokens: &[u32],
    start: usize,
    logits: Logits,
) {
    let n = tokens.len();
    debug_assert!(n > 0 && n <= MAX_CHUNK && start + n <= cache.capacity());
    if let Some(lw) = &w.lfm2 {
        return lfm2::forward(c, w, lw, s, cache, cpu, tokens, start, logits);
    }
    let (dim, hd, eps) = (c.hidden_size, c.head_dim, c.rms_norm_eps);
    let (n_heads, n_kv) = (c.num_attention_heads, c.num_key_value_heads);
    let (q_dim, kv_dim, inter) = (n_heads * hd, n_kv * hd, c.intermediate_size);
    let gemma3 = c.gemma3.as_ref();
    let scale = match gemma3 {
        Some(g) => g.query_pre_attn_scalar.powf(-0.5) as f32,
        None => 1.0 / (hd as f32).sqrt(),
    };
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

    // x = embed[token] (Gemma 3: times √hidden)                   (n, dim)
    for (t, &token) in tokens.iter().enumerate() {
        w.embed
            .row_f32(token as usize, &mut x[t * dim..(t + 1) * dim]);
    }
    if let Some(g) = gemma3 {
        x.iter_mut().for_each(|v| *v *= g.embed_scale);
    }

    for (l, layer) in w.layers.iter().enumerate() {
        let _span = tracing::trace_span!("layer", l).entered();
        // h = rmsnorm(x); q, k, v = h Wq^T, h Wk^T, h Wv^T        (n, q_dim), (n, kv_dim) x2
        rmsnorm_rows(xb, x, &layer.attn_norm, eps);
        layer
            .qkv
            .matmul(cpu, xb, n, [&mut *q, &mut *k, &mut *v], &mut s.fused);

        // Qwen2, gpt-oss: q, k and v biases.
        if let Some([bq, bk, bv]) = &layer.qkv_bias {
            for (out, bias) in [(&mut *q, bq), (&mut *k, bk), (&mut *v, bv)] {
                for row in out.chunks_exact_mut(bias.len()) {
                    add_in_place(row, bias);
                }
            }
        }

        // Qwen3, Gemma 3: per-head RMSNorm of q and k, before RoPE.
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            rmsnorm_rows_in_place(q, qn, eps);
            rmsnorm_rows_in_place(k, kn, eps);
        }

        // Gemma 3's local layers: a sliding window and their own RoPE; Phi-3's window, if any,
        // on every layer; gpt-oss's sliding layers' window.
        let window = gemma3
            .filter(|g| g.sliding_layers[l])
            .map(|g| g.sliding_window)
            .or(c.phi3.as_ref().and_then(|p| p.sliding_window))
            .or(c
                .gpt_oss
                .as_ref()
                .filter(|g| g.sliding_layers[l])
                .map(|g| g.sliding_window));
        let rope = match (window, &s.rope_local) {
            (Some(_), Some(local)) => local,
            _ => &s.rope,
        };

        // RoPE on every head of q and k, then store k, v at their positions.
        for t in 0..n {
            let pos = start + t;
            for head in q[t * q_dim..(t + 1) * q_dim].chunks_exact_mut(hd) {
                rope.rotate(head, pos);
            }
            for head in k[t * kv_dim..(t + 1) * kv_dim].chunks_exact_mut(hd) {
                rope.rotate(head, pos);
            }
            cache.store(
                l,
                pos,
                &k[t * kv_dim..(t + 1) * kv_dim],
                &v[t * kv_dim..(t + 1) * kv_dim],
            );
        }

        // Causal attention: query head h reads KV head h / (n_heads / n_kv), never replicated;
        // one pool job per (token, KV head) streams that head's cache once for its group.
        let shape = AttentionShape {
            heads: n_heads,
            kv_heads: n_kv,
            head_dim: hd,
            scale,
            window,
        };
        // gpt-oss: each head's sink logit joins its softmax.
        let sinks = layer.sinks.as_deref();
        attention::causal_attention_with_sinks(cpu, shape, sinks, q, n, start, cache, l, attn);

        // x = x + attn Wo^T (+ bo, gpt-oss) (Gemma 3: rmsnorm(attn Wo^T))   (n, dim)
        layer.wo.matmul(cpu, attn, n, xb2);
        if let Some(bias) = &layer.wo_bias {
            for row in xb2.chunks_exact_mut(dim) {
                add_in_place(row, bias);
            }
        }
        if let Some(post) = &layer.post_attn_norm {
            rmsnorm_rows_in_place(xb2, post, eps);
        }
        add_in_place(x, xb2);

        // x = x + (silu(h Wg^T) * (h Wu^T)) Wd^T, h = rmsnorm(x)   (n, inter) -> (n, dim)
        // (Qwen3-MoE's sparse layers: the chosen experts' sum, see `moe`.)
        rmsnorm_rows(xb, x, &layer.ffn_norm, eps);
        match &layer.ffn {
            FeedForward::Dense { gate_up, w_down } => {
                gate_up.matmul(cpu, xb, n, [&mut *gate, &mut *up], &mut s.fused);
                // In pieces over the pool: the exponentials are a visible share of a decode
                // step. Gemma 3: GELU-tanh in place of SiLU.
                const PIECE: usize = 1024;
                let activation = if gemma3.is_some() {
                    gelu_tanh_mul
                } else {
                    silu_mul
                };
                cpu.pool().for_each_piece_mut(gate, PIECE, &|i, gate| {
                    activation(cpu.level(), gate, &up[i * PIECE..][..gate.len()]);
                });
                w_down.matmul(cpu, gate, n, xb2);
            }
            FeedForward::Experts(experts) => {
                let state = s
                    .moe
                    .as_mut()
                    .expect("a mixture-of-experts model has the experts' buffers");
                experts.forward(cpu, xb, n, xb2, state);
            }
        }
        if let Some(post) = &layer.post_ffn_norm {
            rmsnorm_rows_in_place(xb2, post, eps);
        }
        add_in_place(x, xb2);
    }

    output(c, w, s, cpu, n, logits);
}

/// The end of a pass over `n` tokens: the final norm of the residual stream `state.x`, and the
/// logits (or hidden state) `logits` asks for, with `cpu`.
fn output(
    c: &ModelConfig,
    w: &TransformerWeights<'_>,
    s: &mut RunState,
    cpu: &CpuContext,
    n: usize,
    logits: Logits,
) {
    let (dim, eps) = (c.hidden_size, c.rms_norm_eps);
    let (x, xb) = (&s.x[..n * dim], &mut s.xb[..n * dim]);
    // logits = rmsnorm(x, norm) lm_head^T                          (rows, vocab)
    let first = match logits {
        Logits::None => return,
        Logits::Last | Logits::LastHidden => n - 1,
        Logits::All => 0,
    };
    let rows = n - first;
    rmsnorm_rows(&mut xb[..rows * dim], &x[first * dim..], &w.norm, eps);
    if logits == Logits::LastHidden {
        s.hidden.clear();
        s.hidden.extend_from_slice(&xb[..dim]);
        return;
    }
    s.logits.resize(rows * c.vocab_size, 0.0);
    w.lm_head
        .matmul(cpu, &xb[..rows * dim], rows, &mut s.logits);
    // logits = cap tanh(logits / cap), where the config asks (final_logit_softcapping).
    if let Some(cap) = c.gemma3.as_ref().and_then(|g| g.final_logit_softcapping) {
        let cap = cap as f32;
        s.logits
            .iter_mut()
            .for_each(|v| *v = (*v / cap).tanh() * cap);
    }
}

/// Last-token pooling, a decoder embedding model's vector of a text (Qwen3-Embedding's): runs
/// `tokens` (the text's, ending with the token whose state is the vector, `<|endoftext|>`) from
/// position 0 in chunks of [`MAX_CHUNK`], overwriting the start of `cache`, and returns the
/// final normed hidden state at the last token, L2-normalized. The head is never computed. The
/// caller checks the ids and that `tokens` fits in the cache.
pub(crate) fn last_token_embedding(
    c: &ModelConfig,
    w: &TransformerWeights<'_>,
    s: &mut RunState,
    cache: &mut KvCache,
    cpu: &CpuContext,
    tokens: &[u32],
) -> Vec<f32> {
    let chunks = tokens.chunks(MAX_CHUNK).len();
    for (i, chunk) in tokens.chunks(MAX_CHUNK).enumerate() {
        let mode = if i + 1 == chunks {
            Logits::LastHidden
        } else {
            Logits::None
        };
        forward(c, w, s, cache, cpu, chunk, i * MAX_CHUNK, mode);
    }
    pooling::normalize(s.hidden.clone())
}

/// `out = weight * (x / sqrt(mean(x^2) + eps))` for each row of `x` (row length = weight length).
fn rmsnorm_rows(out: &mut [f32], x: &[f32], weight: &[f32], eps: f64) {
    for (o, row) in out
        .chunks_exact_mut(weight.len())
        .zip(x.chunks_exact(weight.len()))
    {
        let inv = inv_rms(row, eps);
        for ((oi, xi), wi) in o.iter_mut().zip(row).zip(weight) {
            *oi = wi * (xi * inv);
        }
    }
}

/// Per-head RMSNorm: each `weight.len()`-sized chunk of `x` normalized in place.
fn rmsnorm_rows_in_place(x: &mut [f32], weight: &[f32], eps: f64) {
    for row in x.chunks_exact_mut(weight.len()) {
        let inv = inv_rms(row, eps);
        for (xi, wi) in row.iter_mut().zip(weight) {
            *xi = wi * (*xi * inv);
        }
    }
}

/// `1 / sqrt(mean(x^2) + eps)`; the sum is taken in f64 so its rounding is below f32's.
fn inv_rms(x: &[f32], eps: f64) -> f32 {
    let mean = x.iter().map(|v| f64::from(*v) * f64::from(*v)).sum::<f64>() / x.len() as f64;
    let variance = mean as f32 + eps as f32;
    1.0 / variance.sqrt()
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_scales_to_unit_rms_times_weight() {
        let mut out = [0.0; 2];
        rmsnorm_rows(&mut out, &[3.0, 4.0], &[1.0, 2.0], 0.0);
        let rms = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / rms).abs() < 1e-6 && (out[1] - 8.0 / rms).abs() < 1e-6);
    }
}
