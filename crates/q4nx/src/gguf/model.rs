//! What a GGUF file's header says the model is, in Hugging Face's terms: its config.json
//! ([`model_config`]), which GGUF tensor holds each tensor the engine asks for ([`gguf_name`],
//! [`source_tensors`]) and the fix-ups llama.cpp's converter made that Hearth undoes (Q/K rows
//! interleaved for its RoPE in `llama` models, [`gguf_row`]; Gemma's norms stored as `1 + w`).
//! The one home of these facts for both [`super::import_gguf`] (which copies) and
//! [`super::link_gguf`] (which reads the file where it is).

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

use serde_json::json;

use crate::gguf::experts;
use crate::gguf::family_config::{
    gemma3_config, gpt_oss_config, lfm2_config, lfm2_conv_layers, moe_experts, yarn_parameters,
};
use crate::gguf::tokenizer::{self, Vocabulary};
use crate::gguf::{dequantize, GgmlType, GgufFile, Header, TensorInfo, Value};
use crate::layout::{expected_tensors, ExpectedTensor, Role};
use crate::{Error, Family, ModelConfig};

/// What the header of a GGUF file Hearth can run describes.
pub(crate) struct HeaderModel<'h> {
    /// `general.architecture`.
    pub arch: String,
    /// The family it runs as.
    pub family: Family,
    /// The config, as parsed from `config_text`.
    pub config: ModelConfig,
    /// config.json's text (without token ids and `rope_freqs`; see [`json_with_ids`] and
    /// [`with_rope_freqs`]).
    pub config_text: String,
    /// The vocabulary, checked against the embedding's rows.
    pub vocabulary: Vocabulary<'h>,
}

pub(crate) fn gguf_err(path: &Path, detail: impl Into<String>) -> Error {
    Error::Gguf {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Reads what the header of a GGUF file `src` says the model is, refusing what Hearth cannot
/// run (split files, other architectures, unknown RoPE scalings, vocabularies it cannot read).
/// The tensor table is checked by [`source_tensors`].
pub(crate) fn read_header_model<'h>(h: &'h Header, src: &Path) -> Result<HeaderModel<'h>, Error> {
    // llama.cpp's gguf-split numbers the parts from 0 and keeps the count in each part.
    if let Some(count) = h.get("split.count").and_then(Value::as_u64) {
        if count > 1 {
            let part = h.get("split.no").and_then(Value::as_u64).unwrap_or(0) + 1;
            return Err(gguf_err(
                src,
                format!(
                    "a split GGUF (part {part} of {count}) cannot be imported yet; join the \
                     parts into one file first (llama.cpp's llama-gguf-split --merge)"
                ),
            ));
        }
    }
    let arch = h
        .get("general.architecture")
        .and_then(Value::as_str)
        .ok_or_else(|| gguf_err(src, "the file has no general.architecture"))?
        .to_string();
    let family = match arch.as_str() {
        "llama" => Family::Llama,
        "qwen3" => Family::Qwen3,
        "qwen2" => Family::Qwen2,
        "gemma3" => Family::Gemma3,
        "phi3" => Family::Phi3,
        "lfm2" => Family::Lfm2,
        "qwen3moe" => Family::Qwen3Moe,
        "gpt-oss" => Family::GptOss,
        other => {
            return Err(gguf_err(
                src,
                format!(
                    "architecture {other:?} is not one Hearth runs; it imports llama (Llama 3, \
                     SmolLM2, MiniCPM5), qwen2 (Qwen2.5), qwen3, qwen3moe (Qwen3-30B-A3B), gpt-oss \
                     (gpt-oss-20b), gemma3, phi3 (Phi-3.5, Phi-4-mini) and lfm2 (LFM2) models"
                ),
            ))
        }
    };
    let (config, config_text) = model_config(h, &arch, family).map_err(|d| gguf_err(src, d))?;
    let vocabulary = tokenizer::vocabulary(h)
        .map_err(|d| gguf_err(src, format!("cannot import its tokenizer: {d}")))?;
    if vocabulary.len() != config.vocab_size {
        return Err(gguf_err(
            src,
            format!(
                "the vocabulary has {} tokens but token_embd.weight has {} rows",
                vocabulary.len(),
                config.vocab_size
            ),
        ));
    }
    Ok(HeaderModel {
        arch,
        family,
        config,
        config_text,
        vocabulary,
    })
}

/// config.json (Hugging Face form) from the `{arch}.*` metadata and the embedding's shape.
pub(crate) fn model_config(
    h: &Header,
    arch: &str,
    family: Family,
) -> Result<(ModelConfig, String), String> {
    let key = |k: &str| format!("{arch}.{k}");
    let uint = |k: &str| -> Result<Option<usize>, String> {
        match h.get(&key(k)) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|&n| n <= 1 << 32)
                .map(|n| Some(n as usize))
                .ok_or_else(|| format!("{} is {}, not a count", key(k), v.describe())),
        }
    };
    let need = |k: &str| uint(k)?.ok_or_else(|| format!("the file has no {}", key(k)));
    let float = |k: &str| -> Result<Option<f64>, String> {
        h.get(&key(k))
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| format!("{} is {}, not a number", key(k), v.describe()))
            })
            .transpose()
    };
    let rope_scaling = match h.get(&key("rope.scaling.type")).and_then(Value::as_str) {
        // gpt-oss's config.json without RoPE parameters means transformers' YaRN: say none.
        None | Some("none") if family == Family::GptOss => json!({"rope_type": "default"}),
        None | Some("none") => json!(null),
        Some(kind @ ("linear" | "yarn")) => {
            let factor = float("rope.scaling.factor")?
                .ok_or_else(|| format!("it uses {kind} RoPE scaling without a factor"))?;
            let original = uint("rope.scaling.original_context_length")?;
            let mut scaling = json!({"rope_type": kind, "factor": factor,
                   "original_max_position_embeddings": original});
            if kind == "yarn" {
                yarn_parameters(&mut scaling, &float, &key)?;
            }
            scaling
        }
        Some(kind) => {
            return Err(format!(
                "it uses {kind} RoPE scaling, which Hearth's engine does not apply (it applies \
                 linear, yarn and llama.cpp's rope_freqs)"
            ))
        }
    };
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    let layers = need("block_count")?;
    // LFM2: llama.cpp's converter writes one KV head count per layer, 0 for a convolution layer.
    let lfm2_conv = match (family, h.get(&key("attention.head_count_kv"))) {
        (Family::Lfm2, Some(Value::Array(a))) => Some(lfm2_conv_layers(a, layers, &key)?),
        _ => None,
    };
    let kv_heads = match &lfm2_conv {
        Some((_, kv)) => *kv,
        None => uint("attention.head_count_kv")?.unwrap_or(heads),
    };
    let head_dim = match uint("attention.key_length")? {
        Some(d) => d,
        None if heads > 0 => hidden / heads,
        None => return Err(format!("{} is 0", key("attention.head_count"))),
    };
    if let Some(v) = uint("attention.value_length")? {
        if v != head_dim {
            return Err(format!(
                "its value heads ({v}) and key heads ({head_dim}) differ in width"
            ));
        }
    }
    let embd = h
        .tensor("token_embd.weight")
        .ok_or("the file has no token_embd.weight")?;
    if embd.dims.len() != 2 || embd.dims[0] as usize != hidden {
        return Err(format!(
            "token_embd.weight has dimensions {:?}, expected [{hidden}, vocabulary]",
            embd.dims
        ));
    }
    if let Some(t) = h.tensor(ROPE_FREQS) {
        if !rope_scaling.is_null() || t.kind != GgmlType::F32 || t.dims != [head_dim as u64 / 2] {
            return Err(format!(
                "its {ROPE_FREQS} ({} of dimensions {:?}) is not llama.cpp's {} f32 RoPE \
                 divisors alone",
                t.kind,
                t.dims,
                head_dim / 2
            ));
        }
    }
    let arch_name = match family {
        Family::Llama => "LlamaForCausalLM",
        Family::Qwen3 => "Qwen3ForCausalLM",
        Family::Qwen2 => "Qwen2ForCausalLM",
        Family::Gemma3 => "Gemma3ForCausalLM",
        Family::Phi3 => "Phi3ForCausalLM",
        Family::Lfm2 => "Lfm2ForCausalLM",
        Family::Qwen3Moe => "Qwen3MoeForCausalLM",
        Family::GptOss => "GptOssForCausalLM",
    };
    let experts = match family {
        Family::Qwen3Moe | Family::GptOss => Some(moe_experts(&uint, &float, &key)?),
        _ => None,
    };
    // A qwen3moe file may leave out the dense width, which no layer of it uses; gpt-oss's
    // config.json names its experts' width intermediate_size.
    let intermediate = match (uint("feed_forward_length")?, &experts) {
        (_, Some(e)) if family == Family::GptOss => e.width,
        (Some(width), _) => width,
        (None, Some(e)) => e.width,
        (None, None) => need("feed_forward_length")?,
    };
    let default_eps = if family == Family::GptOss { 1e-5 } else { 1e-6 };
    let mut v = json!({
        "architectures": [arch_name],
        "model_type": family.name(),
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate,
        "vocab_size": embd.dims[1],
        "rope_theta": float("rope.freq_base")?.unwrap_or(10_000.0),
        "rope_scaling": rope_scaling,
        "rms_norm_eps": float("attention.layer_norm_rms_epsilon")?.unwrap_or(default_eps),
        "tie_word_embeddings": h.tensor("output.weight").is_none(),
        "max_position_embeddings": uint("context_length")?.unwrap_or(2048),
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
    });
    if family == Family::Gemma3 {
        let window = uint("attention.sliding_window")?
            .ok_or_else(|| format!("the file has no {}", key("attention.sliding_window")))?;
        let softcap = float("final_logit_softcapping")?;
        gemma3_config(&mut v, layers, hidden / heads, head_dim, window, softcap);
    }
    if family == Family::Phi3 {
        let o = v.as_object_mut().expect("we wrote an object");
        // llama.cpp's converter writes rope.dimension_count = head_dim · partial_rotary_factor,
        // the pretrained context as rope.scaling.original_context_length, and a window of 0
        // for "none".
        if let Some(rotated) = uint("rope.dimension_count")? {
            o.insert(
                "partial_rotary_factor".into(),
                json!(rotated as f64 / head_dim as f64),
            );
        }
        if let Some(original) = uint("rope.scaling.original_context_length")? {
            o.insert("original_max_position_embeddings".into(), json!(original));
        }
        let window = uint("attention.sliding_window")?.filter(|&w| w > 0);
        o.insert("sliding_window".into(), json!(window));
    }
    if family == Family::Lfm2 {
        let conv = lfm2_conv.map_or_else(|| vec![false; layers], |(c, _)| c);
        let width = uint("shortconv.l_cache")?
            .ok_or_else(|| format!("the file has no {}", key("shortconv.l_cache")))?;
        lfm2_config(&mut v, &conv, width);
    }
    if let (Family::GptOss, Some(e)) = (family, &experts) {
        let window = uint("attention.sliding_window")?
            .ok_or_else(|| format!("the file has no {}", key("attention.sliding_window")))?;
        if window == 0 {
            return Err(format!(
                "{} is 0; a sliding layer needs at least its own token",
                key("attention.sliding_window")
            ));
        }
        gpt_oss_config(&mut v, layers, e, window);
    }
    if let Some(e) = experts.filter(|_| family == Family::Qwen3Moe) {
        let o = v.as_object_mut().expect("we wrote an object");
        // llama.cpp's qwen3moe routes every layer and always renormalizes the chosen experts.
        o.insert("num_experts".into(), json!(e.count));
        o.insert("num_experts_per_tok".into(), json!(e.used));
        o.insert("moe_intermediate_size".into(), json!(e.width));
        o.insert("norm_topk_prob".into(), json!(true));
        o.insert("decoder_sparse_step".into(), json!(1));
        o.insert("mlp_only_layers".into(), json!([]));
    }
    let text = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    let config = ModelConfig::from_json(&text).map_err(|e| e.to_string())?;
    Ok((config, text))
}

/// LFM2's final norm (`model.embedding_norm`): llama.cpp's converter first wrote it as
/// `token_embd_norm`, later converters (and Ollama's) as `output_norm`.
const LFM2_FINAL_NORMS: [&str; 2] = ["token_embd_norm.weight", "output_norm.weight"];

/// LongRoPE's divisors as llama.cpp's converter writes a phi3 model's (f32, one per rotated
/// frequency), read into config.json's `rope_scaling`.
pub(crate) const ROPE_FACTORS: [&str; 2] =
    ["rope_factors_short.weight", "rope_factors_long.weight"];

/// llama.cpp's per-frequency RoPE divisors (Llama 3.1's scaling, written by its converter).
pub(crate) const ROPE_FREQS: &str = "rope_freqs.weight";

/// config.json's text with the file's `rope_freqs.weight`, if it has one, as its RoPE scaling
/// (`check` has seen it is `head_dim / 2` f32 values).
pub(crate) fn with_rope_freqs(file: &GgufFile, text: &str) -> Result<String, Error> {
    match (
        file.header().tensor(ROPE_FACTORS[0]),
        file.header().tensor(ROPE_FACTORS[1]),
    ) {
        (Some(short), Some(long)) => return with_longrope(file, text, [short, long]),
        (None, None) => {}
        (one, _) => {
            let (has, lacks) = if one.is_some() {
                (ROPE_FACTORS[0], ROPE_FACTORS[1])
            } else {
                (ROPE_FACTORS[1], ROPE_FACTORS[0])
            };
            return Err(gguf_err(
                file.path(),
                format!("it has {has} but not {lacks}; LongRoPE needs both lists"),
            ));
        }
    }
    let Some(t) = file.header().tensor(ROPE_FREQS) else {
        return Ok(text.to_string());
    };
    let mut factors = vec![0f32; t.row_len()];
    dequantize(t.kind, file.data(t), &mut factors);
    check_finite(file.path(), ROPE_FREQS, &factors)?;
    let mut v: serde_json::Value = serde_json::from_str(text).expect("we wrote this JSON");
    v["rope_scaling"] = json!({"rope_type": "rope_freqs", "factors": factors});
    Ok(serde_json::to_string_pretty(&v).expect("JSON values serialize"))
}

/// config.json's text with a phi3 file's LongRoPE factors and its attention factor
/// (`phi3.rope.scaling.attn_factor`, as llama.cpp's converter computed it), checked by parsing
/// the result.
fn with_longrope(file: &GgufFile, text: &str, tensors: [&TensorInfo; 2]) -> Result<String, Error> {
    let mut lists = Vec::new();
    for (name, t) in ROPE_FACTORS.iter().zip(tensors) {
        if t.kind != GgmlType::F32 || t.dims.len() != 1 || t.dims[0] > 1 << 16 {
            return Err(gguf_err(
                file.path(),
                format!(
                    "its {name} ({} of dimensions {:?}) is not a list of f32 LongRoPE factors",
                    t.kind, t.dims
                ),
            ));
        }
        let mut factors = vec![0f32; t.row_len()];
        dequantize(t.kind, file.data(t), &mut factors);
        check_finite(file.path(), name, &factors)?;
        lists.push(factors);
    }
    let mut v: serde_json::Value = serde_json::from_str(text).expect("we wrote this JSON");
    let mut scaling = json!({"rope_type": "longrope", "short_factor": lists[0],
                             "long_factor": lists[1]});
    if let Some(a) = file
        .header()
        .get("phi3.rope.scaling.attn_factor")
        .and_then(Value::as_f64)
    {
        scaling["attention_factor"] = json!(a);
    }
    v["rope_scaling"] = scaling;
    let text = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    ModelConfig::from_json(&text).map_err(|e| gguf_err(file.path(), e.to_string()))?;
    Ok(text)
}

/// Adds bos/eos ids to config.json's text.
pub(crate) fn json_with_ids(text: &str, bos: Option<u32>, eos: &[u32]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).expect("we wrote this JSON");
    v["bos_token_id"] = json!(bos);
    v["eos_token_id"] = match eos {
        [one] => json!(one),
        many => json!(many),
    };
    let mut s = serde_json::to_string_pretty(&v).expect("JSON values serialize");
    s.push('\n');
    s
}

/// The GGUF name of a Hugging Face tensor name of a `family` model.
pub(crate) fn gguf_name(hf: &str, family: Family) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        // LFM2's final norm (see LFM2_FINAL_NORMS for the newer name).
        "model.embedding_norm.weight" => return Some(LFM2_FINAL_NORMS[0].into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, suffix) = rest.split_once('.')?;
    // gpt-oss's attention sinks, one logit per head: a tensor without a `.weight` of its own.
    if suffix == "self_attn.sinks" {
        return Some(format!("blk.{layer}.attn_sinks.weight"));
    }
    let (module, kind) = suffix.rsplit_once('.')?;
    let g = match (module, family) {
        // Gemma 3's norm after attention, then its norms before and after the MLP.
        ("post_attention_layernorm", Family::Gemma3) => "post_attention_norm",
        ("pre_feedforward_layernorm", Family::Gemma3) => "ffn_norm",
        ("post_feedforward_layernorm", Family::Gemma3) => "post_ffw_norm",
        // gpt-oss's norm before the experts.
        ("post_attention_layernorm", Family::GptOss) => "post_attention_norm",
        (module, _) => match module {
            "input_layernorm" => "attn_norm",
            "post_attention_layernorm" => "ffn_norm",
            "self_attn.q_proj" => "attn_q",
            "self_attn.k_proj" => "attn_k",
            "self_attn.v_proj" => "attn_v",
            // Phi-3's fused projections: llama.cpp keeps them fused under these names.
            "self_attn.qkv_proj" => "attn_qkv",
            "mlp.gate_up_proj" => "ffn_up",
            "self_attn.o_proj" => "attn_output",
            // LFM2's names.
            "operator_norm" => "attn_norm",
            "ffn_norm" => "ffn_norm",
            "self_attn.out_proj" => "attn_output",
            "self_attn.q_layernorm" => "attn_q_norm",
            "self_attn.k_layernorm" => "attn_k_norm",
            "conv.conv" => "shortconv.conv",
            "conv.in_proj" => "shortconv.in_proj",
            "conv.out_proj" => "shortconv.out_proj",
            "feed_forward.w1" => "ffn_gate",
            "feed_forward.w3" => "ffn_up",
            "feed_forward.w2" => "ffn_down",
            "self_attn.q_norm" => "attn_q_norm",
            "self_attn.k_norm" => "attn_k_norm",
            "mlp.gate_proj" => "ffn_gate",
            "mlp.up_proj" => "ffn_up",
            "mlp.down_proj" => "ffn_down",
            // A mixture-of-experts router (its experts are slices: see `experts.rs`).
            "mlp.gate" => "ffn_gate_inp",
            // gpt-oss's router (weight and bias).
            "mlp.router" => "ffn_gate_inp",
            _ => return None,
        },
    };
    Some(format!("blk.{layer}.{g}.{kind}"))
}

/// The GGUF tensor behind every tensor the model needs ([`expected_tensors`], in its order;
/// a tied `lm_head.weight` is `token_embd.weight`), each checked for its dimensions; a tensor
/// of the file that the model would not use is refused, so a file that computes something
/// else is never taken for a plain model of its family. A mixture-of-experts model's experts
/// are owned slices of llama.cpp's 3-D expert tensors (see [`experts`]); every other tensor is
/// the file's own entry.
pub(crate) fn source_tensors<'h>(
    h: &'h Header,
    config: &ModelConfig,
    family: Family,
) -> Result<Vec<(ExpectedTensor, Cow<'h, TensorInfo>)>, String> {
    // Read into config.json, not used as a tensor.
    let mut used = HashSet::from([ROPE_FREQS.to_string()]);
    if family == Family::Phi3 {
        used.extend(ROPE_FACTORS.map(String::from));
    }
    let mut out = Vec::new();
    for expected in expected_tensors(config) {
        let name = &expected.name;
        // LFM2's convolution kernel [hidden, 1, width] is stored squeezed to [hidden, width].
        let want: Vec<u64> = expected
            .shape
            .iter()
            .rev()
            .filter(|&&d| !(family == Family::Lfm2 && d == 1 && expected.shape.len() == 3))
            .map(|&d| d as u64)
            .collect();
        if let Some((stacked, e)) = experts::stacked_name(name) {
            let count = config.moe.as_ref().map_or(0, |p| p.experts);
            let t = h
                .tensor(&stacked)
                .ok_or_else(|| format!("tensor {stacked} is missing; the file is incomplete"))?;
            let slice = experts::expert_slice(t, e, &want, count)?;
            used.insert(stacked);
            out.push((expected, Cow::Owned(slice)));
            continue;
        }
        let mut g = gguf_name(name, family).expect("every expected tensor has a GGUF name");
        if name == "lm_head.weight" && config.tie_word_embeddings {
            g = "token_embd.weight".into();
        }
        if g == LFM2_FINAL_NORMS[0] && h.tensor(&g).is_none() {
            g = LFM2_FINAL_NORMS[1].into();
        }
        let t = h
            .tensor(&g)
            .ok_or_else(|| format!("tensor {g} is missing; the file is incomplete"))?;
        used.insert(g.clone());
        if t.dims != want {
            return Err(format!(
                "tensor {g} has dimensions {:?}, the model's metadata implies {want:?}",
                t.dims
            ));
        }
        out.push((expected, Cow::Borrowed(t)));
    }
    if let Some(extra) = h.tensors.iter().find(|t| !used.contains(&t.name)) {
        return Err(format!(
            "tensor {} is not part of a plain {family:?} model, so Hearth would not compute \
             what the original does",
            extra.name
        ));
    }
    Ok(out)
}

/// Whether llama.cpp's converter stored the rows of the Hugging Face tensor `name` of a
/// `family` model interleaved for its RoPE (see [`gguf_row`]): the Q and K projections of
/// `llama` models only.
pub(crate) fn rows_interleaved(name: &str, family: Family) -> bool {
    family == Family::Llama && (name.ends_with("q_proj.weight") || name.ends_with("k_proj.weight"))
}

/// Whether llama.cpp's converter stored the norm `name` of a `family` model as `1 + w`
/// (Gemma's norms); Hugging Face's `w` is the stored value minus 1.
pub(crate) fn norm_plus_one(role: Role, family: Family) -> bool {
    family == Family::Gemma3 && role == Role::Norm
}

/// The GGUF row that holds Hugging Face row `r` of a Q or K projection with heads of
/// `head_dim` rows: llama.cpp stores row `j * head_dim/2 + i` of a head at `2 i + j`.
pub(crate) fn gguf_row(r: usize, head_dim: Option<usize>) -> usize {
    match head_dim {
        None => r,
        Some(hd) => {
            let (head, within) = (r / hd, r % hd);
            let (j, i) = (within / (hd / 2), within % (hd / 2));
            head * hd + 2 * i + j
        }
    }
}

pub(crate) fn check_finite(path: &Path, name: &str, values: &[f32]) -> Result<(), Error> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(gguf_err(
            path,
            format!(
                "tensor {name} holds a non-finite value ({}) at element {i} of a row; the file \
                 is damaged",
                values[i]
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The config an `lfm2` header of two layers gives, with `head_count_kv` and
    /// `shortconv.l_cache` as given (absent when `None`).
    fn lfm2_config_of(kv: Option<Value>, width: Option<u32>) -> Result<ModelConfig, String> {
        use crate::gguf::write::GgufWriter;
        let mut w = GgufWriter::new(3);
        w.kv("general.architecture", Value::String("lfm2".into()));
        for (k, v) in [
            ("embedding_length", 64),
            ("block_count", 2),
            ("attention.head_count", 4),
            ("feed_forward_length", 96),
        ] {
            w.kv(&format!("lfm2.{k}"), Value::U32(v));
        }
        if let Some(kv) = kv {
            w.kv("lfm2.attention.head_count_kv", kv);
        }
        if let Some(width) = width {
            w.kv("lfm2.shortconv.l_cache", Value::U32(width));
        }
        w.tensor(
            "token_embd.weight",
            &[64, 32],
            GgmlType::F32,
            &[0; 64 * 32 * 4],
        );
        let h = crate::gguf::file::parse(&w.finish(), Path::new("t.gguf")).unwrap();
        model_config(&h, "lfm2", Family::Lfm2).map(|(c, _)| c)
    }

    #[test]
    fn lfm2_layers_come_from_the_per_layer_kv_head_counts() {
        use crate::gguf::Array;
        let counts = |v: Vec<u32>| Some(Value::Array(Array::U32(v)));
        let c = lfm2_config_of(counts(vec![0, 2]), Some(3)).unwrap();
        let p = c.lfm2.expect("LFM2's parameters");
        assert_eq!(p.conv_layers, [true, false]);
        assert_eq!((p.conv_width, p.conv_bias), (3, false));
        // The feed-forward width is the converter's, not derived again.
        assert_eq!((c.num_key_value_heads, c.intermediate_size), (2, 96));
        assert_eq!(c.rms_norm_eps, 1e-6);
        // Malformed headers are refused in words.
        for (kv, width, says) in [
            (counts(vec![0, 2]), None, "no lfm2.shortconv.l_cache"),
            (
                counts(vec![0, 2, 2]),
                Some(3),
                "lists 3 layers but the model has 2",
            ),
            (counts(vec![0, 0]), Some(3), "no layer any KV head"),
            (counts(vec![1, 2]), Some(3), "1 and 2 KV heads"),
            (counts(vec![0, 2]), Some(0), "conv_L_cache is 0"),
            (
                Some(Value::Array(Array::String(vec!["a".into(), "b".into()]))),
                Some(3),
                "not a list of head counts",
            ),
            (Some(Value::String("2".into())), Some(3), "not a count"),
        ] {
            let e = lfm2_config_of(kv, width).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    /// The config a `qwen3moe` header of two layers gives, with `changes` applied to its
    /// expert keys (`None` leaves a key out).
    fn qwen3moe_config_of(changes: &[(&str, Option<Value>)]) -> Result<ModelConfig, String> {
        let keys = vec![
            ("embedding_length", Some(Value::U32(64))),
            ("block_count", Some(Value::U32(2))),
            ("attention.head_count", Some(Value::U32(4))),
            ("feed_forward_length", Some(Value::U32(96))),
            ("expert_count", Some(Value::U32(8))),
            ("expert_used_count", Some(Value::U32(2))),
            ("expert_feed_forward_length", Some(Value::U32(32))),
        ];
        config_with(keys, changes, "qwen3moe", Family::Qwen3Moe)
    }

    #[test]
    fn qwen3moe_experts_come_from_the_expert_keys() {
        let c = qwen3moe_config_of(&[]).unwrap();
        let p = c.moe.expect("mixture-of-experts parameters");
        assert_eq!(
            (p.experts, p.experts_per_token, p.expert_intermediate_size),
            (8, 2, 32)
        );
        // llama.cpp routes every layer and renormalizes the chosen experts' weights.
        assert!(p.norm_topk_prob && p.sparse_layers == [true, true]);
        assert_eq!(c.intermediate_size, 96);
        // Without an expert width, llama.cpp's: the dense width over the experts used.
        let c = qwen3moe_config_of(&[("expert_feed_forward_length", None)]).unwrap();
        assert_eq!(c.moe.unwrap().expert_intermediate_size, 48);
        // Without a dense width, which no layer uses, the expert width stands in.
        let c = qwen3moe_config_of(&[("feed_forward_length", None)]).unwrap();
        assert_eq!(c.intermediate_size, 32);
        // Malformed headers are refused in words.
        for (changes, says) in [
            (
                vec![("expert_count", None)],
                "the file has no qwen3moe.expert_count",
            ),
            (
                vec![("expert_used_count", None)],
                "the file has no qwen3moe.expert_used_count",
            ),
            (
                vec![("expert_count", Some(Value::U32(0)))],
                "qwen3moe.expert_count is 0",
            ),
            (
                vec![("expert_used_count", Some(Value::U32(9)))],
                "qwen3moe.expert_used_count is 9; it should be from 1 to qwen3moe.expert_count (8)",
            ),
            (
                vec![("expert_used_count", Some(Value::U32(0)))],
                "qwen3moe.expert_used_count is 0",
            ),
            (
                vec![("expert_feed_forward_length", Some(Value::U32(0)))],
                "qwen3moe.expert_feed_forward_length is 0",
            ),
            (
                vec![
                    ("expert_feed_forward_length", None),
                    ("feed_forward_length", None),
                ],
                "the file has no qwen3moe.expert_feed_forward_length",
            ),
            (
                vec![("expert_count", Some(Value::String("8".into())))],
                "qwen3moe.expert_count is",
            ),
            (
                vec![("expert_weights_scale", Some(Value::F32(2.5)))],
                "qwen3moe.expert_weights_scale is 2.5",
            ),
        ] {
            let e = qwen3moe_config_of(&changes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    /// The config a `gpt-oss` header of three layers gives, with `changes` applied to its keys
    /// (`None` leaves a key out).
    fn gpt_oss_config_of(changes: &[(&str, Option<Value>)]) -> Result<ModelConfig, String> {
        let keys = vec![
            ("context_length", Some(Value::U32(64))),
            ("embedding_length", Some(Value::U32(64))),
            ("block_count", Some(Value::U32(3))),
            ("feed_forward_length", Some(Value::U32(32))),
            ("attention.head_count", Some(Value::U32(4))),
            ("attention.head_count_kv", Some(Value::U32(2))),
            ("attention.key_length", Some(Value::U32(16))),
            ("attention.value_length", Some(Value::U32(16))),
            ("expert_count", Some(Value::U32(4))),
            ("expert_used_count", Some(Value::U32(2))),
            ("expert_feed_forward_length", Some(Value::U32(32))),
            ("attention.sliding_window", Some(Value::U32(4))),
            ("rope.freq_base", Some(Value::F32(150000.0))),
            ("rope.scaling.type", Some(Value::String("yarn".into()))),
            ("rope.scaling.factor", Some(Value::F32(4.0))),
            ("rope.scaling.original_context_length", Some(Value::U32(16))),
        ];
        config_with(keys, changes, "gpt-oss", Family::GptOss)
    }

    /// The config of an `arch` header holding `keys` (under `arch.`) with `changes` applied
    /// (`None` leaves a key out), and a small f32 embedding.
    fn config_with<'k>(
        mut keys: Vec<(&'k str, Option<Value>)>,
        changes: &[(&'k str, Option<Value>)],
        arch: &str,
        family: Family,
    ) -> Result<ModelConfig, String> {
        use crate::gguf::write::GgufWriter;
        for (k, v) in changes {
            match keys.iter_mut().find(|(key, _)| key == k) {
                Some(slot) => slot.1 = v.clone(),
                None => keys.push((k, v.clone())),
            }
        }
        let mut w = GgufWriter::new(3);
        w.kv("general.architecture", Value::String(arch.into()));
        for (k, v) in keys {
            if let Some(v) = v {
                w.kv(&format!("{arch}.{k}"), v);
            }
        }
        w.tensor(
            "token_embd.weight",
            &[64, 32],
            GgmlType::F32,
            &[0; 64 * 32 * 4],
        );
        let h = crate::gguf::file::parse(&w.finish(), Path::new("t.gguf")).unwrap();
        model_config(&h, arch, family).map(|(c, _)| c)
    }

    #[test]
    fn gpt_oss_config_comes_from_llama_cpps_keys() {
        let c = gpt_oss_config_of(&[]).unwrap();
        assert_eq!(c.family, Family::GptOss);
        assert_eq!(
            (c.num_attention_heads, c.num_key_value_heads, c.head_dim),
            (4, 2, 16)
        );
        assert_eq!((c.max_position_embeddings, c.rope_theta), (64, 150000.0));
        assert_eq!(c.rms_norm_eps, 1e-5);
        let m = c.moe.as_ref().expect("its experts");
        assert_eq!(
            (m.experts, m.experts_per_token, m.expert_intermediate_size),
            (4, 2, 32)
        );
        assert!(m.norm_topk_prob && m.sparse_layers == [true; 3]);
        let p = c.gpt_oss.as_ref().expect("gpt-oss's parameters");
        // llama.cpp slides the even layers, and fixes the SwiGLU's limit and alpha.
        assert_eq!(p.sliding_layers, [true, false, true]);
        assert_eq!(
            (p.sliding_window, p.swiglu_limit, p.swiglu_alpha),
            (4, 7.0, 1.702)
        );
        match c.rope_scaling {
            crate::RopeScaling::Yarn {
                factor,
                original_max_position_embeddings,
                beta_fast,
                beta_slow,
                truncate,
                ..
            } => {
                assert_eq!((factor, original_max_position_embeddings), (4.0, 16));
                assert_eq!((beta_fast, beta_slow, truncate), (32.0, 1.0, true));
            }
            other => panic!("{other:?}"),
        }
        // Without RoPE scaling in the file, none (not transformers' default YaRN).
        let c = gpt_oss_config_of(&[("rope.scaling.type", None)]).unwrap();
        assert_eq!(c.rope_scaling, crate::RopeScaling::None);
        let c =
            gpt_oss_config_of(&[("rope.scaling.yarn_beta_fast", Some(Value::F32(16.0)))]).unwrap();
        assert!(matches!(
            c.rope_scaling,
            crate::RopeScaling::Yarn { beta_fast, .. } if beta_fast == 16.0
        ));
        // Malformed headers are refused in words.
        for (changes, says) in [
            (
                vec![("attention.sliding_window", None)],
                "the file has no gpt-oss.attention.sliding_window",
            ),
            (
                vec![("attention.sliding_window", Some(Value::U32(0)))],
                "gpt-oss.attention.sliding_window is 0",
            ),
            (
                vec![("attention.sliding_window", Some(Value::String("4".into())))],
                "gpt-oss.attention.sliding_window is",
            ),
            (
                vec![("expert_count", None)],
                "the file has no gpt-oss.expert_count",
            ),
            (
                vec![("expert_used_count", Some(Value::U32(5)))],
                "gpt-oss.expert_used_count is 5",
            ),
            (
                vec![("attention.value_length", Some(Value::U32(8)))],
                "value heads (8) and key heads (16) differ",
            ),
            (
                vec![("rope.scaling.factor", None)],
                "yarn RoPE scaling without a factor",
            ),
            (
                vec![("rope.scaling.yarn_beta_slow", Some(Value::F32(-1.0)))],
                "gpt-oss.rope.scaling.yarn_beta_slow is -1, not a positive number",
            ),
            (
                vec![("rope.scaling.yarn_attn_factor", Some(Value::F32(0.5)))],
                "gpt-oss.rope.scaling.yarn_attn_factor is 0.5",
            ),
            (
                vec![("rope.freq_base", Some(Value::String("fast".into())))],
                "gpt-oss.rope.freq_base is",
            ),
        ] {
            let e = gpt_oss_config_of(&changes).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn gpt_oss_names_map_to_llama_cpps() {
        let g = |hf: &str| gguf_name(hf, Family::GptOss);
        for (hf, want) in [
            ("model.layers.3.self_attn.sinks", "blk.3.attn_sinks.weight"),
            (
                "model.layers.3.mlp.router.weight",
                "blk.3.ffn_gate_inp.weight",
            ),
            ("model.layers.3.mlp.router.bias", "blk.3.ffn_gate_inp.bias"),
            ("model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias"),
            (
                "model.layers.3.post_attention_layernorm.weight",
                "blk.3.post_attention_norm.weight",
            ),
            (
                "model.layers.3.self_attn.o_proj.bias",
                "blk.3.attn_output.bias",
            ),
        ] {
            assert_eq!(g(hf).as_deref(), Some(want), "{hf}");
        }
        // Each expert's weights and biases are slices of the 3-D (2-D for biases) tensors.
        for (hf, want) in [
            (
                "model.layers.3.mlp.experts.31.gate_proj.weight",
                ("blk.3.ffn_gate_exps.weight", 31),
            ),
            (
                "model.layers.3.mlp.experts.0.down_proj.bias",
                ("blk.3.ffn_down_exps.bias", 0),
            ),
        ] {
            assert_eq!(
                experts::stacked_name(hf),
                Some((want.0.to_string(), want.1))
            );
        }
    }

    #[test]
    fn rope_rows_go_back_to_hugging_face_order() {
        // head_dim 4: HF rows (0,1 | 2,3) are the halves; llama.cpp stores 0,2,1,3.
        let order: Vec<usize> = (0..8).map(|r| gguf_row(r, Some(4))).collect();
        assert_eq!(order, [0, 2, 1, 3, 4, 6, 5, 7]);
        assert_eq!(gguf_row(5, None), 5);
    }
}
