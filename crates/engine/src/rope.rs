//! Rotary position embedding: the table of cos/sin per position and frequency, and the
//! "rotate half" rotation of one head (element `i` pairs with `i + head_dim/2`), or, for q and
//! k rows stored as llama.cpp stores a `llama` model's (`rope_interleaved` in the config: a
//! linked GGUF), the rotation of adjacent pairs (`2i` with `2i + 1`, frequency `i`). The two
//! compute the same attention: the interleaved rows are the same rows in another order, the
//! same in q and k, and attention only takes dot products of q with k.
//!
//! The inverse frequencies are computed in f32, operation by operation, as transformers'
//! `modeling_rope_utils` computes them (so they round the same way), with `d = head_dim`,
//! `i = 0 .. d/2` and `θ = rope_theta`:
//!
//! - plain: `inv_i = 1 / θ^(2i/d)`.
//! - linear: `inv_i / factor`.
//! - llama3 (Llama 3.1/3.2): with `L = original_max_position_embeddings`,
//!   `wavelen_i = 2π / inv_i`, `low = L / low_freq_factor`, `high = L / high_freq_factor`:
//!   `wavelen_i < high` keeps `inv_i`; `wavelen_i > low` gives `inv_i / factor`; between them
//!   `s = (L / wavelen_i - low_freq_factor) / (high_freq_factor - low_freq_factor)` and
//!   `(1 - s) inv_i / factor + s inv_i`.
//! - yarn: `extra_i = 1 / θ^(2i/d)`, `inter_i = 1 / (factor θ^(2i/d))`; the correction range
//!   `c(n) = d ln(L / (2π n)) / (2 ln θ)`, `lo = max(floor c(beta_fast), 0)`,
//!   `hi = min(ceil c(beta_slow), d - 1)` (no floor/ceil when `truncate` is false);
//!   `ramp_i = clamp((i - lo) / (hi - lo), 0, 1)` (`hi` nudged by 0.001 if equal to `lo`) and
//!   `inv_i = inter_i ramp_i + extra_i (1 - ramp_i)`. cos and sin are multiplied by the
//!   attention factor (`0.1 ln(factor) + 1` unless the config gives it, or the ratio of the two
//!   mscales; resolved in [`q4nx::RopeScaling`]).
//! - rope_freqs (a GGUF's `rope_freqs.weight`, llama.cpp's form of llama3): `inv_i / factors_i`.
//! - longrope (Phi-3.5, Phi-4-mini): `inv_i = 1 / (ext_i θ^(2i/d))` with `ext` the short factors
//!   when the context the model is opened with is at most `original_max_position_embeddings`,
//!   the long ones otherwise, from position 0; cos and sin multiplied by the attention factor
//!   (`sqrt(1 + ln(s) / ln(L))`, `s = max_position_embeddings / L`, unless the config gives it;
//!   resolved in [`q4nx::RopeScaling`]) whichever list applies. Within the pretrained context
//!   this is exactly transformers. Beyond it, transformers switches lists by the length of the
//!   sequence so far (short up to `L` tokens, long after, and the keys already cached keep the
//!   short rotation), so one conversation's earlier tokens would be rotated one way and its
//!   later ones another, and a kept prompt prefix would depend on how long the answer grew; as
//!   llama.cpp does, the list is chosen once per opened context instead, so a model opened for
//!   a long context is consistent from its first token (and equals transformers on any
//!   sequence longer than `L` computed at once).
//!
//! Then `angle = position * inv_i` in f32, and its cos and sin. With a partial rotary factor
//! (Phi-3) `d` is the rotated width and only a head's first `d` elements turn; the rest pass.

use q4nx::RopeScaling;

/// cos/sin of every position's angles, `head_dim / 2` per position.
#[derive(Debug)]
pub(crate) struct RopeTable {
    half: usize,
    /// Pairs are adjacent (`2i`, `2i + 1`) instead of halves (`i`, `i + half`).
    interleaved: bool,
    cos: Vec<f32>, // (context, head_dim / 2)
    sin: Vec<f32>, // (context, head_dim / 2)
}

impl RopeTable {
    /// The table for positions `0..context` of heads of `head_dim` with base `theta`.
    /// `head_dim` is the rotated width (Phi-3: a part of each head; [`Self::rotate`] leaves the
    /// rest), and `context` also picks LongRoPE's list (see the module doc).
    pub(crate) fn new(theta: f64, head_dim: usize, scaling: &RopeScaling, context: usize) -> Self {
        let (inv_freq, attention_factor) = inv_freq(theta, head_dim, scaling, context);
        let half = head_dim / 2;
        let (mut cos, mut sin) = (
            Vec::with_capacity(context * half),
            Vec::with_capacity(context * half),
        );
        for position in 0..context {
            for f in &inv_freq {
                let angle = f64::from(position as f32 * f);
                cos.push(angle.cos() as f32 * attention_factor);
                sin.push(angle.sin() as f32 * attention_factor);
            }
        }
        RopeTable {
            half,
            interleaved: false,
            cos,
            sin,
        }
    }

    /// The same table rotating adjacent pairs when `interleaved` (see the module doc).
    pub(crate) fn interleaved(mut self, interleaved: bool) -> Self {
        self.interleaved = interleaved;
        self
    }

    /// Rotates one head to `position`: its first `head_dim` values (the table's), the rest
    /// left as they are (a partial rotary factor).
    pub(crate) fn rotate(&self, head: &mut [f32], position: usize) {
        let head = &mut head[..2 * self.half];
        let at = position * self.half;
        let (cos, sin) = (&self.cos[at..at + self.half], &self.sin[at..at + self.half]);
        if self.interleaved {
            for ((pair, c), s) in head.chunks_exact_mut(2).zip(cos).zip(sin) {
                let (x0, x1) = (pair[0], pair[1]);
                (pair[0], pair[1]) = (x0 * c - x1 * s, x1 * c + x0 * s);
            }
            return;
        }
        let (a, b) = head.split_at_mut(self.half);
        for (((x0, x1), c), s) in a.iter_mut().zip(b.iter_mut()).zip(cos).zip(sin) {
            (*x0, *x1) = (*x0 * c - *x1 * s, *x1 * c + *x0 * s);
        }
    }
}

/// The inverse frequencies and the factor cos/sin are multiplied by, for a model opened with
/// `context` positions (see the module doc).
fn inv_freq(theta: f64, head_dim: usize, scaling: &RopeScaling, context: usize) -> (Vec<f32>, f32) {
    let d = head_dim as f32;
    // θ^(2i/d), in f32 as torch computes `base ** (arange(0, d, 2).float() / d)`.
    let pos_freq: Vec<f32> = (0..head_dim / 2)
        .map(|i| (theta as f32).powf((2 * i) as f32 / d))
        .collect();
    let plain = || pos_freq.iter().map(|p| 1.0 / p);
    match scaling {
        RopeScaling::None => (plain().collect(), 1.0),
        RopeScaling::Linear { factor } => (plain().map(|f| f / *factor as f32).collect(), 1.0),
        RopeScaling::RopeFreqs { factors } => {
            (plain().zip(factors).map(|(f, k)| f / k).collect(), 1.0)
        }
        RopeScaling::LongRope {
            short_factor,
            long_factor,
            original_max_position_embeddings,
            attention_factor,
        } => {
            let ext = if context > *original_max_position_embeddings {
                long_factor
            } else {
                short_factor
            };
            // torch: 1.0 / (ext_factors * base ** inv_freq_shape).
            let scaled = pos_freq
                .iter()
                .zip(ext)
                .map(|(p, e)| 1.0 / (e * p))
                .collect();
            (scaled, *attention_factor as f32)
        }
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            let old = *original_max_position_embeddings as f64;
            let factor = *factor as f32;
            let low_wavelen = (old / low_freq_factor) as f32;
            let high_wavelen = (old / high_freq_factor) as f32;
            let span = (high_freq_factor - low_freq_factor) as f32;
            let scaled = plain()
                .map(|inv| {
                    // torch's `scalar / tensor` is `tensor.reciprocal() * scalar`.
                    let wavelen = (1.0 / inv) * std::f64::consts::TAU as f32;
                    let llama = if wavelen > low_wavelen {
                        inv / factor
                    } else {
                        inv
                    };
                    if wavelen < high_wavelen || wavelen > low_wavelen {
                        return llama;
                    }
                    let s = ((1.0 / wavelen) * old as f32 - *low_freq_factor as f32) / span;
                    (1.0 - s) * llama / factor + s * llama
                })
                .collect();
            (scaled, 1.0)
        }
        RopeScaling::Yarn {
            factor,
            original_max_position_embeddings,
            beta_fast,
            beta_slow,
            attention_factor,
            truncate,
        } => {
            let dim = head_dim as f64;
            let correction = |rotations: f64| {
                dim * (*original_max_position_embeddings as f64
                    / (rotations * std::f64::consts::TAU))
                    .ln()
                    / (2.0 * theta.ln())
            };
            let (mut lo, mut hi) = (correction(*beta_fast), correction(*beta_slow));
            if *truncate {
                (lo, hi) = (lo.floor(), hi.ceil());
            }
            let (lo, mut hi) = (lo.max(0.0), hi.min(dim - 1.0));
            if lo == hi {
                hi += 0.001;
            }
            let scaled = pos_freq
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let extrapolation = 1.0 / p;
                    let interpolation = 1.0 / (*factor as f32 * p);
                    let ramp = ((i as f32 - lo as f32) / (hi - lo) as f32).clamp(0.0, 1.0);
                    let keep = 1.0 - ramp;
                    interpolation * (1.0 - keep) + extrapolation * keep
                })
                .collect();
            (scaled, *attention_factor as f32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_at_position_zero_is_identity() {
        let table = RopeTable::new(5e6, 8, &RopeScaling::None, 2);
        let mut head = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        table.rotate(&mut head, 0);
        assert_eq!(head, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    }

    #[test]
    fn rotation_pairs_elements_across_the_halves() {
        // Frequency 0 is 1 rad per position: at position 1, (x0, x4) rotates by 1 rad.
        let table = RopeTable::new(10_000.0, 8, &RopeScaling::None, 2);
        let mut head = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        table.rotate(&mut head, 1);
        assert!((head[0] - 1f32.cos()).abs() < 1e-6 && (head[4] - 1f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn interleaved_rotation_is_the_halves_rotation_on_llama_cpps_row_order() {
        // llama.cpp stores element j * half + i of a head at 2 i + j.
        let table = RopeTable::new(10_000.0, 8, &RopeScaling::None, 4);
        let adjacent = RopeTable::new(10_000.0, 8, &RopeScaling::None, 4).interleaved(true);
        let hf: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).sin() + 0.1).collect();
        let mut stored = [0.0f32; 8];
        for (r, v) in hf.iter().enumerate() {
            stored[2 * (r % 4) + r / 4] = *v;
        }
        let mut hf = hf.clone();
        table.rotate(&mut hf, 3);
        adjacent.rotate(&mut stored, 3);
        for (r, v) in hf.iter().enumerate() {
            assert_eq!(stored[2 * (r % 4) + r / 4], *v, "element {r}");
        }
    }

    #[test]
    fn llama3_keeps_high_divides_low_and_ramps_between() {
        // head_dim 32, θ 5e5: wavelengths 6.3, 14.3, 32.4, ...; with L = 32, low 1, high 4 the
        // first is kept, the second smoothed and the rest divided by 8.
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 32,
        };
        let (plain, _) = inv_freq(5e5, 32, &RopeScaling::None, 1);
        let (scaled, factor) = inv_freq(5e5, 32, &scaling, 1);
        assert_eq!(factor, 1.0);
        assert_eq!(scaled[0], plain[0]);
        assert!(scaled[1] < plain[1] && scaled[1] > plain[1] / 8.0);
        for i in 2..16 {
            assert_eq!(scaled[i], plain[i] / 8.0);
        }
    }

    #[test]
    fn rope_freqs_divide_and_yarn_scales_cos_and_sin() {
        let factors: Vec<f32> = (0..4).map(|i| 1.0 + i as f32).collect();
        let (plain, _) = inv_freq(1e4, 8, &RopeScaling::None, 1);
        let (divided, _) = inv_freq(1e4, 8, &RopeScaling::RopeFreqs { factors }, 1);
        assert_eq!(divided[3], plain[3] / 4.0);
        let yarn = RopeScaling::Yarn {
            factor: 4.0,
            original_max_position_embeddings: 64,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: 1.5,
            truncate: true,
        };
        let table = RopeTable::new(1e4, 8, &yarn, 1);
        assert_eq!(
            table.cos, [1.5; 4],
            "position 0: cos 1 times the attention factor"
        );
    }

    #[test]
    fn longrope_picks_its_list_once_from_the_context_and_partial_rotation_leaves_the_rest() {
        let scaling = RopeScaling::LongRope {
            short_factor: vec![1.0, 2.0],
            long_factor: vec![4.0, 8.0],
            original_max_position_embeddings: 16,
            attention_factor: 1.25,
        };
        let (plain, _) = inv_freq(1e4, 4, &RopeScaling::None, 1);
        let (short, factor) = inv_freq(1e4, 4, &scaling, 16);
        assert_eq!((short[1], factor), (plain[1] / 2.0, 1.25));
        let (long, _) = inv_freq(1e4, 4, &scaling, 17);
        assert_eq!(long[1], plain[1] / 8.0);
        let table = RopeTable::new(1e4, 4, &scaling, 17);
        let mut head = [1.0, 1.0, 1.0, 1.0, 7.0, 9.0];
        table.rotate(&mut head, 3);
        assert_eq!(&head[4..], [7.0, 9.0], "unrotated tail");
        assert_ne!(head[0], 1.0);
    }

    /// transformers' inverse frequencies and attention factors for each scaling
    /// (`tests/fixtures/engine/rope-cases.json`, from `generate_llama3_qwen2.py`).
    #[test]
    fn inverse_frequencies_match_transformers() {
        let cases: serde_json::Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/engine/rope-cases.json"
        ))
        .unwrap();
        for case in cases.as_array().unwrap() {
            let config = q4nx::ModelConfig::from_json(&case["config"].to_string()).unwrap();
            let (inv, factor) =
                inv_freq(config.rope_theta, config.head_dim, &config.rope_scaling, 1);
            let want: Vec<f32> = case["inv_freq"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect();
            let name = &case["config"]["rope_parameters"];
            for (i, (a, b)) in inv.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= b.abs() * 2.0 * f32::EPSILON,
                    "{name}: inv_freq[{i}] {a} vs transformers' {b}"
                );
            }
            assert_eq!(inv.len(), want.len());
            let want_factor = case["attention_factor"].as_f64().unwrap() as f32;
            assert_eq!(factor, want_factor, "{name}: attention factor");
        }
    }
}
