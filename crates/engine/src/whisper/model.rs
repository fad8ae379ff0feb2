//! Whisper's network: the weights in f32, the encoder, and the decoder with its caches.
//!
//! Encoder: two convolutions of width 3 (the second with stride 2, both padded by 1 and
//! followed by GELU) computed as products with the frames laid side by side (`im2col`), the
//! position table added, pre-norm layers (self-attention over all 1500 frames, GELU MLP), a
//! final LayerNorm. Decoder: token embedding plus learned positions, pre-norm layers
//! (causal self-attention over a growing key/value cache, cross-attention over the encoder's
//! output whose keys and values are computed once per window, GELU MLP), a final LayerNorm,
//! and logits against the token embedding (tied, as in every Whisper). Attention scales the
//! scores by `1/sqrt(head_dim)`; LayerNorm's mean and variance are summed in f64 (epsilon
//! 1e-5); GELU is the erf form, as transformers' `"gelu"`.

use std::path::Path;

use super::config::WhisperConfig;
use super::matmul::{matmul, matmul_here, PackedMatrix, Rows};
use super::mel::FRAMES;
use super::source::TensorSource;
use crate::cpu::pool::SharedMut;
use crate::cpu::CpuContext;
use crate::Error;

/// A weight matrix and its bias.
pub(crate) struct Linear {
    w: PackedMatrix,
    b: Vec<f32>,
}

impl Linear {
    fn forward(&self, cpu: &CpuContext, x: &[f32], m: usize, out: &mut [f32]) {
        let rows = Rows {
            data: x,
            ld: self.w.k,
            m,
        };
        matmul(cpu, rows, &self.w, Some(&self.b), out, self.w.n);
    }
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct EncoderLayer {
    attn_norm: Norm,
    qkv: Linear,
    out: Linear,
    ffn_norm: Norm,
    fc1: Linear,
    fc2: Linear,
}

struct DecoderLayer {
    self_norm: Norm,
    self_qkv: Linear,
    self_out: Linear,
    cross_norm: Norm,
    cross_q: Linear,
    cross_kv: Linear,
    cross_out: Linear,
    ffn_norm: Norm,
    fc1: Linear,
    fc2: Linear,
}

/// All weights, widened to f32 and packed for [`matmul`].
pub(crate) struct WhisperWeights {
    conv1: Linear,
    conv2: Linear,
    encoder_positions: Vec<f32>,
    encoder: Vec<EncoderLayer>,
    encoder_norm: Norm,
    /// The token embedding, packed: rows are looked up from it, and it is the output layer.
    embedding: PackedMatrix,
    decoder_positions: Vec<f32>,
    decoder: Vec<DecoderLayer>,
    decoder_norm: Norm,
}

impl WhisperWeights {
    pub(crate) fn load(
        source: &TensorSource,
        c: &WhisperConfig,
        dir: &Path,
    ) -> Result<WhisperWeights, Error> {
        let d = c.d_model;
        let tensor = |name: &str, shape: &[usize]| source.tensor(dir, name, shape);
        let linear = |scope: &str, n: usize, k: usize| -> Result<Linear, Error> {
            let w = tensor(&format!("{scope}/weight"), &[n, k])?;
            Ok(Linear {
                w: PackedMatrix::from_rows(&w, n, k),
                b: tensor(&format!("{scope}/bias"), &[n])?,
            })
        };
        let norm = |scope: &str| -> Result<Norm, Error> {
            Ok(Norm {
                gamma: tensor(&format!("{scope}/gamma"), &[d])?,
                beta: tensor(&format!("{scope}/beta"), &[d])?,
            })
        };
        let conv = |name: &str, c_in: usize| -> Result<Linear, Error> {
            // [d, c_in, 3] row-major is [d, c_in * 3]: column c * 3 + tap.
            let w = tensor(&format!("encoder/{name}/weight"), &[d, c_in, 3])?;
            Ok(Linear {
                w: PackedMatrix::from_rows(&w, d, c_in * 3),
                b: tensor(&format!("encoder/{name}/bias"), &[d])?,
            })
        };
        let encoder = (0..c.encoder_layers)
            .map(|i| {
                let p = format!("encoder/layer_{i}");
                Ok(EncoderLayer {
                    attn_norm: norm(&format!("{p}/self_attention/layer_norm"))?,
                    qkv: linear(&format!("{p}/self_attention/linear_0"), 3 * d, d)?,
                    out: linear(&format!("{p}/self_attention/linear_1"), d, d)?,
                    ffn_norm: norm(&format!("{p}/ffn/layer_norm"))?,
                    fc1: linear(&format!("{p}/ffn/linear_0"), c.encoder_ffn, d)?,
                    fc2: linear(&format!("{p}/ffn/linear_1"), d, c.encoder_ffn)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let decoder = (0..c.decoder_layers)
            .map(|i| {
                let p = format!("decoder/layer_{i}");
                Ok(DecoderLayer {
                    self_norm: norm(&format!("{p}/self_attention/layer_norm"))?,
                    self_qkv: linear(&format!("{p}/self_attention/linear_0"), 3 * d, d)?,
                    self_out: linear(&format!("{p}/self_attention/linear_1"), d, d)?,
                    cross_norm: norm(&format!("{p}/attention/layer_norm"))?,
                    cross_q: linear(&format!("{p}/attention/linear_0"), d, d)?,
                    cross_kv: linear(&format!("{p}/attention/linear_1"), 2 * d, d)?,
                    cross_out: linear(&format!("{p}/attention/linear_2"), d, d)?,
                    ffn_norm: norm(&format!("{p}/ffn/layer_norm"))?,
                    fc1: linear(&format!("{p}/ffn/linear_0"), c.decoder_ffn, d)?,
                    fc2: linear(&format!("{p}/ffn/linear_1"), d, c.decoder_ffn)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let embedding = tensor("decoder/embeddings/weight", &[c.vocab_size, d])?;
        Ok(WhisperWeights {
            conv1: conv("conv1", c.n_mels)?,
            conv2: conv("conv2", d)?,
            encoder_positions: tensor(
                "encoder/position_encodings/encodings",
                &[c.max_source_positions, d],
            )?,
            encoder,
            encoder_norm: norm("encoder/layer_norm")?,
            embedding: PackedMatrix::from_rows(&embedding, c.vocab_size, d),
            decoder_positions: tensor(
                "decoder/position_encodings/encodings",
                &[c.max_target_positions, d],
            )?,
            decoder,
            decoder_norm: norm("decoder/layer_norm")?,
        })
    }

    pub(crate) fn parameter_count(&self) -> usize {
        let lin = |l: &Linear| l.w.len() + l.b.len();
        let norm = |n: &Norm| n.gamma.len() + n.beta.len();
        let enc: usize = self
            .encoder
            .iter()
            .map(|l| norm(&l.attn_norm) + lin(&l.qkv) + lin(&l.out) + norm(&l.ffn_norm))
            .sum::<usize>()
            + self
                .encoder
                .iter()
                .map(|l| lin(&l.fc1) + lin(&l.fc2))
                .sum::<usize>();
        let dec: usize = self
            .decoder
            .iter()
            .map(|l| {
                norm(&l.self_norm)
                    + lin(&l.self_qkv)
                    + lin(&l.self_out)
                    + norm(&l.cross_norm)
                    + lin(&l.cross_q)
                    + lin(&l.cross_kv)
                    + lin(&l.cross_out)
                    + norm(&l.ffn_norm)
                    + lin(&l.fc1)
                    + lin(&l.fc2)
            })
            .sum();
        lin(&self.conv1)
            + lin(&self.conv2)
            + self.encoder_positions.len()
            + enc
            + norm(&self.encoder_norm)
            + self.embedding.len()
            + self.decoder_positions.len()
            + dec
            + norm(&self.decoder_norm)
    }
}

/// LayerNorm of each `d`-row of `x` into `out` (mean and variance in f64, epsilon 1e-5).
fn layer_norm(x: &[f32], norm: &Norm, out: &mut [f32]) {
    let d = norm.gamma.len();
    for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
        let var = row
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / d as f64;
        let inv = 1.0 / (var + 1e-5).sqrt();
        for (((o, &v), g), b) in o.iter_mut().zip(row).zip(&norm.gamma).zip(&norm.beta) {
            *o = ((f64::from(v) - mean) * inv) as f32 * g + b;
        }
    }
}

/// GELU (erf form) in place, split over the pool.
fn gelu(cpu: &CpuContext, x: &mut [f32]) {
    cpu.pool().for_each_piece_mut(x, 16 * 1024, &|_, piece| {
        for v in piece {
            *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
        }
    });
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Softmax of a row in place (max subtracted; sums in f64).
fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// Keys and values of one head over a fixed set of positions (the encoder's frames), packed.
pub(crate) struct HeadKv {
    k: PackedMatrix,
    v: PackedMatrix,
}

/// Packs each head's keys and values from `kv` (rows of `ld` floats; keys at `k_at + h * hd`,
/// values at `v_at + h * hd`).
fn pack_heads(
    cpu: &CpuContext,
    kv: &[f32],
    rows: usize,
    ld: usize,
    (k_at, v_at): (usize, usize),
    heads: usize,
    hd: usize,
) -> Vec<HeadKv> {
    let mut packed: Vec<HeadKv> = (0..heads)
        .map(|_| HeadKv {
            k: PackedMatrix::zeroed(rows, hd),
            v: PackedMatrix::zeroed(hd, rows),
        })
        .collect();
    cpu.pool().for_each_piece_mut(&mut packed, 1, &|h, piece| {
        piece[0].k.pack_rows(&kv[k_at + h * hd..], ld);
        piece[0].v.pack_cols(&kv[v_at + h * hd..], ld);
    });
    packed
}

/// Attention of the rows of `q` (row `r` at `q[r * ldq ..]`, head `h` at `h * hd`) over the
/// packed keys and values of every head; writes `out` (`m` rows of `heads * hd`).
fn attention(cpu: &CpuContext, q: &[f32], ldq: usize, m: usize, kv: &[HeadKv], out: &mut [f32]) {
    let heads = kv.len();
    let hd = kv[0].k.k;
    let positions = kv[0].k.n;
    let d = heads * hd;
    let scale = 1.0 / (hd as f32).sqrt();
    const BLOCK: usize = 96;
    let blocks = m.div_ceil(BLOCK);
    let level = cpu.level();
    let shared = SharedMut(out.as_mut_ptr());
    assert!(out.len() >= m * d, "attention: output too short");
    cpu.pool().run(heads * blocks, &|chunk| {
        let (h, b) = (chunk / blocks, chunk % blocks);
        let rows = b * BLOCK..m.min((b + 1) * BLOCK);
        let n = rows.len();
        let mut scores = vec![0.0f32; n * positions];
        let a = Rows {
            data: &q[rows.start * ldq + h * hd..],
            ld: ldq,
            m: n,
        };
        matmul_here(level, a, &kv[h].k, None, &mut scores, positions);
        for row in scores.chunks_exact_mut(positions) {
            for v in row.iter_mut() {
                *v *= scale;
            }
            softmax(row);
        }
        let mut head_out = vec![0.0f32; n * hd];
        let p = Rows {
            data: &scores,
            ld: positions,
            m: n,
        };
        matmul_here(level, p, &kv[h].v, None, &mut head_out, hd);
        for (i, row) in head_out.chunks_exact(hd).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                // SAFETY: (row, head) pairs are disjoint between chunks, inside `out`.
                unsafe { shared.at((rows.start + i) * d + h * hd + j).write(v) };
            }
        }
    });
}

/// The encoder's output for one window's features (`n_mels` rows of 3000 frames).
pub(crate) fn encode(
    cpu: &CpuContext,
    w: &WhisperWeights,
    c: &WhisperConfig,
    features: &[f32],
) -> Result<Vec<f32>, Error> {
    let (d, n_mels) = (c.d_model, c.n_mels);
    if features.len() != n_mels * FRAMES {
        return Err(Error::InvalidSampling {
            reason: format!(
                "Whisper's features are {n_mels} x {FRAMES} values; {} were given",
                features.len()
            ),
        });
    }
    let frames = FRAMES.div_ceil(2);
    if frames != c.max_source_positions {
        return Err(Error::InvalidModel {
            dir: Default::default(),
            reason: format!(
                "the encoder has {} positions, but 30 s of audio makes {frames}",
                c.max_source_positions
            ),
        });
    }
    // conv1: [3000, n_mels * 3] frames side by side (padding 1).
    let mut cols = vec![0.0f32; FRAMES * n_mels * 3];
    for t in 0..FRAMES {
        for m in 0..n_mels {
            for tap in 0..3 {
                let src = t + tap;
                if (1..=FRAMES).contains(&src) {
                    cols[t * n_mels * 3 + m * 3 + tap] = features[m * FRAMES + src - 1];
                }
            }
        }
    }
    let mut h1 = vec![0.0f32; FRAMES * d];
    w.conv1.forward(cpu, &cols, FRAMES, &mut h1);
    gelu(cpu, &mut h1);
    // conv2, stride 2: output t reads frames 2t - 1, 2t, 2t + 1.
    let mut cols = vec![0.0f32; frames * d * 3];
    for t in 0..frames {
        for tap in 0..3 {
            let src = 2 * t + tap;
            if (1..=FRAMES).contains(&src) {
                let row = &h1[(src - 1) * d..src * d];
                for (ch, &v) in row.iter().enumerate() {
                    cols[t * d * 3 + ch * 3 + tap] = v;
                }
            }
        }
    }
    drop(h1);
    let mut x = vec![0.0f32; frames * d];
    w.conv2.forward(cpu, &cols, frames, &mut x);
    drop(cols);
    gelu(cpu, &mut x);
    add(&mut x, &w.encoder_positions);

    let heads = c.encoder_heads;
    let hd = d / heads;
    let mut y = vec![0.0f32; frames * d];
    let mut qkv = vec![0.0f32; frames * 3 * d];
    let mut attn = vec![0.0f32; frames * d];
    let mut hidden = vec![0.0f32; frames * c.encoder_ffn];
    for layer in &w.encoder {
        layer_norm(&x, &layer.attn_norm, &mut y);
        layer.qkv.forward(cpu, &y, frames, &mut qkv);
        let kv = pack_heads(cpu, &qkv, frames, 3 * d, (d, 2 * d), heads, hd);
        attention(cpu, &qkv, 3 * d, frames, &kv, &mut attn);
        layer.out.forward(cpu, &attn, frames, &mut y);
        add(&mut x, &y);
        layer_norm(&x, &layer.ffn_norm, &mut y);
        layer.fc1.forward(cpu, &y, frames, &mut hidden);
        gelu(cpu, &mut hidden);
        layer.fc2.forward(cpu, &hidden, frames, &mut y);
        add(&mut x, &y);
    }
    let mut out = vec![0.0f32; frames * d];
    layer_norm(&x, &w.encoder_norm, &mut out);
    Ok(out)
}

/// The decoder's state for one window: cross-attention keys/values and the self-attention cache.
pub(crate) struct DecoderState {
    cross: Vec<Vec<HeadKv>>,
    /// Per layer, `[position][d]` keys and values of the tokens read so far.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    position: usize,
    d: usize,
    heads: usize,
    max_positions: usize,
}

impl DecoderState {
    /// Computes every layer's cross-attention keys and values from the encoder's output.
    pub(crate) fn new(
        cpu: &CpuContext,
        w: &WhisperWeights,
        c: &WhisperConfig,
        encoded: &[f32],
    ) -> DecoderState {
        let d = c.d_model;
        let frames = encoded.len() / d;
        let heads = c.decoder_heads;
        let mut kv = vec![0.0f32; frames * 2 * d];
        let cross = w
            .decoder
            .iter()
            .map(|layer| {
                layer.cross_kv.forward(cpu, encoded, frames, &mut kv);
                pack_heads(cpu, &kv, frames, 2 * d, (0, d), heads, d / heads)
            })
            .collect();
        DecoderState {
            cross,
            keys: vec![Vec::with_capacity(c.max_target_positions * d); w.decoder.len()],
            values: vec![Vec::with_capacity(c.max_target_positions * d); w.decoder.len()],
            position: 0,
            d,
            heads,
            max_positions: c.max_target_positions,
        }
    }

    /// Reads `tokens` one after another; writes the logits after the last into `logits`.
    /// The caller keeps the position below the model's maximum and the ids in the vocabulary.
    pub(crate) fn feed(
        &mut self,
        cpu: &CpuContext,
        w: &WhisperWeights,
        tokens: &[u32],
        logits: &mut [f32],
    ) {
        let d = self.d;
        let hd = d / self.heads;
        let mut x = vec![0.0f32; d];
        let mut y = vec![0.0f32; d];
        let mut qkv = vec![0.0f32; 3 * d];
        let mut attn = vec![0.0f32; d];
        let mut hidden = vec![0.0f32; w.decoder.first().map_or(0, |l| l.fc1.w.n)];
        for &token in tokens {
            assert!(
                self.position < self.max_positions,
                "decoder: past its positions"
            );
            w.embedding.row(token as usize, &mut x);
            add(
                &mut x,
                &w.decoder_positions[self.position * d..(self.position + 1) * d],
            );
            for (i, layer) in w.decoder.iter().enumerate() {
                layer_norm(&x, &layer.self_norm, &mut y);
                layer.self_qkv.forward(cpu, &y, 1, &mut qkv);
                self.keys[i].extend_from_slice(&qkv[d..2 * d]);
                self.values[i].extend_from_slice(&qkv[2 * d..]);
                let n = self.position + 1;
                let scale = 1.0 / (hd as f32).sqrt();
                let mut scores = vec![0.0f32; n];
                for h in 0..self.heads {
                    let q = &qkv[h * hd..(h + 1) * hd];
                    for (t, s) in scores.iter_mut().enumerate() {
                        let k = &self.keys[i][t * d + h * hd..t * d + (h + 1) * hd];
                        *s = dot(q, k) * scale;
                    }
                    softmax(&mut scores);
                    let out = &mut attn[h * hd..(h + 1) * hd];
                    out.fill(0.0);
                    for (t, &p) in scores.iter().enumerate() {
                        let v = &self.values[i][t * d + h * hd..t * d + (h + 1) * hd];
                        for (o, &v) in out.iter_mut().zip(v) {
                            *o += p * v;
                        }
                    }
                }
                layer.self_out.forward(cpu, &attn, 1, &mut y);
                add(&mut x, &y);
                layer_norm(&x, &layer.cross_norm, &mut y);
                let mut q = vec![0.0f32; d];
                layer.cross_q.forward(cpu, &y, 1, &mut q);
                attention(cpu, &q, d, 1, &self.cross[i], &mut attn);
                layer.cross_out.forward(cpu, &attn, 1, &mut y);
                add(&mut x, &y);
                layer_norm(&x, &layer.ffn_norm, &mut y);
                layer.fc1.forward(cpu, &y, 1, &mut hidden);
                for v in hidden.iter_mut() {
                    *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
                }
                layer.fc2.forward(cpu, &hidden, 1, &mut y);
                add(&mut x, &y);
            }
            self.position += 1;
        }
        layer_norm(&x, &w.decoder_norm, &mut y);
        let rows = Rows {
            data: &y,
            ld: d,
            m: 1,
        };
        matmul(cpu, rows, &w.embedding, None, logits, w.embedding.n);
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0.0f32, |acc, (&x, &y)| acc + x * y)
}
