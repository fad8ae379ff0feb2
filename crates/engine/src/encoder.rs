//! A BERT encoder (`BertModel`, e.g. all-MiniLM-L6-v2), computed as Hugging Face transformers
//! computes it: word + position + token-type embeddings and a LayerNorm, then layers of
//! bidirectional multi-head self-attention and a GELU (erf) feed-forward, each closed by a
//! residual and a LayerNorm (post-LN). The output is the last layer's hidden state of every token.
//!
//! Weights are f32 copies of the safetensors tensors (BF16/F16/F32 read exactly): the model is
//! small (all-MiniLM-L6-v2 holds 22.7 M weights, 91 MB) and the Q4_1/Q8 kernels would round its
//! activations to int8, which an embedding checked against the reference at cosine 0.9999 does
//! not need. The matmuls run on the model's thread pool in pieces of whole tokens.
//!
//! Several texts run in one pass without padding: their tokens are stacked for every matmul and
//! each text attends only to its own tokens. That is what the padded batch with an attention mask
//! of transformers computes for each text, without the work on padding.

use std::path::Path;

use q4nx::{Tensor, Weights};
use serde::Deserialize;

use crate::cpu::pool::SharedMut;
use crate::cpu::{CpuContext, KernelLevel};
use crate::Error;

/// The fields of a BERT `config.json` the forward pass uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct BertConfig {
    /// `"bert"`.
    pub model_type: String,
    /// Word-piece vocabulary size.
    pub vocab_size: usize,
    /// Width of the hidden state (and of the embedding it yields).
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer (hidden_size is a multiple of it).
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// Positions the position embedding has.
    pub max_position_embeddings: usize,
    /// Rows of the token-type embedding (every token here is type 0).
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// Only `"gelu"` (the erf form) is computed.
    #[serde(default = "gelu")]
    pub hidden_act: String,
    /// Only `"absolute"` is computed.
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn gelu() -> String {
    "gelu".into()
}

fn absolute() -> String {
    "absolute".into()
}

/// Largest `config.json` read (a real one is under 1 KB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Largest width, layer count and vocabulary accepted from a config: far above any BERT
/// encoder, low enough that the buffers they size cannot overflow.
const MAX_DIM: usize = 1 << 16;
const MAX_VOCAB: usize = 1 << 20;

impl BertConfig {
    /// Reads and checks `config.json` of the folder `dir`.
    pub(crate) fn from_dir(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("config.json");
        let bad = |reason: String| Error::invalid_model(dir, reason);
        let len = std::fs::metadata(&path)
            .map_err(|e| bad(format!("cannot read config.json: {e}")))?
            .len();
        if len > MAX_CONFIG_BYTES {
            return Err(bad(format!(
                "config.json is {len} bytes; a BERT config is under {MAX_CONFIG_BYTES}"
            )));
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| bad(format!("cannot read config.json: {e}")))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("config.json is not valid JSON: {e}")))?;
        // The model type first: a decoder's config fails on it, not on a missing BERT field.
        let model_type = json.get("model_type").and_then(|t| t.as_str());
        if model_type != Some("bert") {
            return Err(bad(format!(
                "config.json says model_type {model_type:?}; the encoder runs BERT models (\"bert\")"
            )));
        }
        let config: BertConfig = serde_json::from_value(json)
            .map_err(|e| bad(format!("config.json is not a BERT config: {e}")))?;
        config.check().map_err(bad)?;
        Ok(config)
    }

    fn check(&self) -> Result<(), String> {
        if self.model_type != "bert" {
            return Err(format!(
                "config.json says model_type {:?}; the encoder runs BERT models (\"bert\")",
                self.model_type
            ));
        }
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported; the encoder computes \"gelu\" (erf)",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported; the encoder computes \"absolute\"",
                self.position_embedding_type
            ));
        }
        let dims = [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (name, value) in dims {
            if value == 0 || value > MAX_DIM {
                return Err(format!("{name} is {value}; expected 1..={MAX_DIM}"));
            }
        }
        if self.max_position_embeddings < 3 {
            return Err(format!(
                "max_position_embeddings is {}; a text needs at least 3 ([CLS], a word, [SEP])",
                self.max_position_embeddings
            ));
        }
        if self.vocab_size == 0 || self.vocab_size > MAX_VOCAB {
            return Err(format!(
                "vocab_size is {}; expected 1..={MAX_VOCAB}",
                self.vocab_size
            ));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps < 1.0) {
            return Err(format!(
                "layer_norm_eps is {}; expected a small positive number",
                self.layer_norm_eps
            ));
        }
        Ok(())
    }

    fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// A dense layer `y = x W^T + b`, `W` row-major `[rows, cols]` (HF orientation).
#[derive(Debug)]
struct Dense {
    rows: usize,
    cols: usize,
    weight: Vec<f32>, // (rows, cols)
    bias: Vec<f32>,   // (rows)
}

/// `y = (x - mean) / sqrt(var + eps) * weight + bias` over each row.
#[derive(Debug)]
struct LayerNorm {
    weight: Vec<f32>, // (hidden)
    bias: Vec<f32>,   // (hidden)
}

#[derive(Debug)]
struct LayerWeights {
    query: Dense,           // (hidden, hidden)
    key: Dense,             // (hidden, hidden)
    value: Dense,           // (hidden, hidden)
    attn_out: Dense,        // (hidden, hidden)
    attn_norm: LayerNorm,   // (hidden)
    intermediate: Dense,    // (intermediate, hidden)
    output: Dense,          // (hidden, intermediate)
    output_norm: LayerNorm, // (hidden)
}

/// Every weight of a BERT encoder, as f32.
#[derive(Debug)]
pub(crate) struct BertWeights {
    word: Vec<f32>,       // (vocab, hidden)
    position: Vec<f32>,   // (max_positions, hidden)
    token_type: Vec<f32>, // (type_vocab, hidden); row 0 is every token's
    embed_norm: LayerNorm,
    layers: Vec<LayerWeights>,
}

impl BertWeights {
    /// Reads the weights of `c` from `weights` (tensor names as `BertModel` saves them:
    /// `embeddings.word_embeddings.weight`, `encoder.layer.{i}.attention.self.query.weight`...).
    pub(crate) fn load(weights: &Weights, c: &BertConfig, dir: &Path) -> Result<Self, Error> {
        let h = c.hidden_size;
        let tensor = |name: &str, shape: &[usize]| -> Result<Vec<f32>, Error> {
            let t = weights.get(name).map_err(|source| Error::Load {
                dir: dir.to_path_buf(),
                source,
            })?;
            match t {
                Tensor::Dense(d) if d.shape == shape && d.dtype.is_float() => Ok(d.to_f32()),
                other => Err(Error::invalid_model(
                    dir,
                    format!(
                        "tensor {name} is {}; the encoder needs a float tensor of shape {shape:?}",
                        other.describe()
                    ),
                )),
            }
        };
        let dense = |prefix: &str, rows: usize, cols: usize| -> Result<Dense, Error> {
            Ok(Dense {
                rows,
                cols,
                weight: tensor(&format!("{prefix}.weight"), &[rows, cols])?,
                bias: tensor(&format!("{prefix}.bias"), &[rows])?,
            })
        };
        let norm = |prefix: &str| -> Result<LayerNorm, Error> {
            Ok(LayerNorm {
                weight: tensor(&format!("{prefix}.weight"), &[h])?,
                bias: tensor(&format!("{prefix}.bias"), &[h])?,
            })
        };
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let p = format!("encoder.layer.{i}");
                Ok(LayerWeights {
                    query: dense(&format!("{p}.attention.self.query"), h, h)?,
                    key: dense(&format!("{p}.attention.self.key"), h, h)?,
                    value: dense(&format!("{p}.attention.self.value"), h, h)?,
                    attn_out: dense(&format!("{p}.attention.output.dense"), h, h)?,
                    attn_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                    intermediate: dense(
                        &format!("{p}.intermediate.dense"),
                        c.intermediate_size,
                        h,
                    )?,
                    output: dense(&format!("{p}.output.dense"), h, c.intermediate_size)?,
                    output_norm: norm(&format!("{p}.output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(BertWeights {
            word: tensor("embeddings.word_embeddings.weight", &[c.vocab_size, h])?,
            position: tensor(
                "embeddings.position_embeddings.weight",
                &[c.max_position_embeddings, h],
            )?,
            token_type: tensor(
                "embeddings.token_type_embeddings.weight",
                &[c.type_vocab_size, h],
            )?,
            embed_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// Number of weights.
    pub(crate) fn parameter_count(&self) -> usize {
        let dense = |d: &Dense| d.weight.len() + d.bias.len();
        let norm = |n: &LayerNorm| n.weight.len() + n.bias.len();
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                dense(&l.query)
                    + dense(&l.key)
                    + dense(&l.value)
                    + dense(&l.attn_out)
                    + norm(&l.attn_norm)
                    + dense(&l.intermediate)
                    + dense(&l.output)
                    + norm(&l.output_norm)
            })
            .sum();
        self.word.len()
            + self.position.len()
            + self.token_type.len()
            + norm(&self.embed_norm)
            + layers
    }
}

/// The last hidden state `(total, hidden)` of the texts whose token ids are `sequences`
/// (each already holding its `[CLS]` and `[SEP]`, each at most `max_position_embeddings`
/// long, every id below `vocab_size`: the caller checks), stacked in order.
pub(crate) fn forward(
    c: &BertConfig,
    w: &BertWeights,
    cpu: &CpuContext,
    sequences: &[&[u32]],
) -> Vec<f32> {
    let dim = c.hidden_size;
    let eps = c.layer_norm_eps;
    let n: usize = sequences.iter().map(|s| s.len()).sum();
    // Where each text's tokens start in the stack.
    let spans: Vec<(usize, usize)> = sequences
        .iter()
        .scan(0, |start, s| {
            let span = (*start, s.len());
            *start += s.len();
            Some(span)
        })
        .collect();

    // x = LayerNorm(word[id] + position[i] + token_type[0])       (n, dim)
    let mut x = vec![0.0f32; n * dim];
    for (seq, &(start, _)) in sequences.iter().zip(&spans) {
        for (i, &id) in seq.iter().enumerate() {
            let row = &mut x[(start + i) * dim..(start + i + 1) * dim];
            let word = &w.word[id as usize * dim..][..dim];
            let position = &w.position[i * dim..][..dim];
            for (((r, a), b), t) in row.iter_mut().zip(word).zip(position).zip(&w.token_type) {
                *r = a + b + t;
            }
        }
    }
    layer_norm_rows(&mut x, &w.embed_norm, eps);

    let mut q = vec![0.0f32; n * dim];
    let mut k = vec![0.0f32; n * dim];
    let mut v = vec![0.0f32; n * dim];
    let mut context = vec![0.0f32; n * dim];
    let mut projected = vec![0.0f32; n * dim];
    let mut inner = vec![0.0f32; n * c.intermediate_size];
    for layer in &w.layers {
        // q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv          (n, dim) x3
        linear(cpu, &layer.query, &x, &mut q);
        linear(cpu, &layer.key, &x, &mut k);
        linear(cpu, &layer.value, &x, &mut v);
        // each head of each text attends to every token of that text  (n, dim)
        attention(cpu, c, &spans, &q, &k, &v, &mut context);
        // x = LayerNorm(context Wo^T + bo + x)
        linear(cpu, &layer.attn_out, &context, &mut projected);
        add_in_place(&mut x, &projected);
        layer_norm_rows(&mut x, &layer.attn_norm, eps);
        // x = LayerNorm(gelu(x Wi^T + bi) Wo2^T + bo2 + x)           (n, inter) -> (n, dim)
        linear(cpu, &layer.intermediate, &x, &mut inner);
        const PIECE: usize = 4096;
        cpu.pool()
            .for_each_piece_mut(&mut inner, PIECE, &|_, piece| {
                for value in piece {
                    *value = gelu_erf(*value);
                }
            });
        linear(cpu, &layer.output, &inner, &mut projected);
        add_in_place(&mut x, &projected);
        layer_norm_rows(&mut x, &layer.output_norm, eps);
    }
    x
}

/// Tokens per piece of a matmul: each row of W is read once per piece, from L1, for all of
/// them.
const TOKENS_PER_PIECE: usize = 8;

/// Independent sums per dot product, so the compiler keeps them in vector registers.
const LANES: usize = 16;

/// `out[t, r] = bias[r] + sum_k x[t, k] W[r, k]`, in pieces of [`TOKENS_PER_PIECE`] tokens
/// over the pool. Above the scalar level the same code is compiled for AVX2 (8-wide registers
/// instead of SSE's 4); the sums and their order are the same, so the results are too.
fn linear(cpu: &CpuContext, d: &Dense, x: &[f32], out: &mut [f32]) {
    let tokens = x.len() / d.cols;
    debug_assert_eq!(x.len(), tokens * d.cols);
    debug_assert_eq!(out.len(), tokens * d.rows);
    let avx2 = cpu.level() != KernelLevel::Scalar;
    cpu.pool()
        .for_each_piece_mut(out, TOKENS_PER_PIECE * d.rows, &|piece, out| {
            let first = piece * TOKENS_PER_PIECE;
            let count = out.len() / d.rows;
            let xs = &x[first * d.cols..(first + count) * d.cols];
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: every level above scalar is only chosen on a CPU with AVX2
                // (`CpuContext` checks its level is supported).
                unsafe { linear_piece_avx2(d, xs, out) };
                return;
            }
            let _ = avx2;
            linear_piece(d, xs, out);
        });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn linear_piece_avx2(d: &Dense, xs: &[f32], out: &mut [f32]) {
    linear_piece(d, xs, out);
}

/// One piece of [`linear`]: every row of W dotted with each token of `xs` while it is in L1.
#[inline(always)]
fn linear_piece(d: &Dense, xs: &[f32], out: &mut [f32]) {
    for (r, (w, b)) in d.weight.chunks_exact(d.cols).zip(&d.bias).enumerate() {
        for (t, xt) in xs.chunks_exact(d.cols).enumerate() {
            out[t * d.rows + r] = b + dot(xt, w);
        }
    }
}

/// `sum a[i] b[i]` in [`LANES`] independent sums (vectorized by the compiler; also the dense
/// matrices' product in `linear`).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (a_body, b_body) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_body
        .remainder()
        .iter()
        .zip(b_body.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (ca, cb) in a_body.zip(b_body) {
        for i in 0..LANES {
            acc[i] += ca[i] * cb[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Bidirectional self-attention of each text over its own tokens (`spans`: start and length in
/// the stack), one job per text and head: `softmax(q k^T / sqrt(head_dim)) v`.
fn attention(
    cpu: &CpuContext,
    c: &BertConfig,
    spans: &[(usize, usize)],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    context: &mut [f32],
) {
    let (dim, heads, hd) = (c.hidden_size, c.num_attention_heads, c.head_dim());
    let scale = 1.0 / (hd as f32).sqrt();
    let out = SharedMut(context.as_mut_ptr());
    cpu.pool().run(spans.len() * heads, &|job| {
        let (start, len) = spans[job / heads];
        let head = job % heads;
        let at = |token: usize| (start + token) * dim + head * hd;
        let mut scores = vec![0.0f32; len];
        let mut sum = vec![0.0f32; hd];
        for i in 0..len {
            let qi = &q[at(i)..][..hd];
            for (j, s) in scores.iter_mut().enumerate() {
                *s = dot(qi, &k[at(j)..][..hd]) * scale;
            }
            softmax(&mut scores);
            sum.iter_mut().for_each(|s| *s = 0.0);
            for (j, p) in scores.iter().enumerate() {
                for (s, vj) in sum.iter_mut().zip(&v[at(j)..][..hd]) {
                    *s += p * vj;
                }
            }
            let offset = (start + i) * dim + head * hd;
            for (d, value) in sum.iter().enumerate() {
                // SAFETY: `context` has `total * dim` elements (as q, k and v) and the columns
                // of one head of one text's tokens belong to this job alone; `run` returns
                // only after every job is done, while `context` is still borrowed mutably.
                unsafe { out.at(offset + d).write(*value) };
            }
        }
    });
}

/// `x = exp(x - max) / sum` in place.
fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for value in x.iter_mut() {
        *value = (*value - max).exp();
        sum += *value;
    }
    for value in x.iter_mut() {
        *value /= sum;
    }
}

/// GELU as transformers' `"gelu"`: `x / 2 * (1 + erf(x / sqrt(2)))`.
fn gelu_erf(x: f32) -> f32 {
    let x = f64::from(x);
    (0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))) as f32
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// LayerNorm of each row of `x` in place (mean and biased variance summed in f64).
fn layer_norm_rows(x: &mut [f32], norm: &LayerNorm, eps: f64) {
    let dim = norm.weight.len();
    for row in x.chunks_exact_mut(dim) {
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / dim as f64;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / dim as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for ((value, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *value = ((f64::from(*value) - mean) * inv) as f32 * w + b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_known_values() {
        // torch.nn.functional.gelu(torch.tensor([-3., -1., 0., 0.5, 2.])) in f32
        let expected = [-0.0040496886, -0.15865526, 0.0, 0.34573123, 1.9544997];
        for (x, want) in [-3.0, -1.0, 0.0, 0.5, 2.0].into_iter().zip(expected) {
            let got = gelu_erf(x);
            assert!(
                (got - want).abs() < 1e-6,
                "gelu({x}) = {got}, torch gives {want}"
            );
        }
    }

    #[test]
    fn dot_sums_every_element_including_the_tail() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b = vec![1.0f32; 37];
        assert_eq!(dot(&a, &b), (0..37).sum::<i32>() as f32);
    }

    #[test]
    fn every_level_computes_the_same_bits() {
        let d = Dense {
            rows: 5,
            cols: 40,
            weight: (0..200).map(|i| (i as f32 * 0.13).sin()).collect(),
            bias: vec![0.5, -0.25, 0.0, 1.0, 2.0],
        };
        let x: Vec<f32> = (0..11 * 40).map(|i| (i as f32 * 0.07).cos()).collect();
        let run = |level| {
            let mut out = vec![0.0f32; 11 * 5];
            linear(&CpuContext::new(2, level), &d, &x, &mut out);
            out
        };
        let scalar = run(KernelLevel::Scalar);
        for (t, row) in scalar.chunks_exact(5).enumerate() {
            for (r, value) in row.iter().enumerate() {
                let want = d.bias[r] + dot(&x[t * 40..][..40], &d.weight[r * 40..][..40]);
                assert_eq!(value.to_bits(), want.to_bits(), "token {t}, row {r}");
            }
        }
        for level in KernelLevel::supported() {
            assert_eq!(run(level), scalar, "{level} against scalar");
        }
    }

    #[test]
    fn layer_norm_centres_and_scales_each_row() {
        let norm = LayerNorm {
            weight: vec![2.0; 4],
            bias: vec![1.0; 4],
        };
        let mut x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 5.0, 5.0, 5.0];
        layer_norm_rows(&mut x, &norm, 1e-12);
        let inv = 1.0 / 1.25f64.sqrt();
        let want: Vec<f32> = [-1.5, -0.5, 0.5, 1.5]
            .iter()
            .map(|d| (d * inv) as f32 * 2.0 + 1.0)
            .chain([1.0; 4])
            .collect();
        assert_eq!(x, want, "a constant row normalizes to the bias");
    }

    #[test]
    fn config_refuses_other_models_and_activations() {
        let base = BertConfig {
            model_type: "bert".into(),
            vocab_size: 10,
            hidden_size: 8,
            num_hidden_layers: 1,
            num_attention_heads: 2,
            intermediate_size: 16,
            max_position_embeddings: 16,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: "gelu".into(),
            position_embedding_type: "absolute".into(),
        };
        assert!(base.check().is_ok());
        let llama = BertConfig {
            model_type: "llama".into(),
            ..base.clone()
        };
        assert!(llama.check().unwrap_err().contains("model_type"));
        let relu = BertConfig {
            hidden_act: "relu".into(),
            ..base.clone()
        };
        assert!(relu.check().unwrap_err().contains("relu"));
        let odd_heads = BertConfig {
            num_attention_heads: 3,
            ..base
        };
        assert!(odd_heads.check().unwrap_err().contains("multiple"));
    }
}
