//! Converting a Hugging Face model folder (safetensors, BF16/F16/F32) to a Q4NX folder.
//!
//! The converter streams: it plans the whole output header from the source headers, writes it,
//! then reads each source tensor in chunks of row blocks with positioned reads on a read-ahead
//! thread (not through the memory map, so resident memory stays at a few 16 MiB chunk buffers
//! and disk reads overlap compute), quantizes each chunk on every core with
//! `std::thread::scope` (no pool is needed: one scope per chunk costs microseconds against
//! milliseconds of work), and appends the tiles. Everything is written
//! into a hidden `.NAME.partial` folder beside the destination and renamed at the end, so an
//! error or an interruption never leaves a half-written model under the destination name.
//!
//! gpt-oss's experts in transformers' layout (3-D tensors, or the released MXFP4 blocks) are
//! split into Hearth's per-expert tensors, dequantized first if MXFP4 ([`crate::gpt_oss_experts`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use half::bf16;
use serde_json::Value;

use crate::container::{encode_header, EntryToWrite};
use crate::gpt_oss_experts::{self, ExpertTensor};
use crate::layout::{expected_tensors, padded_cols, ExpectedTensor, Role};
use crate::quantize::quantize_row_block;
use crate::tile::{Q4_1_TILE_BYTES, TILE_COLS, TILE_ROWS};
use crate::weights::{Q4NX_FILE, SHAPE_KEY_PREFIX};
use crate::{Dtype, Error, Family, ModelConfig, WeightFormat, Weights};

/// Files copied from the source folder when present, besides the weights.
pub const COPIED_FILES: &[&str] = &[
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
    "special_tokens_map.json",
];

/// Number of KV heads FastFlowLM's Qwen3 engine is built for (every Qwen3 it ships has 8).
pub const FLM_QWEN3_KV_HEADS: usize = 8;

/// Marker file identifying a partial output folder as ours (so we may delete it).
pub(crate) const PARTIAL_MARKER: &str = ".hearth-convert-partial";

/// Source bytes read per chunk (rounded to whole row blocks).
const CHUNK_BYTES: usize = 16 << 20;

/// Which model to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// The model as it is: same heads, same norms, same function (up to Q4_1 rounding).
    #[default]
    Faithful,
    /// What FastFlowLM's Qwen3 engine loads today: KV heads replicated to 8 and, for a Llama
    /// source, all-ones q/k RMSNorm weights. Those norms still divide each head by its RMS, so
    /// this variant does **not** compute the same function as a Llama original.
    FlmQwen3,
}

/// Options of [`convert`].
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Which model to write. By default, [`Variant::Faithful`].
    pub variant: Variant,
    /// Threads for quantization. By default, every core.
    pub threads: Option<usize>,
}

/// Progress of a conversion, reported after each chunk.
#[derive(Debug, Clone)]
pub struct ConvertProgress {
    /// The tensor being written.
    pub tensor: String,
    /// Tensors finished so far.
    pub tensors_done: usize,
    /// Tensors in the output.
    pub tensors_total: usize,
    /// Bytes of model.q4nx written so far.
    pub bytes_done: u64,
    /// Final size of model.q4nx.
    pub bytes_total: u64,
}

/// What a finished conversion produced.
#[derive(Debug, Clone)]
pub struct ConvertReport {
    /// The destination folder.
    pub dir: PathBuf,
    /// The config of the written model (differs from the source for the FlmQwen3 variant).
    pub config: ModelConfig,
    /// Tensors in model.q4nx.
    pub tensors: usize,
    /// Weights in the written model (after any KV-head replication).
    pub parameters: u64,
    /// Size of model.q4nx in bytes.
    pub q4nx_bytes: u64,
    /// Files copied beside it (config.json included).
    pub copied: Vec<String>,
    /// Things the user must know about the result (e.g. the variant's changed function).
    pub warnings: Vec<String>,
}

/// Where the data of one output tensor comes from.
#[derive(Debug, Clone)]
enum Source {
    /// A dense source tensor, written as BF16.
    Bf16(String),
    /// A source linear weight `[N, K]`, quantized to Q4_1 tiles.
    Quantize {
        name: String,
        rows: usize,
        cols: usize,
    },
    /// A source k/v projection whose heads are each repeated `times` times, then quantized.
    QuantizeReplicated {
        name: String,
        rows: usize,
        cols: usize,
        head_dim: usize,
        times: usize,
    },
    /// A BF16 vector of ones (the variant's invented q/k norms).
    Ones(usize),
    /// One of gpt-oss's expert tensors, from transformers' layout: quantized if `linear`
    /// (`[N, K]`), else a BF16 bias.
    Expert {
        tensor: ExpertTensor,
        linear: Option<(usize, usize)>,
    },
}

/// One planned output tensor.
#[derive(Debug, Clone)]
struct Planned {
    entry: EntryToWrite,
    source: Source,
}

/// Converts the Hugging Face model folder `src` into a Q4NX folder `dst` (which must not exist
/// or be empty). `progress` is called after each chunk written.
pub fn convert(
    src: &Path,
    dst: &Path,
    options: &ConvertOptions,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<ConvertReport, Error> {
    let config_path = src.join("config.json");
    let config_text = std::fs::read_to_string(&config_path).map_err(|e| Error::Config {
        path: config_path.clone(),
        detail: format!("cannot read config.json ({e}); a model folder needs it"),
    })?;
    let config = ModelConfig::from_path(&config_path)?;
    let weights = Weights::open(src)?;
    if weights.format() == WeightFormat::Q4nx {
        return Err(convert_err(format!(
            "{} already holds a Q4NX model (model.q4nx); nothing to convert",
            src.display()
        )));
    }
    let split_experts = gpt_oss_experts::in_transformers_layout(&weights, &config);
    if split_experts {
        gpt_oss_experts::check(&weights, &config)?;
    } else {
        crate::validate(&weights, &config)?;
    }
    check_no_unknown_tensors(&weights, &config)?;

    let (out_config, out_config_text, mut warnings) = match options.variant {
        Variant::Faithful => (config.clone(), config_text, Vec::new()),
        Variant::FlmQwen3 => flm_qwen3_config(&config, &config_text)?,
    };
    let out_config_text = without_quantization_config(out_config_text)?;
    if weights.skipped_vision() {
        warnings.push(
            "the model's vision tower was left out: the converted model reads text only, not \
             pictures"
                .to_string(),
        );
    }
    let plan = plan(&weights, &config, &out_config, split_experts)?;
    check_destination(dst)?;
    let partial = partial_dir(dst)?;
    std::fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, e))?;
    std::fs::write(partial.join(PARTIAL_MARKER), b"").map_err(|e| Error::io(&partial, e))?;

    let result = (|| {
        let threads = options
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let q4nx_bytes = write_q4nx(
            &weights,
            &plan,
            options.variant,
            &partial.join(Q4NX_FILE),
            threads,
            progress,
        )?;
        let mut copied = vec!["config.json".to_string()];
        std::fs::write(partial.join("config.json"), out_config_text)
            .map_err(|e| Error::io(partial.join("config.json"), e))?;
        for name in COPIED_FILES {
            let from = src.join(name);
            if from.is_file() {
                std::fs::copy(&from, partial.join(name)).map_err(|e| Error::io(&from, e))?;
                copied.push(name.to_string());
            }
        }
        if dst.is_dir() {
            // check_destination made sure it is empty.
            std::fs::remove_dir(dst).map_err(|e| Error::io(dst, e))?;
        }
        std::fs::rename(&partial, dst).map_err(|e| Error::io(dst, e))?;
        // The marker goes only after the rename: until then a kill leaves a folder the next
        // conversion knows as its own.
        std::fs::remove_file(dst.join(PARTIAL_MARKER)).map_err(|e| Error::io(dst, e))?;
        Ok((q4nx_bytes, copied))
    })();
    let (q4nx_bytes, copied) = match result {
        Ok(r) => r,
        Err(e) => {
            if let Err(cleanup) = std::fs::remove_dir_all(&partial) {
                tracing::warn!(dir = %partial.display(), %cleanup, "could not remove partial output");
            }
            return Err(e);
        }
    };
    // The warnings travel in the report for the caller to show; log them only for the record.
    for w in &warnings {
        tracing::info!("{w}");
    }
    Ok(ConvertReport {
        dir: dst.to_path_buf(),
        tensors: plan.len(),
        parameters: plan
            .iter()
            .map(|p| match &p.source {
                Source::Quantize { rows, cols, .. } => (rows * cols) as u64,
                Source::QuantizeReplicated {
                    rows, cols, times, ..
                } => (rows * cols * times) as u64,
                Source::Expert {
                    linear: Some((rows, cols)),
                    ..
                } => (rows * cols) as u64,
                _ => p.entry.shape.iter().product::<usize>() as u64,
            })
            .sum(),
        config: out_config,
        q4nx_bytes,
        copied,
        warnings,
    })
}

fn convert_err(detail: String) -> Error {
    Error::Convert { detail }
}

/// Refuses source tensors the converter would silently drop (biases, extra modules).
fn check_no_unknown_tensors(weights: &Weights, config: &ModelConfig) -> Result<(), Error> {
    let mut known: HashSet<String> = expected_tensors(config)
        .into_iter()
        .map(|t| t.name)
        .collect();
    if config.family == Family::GptOss {
        known.extend(gpt_oss_experts::stored_names(config));
    }
    for name in weights.names() {
        if !known.contains(name) && !name.ends_with("rotary_emb.inv_freq") {
            return Err(convert_err(format!(
                "{}: tensor {name} is not part of a plain {:?} model (config.json does not \
                 imply it), so the converted model would not compute what the original does",
                weights.path().display(),
                config.family
            )));
        }
    }
    Ok(())
}

/// Refuses a destination that is a file or a folder with something in it.
pub(crate) fn check_destination(dst: &Path) -> Result<(), Error> {
    if dst.is_file() {
        return Err(convert_err(format!(
            "{} exists and is a file; choose a folder that does not exist yet",
            dst.display()
        )));
    }
    if dst.is_dir() {
        let mut entries = std::fs::read_dir(dst).map_err(|e| Error::io(dst, e))?;
        if entries.next().is_some() {
            return Err(convert_err(format!(
                "{} already exists and is not empty; remove it or choose another folder",
                dst.display()
            )));
        }
    }
    Ok(())
}

/// The hidden `.NAME.partial` folder beside `dst` that a conversion writes into, cleared of
/// what an interrupted conversion left there.
pub(crate) fn partial_dir(dst: &Path) -> Result<PathBuf, Error> {
    let dst_name = dst
        .file_name()
        .ok_or_else(|| convert_err(format!("{} is not a folder name", dst.display())))?
        .to_string_lossy()
        .into_owned();
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let partial = parent.join(format!(".{dst_name}.partial"));
    remove_stale_partial(&partial)?;
    Ok(partial)
}

fn remove_stale_partial(partial: &Path) -> Result<(), Error> {
    if !partial.exists() {
        return Ok(());
    }
    if partial.join(PARTIAL_MARKER).is_file() {
        tracing::info!(dir = %partial.display(), "removing output of an interrupted convert");
        std::fs::remove_dir_all(partial).map_err(|e| Error::io(partial, e))
    } else if is_empty_dir(partial) {
        // A conversion killed between making the folder and marking it; an empty folder holds
        // nothing to lose.
        std::fs::remove_dir(partial).map_err(|e| Error::io(partial, e))
    } else {
        Err(convert_err(format!(
            "{} exists and was not made by hearth convert; move it away and try again",
            partial.display()
        )))
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

/// The FlmQwen3 variant's config (JSON text rewritten) and the warning it carries.
fn flm_qwen3_config(
    config: &ModelConfig,
    text: &str,
) -> Result<(ModelConfig, String, Vec<String>), Error> {
    if config.family == Family::Lfm2 {
        return Err(convert_err(
            "cannot make a FastFlowLM Qwen3 variant of an LFM2 model: its convolution layers \
             have no place in Qwen3"
                .into(),
        ));
    }
    if config.family == Family::Phi3 {
        return Err(convert_err(
            "cannot make a FastFlowLM Qwen3 variant of a Phi-3 model: its partial rotary, \
             LongRoPE and sliding window have no place in Qwen3"
                .into(),
        ));
    }
    if config.family == Family::Gemma3 {
        return Err(convert_err(
            "cannot make a FastFlowLM Qwen3 variant of a Gemma 3 model: its extra norms, GELU \
             and sliding-window layers have no place in Qwen3"
                .into(),
        ));
    }
    if config.qkv_bias() {
        return Err(convert_err(format!(
            "cannot make a FastFlowLM Qwen3 variant of a {} model: Qwen3 has no q/k/v biases to \
             carry them",
            config.family.name()
        )));
    }
    let kv = config.num_key_value_heads;
    let heads = config.num_attention_heads;
    if kv > FLM_QWEN3_KV_HEADS
        || !FLM_QWEN3_KV_HEADS.is_multiple_of(kv)
        || !heads.is_multiple_of(FLM_QWEN3_KV_HEADS)
        || !config.head_dim.is_multiple_of(TILE_ROWS)
    {
        return Err(convert_err(format!(
            "cannot make a FastFlowLM Qwen3 variant: {heads} query heads, {kv} KV heads and \
             head_dim {} cannot be laid out as {FLM_QWEN3_KV_HEADS} KV heads",
            config.head_dim
        )));
    }
    let mut json: serde_json::Map<String, Value> =
        serde_json::from_str(text).map_err(|e| Error::Config {
            path: PathBuf::from("config.json"),
            detail: format!("config.json is not a JSON object: {e}"),
        })?;
    json.insert(
        "architectures".into(),
        serde_json::json!(["Qwen3ForCausalLM"]),
    );
    json.insert("model_type".into(), "qwen3".into());
    json.insert("num_key_value_heads".into(), FLM_QWEN3_KV_HEADS.into());
    json.insert("head_dim".into(), config.head_dim.into());
    json.insert("rope_theta".into(), config.rope_theta.into());
    let mut out_text = serde_json::to_string_pretty(&Value::Object(json))
        .map_err(|e| convert_err(format!("cannot write config.json: {e}")))?;
    out_text.push('\n');
    let out = ModelConfig::from_json(&out_text)?;
    let mut warnings = Vec::new();
    if config.family == Family::Llama {
        warnings.push(format!(
            "the flm-qwen3 variant does not compute the same function as the original model: \
             it adds q/k RMSNorm with unit weights, which still divides every head by its RMS \
             (and replicates the {kv} KV heads to {FLM_QWEN3_KV_HEADS}, which is exact but uses \
             {}x the KV cache); use it only to run on FastFlowLM's Qwen3 engine",
            FLM_QWEN3_KV_HEADS / kv
        ));
    }
    Ok((out, out_text, warnings))
}

/// config.json's text without `quantization_config`. It describes the source's weights (the
/// released gpt-oss's `{"quant_method": "mxfp4", ...}`: its experts as MXFP4 blocks), which
/// the conversion does not keep: every output linear is Q4_1 tiles in model.q4nx, so the key
/// would lie about the folder to any reader of it. A text without the key is kept as it is.
fn without_quantization_config(text: String) -> Result<String, Error> {
    let mut json: serde_json::Map<String, Value> =
        serde_json::from_str(&text).map_err(|e| Error::Config {
            path: PathBuf::from("config.json"),
            detail: format!("config.json is not a JSON object: {e}"),
        })?;
    if json.remove("quantization_config").is_none() {
        return Ok(text);
    }
    let mut out = serde_json::to_string_pretty(&Value::Object(json))
        .map_err(|e| convert_err(format!("cannot write config.json: {e}")))?;
    out.push('\n');
    Ok(out)
}

/// Plans every output tensor from the output config and the source weights (with
/// `split_experts`, gpt-oss's experts come from transformers' layout).
fn plan(
    weights: &Weights,
    src: &ModelConfig,
    out: &ModelConfig,
    split_experts: bool,
) -> Result<Vec<Planned>, Error> {
    let times = out.num_key_value_heads / src.num_key_value_heads;
    let mut plan = Vec::new();
    for ExpectedTensor { name, role, shape } in expected_tensors(out) {
        if let Some(tensor) = split_experts
            .then(|| ExpertTensor::parse(out, &name))
            .flatten()
        {
            let (dtype, stored, linear) = match role {
                Role::Linear => {
                    let (n, k) = (shape[0], shape[1]);
                    let tiles = n.div_ceil(TILE_ROWS) * (padded_cols(k) / TILE_COLS);
                    (Dtype::I8, vec![tiles, Q4_1_TILE_BYTES], Some((n, k)))
                }
                _ => (Dtype::Bf16, shape, None),
            };
            if linear.is_some_and(|(n, _)| n % TILE_ROWS != 0) {
                return Err(Error::WrongTensor {
                    path: weights.path().to_path_buf(),
                    tensor: name,
                    expected: "a row count N that is a multiple of 32 (FastFlowLM tiles)".into(),
                    found: format!("N = {}", linear.map_or(0, |l| l.0)),
                });
            }
            plan.push(Planned {
                entry: EntryToWrite {
                    name,
                    dtype,
                    shape: stored,
                },
                source: Source::Expert { tensor, linear },
            });
            continue;
        }
        let source_name = if name == "lm_head.weight" && !weights.contains(&name) {
            // Tied embeddings: Q4NX always carries an explicit lm_head.
            "model.embed_tokens.weight".to_string()
        } else {
            name.clone()
        };
        let planned = match role {
            Role::Embedding | Role::Norm => {
                let source = if weights.contains(&source_name) {
                    Source::Bf16(source_name)
                } else if name.ends_with("q_norm.weight") || name.ends_with("k_norm.weight") {
                    Source::Ones(shape[0])
                } else {
                    return Err(Error::MissingTensor {
                        path: weights.path().to_path_buf(),
                        tensor: source_name,
                    });
                };
                Planned {
                    entry: EntryToWrite {
                        name,
                        dtype: Dtype::Bf16,
                        shape,
                    },
                    source,
                }
            }
            Role::Linear => {
                let (n, k) = (shape[0], shape[1]);
                if n % TILE_ROWS != 0 {
                    return Err(Error::WrongTensor {
                        path: weights.path().to_path_buf(),
                        tensor: source_name,
                        expected: "a row count N that is a multiple of 32 (FastFlowLM tiles)"
                            .into(),
                        found: format!("N = {n}"),
                    });
                }
                let is_kv = name.ends_with("k_proj.weight") || name.ends_with("v_proj.weight");
                let source = if is_kv && times > 1 {
                    Source::QuantizeReplicated {
                        name: source_name,
                        rows: n / times,
                        cols: k,
                        head_dim: out.head_dim,
                        times,
                    }
                } else {
                    Source::Quantize {
                        name: source_name,
                        rows: n,
                        cols: k,
                    }
                };
                let tiles = n / TILE_ROWS * (padded_cols(k) / TILE_COLS);
                Planned {
                    entry: EntryToWrite {
                        name,
                        dtype: Dtype::I8,
                        shape: vec![tiles, Q4_1_TILE_BYTES],
                    },
                    source,
                }
            }
        };
        plan.push(planned);
    }
    Ok(plan)
}

/// Positioned reads of source tensors, one open file per shard.
struct Reader<'w> {
    weights: &'w Weights,
    files: HashMap<PathBuf, File>,
}

impl Reader<'_> {
    /// Reads `len` bytes at `offset` into the tensor's data, returning the dtype.
    fn read(
        &mut self,
        name: &str,
        offset: usize,
        buf: &mut Vec<u8>,
        len: usize,
    ) -> Result<Dtype, Error> {
        let (path, range, dtype, _) =
            self.weights
                .locate(name)
                .ok_or_else(|| Error::MissingTensor {
                    path: self.weights.path().to_path_buf(),
                    tensor: name.to_string(),
                })?;
        let file = match self.files.get(path) {
            Some(f) => f,
            None => {
                let f = File::open(path).map_err(|e| Error::io(path, e))?;
                self.files.entry(path.to_path_buf()).or_insert(f)
            }
        };
        buf.resize(len, 0);
        file.read_exact_at(buf, (range.start + offset) as u64)
            .map_err(|e| Error::io(path, e))?;
        Ok(dtype)
    }
}

/// Writes model.q4nx and returns its size.
fn write_q4nx(
    weights: &Weights,
    plan: &[Planned],
    variant: Variant,
    path: &Path,
    threads: usize,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<u64, Error> {
    let mut metadata = BTreeMap::from([
        ("format".to_string(), "q4nx".to_string()),
        (
            "producer".to_string(),
            format!("hearth {}", env!("CARGO_PKG_VERSION")),
        ),
        (
            "hearth.variant".to_string(),
            match variant {
                Variant::Faithful => "faithful",
                Variant::FlmQwen3 => "flm-qwen3",
            }
            .to_string(),
        ),
    ]);
    for p in plan {
        if let Source::Quantize { rows, cols, .. } = p.source {
            metadata.insert(
                format!("{SHAPE_KEY_PREFIX}{}", p.entry.name),
                format!("{rows},{cols}"),
            );
        }
        if let Source::Expert {
            linear: Some((rows, cols)),
            ..
        } = p.source
        {
            metadata.insert(
                format!("{SHAPE_KEY_PREFIX}{}", p.entry.name),
                format!("{rows},{cols}"),
            );
        }
        if let Source::QuantizeReplicated {
            rows, cols, times, ..
        } = p.source
        {
            metadata.insert(
                format!("{SHAPE_KEY_PREFIX}{}", p.entry.name),
                format!("{},{cols}", rows * times),
            );
        }
    }
    let entries: Vec<EntryToWrite> = plan.iter().map(|p| p.entry.clone()).collect();
    let header = encode_header(&entries, &metadata);
    let bytes_total =
        header.len() as u64 + entries.iter().map(|e| e.byte_len() as u64).sum::<u64>();
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = Sink {
        writer: BufWriter::with_capacity(4 << 20, file),
        path,
        written: 0,
    };
    out.write(&header)?;
    let mut reader = Reader {
        weights,
        files: HashMap::new(),
    };
    for (index, p) in plan.iter().enumerate() {
        let start = out.written;
        let mut report = |written: u64| {
            progress(ConvertProgress {
                tensor: p.entry.name.clone(),
                tensors_done: index,
                tensors_total: plan.len(),
                bytes_done: written,
                bytes_total,
            })
        };
        match &p.source {
            Source::Bf16(name) => write_bf16(
                &mut reader,
                name,
                p.entry.byte_len() / 2,
                &mut out,
                &mut report,
            )?,
            Source::Ones(len) => {
                let one = bf16::ONE.to_le_bytes();
                let bytes: Vec<u8> = (0..*len).flat_map(|_| one).collect();
                out.write(&bytes)?;
            }
            Source::Quantize { name, rows, cols } => write_quantized(
                &mut reader,
                name,
                *rows,
                *cols,
                threads,
                &mut out,
                &mut report,
            )?,
            Source::QuantizeReplicated {
                name,
                rows,
                cols,
                head_dim,
                times,
            } => {
                let w = read_f32(&mut reader, name, rows * cols)?;
                let mut replicated = Vec::with_capacity(w.len() * times);
                for head in w.chunks_exact(head_dim * cols) {
                    for _ in 0..*times {
                        replicated.extend_from_slice(head);
                    }
                }
                let tiles = crate::quantize_q4_1_tiles(&replicated, rows * times, *cols);
                out.write(&tiles)?;
            }
            Source::Expert { tensor, linear } => {
                let values = tensor.read(weights, &mut |name, offset, len| {
                    let mut buf = Vec::new();
                    reader.read(name, offset, &mut buf, len)?;
                    Ok(buf)
                })?;
                match linear {
                    Some((rows, cols)) => {
                        out.write(&crate::quantize_q4_1_tiles(&values, *rows, *cols))?
                    }
                    None => {
                        let bytes: Vec<u8> = values
                            .iter()
                            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
                            .collect();
                        out.write(&bytes)?;
                    }
                }
            }
        }
        let expected = p.entry.byte_len() as u64;
        if out.written - start != expected {
            return Err(convert_err(format!(
                "internal error: tensor {} wrote {} bytes, its header says {expected}",
                p.entry.name,
                out.written - start
            )));
        }
        report(out.written);
    }
    let file = out
        .writer
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(path, e))?;
    Ok(bytes_total)
}

/// The output file and how much has been written to it.
struct Sink<'p> {
    writer: BufWriter<File>,
    path: &'p Path,
    written: u64,
}

impl Sink<'_> {
    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.writer
            .write_all(bytes)
            .map_err(|e| Error::io(self.path, e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Converts `bytes` of a float dtype to f32, refusing NaN and infinities.
fn to_f32_checked(dtype: Dtype, bytes: &[u8], out: &mut Vec<f32>, name: &str) -> Result<(), Error> {
    out.clear();
    if !crate::dtype::extend_f32(dtype, bytes, out) {
        return Err(convert_err(format!(
            "tensor {name} is {dtype}; only BF16, F16 and F32 weights can be converted"
        )));
    }
    if let Some(i) = out.iter().position(|v| !v.is_finite()) {
        return Err(convert_err(format!(
            "tensor {name} holds a non-finite value ({}) at element {i} of a chunk; the source \
             model is damaged",
            out[i]
        )));
    }
    Ok(())
}

fn read_f32(reader: &mut Reader, name: &str, len: usize) -> Result<Vec<f32>, Error> {
    let (_, _, dtype, _) = reader
        .weights
        .locate(name)
        .ok_or_else(|| Error::MissingTensor {
            path: reader.weights.path().to_path_buf(),
            tensor: name.to_string(),
        })?;
    let mut buf = Vec::new();
    reader.read(name, 0, &mut buf, len * dtype.size())?;
    let mut out = Vec::with_capacity(len);
    to_f32_checked(dtype, &buf, &mut out, name)?;
    Ok(out)
}

/// Streams a dense tensor to BF16 (a byte copy when the source already is BF16).
fn write_bf16(
    reader: &mut Reader,
    name: &str,
    len: usize,
    out: &mut Sink,
    report: &mut dyn FnMut(u64),
) -> Result<(), Error> {
    let (_, _, dtype, _) = reader
        .weights
        .locate(name)
        .ok_or_else(|| Error::MissingTensor {
            path: reader.weights.path().to_path_buf(),
            tensor: name.to_string(),
        })?;
    let per_chunk = (CHUNK_BYTES / dtype.size()).max(1);
    let pieces: Vec<(usize, usize)> = (0..len)
        .step_by(per_chunk)
        .map(|start| {
            (
                start * dtype.size(),
                per_chunk.min(len - start) * dtype.size(),
            )
        })
        .collect();
    let mut floats = Vec::new();
    let mut bytes = Vec::new();
    read_ahead(reader, name, &pieces, &mut |buf| {
        to_f32_checked(dtype, buf, &mut floats, name)?;
        if dtype == Dtype::Bf16 {
            out.write(buf)?;
        } else {
            bytes.clear();
            bytes.extend(floats.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()));
            out.write(&bytes)?;
        }
        report(out.written);
        Ok(())
    })
}

/// Reads `pieces` (offset, length) of a tensor on a separate thread, one piece ahead of
/// `consume`, so disk reads overlap the quantization of the previous piece.
fn read_ahead(
    reader: &mut Reader,
    name: &str,
    pieces: &[(usize, usize)],
    consume: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
) -> Result<(), Error> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<u8>, Error>>(1);
        scope.spawn(move || {
            for &(offset, len) in pieces {
                let mut buf = Vec::new();
                let piece = reader.read(name, offset, &mut buf, len).map(|_| buf);
                let failed = piece.is_err();
                // A closed channel means the consumer stopped on an error: stop reading too.
                if tx.send(piece).is_err() || failed {
                    break;
                }
            }
        });
        for _ in pieces {
            let buf = rx
                .recv()
                .map_err(|_| convert_err(format!("reading {name} stopped unexpectedly")))??;
            consume(&buf)?;
        }
        Ok(())
    })
}

/// Streams a linear weight to Q4_1 tiles, chunk by chunk of row blocks, on `threads` threads.
fn write_quantized(
    reader: &mut Reader,
    name: &str,
    rows: usize,
    cols: usize,
    threads: usize,
    out: &mut Sink,
    report: &mut dyn FnMut(u64),
) -> Result<(), Error> {
    let (_, _, dtype, _) = reader
        .weights
        .locate(name)
        .ok_or_else(|| Error::MissingTensor {
            path: reader.weights.path().to_path_buf(),
            tensor: name.to_string(),
        })?;
    let block_src_bytes = TILE_ROWS * cols * dtype.size();
    let block_out_bytes = padded_cols(cols) / TILE_COLS * Q4_1_TILE_BYTES;
    let blocks_total = rows / TILE_ROWS;
    let blocks_per_chunk =
        (CHUNK_BYTES / block_src_bytes.max(1)).clamp(threads, blocks_total.max(threads));
    let pieces: Vec<(usize, usize)> = (0..blocks_total)
        .step_by(blocks_per_chunk)
        .map(|block| {
            let n = blocks_per_chunk.min(blocks_total - block);
            (block * block_src_bytes, n * block_src_bytes)
        })
        .collect();
    let mut tiles = Vec::new();
    read_ahead(reader, name, &pieces, &mut |buf| {
        let n = buf.len() / block_src_bytes;
        tiles.clear();
        tiles.resize(n * block_out_bytes, 0);
        let per_thread = n.div_ceil(threads);
        let results: Vec<Result<(), Error>> = std::thread::scope(|scope| {
            let handles: Vec<_> = buf
                .chunks(per_thread * block_src_bytes)
                .zip(tiles.chunks_mut(per_thread * block_out_bytes))
                .map(|(src, dst)| {
                    scope.spawn(move || {
                        let mut floats = Vec::with_capacity(TILE_ROWS * cols);
                        for (s, d) in src
                            .chunks_exact(block_src_bytes)
                            .zip(dst.chunks_exact_mut(block_out_bytes))
                        {
                            to_f32_checked(dtype, s, &mut floats, name)?;
                            quantize_row_block(&floats, cols, d);
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(convert_err(format!("quantizing {name} failed"))))
                })
                .collect()
        });
        results.into_iter().collect::<Result<(), Error>>()?;
        out.write(&tiles)?;
        report(out.written);
        Ok(())
    })
}

#[cfg(test)]
mod tests;
