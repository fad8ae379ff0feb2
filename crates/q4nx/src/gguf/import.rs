//! A GGUF file (Llama, Qwen2, Qwen3, Qwen3-MoE, Gemma 3, Phi-3, LFM2, gpt-oss) to a Q4NX
//! model folder. A mixture of experts' 3-D tensors are split into one tensor per expert
//! (`gguf/experts.rs`); gpt-oss's MXFP4 experts are decoded and quantized to Q4_1, as every
//! type without a tile of its own is (below).
//!
//! Linear weights keep the GGUF's codes where a block maps onto a Q4NX tile group: Q4_1 and
//! Q4_0 (as `m = -8 d`) become Q4_1 tiles and Q8_0 becomes Q8 tiles, with only the f16 scales
//! rounded to BF16. Other linear types are decoded as ggml does and quantized to Q4_1, except
//! the output head, which is never stored below the GGUF's precision: a head above 4 bits
//! becomes Q8 tiles. The embedding and the norms are decoded and stored as BF16 (Gemma's
//! norms, which llama.cpp's converter stores as `1 + w`, back as Hugging Face's `w`).
//!
//! llama.cpp stores the Q and K projections of `llama` models with each head's rows
//! interleaved for its RoPE; the rows are put back in Hugging Face order here, so the engine's
//! rotate-half RoPE computes the same thing. Llama 3.1's RoPE scaling, which llama.cpp's
//! converter writes as per-frequency divisors (`rope_freqs.weight`), goes into config.json as
//! [`crate::RopeScaling::RopeFreqs`]. Everything is written into a hidden partial folder
//! and renamed at the end, like [`crate::convert`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use half::bf16;

use crate::container::{encode_header, EntryToWrite};
use crate::convert::{check_destination, partial_dir, PARTIAL_MARKER};
use crate::gguf::model::{
    check_finite, gguf_err, gguf_row, json_with_ids, norm_plus_one, read_header_model,
    rows_interleaved, source_tensors, with_rope_freqs, HeaderModel,
};
use crate::gguf::tokenizer::{self, Vocabulary};
use crate::gguf::{dequantize, GgmlType, GgufFile, Header, TensorInfo, Value};
use crate::layout::{padded_cols, ExpectedTensor, Role};
use crate::quantize::quantize_row_block;
use crate::tile::{
    self, GROUP, GROUPS_PER_TILE, Q4_1_TILE_BYTES, Q8_TILE_BYTES, TILE_COLS, TILE_ROWS,
};
use crate::weights::{Q4NX_FILE, SHAPE_KEY_PREFIX};
use crate::{ConvertProgress, Dtype, Error, Family, ModelConfig, Weights};

/// BF16 bytes of embedding and norm rows converted per write.
const EMBEDDING_CHUNK_BYTES: usize = 4 << 20;

/// What an import produced.
#[derive(Debug, Clone)]
pub struct GgufImportReport {
    /// The destination folder.
    pub dir: PathBuf,
    /// The model's config.
    pub config: ModelConfig,
    /// `general.architecture`.
    pub architecture: String,
    /// `general.name`, if the file has one.
    pub model_name: Option<String>,
    /// Tensors in model.q4nx.
    pub tensors: usize,
    /// Weights in the model (lm_head counted even when tied).
    pub parameters: u64,
    /// Size of model.q4nx in bytes.
    pub q4nx_bytes: u64,
    /// How each linear weight was stored, e.g. "Q4_1 -> Q4_1 tiles (codes kept)": count.
    pub linear_paths: BTreeMap<String, usize>,
    /// Relative RMS change of the weights whose codes were kept, caused only by rounding
    /// their f16 scales (and mins) to BF16.
    pub scale_rounding_error: f64,
}

/// How one linear weight is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path4 {
    /// Q4_1/Q4_0 codes kept in Q4_1 tiles.
    KeepQ4,
    /// Q8_0 codes kept in Q8 tiles.
    KeepQ8,
    /// Decoded, then quantized to Q4_1 tiles.
    ToQ4,
    /// Decoded, then quantized to Q8 tiles.
    ToQ8,
}

impl Path4 {
    fn choose(kind: GgmlType, is_head: bool) -> Path4 {
        match kind {
            GgmlType::Q4_1 | GgmlType::Q4_0 => Path4::KeepQ4,
            GgmlType::Q8_0 => Path4::KeepQ8,
            _ if is_head && kind.bits_per_weight() > 5.0 => Path4::ToQ8,
            _ => Path4::ToQ4,
        }
    }

    fn tile_bytes(self) -> usize {
        match self {
            Path4::KeepQ4 | Path4::ToQ4 => Q4_1_TILE_BYTES,
            Path4::KeepQ8 | Path4::ToQ8 => Q8_TILE_BYTES,
        }
    }

    fn describe(self, kind: GgmlType) -> String {
        match self {
            Path4::KeepQ4 => format!("{kind} -> Q4_1 tiles (codes kept)"),
            Path4::KeepQ8 => format!("{kind} -> Q8 tiles (codes kept)"),
            Path4::ToQ4 => format!("{kind} -> Q4_1 tiles (requantized)"),
            Path4::ToQ8 => format!("{kind} -> Q8 tiles (requantized)"),
        }
    }
}

/// Where one output tensor comes from.
struct Planned<'h> {
    entry: EntryToWrite,
    source: Cow<'h, TensorInfo>,
    /// For linear weights: how, the logical `[N, K]`, and the Q/K head size to un-permute.
    linear: Option<(Path4, usize, usize, Option<usize>)>,
    /// Added to every value of a dense tensor (-1 for a Gemma norm: back to Hugging Face's w).
    shift: f32,
}

/// Imports the GGUF file `src` into a new Q4NX folder `dst` (which must not exist or be
/// empty). `progress` is called as model.q4nx grows.
pub fn import_gguf(
    src: &Path,
    dst: &Path,
    threads: Option<usize>,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<GgufImportReport, Error> {
    let file = GgufFile::open(src)?;
    let h = file.header();
    let Checked {
        arch,
        config_text,
        context,
        vocabulary,
        plan,
    } = check(h, src)?;
    let tok = tokenizer::build(h, &vocabulary, context)
        .map_err(|d| gguf_err(src, format!("cannot import its tokenizer: {d}")))?;
    let config_text = with_rope_freqs(&file, &config_text)?;

    check_destination(dst)?;
    let partial = partial_dir(dst)?;
    std::fs::create_dir_all(&partial).map_err(|e| Error::io(&partial, e))?;
    std::fs::write(partial.join(PARTIAL_MARKER), b"").map_err(|e| Error::io(&partial, e))?;
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let result = (|| {
        let (q4nx_bytes, error) =
            write_q4nx(&file, &plan, &partial.join(Q4NX_FILE), threads, progress)?;
        let with_config = json_with_ids(&config_text, tok.bos_id, &tok.eos_ids);
        for (name, text) in [
            ("config.json", with_config.as_str()),
            ("tokenizer.json", tok.tokenizer.as_str()),
            ("tokenizer_config.json", tok.tokenizer_config.as_str()),
            ("generation_config.json", tok.generation_config.as_str()),
        ] {
            std::fs::write(partial.join(name), text)
                .map_err(|e| Error::io(partial.join(name), e))?;
        }
        // The written folder must read back as the model it claims to be.
        let weights = Weights::open(&partial)?;
        let written = ModelConfig::from_path(&partial.join("config.json"))?;
        crate::validate(&weights, &written)?;
        drop(weights);
        std::fs::remove_file(partial.join(PARTIAL_MARKER)).map_err(|e| Error::io(&partial, e))?;
        if dst.is_dir() {
            std::fs::remove_dir(dst).map_err(|e| Error::io(dst, e))?;
        }
        std::fs::rename(&partial, dst).map_err(|e| Error::io(dst, e))?;
        Ok((q4nx_bytes, error, written))
    })();
    let (q4nx_bytes, scale_rounding_error, config) = match result {
        Ok(r) => r,
        Err(e) => {
            if let Err(cleanup) = std::fs::remove_dir_all(&partial) {
                tracing::warn!(dir = %partial.display(), %cleanup, "could not remove partial output");
            }
            return Err(e);
        }
    };
    let mut linear_paths = BTreeMap::new();
    for p in &plan {
        if let Some((path, ..)) = p.linear {
            *linear_paths
                .entry(path.describe(p.source.kind))
                .or_insert(0) += 1;
        }
    }
    Ok(GgufImportReport {
        dir: dst.to_path_buf(),
        architecture: arch,
        model_name: h
            .get("general.name")
            .and_then(Value::as_str)
            .map(str::to_string),
        tensors: plan.len(),
        parameters: plan
            .iter()
            .map(|p| match p.linear {
                Some((_, n, k, _)) => (n * k) as u64,
                None => p.entry.shape.iter().product::<usize>() as u64,
            })
            .sum(),
        config,
        q4nx_bytes,
        linear_paths,
        scale_rounding_error,
    })
}

/// What the header of an importable GGUF file gives: everything but the tensor data.
struct Checked<'h> {
    arch: String,
    config_text: String,
    /// The context length, for the tokenizer's `model_max_length`.
    context: usize,
    vocabulary: Vocabulary<'h>,
    plan: Vec<Planned<'h>>,
}

/// Whether [`import_gguf`] would accept the GGUF file whose header is `h` (read from `src`),
/// judged from the header alone: the architecture, the hyperparameters, the tokenizer and the
/// tensor table. The tensor data is not read, so this is quick even for a file of many GB.
/// The one place that decides which GGUF files Hearth can import.
pub fn check_header(h: &Header, src: &Path) -> Result<(), Error> {
    check(h, src).map(drop)
}

fn check<'h>(h: &'h Header, src: &Path) -> Result<Checked<'h>, Error> {
    let HeaderModel {
        arch,
        family,
        config,
        config_text,
        vocabulary,
    } = read_header_model(h, src)?;
    let plan = plan(h, &config, family).map_err(|d| gguf_err(src, d))?;
    Ok(Checked {
        arch,
        config_text,
        context: config.max_position_embeddings,
        vocabulary,
        plan,
    })
}

/// Plans every output tensor (the sources [`source_tensors`] checked).
fn plan<'h>(
    h: &'h Header,
    config: &ModelConfig,
    family: Family,
) -> Result<Vec<Planned<'h>>, String> {
    let mut out = Vec::new();
    for (ExpectedTensor { name, role, shape }, t) in source_tensors(h, config, family)? {
        let g = &t.name;
        let planned = match role {
            Role::Embedding | Role::Norm => Planned {
                entry: EntryToWrite {
                    name,
                    dtype: Dtype::Bf16,
                    shape,
                },
                source: t,
                linear: None,
                shift: if norm_plus_one(role, family) {
                    -1.0
                } else {
                    0.0
                },
            },
            Role::Linear => {
                let (n, k) = (shape[0], shape[1]);
                if n % TILE_ROWS != 0 {
                    return Err(format!(
                        "tensor {g} has {n} rows; Q4NX tiles need a multiple of 32"
                    ));
                }
                let path = Path4::choose(t.kind, name == "lm_head.weight");
                let permute = rows_interleaved(&name, family).then_some(config.head_dim);
                let tiles = n / TILE_ROWS * (padded_cols(k) / TILE_COLS);
                Planned {
                    entry: EntryToWrite {
                        name,
                        dtype: Dtype::I8,
                        shape: vec![tiles, path.tile_bytes()],
                    },
                    source: t,
                    linear: Some((path, n, k, permute)),
                    shift: 0.0,
                }
            }
        };
        out.push(planned);
    }
    Ok(out)
}

/// Squared error and squared magnitude of keeping codes with BF16 scales, summed.
#[derive(Default, Clone, Copy)]
struct Rounding {
    err: f64,
    norm: f64,
}

/// Writes model.q4nx; returns its size and the relative RMS error of BF16 scale rounding.
fn write_q4nx(
    file: &GgufFile,
    plan: &[Planned],
    path: &Path,
    threads: usize,
    progress: &mut dyn FnMut(ConvertProgress),
) -> Result<(u64, f64), Error> {
    let mut metadata = BTreeMap::from([
        ("format".to_string(), "q4nx".to_string()),
        (
            "producer".to_string(),
            format!("hearth {} (from GGUF)", env!("CARGO_PKG_VERSION")),
        ),
        ("hearth.variant".to_string(), "faithful".to_string()),
    ]);
    for p in plan {
        if let Some((_, n, k, _)) = p.linear {
            metadata.insert(
                format!("{SHAPE_KEY_PREFIX}{}", p.entry.name),
                format!("{n},{k}"),
            );
        }
    }
    let entries: Vec<EntryToWrite> = plan.iter().map(|p| p.entry.clone()).collect();
    let header = encode_header(&entries, &metadata);
    let bytes_total =
        header.len() as u64 + entries.iter().map(|e| e.byte_len() as u64).sum::<u64>();
    let out_file = File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = BufWriter::with_capacity(4 << 20, out_file);
    let mut written = header.len() as u64;
    out.write_all(&header).map_err(|e| Error::io(path, e))?;
    let mut total = Rounding::default();
    for (index, p) in plan.iter().enumerate() {
        let data = file.data(&p.source);
        let mut emit = |bytes: &[u8], written: &mut u64| -> Result<(), Error> {
            out.write_all(bytes).map_err(|e| Error::io(path, e))?;
            *written += bytes.len() as u64;
            progress(ConvertProgress {
                tensor: p.entry.name.clone(),
                tensors_done: index,
                tensors_total: plan.len(),
                bytes_done: *written,
                bytes_total,
            });
            Ok(())
        };
        let start = written;
        match p.linear {
            None => {
                let row = p.source.row_len();
                let row_bytes = p.source.kind.bytes_for(row);
                let mut floats = vec![0f32; row];
                let mut bytes = Vec::new();
                // Whole rows of about EMBEDDING_CHUNK_BYTES of BF16 output per write, so memory
                // stays the same whatever the row length.
                let rows_per_chunk = (EMBEDDING_CHUNK_BYTES / (row * 2)).max(1);
                for chunk in data.chunks(row_bytes * rows_per_chunk) {
                    bytes.clear();
                    for src in chunk.chunks_exact(row_bytes) {
                        dequantize(p.source.kind, src, &mut floats);
                        check_finite(file.path(), &p.source.name, &floats)?;
                        if p.shift != 0.0 {
                            floats.iter_mut().for_each(|v| *v += p.shift);
                        }
                        bytes.extend(floats.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()));
                    }
                    emit(&bytes, &mut written)?;
                }
            }
            Some((how, n, k, permute)) => {
                let row_bytes = p.source.kind.bytes_for(k);
                let block_out = padded_cols(k) / TILE_COLS * how.tile_bytes();
                let blocks = n / TILE_ROWS;
                let per_chunk = 64.max(threads);
                for first in (0..blocks).step_by(per_chunk) {
                    let count = per_chunk.min(blocks - first);
                    let mut tiles = vec![0u8; count * block_out];
                    let per_thread = count.div_ceil(threads);
                    let results: Vec<Result<Rounding, Error>> = std::thread::scope(|scope| {
                        let handles: Vec<_> = tiles
                            .chunks_mut(per_thread * block_out)
                            .enumerate()
                            .map(|(t, dst)| {
                                let src_row = |r: usize| {
                                    let g = gguf_row(r, permute);
                                    &data[g * row_bytes..(g + 1) * row_bytes]
                                };
                                let kind = p.source.kind;
                                let name = &p.source.name;
                                let gguf_path = file.path();
                                scope.spawn(move || {
                                    let mut sum = Rounding::default();
                                    for (b, block) in dst.chunks_exact_mut(block_out).enumerate() {
                                        let rb = first + t * per_thread + b;
                                        let rows: Vec<&[u8]> = (0..TILE_ROWS)
                                            .map(|r| src_row(rb * TILE_ROWS + r))
                                            .collect();
                                        let r =
                                            row_block(how, kind, &rows, k, block).map_err(|d| {
                                                gguf_err(gguf_path, format!("tensor {name}: {d}"))
                                            })?;
                                        sum.err += r.err;
                                        sum.norm += r.norm;
                                    }
                                    Ok(sum)
                                })
                            })
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| {
                                h.join().unwrap_or_else(|_| {
                                    Err(gguf_err(file.path(), "a conversion thread failed"))
                                })
                            })
                            .collect()
                    });
                    for r in results {
                        let r = r?;
                        total.err += r.err;
                        total.norm += r.norm;
                    }
                    emit(&tiles, &mut written)?;
                }
            }
        }
        if written - start != p.entry.byte_len() as u64 {
            return Err(gguf_err(
                file.path(),
                format!(
                    "internal error: tensor {} wrote {} bytes, its header says {}",
                    p.entry.name,
                    written - start,
                    p.entry.byte_len()
                ),
            ));
        }
    }
    let out_file = out
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    out_file.sync_all().map_err(|e| Error::io(path, e))?;
    let rel = if total.norm > 0.0 {
        (total.err / total.norm).sqrt()
    } else {
        0.0
    };
    Ok((bytes_total, rel))
}

fn half(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Writes the tiles of one block of 32 rows (each `rows[r]` the GGUF bytes of a row of `k`).
fn row_block(
    how: Path4,
    kind: GgmlType,
    rows: &[&[u8]],
    k: usize,
    out: &mut [u8],
) -> Result<Rounding, String> {
    let mut sum = Rounding::default();
    match how {
        Path4::ToQ4 => {
            let mut floats = vec![0f32; TILE_ROWS * k];
            for (r, src) in rows.iter().enumerate() {
                dequantize(kind, src, &mut floats[r * k..(r + 1) * k]);
            }
            if let Some(v) = floats.iter().find(|v| !v.is_finite()) {
                return Err(format!(
                    "holds a non-finite value ({v}); the file is damaged"
                ));
            }
            quantize_row_block(&floats, k, out);
        }
        Path4::ToQ8 => {
            let mut floats = vec![0f32; k];
            let mut values = Box::new([[0i8; TILE_COLS]; TILE_ROWS]);
            let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            for (ct, tile_out) in out.chunks_exact_mut(Q8_TILE_BYTES).enumerate() {
                for (r, src) in rows.iter().enumerate() {
                    dequantize(kind, src, &mut floats);
                    if let Some(v) = floats.iter().find(|v| !v.is_finite()) {
                        return Err(format!(
                            "holds a non-finite value ({v}); the file is damaged"
                        ));
                    }
                    for g in 0..GROUPS_PER_TILE {
                        let start = (ct * TILE_COLS + g * GROUP).min(k);
                        let end = (start + GROUP).min(k);
                        let (scale, codes) = quantize_q8_group(&floats[start..end]);
                        d[r][g] = scale;
                        values[r][g * GROUP..(g + 1) * GROUP].copy_from_slice(&codes);
                    }
                }
                tile::pack_q8_tile(&values, &d, tile_out);
            }
        }
        Path4::KeepQ4 => {
            let mut codes = Box::new([[0u8; TILE_COLS]; TILE_ROWS]);
            let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            let mut m = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            let bb = kind.block_bytes();
            for (ct, tile_out) in out.chunks_exact_mut(Q4_1_TILE_BYTES).enumerate() {
                for (r, src) in rows.iter().enumerate() {
                    for g in 0..GROUPS_PER_TILE {
                        let b = ct * GROUPS_PER_TILE + g;
                        let cell = &mut codes[r][g * GROUP..(g + 1) * GROUP];
                        if b * GROUP >= k {
                            cell.fill(0);
                            d[r][g] = bf16::ZERO;
                            m[r][g] = bf16::ZERO;
                            continue;
                        }
                        let x = &src[b * bb..(b + 1) * bb];
                        let (df, mf, qs) = match kind {
                            GgmlType::Q4_1 => (half(x, 0), half(x, 2), &x[4..20]),
                            _ => (half(x, 0), -8.0 * half(x, 0), &x[2..18]),
                        };
                        for j in 0..16 {
                            cell[j] = qs[j] & 0x0f;
                            cell[j + 16] = qs[j] >> 4;
                        }
                        let (db, mb) = (bf16::from_f32(df), bf16::from_f32(mf));
                        d[r][g] = db;
                        m[r][g] = mb;
                        for &q in cell.iter() {
                            let exact = f64::from(q) * f64::from(df) + f64::from(mf);
                            let kept =
                                f64::from(q) * f64::from(db.to_f32()) + f64::from(mb.to_f32());
                            sum.err += (exact - kept).powi(2);
                            sum.norm += exact * exact;
                        }
                    }
                }
                tile::pack_q4_1_tile(&codes, &d, &m, tile_out);
            }
        }
        Path4::KeepQ8 => {
            let mut values = Box::new([[0i8; TILE_COLS]; TILE_ROWS]);
            let mut d = [[bf16::ZERO; GROUPS_PER_TILE]; TILE_ROWS];
            let bb = kind.block_bytes();
            for (ct, tile_out) in out.chunks_exact_mut(Q8_TILE_BYTES).enumerate() {
                for (r, src) in rows.iter().enumerate() {
                    for g in 0..GROUPS_PER_TILE {
                        let b = ct * GROUPS_PER_TILE + g;
                        let cell = &mut values[r][g * GROUP..(g + 1) * GROUP];
                        if b * GROUP >= k {
                            cell.fill(0);
                            d[r][g] = bf16::ZERO;
                            continue;
                        }
                        let x = &src[b * bb..(b + 1) * bb];
                        let df = half(x, 0);
                        for (c, &q) in cell.iter_mut().zip(&x[2..34]) {
                            *c = q as i8;
                        }
                        let db = bf16::from_f32(df);
                        d[r][g] = db;
                        for &q in cell.iter() {
                            let exact = f64::from(q) * f64::from(df);
                            let kept = f64::from(q) * f64::from(db.to_f32());
                            sum.err += (exact - kept).powi(2);
                            sum.norm += exact * exact;
                        }
                    }
                }
                tile::pack_q8_tile(&values, &d, tile_out);
            }
        }
    }
    Ok(sum)
}

/// Symmetric 8-bit quantization of up to 32 values with a BF16 scale.
fn quantize_q8_group(values: &[f32]) -> (bf16, [i8; GROUP]) {
    let mut codes = [0i8; GROUP];
    let amax = values.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = bf16::from_f32(amax / 127.0);
    let df = d.to_f32();
    if df > 0.0 {
        for (c, &v) in codes.iter_mut().zip(values) {
            *c = (v / df).round().clamp(-127.0, 127.0) as i8;
        }
    }
    (d, codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_of(w: &crate::gguf::write::GgufWriter) -> Result<ModelConfig, Error> {
        let h = crate::gguf::file::parse(&w.finish(), Path::new("t.gguf"))?;
        let checked = check(&h, Path::new("t.gguf"))?;
        ModelConfig::from_json(&checked.config_text)
    }

    #[test]
    fn gguf_rope_scaling_becomes_the_configs() {
        use crate::gguf::write::tiny_model;
        use crate::RopeScaling;
        let mut w = tiny_model("llama");
        w.kv("llama.rope.scaling.type", Value::String("yarn".into()));
        w.kv("llama.rope.scaling.factor", Value::F32(4.0));
        w.kv("llama.rope.scaling.original_context_length", Value::U32(64));
        let c = config_of(&w).unwrap();
        assert!(
            matches!(c.rope_scaling, RopeScaling::Yarn { factor, original_max_position_embeddings: 64, .. } if factor == 4.0),
            "{:?}",
            c.rope_scaling
        );
        let mut w = tiny_model("llama");
        w.kv("llama.rope.scaling.type", Value::String("longrope".into()));
        let e = config_of(&w).unwrap_err().to_string();
        assert!(e.contains("longrope"), "{e}");
        // rope_freqs must be head_dim / 2 (here 16) f32 divisors.
        let mut w = tiny_model("llama");
        w.tensor("rope_freqs.weight", &[8], GgmlType::F32, &[0u8; 32]);
        let e = config_of(&w).unwrap_err().to_string();
        assert!(e.contains("rope_freqs.weight"), "{e}");
        let mut w = tiny_model("llama");
        w.tensor("rope_freqs.weight", &[16], GgmlType::F32, &[0u8; 64]);
        assert_eq!(config_of(&w).unwrap().family, Family::Llama);
    }

    #[test]
    fn the_head_never_drops_below_its_gguf_precision() {
        assert_eq!(Path4::choose(GgmlType::Q6_K, true), Path4::ToQ8);
        assert_eq!(Path4::choose(GgmlType::Q8_0, true), Path4::KeepQ8);
        assert_eq!(Path4::choose(GgmlType::F16, true), Path4::ToQ8);
        assert_eq!(Path4::choose(GgmlType::Q4_K, true), Path4::ToQ4);
        assert_eq!(Path4::choose(GgmlType::Q6_K, false), Path4::ToQ4);
        assert_eq!(Path4::choose(GgmlType::Q4_0, false), Path4::KeepQ4);
    }

    /// The tiny gpt-oss GGUF (llama.cpp's layout: MXFP4 experts as 3-D tensors with f32
    /// biases, sinks, a router with a bias, Q8_0 attention with biases) imports to a folder
    /// that opens and holds, under the names and shapes the engine's gpt-oss loader asks for,
    /// every tensor and nothing else; expert 2 of layer 1 holds the GGUF's expert 2.
    #[test]
    fn a_gpt_oss_gguf_imports_with_every_tensor_the_engine_loads() {
        let gguf = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/gguf/tiny-gpt-oss-mxfp4.gguf");
        let tmp = tempfile::tempdir().unwrap();
        let dst = tmp.path().join("imported");
        let report = import_gguf(&gguf, &dst, Some(1), &mut |_| {}).unwrap();
        assert_eq!(report.architecture, "gpt-oss");
        let c = ModelConfig::from_path(&dst.join("config.json")).unwrap();
        assert_eq!(c.family, Family::GptOss);
        let (layers, hidden, heads, hd, kv, vocab) = (3, 64, 4, 16, 2, 320);
        let (experts, width) = (4, 32);
        assert_eq!(
            (c.num_hidden_layers, c.hidden_size, c.num_attention_heads),
            (layers, hidden, heads)
        );
        assert_eq!((c.head_dim, c.num_key_value_heads), (hd, kv));
        let moe = c.moe.as_ref().expect("gpt-oss has experts");
        assert_eq!(
            (moe.experts, moe.expert_intermediate_size),
            (experts, width)
        );
        // 3 layers of 4 experts of 3 projections: MXFP4 has no Q4NX tile of its own.
        assert_eq!(
            report.linear_paths.get("MXFP4 -> Q4_1 tiles (requantized)"),
            Some(&(layers * experts * 3))
        );

        // (name, rows and columns of a linear weight) and (name, length of a vector), as
        // the engine's loader asks for them (transformer.rs and transformer/moe.rs).
        let mut linears = vec![
            ("model.embed_tokens.weight".to_string(), vocab, hidden),
            ("lm_head.weight".to_string(), vocab, hidden),
        ];
        let mut vectors = vec![("model.norm.weight".to_string(), hidden)];
        for i in 0..layers {
            let p = format!("model.layers.{i}");
            for (name, rows, cols) in [
                ("self_attn.q_proj", heads * hd, hidden),
                ("self_attn.k_proj", kv * hd, hidden),
                ("self_attn.v_proj", kv * hd, hidden),
                ("self_attn.o_proj", hidden, heads * hd),
                ("mlp.router", experts, hidden),
            ] {
                linears.push((format!("{p}.{name}.weight"), rows, cols));
                vectors.push((format!("{p}.{name}.bias"), rows));
            }
            vectors.push((format!("{p}.input_layernorm.weight"), hidden));
            vectors.push((format!("{p}.post_attention_layernorm.weight"), hidden));
            vectors.push((format!("{p}.self_attn.sinks"), heads));
            for e in 0..experts {
                for (name, rows, cols) in [
                    ("gate_proj", width, hidden),
                    ("up_proj", width, hidden),
                    ("down_proj", hidden, width),
                ] {
                    let name = format!("{p}.mlp.experts.{e}.{name}");
                    linears.push((format!("{name}.weight"), rows, cols));
                    vectors.push((format!("{name}.bias"), rows));
                }
            }
        }
        let weights = Weights::open(&dst).unwrap();
        for (name, rows, cols) in &linears {
            let t = weights.get(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let fits = match &t {
                // The embedding is read by rows, so it stays dense.
                crate::Tensor::Dense(d) => d.shape == [*rows, *cols],
                crate::Tensor::Q4_1(m) | crate::Tensor::Q8(m) => {
                    (m.rows, m.cols) == (*rows, padded_cols(*cols))
                }
                crate::Tensor::Gguf(_) => false,
            };
            assert!(fits, "{name} is {}, not [{rows}, {cols}]", t.describe());
        }
        for (name, len) in &vectors {
            let t = weights.get(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                matches!(&t, crate::Tensor::Dense(d) if d.shape == [*len] && d.dtype.is_float()),
                "{name} is {}, not a vector of {len}",
                t.describe()
            );
        }
        let mut wanted: Vec<&str> = linears
            .iter()
            .map(|l| l.0.as_str())
            .chain(vectors.iter().map(|v| v.0.as_str()))
            .collect();
        wanted.sort_unstable();
        assert_eq!(
            weights.names(),
            wanted,
            "the folder holds these tensors and no other"
        );

        // Expert 2 of layer 1: its bias is the GGUF's exactly (f32 values BF16-exact), its
        // weights the GGUF's MXFP4 values within Q4_1's rounding.
        let file = GgufFile::open(&gguf).unwrap();
        let stacked = |g: &str| file.header().tensor(g).unwrap().clone();
        let bias = crate::gguf::experts::expert_slice(
            &stacked("blk.1.ffn_up_exps.bias"),
            2,
            &[width as u64],
            experts,
        )
        .unwrap();
        let mut want = vec![0f32; width];
        dequantize(bias.kind, file.data(&bias), &mut want);
        let crate::Tensor::Dense(got) = weights
            .get("model.layers.1.mlp.experts.2.up_proj.bias")
            .unwrap()
        else {
            unreachable!("checked above")
        };
        assert_eq!(got.to_f32(), want);
        let gate = crate::gguf::experts::expert_slice(
            &stacked("blk.1.ffn_gate_exps.weight"),
            2,
            &[hidden as u64, width as u64],
            experts,
        )
        .unwrap();
        let mut want = vec![0f32; width * hidden];
        for (r, row) in want.chunks_exact_mut(hidden).enumerate() {
            let bytes = gate.kind.bytes_for(hidden);
            dequantize(
                gate.kind,
                &file.data(&gate)[r * bytes..(r + 1) * bytes],
                row,
            );
        }
        let crate::Tensor::Q4_1(m) = weights
            .get("model.layers.1.mlp.experts.2.gate_proj.weight")
            .unwrap()
        else {
            panic!("the expert's weights are Q4_1 tiles")
        };
        let got = m.dequantize();
        for (r, want) in want.chunks_exact(hidden).enumerate() {
            for (g, want) in want.chunks_exact(GROUP).enumerate() {
                // Half a step of (max - min) / 15, and the BF16 rounding of scale and minimum.
                let (lo, hi) = want
                    .iter()
                    .fold((f32::MAX, f32::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                let bound = (hi - lo) / 30.0 + (hi.abs() + lo.abs()) / 128.0 + 1e-6;
                for (c, want) in want.iter().enumerate() {
                    let have = got[r * m.cols + g * GROUP + c];
                    assert!(
                        (have - want).abs() <= bound,
                        "row {r} column {}: {have} against {want}",
                        g * GROUP + c
                    );
                }
            }
        }
    }

    #[test]
    fn q8_group_round_trips_within_half_a_step() {
        let v: Vec<f32> = (0..32).map(|i| (i as f32 - 15.5) * 0.013).collect();
        let (d, q) = quantize_q8_group(&v);
        for (x, c) in v.iter().zip(q) {
            assert!((f32::from(c) * d.to_f32() - x).abs() <= d.to_f32() * 0.5 + 1e-6);
        }
    }
}
