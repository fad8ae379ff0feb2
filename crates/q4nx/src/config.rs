//! `config.json` of the Llama, Qwen2, Qwen3, Qwen3-MoE, Gemma 3, Phi-3, LFM2 and gpt-oss
//! families, reduced to what the forward pass needs (Gemma 3's own parameters in
//! [`crate::gemma3`], Phi-3's in [`crate::phi3`], LFM2's in [`crate::lfm2`], Qwen3-MoE's
//! experts in [`crate::moe`], gpt-oss's in [`crate::gpt_oss`]).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::gemma3::{self, Gemma3Params};
use crate::gpt_oss::{self, GptOssParams};
use crate::json_field;
use crate::lfm2::{self, Lfm2Params};
use crate::moe::{self, MoeParams};
use crate::phi3::{self, Phi3Params};
use crate::{Error, RopeScaling};

/// The architecture family, from `architectures[0]` or `model_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// `LlamaForCausalLM` (MiniCPM5 is one): GQA, no QK-norm.
    Llama,
    /// `Qwen3ForCausalLM`: Llama plus a per-head RMSNorm on q and k before RoPE.
    Qwen3,
    /// `Qwen2ForCausalLM` (Qwen2.5, DeepSeek-R1-Distill-Qwen): Llama plus biases on q, k and v.
    Qwen2,
    /// `Gemma3ForCausalLM` (and the language model of `Gemma3ForConditionalGeneration`):
    /// QK-norm, norms after attention and after the MLP, every norm `(1 + w)`, GELU-tanh,
    /// local sliding-window layers between global ones ([`Gemma3Params`]).
    Gemma3,
    /// `Phi3ForCausalLM` (Phi-3.5-mini, Phi-4-mini): q, k and v in one fused `qkv_proj`, gate
    /// and up in one `gate_up_proj`, RoPE on part of each head, LongRoPE ([`Phi3Params`]).
    Phi3,
    /// `Lfm2ForCausalLM` (LiquidAI LFM2): gated short-convolution layers beside attention
    /// layers with a per-head RMSNorm on q and k ([`Lfm2Params`]).
    Lfm2,
    /// `Qwen3MoeForCausalLM` (Qwen3-30B-A3B): Qwen3 whose MLPs are mixtures of experts, each
    /// token sent to the few its router ranks highest ([`MoeParams`]).
    Qwen3Moe,
    /// `GptOssForCausalLM` (gpt-oss-20b): biases on every attention projection, a learned
    /// sink logit per head, sliding-window layers between full ones, YaRN, and mixtures of
    /// experts with biases and a clamped SwiGLU ([`GptOssParams`]).
    #[serde(rename = "gpt-oss")]
    GptOss,
}

impl Family {
    /// The lowercase name (`model_type`, and what model cards show).
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen3 => "qwen3",
            Family::Qwen2 => "qwen2",
            Family::Gemma3 => "gemma3",
            Family::Phi3 => "phi3",
            Family::Lfm2 => "lfm2",
            Family::Qwen3Moe => "qwen3moe",
            Family::GptOss => "gpt-oss",
        }
    }

    /// Whether its attention normalizes each head's q and k (`self_attn.q_norm`/`k_norm`,
    /// before RoPE). LFM2's q/k layernorms are its own (`crate::lfm2`).
    pub fn qk_norm(self) -> bool {
        matches!(self, Family::Qwen3 | Family::Qwen3Moe | Family::Gemma3)
    }
}

/// The hyperparameters of a model, as read from its `config.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    /// Llama or Qwen3.
    pub family: Family,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Number of transformer blocks.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (defaults to `num_attention_heads`).
    pub num_key_value_heads: usize,
    /// Width of one head: explicit `head_dim`, or `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    /// Width of the gated MLP.
    pub intermediate_size: usize,
    /// Rows of the embedding and of `lm_head`.
    pub vocab_size: usize,
    /// RoPE base: top-level `rope_theta` or `rope_parameters.rope_theta` (default 10000).
    pub rope_theta: f64,
    /// How RoPE's frequencies are scaled (`rope_scaling` or `rope_parameters`).
    pub rope_scaling: RopeScaling,
    /// RMSNorm epsilon (default 1e-6).
    pub rms_norm_eps: f64,
    /// Whether `lm_head` shares the embedding's weights (default false).
    pub tie_word_embeddings: bool,
    /// Longest context the model was trained for (default 2048 for Llama, 32768 for Qwen3).
    pub max_position_embeddings: usize,
    /// Beginning-of-sequence id, if any.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence ids (`eos_token_id` may be one integer or a list).
    pub eos_token_ids: Vec<u32>,
    /// Gemma 3's own parameters (Gemma 3 only; [`Self::rope_theta`] and
    /// [`Self::rope_scaling`] are then its global layers').
    pub gemma3: Option<Gemma3Params>,
    /// Phi-3's own parameters (Phi-3 only).
    pub phi3: Option<Phi3Params>,
    /// `rope_interleaved` (default false): the Q and K projections' rows are stored as
    /// llama.cpp's converter stores a `llama` model's, each head's rotation pairing adjacent
    /// elements (2i, 2i + 1) instead of i and i + head_dim / 2. A linked GGUF of that family
    /// says so (see [`crate::gguf::link_gguf`]).
    pub rope_interleaved: bool,
    /// LFM2's own parameters (LFM2 only).
    pub lfm2: Option<Lfm2Params>,
    /// The experts of Qwen3-MoE and gpt-oss.
    pub moe: Option<MoeParams>,
    /// gpt-oss's own parameters (gpt-oss only).
    pub gpt_oss: Option<GptOssParams>,
}

/// Largest `config.json` read (1 MiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Widest hidden size Hearth's engine runs (Llama 3.1 405B uses 16384).
pub const MAX_HIDDEN_SIZE: usize = 1 << 16;

/// Widest feed-forward layer Hearth's engine runs (Llama 3.1 405B uses 53248).
pub const MAX_INTERMEDIATE_SIZE: usize = 1 << 18;

impl ModelConfig {
    /// Reads and parses a `config.json` (at most [`MAX_CONFIG_BYTES`]: a real one is a few
    /// KB, and a model folder found on disk may hold anything).
    pub fn from_path(path: &Path) -> Result<Self, Error> {
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| Error::io(path, e))?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(Error::Config {
                path: path.to_path_buf(),
                detail: format!(
                    "config.json is larger than {} KiB, which no model's config is; the folder \
                     is not a model as Hearth knows them",
                    MAX_CONFIG_BYTES >> 10
                ),
            });
        }
        Self::parse(&text, path)
    }

    /// Parses the text of a `config.json`.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        Self::parse(text, Path::new("config.json"))
    }

    /// Width of all query heads together (`num_attention_heads * head_dim`).
    pub fn q_dim(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }

    /// Width of all key (or value) heads together (`num_key_value_heads * head_dim`).
    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }

    /// Leading elements of each head that RoPE rotates: all of them but in Phi-3 with a
    /// `partial_rotary_factor`.
    pub fn rotary_dim(&self) -> usize {
        self.phi3.as_ref().map_or(self.head_dim, |p| p.rotary_dim)
    }

    /// Whether the q, k and v projections carry biases (Qwen2, gpt-oss).
    pub fn qkv_bias(&self) -> bool {
        matches!(self.family, Family::Qwen2 | Family::GptOss)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        let err = |detail: String| Error::Config {
            path: path.to_path_buf(),
            detail,
        };
        let root: Value = serde_json::from_str(text)
            .map_err(|e| err(format!("config.json is not valid JSON: {e}")))?;
        let obj = root
            .as_object()
            .ok_or_else(|| err("config.json is not a JSON object".into()))?;
        let family = family_of(obj).map_err(err)?;
        let top = Fields {
            obj,
            path: path.to_path_buf(),
        };
        // Gemma3ForConditionalGeneration keeps its language model's fields in text_config.
        let fields = match obj.get("text_config") {
            Some(Value::Object(text)) if family == Family::Gemma3 => Fields {
                obj: text,
                path: path.to_path_buf(),
            },
            _ => Fields {
                obj,
                path: path.to_path_buf(),
            },
        };
        let hidden_size = fields.usize_required("hidden_size")?;
        let num_attention_heads = fields.usize_required("num_attention_heads")?;
        let num_key_value_heads = fields
            .usize_optional("num_key_value_heads")?
            .unwrap_or(num_attention_heads);
        let head_dim = match fields.usize_optional("head_dim")? {
            Some(d) => d,
            None => {
                if num_attention_heads == 0 || hidden_size % num_attention_heads != 0 {
                    return Err(err(format!(
                        "head_dim is not given and hidden_size {hidden_size} is not a multiple \
                         of num_attention_heads {num_attention_heads}"
                    )));
                }
                hidden_size / num_attention_heads
            }
        };
        // gpt-oss: transformers' YaRN and base when the config gives no RoPE parameters.
        let mut with_rope = None;
        if family == Family::GptOss
            && !["rope_scaling", "rope_parameters"]
                .iter()
                .any(|k| obj.get(*k).is_some_and(Value::is_object))
        {
            let mut filled = obj.clone();
            filled.insert("rope_parameters".into(), gpt_oss::default_rope_parameters());
            with_rope = Some(filled);
        }
        let rope_obj = with_rope.as_ref().unwrap_or(obj);
        let rope_theta = match fields.f64_optional("rope_theta")? {
            Some(t) => t,
            None => match obj.get("rope_parameters").and_then(|p| p.get("rope_theta")) {
                Some(v) => v.as_f64().ok_or_else(|| {
                    err(format!("rope_parameters.rope_theta is not a number: {v}"))
                })?,
                None if family == Family::GptOss => 150_000.0,
                None => 10_000.0,
            },
        };
        let default_ctx = match family {
            Family::Llama => 2048,
            Family::Qwen3 | Family::Qwen2 | Family::Qwen3Moe => 32768,
            Family::Gemma3 => gemma3::DEFAULT_CONTEXT,
            Family::Phi3 => 4096,
            Family::Lfm2 => lfm2::DEFAULT_CONTEXT,
            Family::GptOss => gpt_oss::DEFAULT_CONTEXT,
        };
        let max_position_embeddings = fields
            .usize_optional("max_position_embeddings")?
            .unwrap_or(default_ctx);
        let num_hidden_layers = fields.usize_required("num_hidden_layers")?;
        let mut phi3_params = None;
        let (rope_theta, rope_scaling, gemma3) = if family == Family::Gemma3 {
            let (params, global) = gemma3::parse(
                fields.obj,
                num_hidden_layers,
                hidden_size,
                max_position_embeddings,
                head_dim,
            )
            .map_err(err)?;
            (global.theta, global.scaling, Some(params))
        } else if family == Family::Phi3 {
            let (params, scaling) =
                phi3::parse(obj, head_dim, max_position_embeddings).map_err(err)?;
            phi3_params = Some(params);
            (rope_theta, scaling, None)
        } else {
            let scaling = RopeScaling::from_config(rope_obj, max_position_embeddings, head_dim)
                .map_err(err)?;
            (rope_theta, scaling, None)
        };
        // Token ids may sit beside text_config rather than in it.
        let ids = if fields.get("eos_token_id").is_some() {
            &fields
        } else {
            &top
        };
        if fields.bool_optional("use_sliding_window")? == Some(true) {
            return Err(err(
                "config.json asks for sliding-window attention (use_sliding_window), which \
                 Hearth's engine does not apply"
                    .into(),
            ));
        }
        // LFM2: its layer kinds, its feed-forward width from block_ff_dim, norm_eps, and a head
        // tied to the embedding unless it says otherwise (tie_embedding).
        let lfm2 = (family == Family::Lfm2)
            .then(|| lfm2::parse(obj, num_hidden_layers))
            .transpose()
            .map_err(err)?;
        let (moe, gpt_oss) = match family {
            Family::Qwen3Moe => (Some(moe::parse(obj, num_hidden_layers).map_err(err)?), None),
            Family::GptOss => {
                let (params, experts) = gpt_oss::parse(obj, num_hidden_layers).map_err(err)?;
                (Some(experts), Some(params))
            }
            _ => (None, None),
        };
        let intermediate_size = match family {
            Family::Lfm2 => lfm2::intermediate_size(obj).map_err(err)?,
            _ => fields.usize_required("intermediate_size")?,
        };
        let rms_norm_eps = match family {
            Family::Lfm2 => fields.f64_optional("norm_eps")?.unwrap_or(1e-5),
            _ => fields.f64_optional("rms_norm_eps")?.unwrap_or(1e-6),
        };
        let tie_word_embeddings = match (family, fields.bool_optional("tie_word_embeddings")?) {
            (_, Some(tied)) => tied,
            (Family::Lfm2, None) => fields.bool_optional("tie_embedding")?.unwrap_or(true),
            (_, None) => false,
        };
        let config = ModelConfig {
            family,
            hidden_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            intermediate_size,
            vocab_size: fields.usize_required("vocab_size")?,
            rope_theta,
            rope_scaling,
            rms_norm_eps,
            tie_word_embeddings,
            max_position_embeddings,
            bos_token_id: ids.u32_optional("bos_token_id")?,
            eos_token_ids: ids.eos_ids()?,
            gemma3,
            phi3: phi3_params,
            rope_interleaved: top.bool_optional("rope_interleaved")?.unwrap_or(false),
            lfm2,
            moe,
            gpt_oss,
        };
        config.check().map_err(err)?;
        Ok(config)
    }

    /// Checks the relations between fields that the forward pass relies on.
    fn check(&self) -> Result<(), String> {
        for (name, value) in [
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("intermediate_size", self.intermediate_size),
            ("vocab_size", self.vocab_size),
        ] {
            if value == 0 {
                return Err(format!("{name} is 0"));
            }
        }
        if !self
            .num_attention_heads
            .is_multiple_of(self.num_key_value_heads)
        {
            return Err(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.num_attention_heads, self.num_key_value_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(format!(
                "head_dim {} is odd; RoPE needs pairs",
                self.head_dim
            ));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
            return Err(format!(
                "rope_theta {} is not a positive number",
                self.rope_theta
            ));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps >= 0.0) {
            return Err(format!(
                "rms_norm_eps {} is not a number >= 0",
                self.rms_norm_eps
            ));
        }
        // Guard the sizes and products used for tensor shapes against hostile configs.
        if self.num_hidden_layers > 4096 {
            return Err(format!(
                "num_hidden_layers {} is implausibly large",
                self.num_hidden_layers
            ));
        }
        // What the engine runs: its per-thread buffers are sized by these widths.
        for (name, value, max) in [
            ("hidden_size", self.hidden_size, MAX_HIDDEN_SIZE),
            (
                "intermediate_size",
                self.intermediate_size,
                MAX_INTERMEDIATE_SIZE,
            ),
            (
                "moe_intermediate_size",
                self.moe.as_ref().map_or(0, |m| m.expert_intermediate_size),
                MAX_INTERMEDIATE_SIZE,
            ),
        ] {
            if value > max {
                return Err(format!(
                    "{name} {value} is more than Hearth's engine runs (at most {max}; the \
                     largest released models use about a quarter of that)"
                ));
            }
        }
        for (name, value) in [
            ("hidden_size", self.hidden_size),
            ("num_attention_heads", self.num_attention_heads),
            ("head_dim", self.head_dim),
            ("intermediate_size", self.intermediate_size),
            ("vocab_size", self.vocab_size),
        ] {
            if value > 1 << 32 {
                return Err(format!("{name} {value} is implausibly large"));
            }
        }
        let big = 1usize << 40;
        for (name, value) in [
            (
                "vocab_size * hidden_size",
                self.vocab_size.checked_mul(self.hidden_size),
            ),
            (
                "num_attention_heads * head_dim",
                self.num_attention_heads.checked_mul(self.head_dim),
            ),
            (
                "intermediate_size * hidden_size",
                self.intermediate_size.checked_mul(self.hidden_size),
            ),
        ] {
            if value.is_none_or(|v| v > big) {
                return Err(format!("{name} is implausibly large"));
            }
        }
        Ok(())
    }
}

/// Maps `architectures[0]` (preferred) or `model_type` to a family.
fn family_of(obj: &Map<String, Value>) -> Result<Family, String> {
    let arch = obj
        .get("architectures")
        .and_then(|a| a.as_array())
        .and_then(|a| a.first())
        .and_then(|a| a.as_str());
    let model_type = obj.get("model_type").and_then(|m| m.as_str());
    match (arch, model_type) {
        (Some("LlamaForCausalLM"), _) | (None, Some("llama")) => Ok(Family::Llama),
        // Qwen3Model: the base class without the head, which embedding models are saved from.
        (Some("Qwen3ForCausalLM" | "Qwen3Model"), _) | (None, Some("qwen3")) => Ok(Family::Qwen3),
        (Some("Qwen2ForCausalLM"), _) | (None, Some("qwen2")) => Ok(Family::Qwen2),
        // The multimodal class: only its language model is read (text_config).
        (Some("Gemma3ForCausalLM" | "Gemma3ForConditionalGeneration"), _)
        | (None, Some("gemma3_text" | "gemma3")) => Ok(Family::Gemma3),
        (Some("Phi3ForCausalLM"), _) | (None, Some("phi3")) => Ok(Family::Phi3),
        (Some("Lfm2ForCausalLM"), _) | (None, Some("lfm2")) => Ok(Family::Lfm2),
        (Some("Qwen3MoeForCausalLM"), _) | (None, Some("qwen3_moe")) => Ok(Family::Qwen3Moe),
        (Some("GptOssForCausalLM"), _) | (None, Some("gpt_oss")) => Ok(Family::GptOss),
        (None, None) => Err(
            "config.json names no architecture (architectures or model_type); \
                             Hearth runs LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, \
                             Qwen3MoeForCausalLM, GptOssForCausalLM, Gemma3ForCausalLM, \
                             Lfm2ForCausalLM and Phi3ForCausalLM models"
                .into(),
        ),
        (Some(other), _) | (None, Some(other)) => Err(format!(
            "unsupported architecture {other:?}; Hearth runs LlamaForCausalLM, \
             Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GptOssForCausalLM, \
             Gemma3ForCausalLM, Lfm2ForCausalLM and Phi3ForCausalLM models"
        )),
    }
}

/// Typed access to the fields of a config object with precise errors.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    path: PathBuf,
}

impl Fields<'_> {
    fn err(&self, detail: String) -> Error {
        Error::Config {
            path: self.path.clone(),
            detail,
        }
    }

    fn get(&self, key: &str) -> Option<&Value> {
        json_field::get(self.obj, key)
    }

    fn usize_optional(&self, key: &str) -> Result<Option<usize>, Error> {
        json_field::count(self.obj, key).map_err(|e| self.err(e))
    }

    fn usize_required(&self, key: &str) -> Result<usize, Error> {
        self.usize_optional(key)?
            .ok_or_else(|| self.err(format!("config.json has no {key}")))
    }

    fn u32_optional(&self, key: &str) -> Result<Option<u32>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => to_u32(v)
                .map(Some)
                .ok_or_else(|| self.err(format!("{key} is not a token id: {v}"))),
        }
    }

    fn f64_optional(&self, key: &str) -> Result<Option<f64>, Error> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(format!("{key} is not a number: {v}"))),
        }
    }

    fn bool_optional(&self, key: &str) -> Result<Option<bool>, Error> {
        json_field::flag(self.obj, key).map_err(|e| self.err(e))
    }

    fn eos_ids(&self) -> Result<Vec<u32>, Error> {
        match self.get("eos_token_id") {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    to_u32(v).ok_or_else(|| self.err(format!("eos_token_id has a bad id: {v}")))
                })
                .collect(),
            Some(v) => to_u32(v)
                .map(|id| vec![id])
                .ok_or_else(|| self.err(format!("eos_token_id is not a token id: {v}"))),
        }
    }
}

fn to_u32(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINICPM5: &str = r#"{
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 2048, "num_hidden_layers": 42, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 6144,
        "vocab_size": 130560, "rope_theta": 5000000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": false, "max_position_embeddings": 32768,
        "bos_token_id": 0, "eos_token_id": [1, 130073], "rope_scaling": null
    }"#;

    #[test]
    fn minicpm5_parses() {
        let c = ModelConfig::from_json(MINICPM5).unwrap();
        assert_eq!(c.family, Family::Llama);
        assert_eq!(
            (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
            (16, 2, 128)
        );
        assert_eq!(c.rope_theta, 5e6);
        assert_eq!(c.eos_token_ids, vec![1, 130073]);
        assert_eq!(c.bos_token_id, Some(0));
        assert_eq!((c.q_dim(), c.kv_dim()), (2048, 256));
    }

    #[test]
    fn qwen3_rope_parameters_and_implicit_head_dim() {
        let c = ModelConfig::from_json(
            r#"{"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
                "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
                "tie_word_embeddings": true, "eos_token_id": 7}"#,
        )
        .unwrap();
        assert_eq!(c.family, Family::Qwen3);
        assert_eq!(c.head_dim, 16, "head_dim falls back to hidden / heads");
        assert_eq!(c.num_key_value_heads, 4, "kv heads default to heads");
        assert_eq!(c.rope_theta, 1e6);
        assert!(c.tie_word_embeddings);
        assert_eq!(c.eos_token_ids, vec![7]);
        assert_eq!(c.max_position_embeddings, 32768);
    }

    #[test]
    fn the_qwen3_base_class_is_qwen3() {
        let c = ModelConfig::from_json(
            r#"{"architectures": ["Qwen3Model"], "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}"#,
        )
        .unwrap();
        assert_eq!(
            c.family,
            Family::Qwen3,
            "embedding models are saved from Qwen3Model"
        );
    }

    #[test]
    fn qwen3moe_carries_its_experts() {
        let c = ModelConfig::from_json(
            r#"{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                "intermediate_size": 96, "vocab_size": 100, "num_experts": 4,
                "num_experts_per_tok": 2, "norm_topk_prob": true, "moe_intermediate_size": 32}"#,
        )
        .unwrap();
        assert_eq!(c.family, Family::Qwen3Moe);
        let moe = c.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.experts_per_token), (4, 2));
        assert_eq!(moe.sparse_layers, [true, true]);
        let e = ModelConfig::from_json(
            r#"{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
                "num_experts": 2, "num_experts_per_tok": 3, "moe_intermediate_size": 32}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("num_experts_per_tok is 3"), "{e}");
        // An expert wider than the engine runs, checked with the other widths.
        let e = ModelConfig::from_json(
            r#"{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "intermediate_size": 96, "vocab_size": 100,
                "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 9999999}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("moe_intermediate_size 9999999 is more than"),
            "{e}"
        );
    }

    #[test]
    fn missing_field_is_named() {
        let e = ModelConfig::from_json(r#"{"model_type": "llama", "hidden_size": 64}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_attention_heads"), "{e}");
    }

    #[test]
    fn unsupported_architecture_is_named() {
        let e = ModelConfig::from_json(r#"{"architectures": ["GPT2LMHeadModel"]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("GPT2LMHeadModel"), "{e}");
    }

    #[test]
    fn bad_relations_are_refused() {
        let e = ModelConfig::from_json(
            r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 128,
                "vocab_size": 100}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("num_key_value_heads 3"), "{e}");
        let e = ModelConfig::from_json(
            r#"{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1000000000,
                "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("num_hidden_layers 1000000000 is implausibly large"),
            "{e}"
        );
        assert!(ModelConfig::from_json("[1,2]").is_err());
        assert!(ModelConfig::from_json("{").is_err());
    }
}
